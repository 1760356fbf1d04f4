"""The real trainer's command line for subprocess tests (CPU owner)."""

from __future__ import annotations

import sys
from pathlib import Path


def train_argv(run_dir: Path, *overrides: str, sim: str = "mujoco") -> list[str]:
    """``python -m trainer train`` for the FlashSAC / G1 owner, writing into ``run_dir``."""
    return [
        sys.executable, "-m", "trainer", "train",
        "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", sim,
        f"training.log_dir={run_dir}",
        *overrides,
    ]  # fmt: skip
