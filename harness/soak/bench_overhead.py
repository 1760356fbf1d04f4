"""Monitor CPU overhead on a 50-process tree: ``python -m harness.soak.bench_overhead``.

Starts a tree of 50 sleeping processes (one root that forks 49 children, each holding a
pipe, an eventfd and a file in /dev/shm, and tagged with the run marker), a run
directory with a few files, then times the monitor's per-tick work exactly as
:class:`harness.soak.monitor.SoakMonitor` does it (tree with marker scan, progress, GPU)
in CPU seconds of this process. Between ticks the monitor blocks in ``select`` on a pidfd,
which costs nothing, so ``cpu_s_per_sample / interval`` is its share of one core.
The figures go to docs/benchmarks.md (current) and a dated record in docs/journal/.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from harness.soak.gpu import GpuSampler
from harness.soak.proctree import ProcessTreeSampler
from harness.soak.progress import sample_progress

TREE = r"""
import os, sys, time, tempfile
shm = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
def hold():
    keep = [os.pipe(), os.eventfd(0)]
    path = os.path.join(shm, f"g1soak-bench-{os.getpid()}")
    keep.append(open(path, "wb"))
    os.unlink(path)
    return keep
for _ in range(int(sys.argv[1]) - 1):
    if os.fork() == 0:
        held = hold()
        time.sleep(600)
        os._exit(0)
held = hold()
open(sys.argv[2], "w").close()
time.sleep(600)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=50)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--interval-s", type=float, default=5.0)
    args = parser.parse_args()
    soak_id = uuid.uuid4().hex
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        for i in range(20):
            (run / f"f{i}.bin").write_bytes(b"x" * 4096)
        ready = Path(tmp) / "ready"
        root = subprocess.Popen(
            [sys.executable, "-c", TREE, str(args.processes), str(ready)],
            env={**os.environ, "G1SOAK_RUN_ID": soak_id},
            start_new_session=True,
        )
        try:
            while not ready.exists():
                time.sleep(0.01)
            time.sleep(0.5)
            tree = ProcessTreeSampler(soak_id, trainer_pgid=root.pid)
            gpu = GpuSampler(tree.helper_pids)
            count = tree.sample().process_count
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for _ in range(args.samples):
                sample = tree.sample()
                sample_progress(run)
                gpu.sample(sample.pids)
            cpu = time.process_time() - cpu0
            wall = time.perf_counter() - wall0
            gpu.close()
        finally:
            os.killpg(root.pid, signal.SIGKILL)
            root.wait()
    per_sample = cpu / args.samples
    result = {
        "tree_processes": count,
        "machine_processes": sum(1 for e in os.listdir("/proc") if e.isdigit()),
        "samples": args.samples,
        "cpu_s_per_sample": round(per_sample, 6),
        "wall_s_per_sample": round(wall / args.samples, 6),
        "interval_s": args.interval_s,
        "core_percent_at_interval": round(100.0 * per_sample / args.interval_s, 4),
        "gpu_source": "unavailable" if gpu.nvml_error else "nvml",
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
