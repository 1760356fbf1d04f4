"""Conversion of a source motion to our NPZ contract: resample, recompute, record provenance.

The converted clip keeps only what the producer's model cannot get wrong for us: the root
pose and the 29 joint angles, matched by name. Everything else is recomputed on our own G1
model (docs/assets.md, "Importing clips"):

1. resample to 50 fps on the source's time axis t_k = k / fps_in: linear interpolation for the
   root position and the joints, slerp for the root quaternion (after making its sign
   continuous);
2. velocities from the resampled trajectory: central differences (one-sided at the ends) of
   the joints and root position, and of the root orientation (world angular velocity);
3. body states of all 31 bodies by forward kinematics
   (:func:`trainer.sim.scene.body_kinematics`), body quaternion signs made continuous;
4. where the source has body poses, the residual between them and our forward kinematics
   per body, at the source's own frames, as a check of the name mapping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainer.assets import sha256_file
from trainer.config.defaults import default_scene_cfg
from trainer.motion_import import quat
from trainer.motion_import.conventions import read_source
from trainer.motion_import.model import forward_poses, g1_body_names, g1_model
from trainer.motion_import.repair import Discontinuity, apply_repairs, find_discontinuities
from trainer.motion_import.source import QuatOrder, SourceMotion
from trainer.sim.scene import JOINT_NAMES, body_kinematics, locate_g1_mjcf
from trainer.task.motion.clip import MOTION_FPS, MotionError

__all__ = [
    "IMPORTER_VERSION",
    "PROVENANCE_KEYS",
    "BodyResidual",
    "Conversion",
    "convert",
    "convert_file",
    "model_sha256",
    "resample",
]

IMPORTER_VERSION = 2
"""Bump when conversion changes its output; cached conversions of an older version are redone."""

PROVENANCE_KEYS = (
    "import_version",
    "import_convention",
    "import_source_name",
    "import_source_sha256",
    "import_fps_in",
    "import_fps_source",
    "import_quat_order",
    "import_quat_order_source",
    "import_tree_order",
    "import_model_sha256",
    "import_repairs",
)
"""Keys a converted file carries besides the contract's (the loader ignores extra keys)."""


@dataclass(frozen=True)
class BodyResidual:
    """Largest difference over the clip between the producer's pose of one body and ours."""

    body: str
    pos_m: float
    ori_rad: float


@dataclass(frozen=True)
class Conversion:
    """A converted clip: the NPZ arrays to write and what the checks need."""

    source: SourceMotion
    source_sha256: str
    arrays: dict[str, np.ndarray]
    """Our NPZ contract (fps 50, world-inclusive with names) plus :data:`PROVENANCE_KEYS`."""
    foot_min_z: np.ndarray
    """[T] lowest point of the two feet's collision geoms per converted frame (m)."""
    residual: tuple[BodyResidual, ...] | None
    """Per source body; None when the source has no body poses (CSV)."""
    discontinuities: tuple[Discontinuity, ...] = ()
    """Named joint jumps left in the clip after its repairs (source frames)."""
    repaired: tuple[Discontinuity, ...] = ()
    """The jumps the requested repairs removed (source frames)."""

    @property
    def num_frames(self) -> int:
        return int(self.arrays["joint_pos"].shape[0])


def model_sha256() -> str:
    """sha256 of the robot MJCF the conversion's forward kinematics uses."""
    return sha256_file(locate_g1_mjcf(default_scene_cfg()))


