"""A short motion clip for play tests: the synthetic dance cut to its first frames."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainer.config.defaults import default_scene_cfg
from trainer.sim.scene import build_g1_model
from trainer.task.motion import generate_synthetic_dance


def write_short_clip(path: Path, frames: int) -> Path:
    """Write the synthetic dance's first ``frames`` frames as a motion NPZ; return the path."""
    arrays = generate_synthetic_dance(build_g1_model(default_scene_cfg()))
    total = arrays["joint_pos"].shape[0]
    short = {k: v[:frames] if v.ndim and v.shape[0] == total else v for k, v in arrays.items()}
    np.savez(path, **short)
    return path
