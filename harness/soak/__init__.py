"""The soak harness: launch a trainer, watch it from outside, judge what it wrote.

``g1-soak`` and ``soak-run`` (cli.py) drive :class:`harness.soak.monitor.SoakMonitor`,
which samples the process tree (proctree.py), run-dir progress (progress.py) and GPU
memory (gpu.py), detects resource trends (trend.py), calls the run-directory verdict
(verdict.py) and its learning verdict (learning.py) and writes the 0.3.0 artifact
(artifact.py). Nothing here imports torch.
"""