def resample(
    source: SourceMotion, fps_out: int = MOTION_FPS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(root_pos [T', 3], root_quat [T', 4], joint_pos [T', 29])`` at ``fps_out``.

    Output frame j sits at t = j / fps_out over the source's span (T − 1) / fps_in, so
    T' = floor((T − 1) · fps_out / fps_in) + 1. A source already at ``fps_out`` is returned
    unchanged.

    Raises:
        MotionError: the resampled clip would have fewer than 2 frames.
    """
    if math.isclose(source.fps, fps_out):
        return source.root_pos, source.root_quat, source.joint_pos
    frames = source.num_frames
    count = math.floor((frames - 1) * fps_out / source.fps + 1e-9) + 1
    if count < 2:
        msg = (
            f"motion file '{source.path}': {frames} frames at {source.fps:g} fps last "
            f"{(frames - 1) / source.fps:.4f} s, under one {fps_out}-fps frame step; a clip needs at least 2 frames at {fps_out} fps"
        )
        raise MotionError(msg)
    pos = np.arange(count) * (source.fps / fps_out)  # output times in source frame units
    lo = np.clip(np.floor(pos).astype(np.int64), 0, frames - 2)
    frac = pos - lo
    w = frac[:, None]

    def lerp(x: np.ndarray) -> np.ndarray:
        return x[lo] * (1.0 - w) + x[lo + 1] * w

    root_quat = quat.slerp(source.root_quat[lo], source.root_quat[lo + 1], frac)
    return lerp(source.root_pos), quat.continuous_sign(root_quat), lerp(source.joint_pos)


def _states(
    root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray, fps: float
) -> dict[str, np.ndarray]:
    """Forward kinematics with velocities from the trajectory (module docstring, step 2)."""
    dt = 1.0 / fps
    ang_w = quat.world_angular_velocity(root_quat, dt)
    qpos = np.concatenate((root_pos, root_quat, joint_pos), axis=1)
    qvel = np.concatenate(
        (
            np.gradient(root_pos, dt, axis=0),  # free joint: world linear velocity
            quat.rotate(quat.conjugate(root_quat), ang_w),  # free joint: body-frame angular
            np.gradient(joint_pos, dt, axis=0),
        ),
        axis=1,
    )
    states = body_kinematics(g1_model(), qpos, qvel)
    states["body_quat_w"] = quat.continuous_sign(states["body_quat_w"])
    states["joint_vel"] = qvel[:, 6:]
    return states


def _residual(source: SourceMotion) -> tuple[BodyResidual, ...] | None:
    """Producer's body poses vs our forward kinematics at the source's own frames."""
    if source.bodies is None:
        return None
    pos, rot = forward_poses(source.root_pos, source.root_quat, source.joint_pos)
    ids = [g1_body_names().index(name) for name in source.bodies.names]
    pos_err = np.linalg.norm(pos[:, ids] - source.bodies.pos, axis=-1).max(0)
    ori_err = quat.angle_between(rot[:, ids], source.bodies.quat).max(0)
    return tuple(
        BodyResidual(name, float(p), float(o))
        for name, p, o in zip(source.bodies.names, pos_err, ori_err, strict=True)
    )


def _provenance(
    source: SourceMotion, source_sha256: str, repaired: list[Discontinuity]
) -> dict[str, np.ndarray]:
    return {
        "import_version": np.asarray(IMPORTER_VERSION, dtype=np.int64),
        "import_convention": np.asarray(source.convention),
        "import_source_name": np.asarray(source.path.name),
        "import_source_sha256": np.asarray(source_sha256),
        "import_fps_in": np.asarray(source.fps, dtype=np.float64),
        "import_fps_source": np.asarray(source.fps_source),
        "import_quat_order": np.asarray(source.quat_order),
        "import_quat_order_source": np.asarray(source.quat_order_source),
        "import_tree_order": np.asarray(source.tree_order),
        "import_model_sha256": np.asarray(model_sha256()),
        "import_repairs": np.asarray([d.describe() for d in repaired], dtype=np.str_).reshape(-1),
    }


def convert(source: SourceMotion, source_sha256: str, repairs: tuple[str, ...] = ()) -> Conversion:
    """Convert a read source (module docstring); ``source_sha256`` is its file's sha256.

    ``repairs`` (``trainer.motion_import.repair.REPAIRS`` names) are applied to the source's
    joints before resampling and recorded in ``import_repairs``; none are applied otherwise.
    """
    source, repaired = apply_repairs(source, repairs)
    root_pos, root_quat, joint_pos = resample(source)
    states = _states(root_pos, root_quat, joint_pos, MOTION_FPS)
    f32 = np.float32
    arrays = {
        "fps": np.asarray(MOTION_FPS, dtype=np.int64),
        "joint_pos": joint_pos.astype(f32),
        "joint_vel": states["joint_vel"].astype(f32),
        "body_pos_w": states["body_pos_w"].astype(f32),
        "body_quat_w": states["body_quat_w"].astype(f32),
        "body_lin_vel_w": states["body_lin_vel_w"].astype(f32),
        "body_ang_vel_w": states["body_ang_vel_w"].astype(f32),
        "joint_names": np.asarray(JOINT_NAMES, dtype=np.str_),
        "body_names": np.asarray(g1_body_names(), dtype=np.str_),
        **_provenance(source, source_sha256, repaired),
    }
    return Conversion(
        source=source,
        source_sha256=source_sha256,
        arrays=arrays,
        foot_min_z=states["foot_min_z"],
        residual=_residual(source),
        discontinuities=tuple(find_discontinuities(source.joint_pos, source.fps)),
        repaired=tuple(repaired),
    )


def convert_file(
    path: str | Path,
    *,
    fps_in: float | None = None,
    quat_order: QuatOrder = "auto",
    repairs: tuple[str, ...] = (),
) -> Conversion:
    """Read ``path`` in its detected convention and convert it (see :func:`read_source`)."""
    source = read_source(path, fps_in=fps_in, quat_order=quat_order)
    return convert(source, sha256_file(source.path), repairs)
