"""Reference motions: the NPZ contract, clip loading, resolution and the synthetic clip.

A motion clip is an ``.npz`` with per-frame joint and body states (CONTRACTS §12). The
loader checks every rule of the contract and fails with a :class:`MotionError` naming the
offending key; it keeps only the 14 tracked bodies (TASK.md §3) as float32, so the env can
put the clip into one device table. :func:`resolve_motion` turns a motion id or path into a
file (path, package root, cache root, local synthetic generation, Hugging Face hub) and
never substitutes another clip; a clip in a foreign convention, or a clip set (comma list or
directory), goes through ``trainer.motion_import`` into one cached file in this contract
(an optional ``clip_ends`` key marks the clips of a set). :func:`generate_synthetic_dance`
builds the offline default clip, a deterministic flat-foot squat with waist and arm motion.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from trainer.assets import AssetError, cache_root, check_asset_id, sha256_file
from trainer.assets import asset_roots as default_asset_roots
from trainer.config.defaults import default_scene_cfg
from trainer.sim.scene import (
    DEFAULT_JOINT_POS,
    FOOT_BODY_NAMES,
    JOINT_NAMES,
    TRACKED_BODY_NAMES,
    body_kinematics,
    build_g1_model,
)

if TYPE_CHECKING:
    import mujoco

__all__ = [
    "DANCE_MOTION_ID",
    "DEFAULT_HUB_REPO",
    "MOTION_FPS",
    "REQUIRED_KEYS",
    "SYNTHETIC_CLIP_IDS",
    "SYNTHETIC_GENERATOR_VERSION",
    "SYNTHETIC_MARCH_ID",
    "SYNTHETIC_MOTION_ID",
    "HubMode",
    "MotionClip",
    "MotionError",
    "ResolvedMotion",
    "arrays_sha256",
    "check_clip_ends",
    "download_from_hub",
    "ensure_synthetic_clip",
    "generate_synthetic_clip",
    "generate_synthetic_dance",
    "hub_offline",
    "load_motion",
    "load_motions",
    "load_resolved_motion",
    "npz_sha256",
    "resolve_motion",
    "write_npz_atomic",
]

logger = logging.getLogger(__name__)

SYNTHETIC_MOTION_ID = "motions/g1/synthetic_dance.npz"
SYNTHETIC_MARCH_ID = "motions/g1/synthetic_march.npz"
"""A second built-in clip of a different motion (marching in place), for learning checks."""
DANCE_MOTION_ID = "motions/g1/dance1_subject2_part.npz"
DEFAULT_HUB_REPO = "unilabsim/unilab-motions"
MOTION_FPS = 50
"""1 / ctrl_dt; clips at any other rate are rejected (no resampling)."""
SYNTHETIC_GENERATOR_VERSION = 1
"""Bump when :func:`generate_synthetic_dance` changes its output (and update docs/assets.md)."""

REQUIRED_KEYS: tuple[str, ...] = (
    "fps",
    "joint_pos",
    "joint_vel",
    "body_pos_w",
    "body_quat_w",
    "body_lin_vel_w",
    "body_ang_vel_w",
)
_BODY_KEYS = ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
_QUAT_NORM_TOL = 1e-3
_OFFLINE_ALTERNATIVE = (
    f"offline alternative: env.commands.motion.motion_file={SYNTHETIC_MOTION_ID} "
    "(generate with: g1-pull-assets --robot g1)"
)

HubMode = Literal["auto", "skip", "require"]
MotionSource = Literal[
    "path", "package", "cache", "generated", "downloaded", "converted", "clip-set"
]
BodyLayout = Literal["world-inclusive", "world-exclusive", "named"]


class MotionError(ValueError):
    """A motion clip is missing or breaks the NPZ contract; the message names key and fix."""


@dataclass(frozen=True)
class MotionClip:
    """One or more concatenated clips, reduced to the 14 tracked bodies (float32, wxyz)."""

    fps: int
    """Frames per second (always 50 = 1 / ctrl_dt)."""
    joint_pos: np.ndarray
    """[T, 29] joint positions, model XML joint order."""
    joint_vel: np.ndarray
    """[T, 29] joint velocities."""
    body_pos_w: np.ndarray
    """[T, 14, 3] world body positions, TASK.md §3 order."""
    body_quat_w: np.ndarray
    """[T, 14, 4] world body orientations, wxyz."""
    body_lin_vel_w: np.ndarray
    """[T, 14, 3] world linear velocity of each body-frame origin."""
    body_ang_vel_w: np.ndarray
    """[T, 14, 3] world angular velocity."""
    clip_ends: np.ndarray
    """[n_clips] int64 exclusive end frame of each clip on the concatenated axis."""
    source: str
    """Where the clip came from (paths joined by ``,`` for several clips)."""
    sha256: str
    """Content hash: :func:`arrays_sha256` of one file, or of the per-clip hashes for several."""

    @property
    def num_frames(self) -> int:
        """Total frames T over all clips."""
        return int(self.joint_pos.shape[0])

    @property
    def num_clips(self) -> int:
        return int(self.clip_ends.shape[0])


@dataclass(frozen=True)
class ResolvedMotion:
    """A motion id resolved to a local file."""

    path: Path
    source: MotionSource
    sha256: str
    """:func:`arrays_sha256` of the file's arrays (zip containers embed timestamps); the
    file's sha256 for a CSV (which resolution then converts)."""


