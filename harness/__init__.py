"""Everything that watches or measures a trainer from outside.

The harness never imports torch, mujoco, warp or ``trainer``: it must start fast and
judge a trainer only by what the trainer wrote and what /proc and NVML show. What it shares
with the trainer (formats, schemas, names, the owner chain) lives in ``contracts``.
"""
