"""CUDA MPS plumbing both sides read (docs/mps.md): GPU discovery, daemon records, pipe probes.

``gpus`` lists physical GPUs and parses ``--gpus`` selectors; ``records`` owns the cumps
ownership records and their liveness; ``probe`` holds the read-only checks of a control
daemon that ``cumps`` and the trainer's MPS preflight share. Pure Python, torch-free.
"""