# ---------------------------------------------------------------------------------------------
# Hashing
# ---------------------------------------------------------------------------------------------


def arrays_sha256(arrays: Mapping[str, np.ndarray]) -> str:
    """Hash a set of arrays independently of the zip container.

    For each key in sorted order the digest takes the key, the dtype string, the shape and
    the C-order bytes, so equal arrays give equal hashes whatever the file's timestamps.
    """
    digest = hashlib.sha256()
    for key in sorted(arrays):
        arr = np.ascontiguousarray(np.asarray(arrays[key]))
        digest.update(key.encode())
        digest.update(arr.dtype.str.encode())
        digest.update(repr(arr.shape).encode())
        digest.update(arr.tobytes())
    return digest.hexdigest()


def npz_sha256(path: str | Path) -> str:
    """:func:`arrays_sha256` of an ``.npz`` file's arrays.

    Raises:
        MotionError: the file is not a readable ``.npz``.
    """
    return arrays_sha256(_read_npz(Path(path)))


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        msg = f"motion file '{path}' is not a readable .npz ({type(err).__name__}: {err}); re-export it with numpy.savez"
        raise MotionError(msg) from err


def _content_sha256(path: Path) -> str:
    """:func:`arrays_sha256` of an NPZ; the bytes' sha256 of a CSV clip (no arrays to hash)."""
    if path.suffix.lower() == ".csv":
        return sha256_file(path)
    return arrays_sha256(_read_npz(path))


# ---------------------------------------------------------------------------------------------
# Loading and validation (CONTRACTS §12 motion table)
# ---------------------------------------------------------------------------------------------


def _model_joint_names(model: mujoco.MjModel) -> tuple[str, ...]:
    return tuple(model.joint(j).name for j in range(model.njnt) if model.jnt_type[j] == 3)


def _model_body_names(model: mujoco.MjModel) -> tuple[str, ...]:
    return tuple(model.body(b).name for b in range(model.nbody))


def _check_fps(path: Path, raw: np.ndarray, expected: int) -> int:
    value = np.asarray(raw)
    if value.shape not in ((), (1,)) or value.dtype.kind not in "iuf":
        msg = f"motion file '{path}': key 'fps' must be an int scalar or shape (1,), got dtype {value.dtype} shape {value.shape}"
        raise MotionError(msg)
    fps = float(value.reshape(()))
    if not math.isfinite(fps) or fps != round(fps):
        msg = f"motion file '{path}': key 'fps'={fps} must be an integer; export at {expected} fps"
        raise MotionError(msg)
    if int(fps) != expected:
        msg = (
            f"motion file '{path}': key 'fps'={int(fps)} must equal 1/ctrl_dt={expected}; "
            f"resample the clip to {expected} fps (the loader does not resample)"
        )
        raise MotionError(msg)
    return int(fps)


