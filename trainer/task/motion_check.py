"""The motion clip's contents, checked before anything is spawned.

``train``'s preflight and ``python -m trainer check-config`` both load the clip exactly as
the env will (``trainer.task.motion.load_motion`` against the G1 model of the config), so a
clip with a missing key, a wrong shape or a bad quaternion fails there, in one line,
instead of inside the collector seconds later. Needs mujoco and numpy, never torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainer.sim.scene import SceneCfg, build_g1_model
from trainer.task.motion import MOTION_FPS, load_motion

__all__ = ["MotionFacts", "check_motion_file"]


@dataclass(frozen=True, kw_only=True)
class MotionFacts:
    """What the check learnt about a valid clip."""

    frames: int
    fps: int
    arrays_sha256: str
    """Hash of the file's arrays (``trainer.task.motion.arrays_sha256``), not of its bytes."""

    @property
    def seconds(self) -> float:
        return self.frames / self.fps


def check_motion_file(path: Path, scene: SceneCfg, *, fps: int = MOTION_FPS) -> MotionFacts:
    """Load ``path`` against the G1 model of ``scene`` and return its facts.

    Raises:
        MotionError: the clip breaks the motion NPZ contract (docs/assets.md); the message
            names the file, the key and the fix.
        AssetError: the G1 model cannot be found.
    """
    clip = load_motion(path, build_g1_model(scene), fps=fps)
    return MotionFacts(frames=clip.num_frames, fps=clip.fps, arrays_sha256=clip.sha256)
