"""The built-in synthetic clips, generated offline (docs/assets.md).

:func:`generate_synthetic_dance` builds the offline default clip, a deterministic flat-foot
squat with waist and arm motion; :func:`generate_synthetic_clip` also builds the marching clip.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from trainer.assets import cache_root
from trainer.sim.scene import (
    DEFAULT_JOINT_POS,
    FOOT_BODY_NAMES,
    JOINT_NAMES,
    body_kinematics,
    build_g1_kinematics_model,
)
from trainer.task.motion.clip import (
    MOTION_FPS,
    SYNTHETIC_GENERATOR_VERSION,
    SYNTHETIC_MARCH_ID,
    SYNTHETIC_MOTION_ID,
    MotionError,
    arrays_sha256,
    model_body_names,
    model_joint_names,
    read_npz,
)

if TYPE_CHECKING:
    import mujoco


logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Synthetic offline clip
# ---------------------------------------------------------------------------------------------

_SYNTH_FRAMES = 500
_SQUAT_PERIOD_S = 2.5
_SQUAT_DEPTH_RAD = 0.30
_WAIST_LEAN_RAD = 0.12
_RAMP_S = 1.0


def _synthetic_joint_pos(num_frames: int, fps: int) -> np.ndarray:
    """[T, 29] joint targets: a flat-foot squat plus waist twist and arm swings.

    Flat feet: with the pelvis level, hip pitch -d, knee +2d and ankle pitch -d keep the sum
    of the leg's pitch angles (the foot's pitch relative to the pelvis) at its standing value.
    Waist and arm motion fade in over the first second so frame 0 is the ``stand`` pose.
    """
    t = np.arange(num_frames, dtype=np.float64) / fps  # [T]
    squat = 0.5 * (1.0 - np.cos(2.0 * np.pi * t / _SQUAT_PERIOD_S))  # 0..1, starts at rest
    x = np.clip(t / _RAMP_S, 0.0, 1.0)
    ramp = x * x * (3.0 - 2.0 * x)  # smoothstep: C1 fade-in
    idx = {name: i for i, name in enumerate(JOINT_NAMES)}
    q = np.tile(np.asarray(DEFAULT_JOINT_POS, dtype=np.float64), (num_frames, 1))  # [T, 29]
    depth = _SQUAT_DEPTH_RAD * squat
    for side in ("left", "right"):
        q[:, idx[f"{side}_hip_pitch_joint"]] -= depth
        q[:, idx[f"{side}_knee_joint"]] += 2.0 * depth
        q[:, idx[f"{side}_ankle_pitch_joint"]] -= depth
    two_pi = 2.0 * np.pi
    q[:, idx["waist_yaw_joint"]] += 0.35 * ramp * np.sin(two_pi * t / 5.0)
    q[:, idx["waist_roll_joint"]] += 0.08 * ramp * np.sin(two_pi * t / _SQUAT_PERIOD_S)
    q[:, idx["waist_pitch_joint"]] += _WAIST_LEAN_RAD * squat
    swing = ramp * np.sin(two_pi * t / _SQUAT_PERIOD_S)
    spread = ramp * 0.5 * (1.0 - np.cos(two_pi * t / 5.0))
    for side, sign in (("left", 1.0), ("right", -1.0)):
        q[:, idx[f"{side}_shoulder_pitch_joint"]] += sign * 0.5 * swing
        q[:, idx[f"{side}_shoulder_roll_joint"]] += sign * 0.3 * spread
        q[:, idx[f"{side}_shoulder_yaw_joint"]] += 0.2 * ramp * np.sin(two_pi * t / 2.0)
        q[:, idx[f"{side}_elbow_joint"]] += (
            0.4 * ramp * np.sin(two_pi * t / 1.25 + (0.0 if sign > 0 else np.pi))
        )
        q[:, idx[f"{side}_wrist_roll_joint"]] += 0.3 * ramp * np.sin(two_pi * t / 1.6)
        q[:, idx[f"{side}_wrist_pitch_joint"]] += 0.2 * ramp * np.sin(two_pi * t / 2.0)
    return q


_MARCH_PERIOD_S = 1.2
_MARCH_HIP_RAD = 0.5
_MARCH_KNEE_RAD = 0.9
_MARCH_ARM_RAD = 0.4


def _march_joint_pos(num_frames: int, fps: int) -> np.ndarray:
    """[T, 29] joint targets: marching in place, knees raised in turn, arms swinging opposite.

    A raised leg keeps its foot flat (ankle pitch = -(hip pitch + knee)), and the lift
    profile ``max(0, sin)^2`` is C1, so each foot leaves and meets the floor smoothly. The
    motion fades in over the first second so frame 0 is the ``stand`` pose.
    """
    t = np.arange(num_frames, dtype=np.float64) / fps  # [T]
    x = np.clip(t / _RAMP_S, 0.0, 1.0)
    ramp = x * x * (3.0 - 2.0 * x)
    idx = {name: i for i, name in enumerate(JOINT_NAMES)}
    q = np.tile(np.asarray(DEFAULT_JOINT_POS, dtype=np.float64), (num_frames, 1))  # [T, 29]
    phase = 2.0 * np.pi * t / _MARCH_PERIOD_S
    for side, shift, sign in (("left", 0.0, 1.0), ("right", np.pi, -1.0)):
        lift = ramp * np.maximum(0.0, np.sin(phase + shift)) ** 2
        q[:, idx[f"{side}_hip_pitch_joint"]] -= _MARCH_HIP_RAD * lift
        q[:, idx[f"{side}_knee_joint"]] += _MARCH_KNEE_RAD * lift
        q[:, idx[f"{side}_ankle_pitch_joint"]] -= (_MARCH_KNEE_RAD - _MARCH_HIP_RAD) * lift
        # The arm swings forward with the opposite leg's lift.
        q[:, idx[f"{side}_shoulder_pitch_joint"]] += sign * _MARCH_ARM_RAD * ramp * np.sin(phase)
        q[:, idx[f"{side}_elbow_joint"]] += 0.3 * ramp * (1.0 + np.sin(phase + shift)) * 0.5
    q[:, idx["waist_yaw_joint"]] += 0.1 * ramp * np.sin(phase)
    return q


_SYNTHETIC_JOINT_POS = {
    SYNTHETIC_MOTION_ID: _synthetic_joint_pos,
    SYNTHETIC_MARCH_ID: _march_joint_pos,
}
SYNTHETIC_CLIP_IDS: tuple[str, ...] = tuple(_SYNTHETIC_JOINT_POS)
"""Clips the trainer generates offline instead of downloading."""


def generate_synthetic_dance(model: mujoco.MjModel) -> dict[str, np.ndarray]:
    """The offline default clip ``motions/g1/synthetic_dance.npz``; see :func:`generate_synthetic_clip`."""
    return generate_synthetic_clip(model, SYNTHETIC_MOTION_ID)


def generate_synthetic_clip(model: mujoco.MjModel, motion_id: str) -> dict[str, np.ndarray]:
    """Build the built-in clip ``motion_id`` (one of :data:`SYNTHETIC_CLIP_IDS`), deterministically.

    500 frames at 50 fps. The pelvis stays level; its xy keeps the feet centred on the world
    origin and its height puts the lowest foot point at z = 0 in every frame. Joint and root
    velocities are central finite differences of the positions (one-sided at the ends);
    body velocities come from :func:`trainer.sim.scene.body_kinematics`. World-inclusive
    layout (B = nbody = 31), float32.

    Args:
        model: the G1 scene model (its foot collision geoms define the ground contact).
        motion_id: which built-in clip.

    Returns:
        The NPZ arrays in file order, including ``generator_version``.
    """
    fps = MOTION_FPS
    dt = 1.0 / fps
    joint_pos = _SYNTHETIC_JOINT_POS[motion_id](_SYNTH_FRAMES, fps)
    model_joints = model_joint_names(model)
    if model_joints != JOINT_NAMES:
        msg = f"model hinge joints {model_joints[:3]}... differ from the G1 29-DoF order; build it with build_g1_model"
        raise MotionError(msg)
    low, high = model.jnt_range[1:, 0], model.jnt_range[1:, 1]
    if (joint_pos < low).any() or (joint_pos > high).any():
        msg = "synthetic clip leaves the joint range; the generator constants are wrong"
        raise AssertionError(msg)
    qpos = np.zeros((_SYNTH_FRAMES, model.nq))
    qpos[:, 3] = 1.0  # level pelvis, wxyz
    qpos[:, 7:] = joint_pos
    qvel0 = np.zeros((_SYNTH_FRAMES, model.nv))
    rooted = body_kinematics(model, qpos, qvel0)
    feet = [model.body(name).id for name in FOOT_BODY_NAMES]
    feet_xy = rooted["body_pos_w"][:, feet, :2].mean(axis=1)  # [T, 2]
    qpos[:, 0:2] = -feet_xy
    qpos[:, 2] = -rooted["foot_min_z"]
    qvel = np.zeros((_SYNTH_FRAMES, model.nv))
    qvel[:, 0:3] = np.gradient(qpos[:, 0:3], dt, axis=0)  # world linear velocity of the root
    qvel[:, 6:] = np.gradient(joint_pos, dt, axis=0)
    states = body_kinematics(model, qpos, qvel)
    body_names = np.asarray(model_body_names(model), dtype=np.str_)
    f32 = np.float32
    return {
        "fps": np.asarray(fps, dtype=np.int64),
        "joint_pos": joint_pos.astype(f32),
        "joint_vel": qvel[:, 6:].astype(f32),
        "body_pos_w": states["body_pos_w"].astype(f32),
        "body_quat_w": states["body_quat_w"].astype(f32),
        "body_lin_vel_w": states["body_lin_vel_w"].astype(f32),
        "body_ang_vel_w": states["body_ang_vel_w"].astype(f32),
        "joint_names": np.asarray(JOINT_NAMES, dtype=np.str_),
        "body_names": body_names,
        "generator_version": np.asarray(SYNTHETIC_GENERATOR_VERSION, dtype=np.int64),
    }


def write_npz_atomic(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` through a temp file and a rename (never half-written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".npz", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def ensure_synthetic_clip(
    cache_dir: Path | None = None,
    model: mujoco.MjModel | None = None,
    motion_id: str = SYNTHETIC_MOTION_ID,
) -> tuple[Path, Literal["present", "generated"], str]:
    """Make sure ``<cache root>/<motion_id>`` holds the current built-in clip.

    The clip is regenerated (cheap: 1000 forward-kinematics calls) and compared by
    :func:`arrays_sha256`; the file is written only when missing or different.

    Args:
        cache_dir: the cache root; defaults to :func:`trainer.assets.cache_root`.
        model: the G1 model; defaults to :func:`trainer.sim.scene.build_g1_kinematics_model`
            (the clip depends on the robot's kinematics alone, never on a scene config).
        motion_id: one of :data:`SYNTHETIC_CLIP_IDS`.

    Returns:
        ``(path, status, sha256)`` with status ``present`` or ``generated``.
    """
    root = cache_root() if cache_dir is None else Path(cache_dir)
    path = root / motion_id
    arrays = generate_synthetic_clip(
        build_g1_kinematics_model() if model is None else model, motion_id
    )
    expected = arrays_sha256(arrays)
    if path.is_file():
        try:
            if arrays_sha256(read_npz(path)) == expected:
                return path, "present", expected
        except MotionError:
            logger.warning("regenerating unreadable synthetic clip %s", path)
    write_npz_atomic(path, arrays)
    return path, "generated", expected