def _check_shapes(path: Path, arrays: dict[str, np.ndarray], num_joints: int) -> tuple[int, int]:
    joint_pos = arrays["joint_pos"]
    if joint_pos.ndim != 2:
        msg = f"motion file '{path}': key 'joint_pos' must have shape (T, {num_joints}), got {joint_pos.shape}"
        raise MotionError(msg)
    num_frames = joint_pos.shape[0]
    if num_frames < 2:
        msg = (
            f"motion file '{path}': key 'joint_pos' has T={num_frames} frames; a clip needs T >= 2"
        )
        raise MotionError(msg)
    for key in ("joint_pos", "joint_vel"):
        arr = arrays[key]
        if arr.ndim != 2 or arr.shape[0] != num_frames:
            msg = f"motion file '{path}': key '{key}' must have shape ({num_frames}, {num_joints}), got {arr.shape}"
            raise MotionError(msg)
        if arr.shape[1] != num_joints:
            msg = (
                f"motion file '{path}': key '{key}' has {arr.shape[1]} joint columns; "
                f"the model has {num_joints} (G1 29-DoF, XML order)"
            )
            raise MotionError(msg)
    num_bodies = arrays["body_pos_w"].shape[1] if arrays["body_pos_w"].ndim == 3 else -1
    for key in _BODY_KEYS:
        arr = arrays[key]
        width = 4 if key == "body_quat_w" else 3
        if (
            arr.ndim != 3
            or arr.shape[0] != num_frames
            or arr.shape[2] != width
            or arr.shape[1] != num_bodies
        ):
            msg = f"motion file '{path}': key '{key}' must have shape ({num_frames}, B, {width}) with one B for all body keys, got {arr.shape}"
            raise MotionError(msg)
    return num_frames, num_bodies


def _body_columns(
    path: Path, arrays: dict[str, np.ndarray], num_bodies: int, model: mujoco.MjModel
) -> tuple[np.ndarray, BodyLayout]:
    model_bodies = _model_body_names(model)
    if "body_names" in arrays:
        names = [str(n) for n in np.asarray(arrays["body_names"]).reshape(-1)]
        if len(names) != num_bodies:
            msg = f"motion file '{path}': key 'body_names' has {len(names)} names but the body arrays have B={num_bodies}"
            raise MotionError(msg)
        unknown = [n for n in names if n not in model_bodies]
        if unknown:
            msg = f"motion file '{path}': key 'body_names' lists bodies not in the model: {unknown[:5]}; use the G1 29-DoF body names"
            raise MotionError(msg)
        missing = [n for n in TRACKED_BODY_NAMES if n not in names]
        if missing:
            msg = f"motion file '{path}': key 'body_names' lacks tracked bodies {missing}; export all of {list(TRACKED_BODY_NAMES)}"
            raise MotionError(msg)
        return np.asarray([names.index(n) for n in TRACKED_BODY_NAMES], dtype=np.int64), "named"
    ids = np.asarray([model_bodies.index(n) for n in TRACKED_BODY_NAMES], dtype=np.int64)
    if num_bodies == model.nbody:
        return ids, "world-inclusive"
    if num_bodies == model.nbody - 1:
        return ids - 1, "world-exclusive"
    msg = (
        f"motion file '{path}': key 'body_pos_w' has B={num_bodies} bodies; accepted counts are "
        f"{model.nbody} (world-inclusive) or {model.nbody - 1} (world-exclusive), or add 'body_names'"
    )
    raise MotionError(msg)


def _check_finite_and_quats(path: Path, arrays: dict[str, np.ndarray]) -> None:
    for key in REQUIRED_KEYS[1:]:
        bad = ~np.isfinite(arrays[key])
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            msg = f"motion file '{path}': key '{key}' has a non-finite value (NaN/inf) at index {where}; fix the export"
            raise MotionError(msg)
    norms = np.linalg.norm(arrays["body_quat_w"].astype(np.float64), axis=-1)
    off = np.abs(norms - 1.0) > _QUAT_NORM_TOL
    if off.any():
        frame, body = (int(i) for i in np.argwhere(off)[0])
        msg = (
            f"motion file '{path}': key 'body_quat_w' has norm {norms[frame, body]:.6f} at frame {frame}, "
            f"body column {body}; quaternions must be unit (within {_QUAT_NORM_TOL}) and wxyz"
        )
        raise MotionError(msg)


def check_clip_ends(path: Path, raw: np.ndarray | None, num_frames: int) -> np.ndarray:
    """The optional ``clip_ends`` of a clip set: exclusive end frames, each clip >= 2 frames."""
    if raw is None:
        return np.asarray([num_frames], dtype=np.int64)
    ends = np.asarray(raw)
    lengths = np.diff(ends, prepend=0) if ends.ndim == 1 else np.zeros(0)
    if (
        ends.ndim != 1
        or ends.dtype.kind not in "iu"
        or ends.size == 0
        or int(ends[-1]) != num_frames
        or (lengths < 2).any()
    ):
        msg = (
            f"motion file '{path}': key 'clip_ends' must be increasing int end frames ending at "
            f"T={num_frames} with every clip >= 2 frames, got {ends.tolist()[:8]}; rebuild the clip set"
        )
        raise MotionError(msg)
    return ends.astype(np.int64)


