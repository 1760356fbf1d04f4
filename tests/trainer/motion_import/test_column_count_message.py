"""A clip whose ``joint_pos`` width fits neither its joint names nor the names plus the root
is told the widths its names allow, through the real ``g1-motion inspect``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from trainer.sim.scene import JOINT_NAMES

BIN = Path(sys.executable).parent


def test_the_message_names_the_widths_the_joint_names_allow(tmp_path: Path) -> None:
    clip = tmp_path / "clip.npz"
    names = np.asarray(JOINT_NAMES, dtype=str)
    np.savez(clip, joint_names=names, joint_pos=np.zeros((10, 23)), fps=np.asarray(50.0))
    argv = [str(BIN / "g1-motion"), "inspect", str(clip)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: motion file '{clip}': key 'joint_names' has 29 names but 'joint_pos' has 23 "
        "columns; expected 29 (joints only) or 36 (root pos + quat first)"
    )
