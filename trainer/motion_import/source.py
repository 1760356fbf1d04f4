"""What reading a clip gives: the source motion, reduced to root pose and G1 joints by name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

__all__ = ["CONVENTIONS", "BodyStates", "Convention", "QuatOrder", "SourceMotion"]

Convention = Literal["g1soak", "mjlab", "named", "root-included", "csv"]
QuatOrder = Literal["auto", "wxyz", "xyzw"]

CONVENTIONS: dict[str, str] = {
    "g1soak": "our NPZ contract (fps 50, 29 joints in G1 order, 30/31 bodies or body_names)",
    "mjlab": "mjlab/BeyondMimic NPZ: joint_pos [T, 29], all 30 (or 31) G1 bodies in MuJoCo order, no names",
    "named": "NPZ with joint_names/body_names in any order (bodies may be a superset)",
    "root-included": "NPZ with joint_pos [T, 7+J] (root pos, root quat, joints) and joint_names [J]",
    "csv": "retargeted CSV: root pos (3), root quat (4), 29 joints per row, optional header",
}
"""Every recognised convention and its one-line description (errors list them)."""


@dataclass(frozen=True)
class BodyStates:
    """The producer's world body poses, for the forward-kinematics residual."""

    names: tuple[str, ...]
    """Names of the columns that are G1 bodies (producer's extra bodies dropped)."""
    pos: np.ndarray
    """[T, B, 3] world positions."""
    quat: np.ndarray
    """[T, B, 4] world orientations, wxyz."""


@dataclass(frozen=True)
class SourceMotion:
    """A clip as its producer wrote it, reduced to root pose + G1 joints (float64)."""

    path: Path
    convention: Convention
    native: bool
    """True when the file already satisfies our NPZ contract and is used unchanged."""
    fps: float
    fps_source: str
    """Where ``fps`` came from: ``key 'fps'``, ``--fps-in`` or ``CSV default``."""
    root_pos: np.ndarray
    """[T, 3] world position of the pelvis (the free joint)."""
    root_quat: np.ndarray
    """[T, 4] world orientation of the pelvis, wxyz, unit."""
    joint_pos: np.ndarray
    """[T, 29] hinge angles in G1 XML order."""
    quat_order: Literal["wxyz", "xyzw"]
    """Component order of the source's root quaternion."""
    quat_order_source: str
    """How the order was found (stated by the convention, detected, or ``--quat-order``)."""
    bodies: BodyStates | None
    """The producer's body poses (None for a CSV)."""
    tree_order: str = "by name"
    """How joints and bodies were matched: by name, or a name-less file's tree order."""
    ignored_joints: tuple[str, ...] = ()
    """Source joints that are not G1 hinges (e.g. hand joints); not used."""
    ignored_bodies: tuple[str, ...] = ()
    """Source bodies that are not G1 bodies; not used."""
    clip_ends: tuple[int, ...] = ()
    """Exclusive end frames of a clip set's clips (``clip_ends``); empty for one clip."""

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])