@dataclass(frozen=True)
class _LoadedClip:
    clip: MotionClip
    layout: BodyLayout


def _load_one(
    path: Path, model: mujoco.MjModel, fps: int, expected_sha256: str | None = None
) -> _LoadedClip:
    raw = _read_npz(path)
    sha256 = arrays_sha256(raw)
    if expected_sha256 is not None and sha256 != expected_sha256:
        msg = (
            f"motion file '{path}' changed after preflight: its arrays hash to sha256 {sha256}, "
            f"preflight resolved sha256 {expected_sha256}; restore that clip or start a new run"
        )
        raise MotionError(msg)
    for key in REQUIRED_KEYS:
        if key not in raw:
            msg = (
                f"motion file '{path}': missing key '{key}' (required: {', '.join(REQUIRED_KEYS)})"
            )
            raise MotionError(msg)
    clip_fps = _check_fps(path, raw["fps"], fps)
    model_joints = _model_joint_names(model)
    arrays = {key: np.asarray(raw[key]) for key in REQUIRED_KEYS[1:]}
    for key, arr in arrays.items():
        if arr.dtype.kind not in "iuf":
            msg = f"motion file '{path}': key '{key}' has dtype {arr.dtype}; expected floats"
            raise MotionError(msg)
    num_frames, num_bodies = _check_shapes(path, arrays, len(model_joints))
    if "joint_names" in raw:
        names = tuple(str(n) for n in np.asarray(raw["joint_names"]).reshape(-1))
        if names != model_joints:
            mismatch = next(
                (i for i, (a, b) in enumerate(zip(names, model_joints)) if a != b),
                min(len(names), len(model_joints)),
            )
            msg = (
                f"motion file '{path}': key 'joint_names' does not match the model at column {mismatch} "
                f"({names[mismatch] if mismatch < len(names) else '<none>'!r} vs "
                f"{model_joints[mismatch] if mismatch < len(model_joints) else '<none>'!r}); export in model XML order"
            )
            raise MotionError(msg)
    columns, layout = _body_columns(path, raw, num_bodies, model)
    _check_finite_and_quats(path, arrays)
    clip_ends = check_clip_ends(path, raw.get("clip_ends"), num_frames)
    f32 = {key: arr.astype(np.float32) for key, arr in arrays.items()}
    clip = MotionClip(
        fps=clip_fps,
        joint_pos=np.ascontiguousarray(f32["joint_pos"]),
        joint_vel=np.ascontiguousarray(f32["joint_vel"]),
        body_pos_w=np.ascontiguousarray(f32["body_pos_w"][:, columns]),
        body_quat_w=np.ascontiguousarray(f32["body_quat_w"][:, columns]),
        body_lin_vel_w=np.ascontiguousarray(f32["body_lin_vel_w"][:, columns]),
        body_ang_vel_w=np.ascontiguousarray(f32["body_ang_vel_w"][:, columns]),
        clip_ends=clip_ends,
        source=str(path),
        sha256=sha256,
    )
    return _LoadedClip(clip=clip, layout=layout)


def load_motion(
    path: str | Path,
    model: mujoco.MjModel,
    *,
    fps: int = MOTION_FPS,
    expected_sha256: str | None = None,
) -> MotionClip:
    """Load and validate one motion NPZ (CONTRACTS §12).

    Args:
        path: the ``.npz`` file.
        model: the G1 model; joint and body names and ``nbody`` come from it.
        fps: the required frame rate, ``1 / ctrl_dt``.
        expected_sha256: the :func:`arrays_sha256` the file must still have (the digest
            preflight recorded); checked before any other rule.

    Returns:
        The clip reduced to the 14 tracked bodies, float32.

    Raises:
        MotionError: the file is unreadable, no longer has ``expected_sha256`` (the message
            names both digests) or breaks a rule (the message names the key).
    """
    return _load_one(Path(path), model, fps, expected_sha256).clip


