"""``g1-backend-probe``: the parent of the phase-local backend probe (docs/contracts.md §backend-probe).

The parent validates flags, checks acceptance preconditions, snapshots the GPU and runs one
``python -m trainer.probe`` child per backend; it never imports torch, mujoco or warp.
"""
