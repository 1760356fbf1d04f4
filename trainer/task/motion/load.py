"""Loading and validating motion NPZs against the contract (docs/assets.md).

The loader checks every rule of the contract and fails with a :class:`MotionError` naming the
offending key; it keeps only the 14 tracked bodies (docs/task.md §tracked-bodies) as float32, so the env can
put the clip into one device table.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from trainer.sim.scene import TRACKED_BODY_NAMES
from trainer.task.motion.clip import (
    MOTION_FPS,
    REQUIRED_KEYS,
    MotionClip,
    MotionError,
    ResolvedMotion,
    arrays_sha256,
    model_body_names,
    model_joint_names,
    read_npz,
)

if TYPE_CHECKING:
    import mujoco


BodyLayout = Literal["world-inclusive", "world-exclusive", "named"]
_BODY_KEYS = ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
_QUAT_NORM_TOL = 1e-3


# ---------------------------------------------------------------------------------------------
# Loading and validation (docs/contracts.md §assets-and-motion motion table)
# ---------------------------------------------------------------------------------------------


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
    model_bodies = model_body_names(model)
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


def _clip_names(path: Path, raw: np.ndarray | None, num_clips: int) -> tuple[str, ...]:
    """The optional ``clip_names`` of a clip set: one non-blank string per clip."""
    if raw is None:
        return ()
    names = tuple(str(n) for n in np.asarray(raw).reshape(-1))
    if len(names) != num_clips or not all(n.strip() for n in names):
        msg = (
            f"motion file '{path}': key 'clip_names' must hold {num_clips} non-blank names "
            f"(one per clip of 'clip_ends'), got {len(names)}; rebuild the clip set"
        )
        raise MotionError(msg)
    return names


@dataclass(frozen=True)
class _LoadedClip:
    clip: MotionClip
    layout: BodyLayout


def _load_one(
    path: Path, model: mujoco.MjModel, fps: int, expected_sha256: str | None = None
) -> _LoadedClip:
    raw = read_npz(path)
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
    model_joints = model_joint_names(model)
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
    clip_names = _clip_names(path, raw.get("clip_names"), len(clip_ends))
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
        clip_names=clip_names,
    )
    return _LoadedClip(clip=clip, layout=layout)


def load_motion(
    path: str | Path,
    model: mujoco.MjModel,
    *,
    fps: int = MOTION_FPS,
    expected_sha256: str | None = None,
) -> MotionClip:
    """Load and validate one motion NPZ (docs/contracts.md §assets-and-motion).

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
        clip_names=tuple(name for c in clips for name in (c.clip_names or (Path(c.source).stem,))),
    )