def load_resolved_motion(resolved: ResolvedMotion, model: mujoco.MjModel) -> MotionClip:
    """Load exactly the file ``resolved`` names and check it still hashes to its digest.

    The collector loads the clip preflight resolved this way instead of resolving the id a
    second time, so the run trains on the clip its ``run_config`` preflight checked.
    """
    return load_motion(resolved.path, model, expected_sha256=resolved.sha256)


def load_motions(
    paths: Sequence[str | Path], model: mujoco.MjModel, *, fps: int = MOTION_FPS
) -> MotionClip:
    """Load several clips and concatenate them on the frame axis.

    All clips must share fps, joint width and body layout; ``clip_ends`` marks each clip's
    exclusive end frame so a row's truncation uses the end of the clip it is in.

    Raises:
        MotionError: no paths, a clip is invalid, or the clips' layouts differ.
    """
    if not paths:
        msg = "no motion files given; set env.commands.motion.motion_file"
        raise MotionError(msg)
    loaded = [_load_one(Path(p), model, fps) for p in paths]
    first = loaded[0]
    for other in loaded[1:]:
        if other.layout != first.layout or other.clip.fps != first.clip.fps:
            msg = (
                f"motion files '{first.clip.source}' ({first.layout}, {first.clip.fps} fps) and "
                f"'{other.clip.source}' ({other.layout}, {other.clip.fps} fps) differ; "
                "concatenated clips must share fps, joint width and body layout"
            )
            raise MotionError(msg)
    if len(loaded) == 1:
        return first.clip
    clips = [item.clip for item in loaded]
    offsets = np.cumsum([0] + [c.num_frames for c in clips[:-1]])
    combined_sha = hashlib.sha256("\n".join(c.sha256 for c in clips).encode()).hexdigest()
    return MotionClip(
        fps=first.clip.fps,
        joint_pos=np.concatenate([c.joint_pos for c in clips]),
        joint_vel=np.concatenate([c.joint_vel for c in clips]),
        body_pos_w=np.concatenate([c.body_pos_w for c in clips]),
        body_quat_w=np.concatenate([c.body_quat_w for c in clips]),
        body_lin_vel_w=np.concatenate([c.body_lin_vel_w for c in clips]),
        body_ang_vel_w=np.concatenate([c.body_ang_vel_w for c in clips]),
        clip_ends=np.concatenate([c.clip_ends + o for c, o in zip(clips, offsets, strict=True)]),
        source=",".join(c.source for c in clips),
        sha256=combined_sha,
    )


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
    model_joints = _model_joint_names(model)
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
    body_names = np.asarray(_model_body_names(model), dtype=np.str_)
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
        model: the G1 model; defaults to ``build_g1_model(default_scene_cfg())``.
        motion_id: one of :data:`SYNTHETIC_CLIP_IDS`.

    Returns:
        ``(path, status, sha256)`` with status ``present`` or ``generated``.
    """
    root = cache_root() if cache_dir is None else Path(cache_dir)
    path = root / motion_id
    arrays = generate_synthetic_clip(
        build_g1_model(default_scene_cfg()) if model is None else model, motion_id
    )
    expected = arrays_sha256(arrays)
    if path.is_file():
        try:
            if arrays_sha256(_read_npz(path)) == expected:
                return path, "present", expected
        except MotionError:
            logger.warning("regenerating unreadable synthetic clip %s", path)
    write_npz_atomic(path, arrays)
    return path, "generated", expected


# ---------------------------------------------------------------------------------------------
# Resolution (CONTRACTS §12 "Resolving a motion path")
# ---------------------------------------------------------------------------------------------


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` is truthy (huggingface_hub's spelling: 1/ON/YES/TRUE)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


ASSET_ID_SUFFIXES = (".npz", ".csv")
"""How a motion asset id ends; anything else that is no existing path is never looked up on
the hub, so a typo such as ``dnace`` costs no network time."""
NOT_AN_ASSET_ID = (
    "; it is no path and no asset id (those end in .npz or .csv), so the hub was not asked"
)


def _not_found(motion_id: str, searched: Sequence[str], hub_note: str) -> MotionError:
    return MotionError(
        f"motion file '{motion_id}' not found (searched: {', '.join(searched)}){hub_note}; {_OFFLINE_ALTERNATIVE}"
    )


def _describe(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def download_from_hub(motion_id: str, hub_repo: str, local_dir: Path) -> Path:
    """Download ``motion_id`` from the dataset repo ``hub_repo`` into ``local_dir``.

    A failing custom ``HF_ENDPOINT`` is retried once against the public hub; a host that
    does not resolve or takes no connection fails at once (``trainer.hub``).

    Raises:
        Exception: whatever huggingface_hub raised on the last attempt
            (:class:`trainer.hub.HubUnreachable` when the hub could not be reached).
    """
    from trainer.hub import download

    return download(hub_repo, motion_id, local_dir)


def resolve_motion(
    motion_id: str,
    *,
    hub_repo: str = DEFAULT_HUB_REPO,
    hub: HubMode = "auto",
    asset_roots: Sequence[Path] | None = None,
) -> ResolvedMotion:
    """Resolve a motion id or path to a local file in our NPZ contract.

    Each file is found in docs/assets.md order: 1. the path as given (absolute or CWD-relative)
    if it exists; a missing absolute path fails at once. 2. ``<package root>/<id>``, then
    ``<cache root>/<id>``. 3. The synthetic id is generated into the cache root; any other id
    is downloaded from the dataset repo ``hub_repo`` unless ``hub == "skip"`` or
    ``HF_HUB_OFFLINE`` is truthy. Another clip is never substituted.

    A file already in our contract is returned unchanged. A clip in a foreign convention is
    converted into the cache root, keyed by its digest; a comma list or a directory of clips
    becomes one cached clip set (``trainer.motion_import.resolve``, docs/assets.md).

    Args:
        motion_id: a path or an asset id such as ``motions/g1/dance1_subject2_part.npz``, a
            comma-separated list of them, or a directory of clips.
        hub_repo: Hugging Face dataset repository.
        hub: ``auto``/``require`` try the hub (unless offline), ``skip`` never does.
        asset_roots: asset roots (package, cache); defaults to :func:`trainer.assets.asset_roots`.

    Returns:
        The local path, where it came from and its arrays hash.

    Raises:
        MotionError: not found anywhere (the contract's wording), or not convertible.
    """
    if hub not in ("auto", "skip", "require"):
        msg = f"hub={hub!r} must be one of auto, skip, require"
        raise MotionError(msg)
    roots = tuple(default_asset_roots() if asset_roots is None else asset_roots)
    from trainer.motion_import.resolve import resolve_imported  # lazy: it imports this module

    return resolve_imported(
        motion_id,
        lambda item: _resolve_file(item, hub_repo=hub_repo, hub=hub, search_roots=roots),
        roots=roots,
        cache=Path(roots[-1]) if roots else cache_root(),
    )


def _resolve_file(
    motion_id: str, *, hub_repo: str, hub: HubMode, search_roots: tuple[Path, ...]
) -> ResolvedMotion:
    """One file in docs/assets.md order (see :func:`resolve_motion`), as it is on disk."""
    given = Path(motion_id).expanduser()
    if given.is_file():
        return ResolvedMotion(given, "path", _content_sha256(given))
    if given.is_absolute():
        raise _not_found(motion_id, [str(given)], "")
    searched = [str(given)]
    try:
        check_asset_id(motion_id)
    except AssetError as err:
        raise _not_found(motion_id, searched, "") from err
    for root, source in zip(search_roots, ("package", "cache"), strict=False):
        candidate = Path(root) / motion_id
        if candidate.is_file():
            return ResolvedMotion(candidate, source, _content_sha256(candidate))
        searched.append(str(candidate))
    writable = Path(search_roots[-1]) if search_roots else cache_root()
    if motion_id in SYNTHETIC_CLIP_IDS:
        path, _, sha = ensure_synthetic_clip(writable, motion_id=motion_id)
        return ResolvedMotion(path, "generated", sha)
    if not motion_id.lower().endswith(ASSET_ID_SUFFIXES):
        raise _not_found(motion_id, searched, NOT_AN_ASSET_ID)
    if hub == "skip":
        raise _not_found(motion_id, searched, "; hub download skipped (--hub skip)")
    if hub_offline():
        raise _not_found(motion_id, searched, "; hub download disabled by HF_HUB_OFFLINE")
    try:
        path = download_from_hub(motion_id, hub_repo, writable)
    except Exception as err:  # any hub failure is reported, never swallowed into a fallback
        raise _not_found(motion_id, searched, f"; hub download failed: {_describe(err)}") from err
    return ResolvedMotion(path, "downloaded", _content_sha256(path))
