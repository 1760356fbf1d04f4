"""Reading a clip in any supported convention into one typed source motion, by name.

Conventions are detected from the file's suffix, keys and shapes (docs/assets.md, "Importing
clips"):

* ``g1soak``: our own NPZ contract, loaded as it is (also every file ``g1-motion`` wrote);
* ``mjlab``: mjlab / BeyondMimic NPZ, ``joint_pos`` ``[T, 29]`` and body arrays over all 30
  bodies of the G1 (31 with the world body) in MuJoCo order, no name arrays;
* ``named``: ``joint_pos`` ``[T, J]`` with ``joint_names`` ``[J]`` and/or ``body_names``, in any
  order, bodies possibly a superset of ours;
* ``root-included``: ``joint_pos`` ``[T, 7 + J]`` (root position, root quaternion, joints) with
  ``joint_names`` ``[J]``, body arrays over any set of named bodies;
* ``csv``: one row per frame, root position (3), root quaternion (4) and the joints, with an
  optional header row naming the columns.

Joints and bodies are matched to the G1 by name. Files without name arrays (``mjlab``, a CSV
without a header) carry the G1's own names by position: an ``mjlab`` NPZ in MuJoCo's
depth-first order unless our forward kinematics matches its body poses only in the
breadth-first order PhysX-based tools use; a CSV in G1 XML order.
Every rule that fails raises :class:`~trainer.task.motion.MotionError` naming the key and the
fix, on one line.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainer.motion_import import quat
from trainer.motion_import.csv_clip import read_csv
from trainer.motion_import.model import breadth_first_names, forward_poses, g1_body_names
from trainer.motion_import.source import (
    CONVENTIONS,
    BodyStates,
    Convention,
    QuatOrder,
    SourceMotion,
)
from trainer.motion_import.validate import (
    as_wxyz,
    check_frame_count,
    check_frames,
    check_unit,
    fail,
    find_quat_order,
    float_array,
    map_joints,
    read_arrays,
    read_names,
)
from trainer.sim.scene import JOINT_NAMES, TRACKED_BODY_NAMES
from trainer.task.motion.clip import MOTION_FPS, REQUIRED_KEYS, MotionError
from trainer.task.motion.load import check_clip_ends

__all__ = ["detect_convention", "read_source"]

_ROOT_BODY = "pelvis"
_BODY_KEYS = ("body_pos_w", "body_quat_w")
_PROVENANCE_KEY = "import_convention"
_DEPTH_FIRST = "depth-first (MuJoCo)"
_BREADTH_FIRST = "breadth-first (PhysX)"
_ORDER_FRAMES = 16
"""Frames the tree-order test of a name-less file runs forward kinematics on."""
_ORDER_MATCH_M = 0.01
"""A tree order matches when our forward kinematics puts every body within this (m)."""


# ---------------------------------------------------------------------------------------------
# Detection
# ---------------------------------------------------------------------------------------------


def _body_count(arrays: Mapping[str, np.ndarray]) -> int | None:
    arr = arrays.get("body_pos_w")
    return int(arr.shape[1]) if arr is not None and arr.ndim == 3 else None


def _is_native(arrays: Mapping[str, np.ndarray]) -> bool:
    """Whether the arrays satisfy our NPZ contract by keys, shapes, rate and names (the loader
    still checks values: finiteness, unit quaternions)."""
    if any(key not in arrays for key in REQUIRED_KEYS):
        return False
    fps = np.asarray(arrays["fps"])
    if fps.size != 1 or fps.dtype.kind not in "iuf" or float(fps.reshape(())) != MOTION_FPS:
        return False
    joint_pos, joint_vel = arrays["joint_pos"], arrays["joint_vel"]
    if (
        joint_pos.ndim != 2
        or joint_pos.shape[1] != len(JOINT_NAMES)
        or joint_vel.shape != joint_pos.shape
    ):
        return False
    if (
        "joint_names" in arrays
        and tuple(str(n) for n in arrays["joint_names"].reshape(-1)) != JOINT_NAMES
    ):
        return False
    count = _body_count(arrays)
    if count is None:
        return False
    if "body_names" not in arrays:
        return count in (len(g1_body_names()), len(g1_body_names()) - 1)
    names = [str(n) for n in arrays["body_names"].reshape(-1)]
    known = set(g1_body_names())
    return len(names) == count and set(names) <= known and set(TRACKED_BODY_NAMES) <= set(names)


def _unknown(path: Path, arrays: Mapping[str, np.ndarray], why: str) -> MotionError:
    shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in sorted(arrays.items()))
    known = "; ".join(f"{name}: {text}" for name, text in CONVENTIONS.items())
    return fail(
        path, f"unknown convention: {why} (keys: {shapes}); recognised conventions are {known}"
    )


def detect_convention(path: Path, arrays: Mapping[str, np.ndarray]) -> tuple[Convention, bool]:
    """``(convention, native)`` of an NPZ's arrays (see the module docstring).

    Raises:
        MotionError: no recognised convention; the message lists the keys and the conventions.
    """
    if "joint_pos" not in arrays:
        raise _unknown(path, arrays, "no key 'joint_pos'")
    joint_pos = arrays["joint_pos"]
    if joint_pos.ndim != 2:
        raise _unknown(
            path, arrays, f"key 'joint_pos' has shape {joint_pos.shape}, not (T, columns)"
        )
    native = _is_native(arrays)
    if _PROVENANCE_KEY in arrays or native and ("joint_names" in arrays or "body_names" in arrays):
        return "g1soak", native
    width = joint_pos.shape[1]
    if "joint_names" in arrays:
        count = np.asarray(arrays["joint_names"]).size
        if width == count + 7:
            return "root-included", False
        if width != count:
            raise fail(
                path,
                f"key 'joint_names' has {count} names but 'joint_pos' has {width} columns; "
                f"expected {count} (joints only) or {count + 7} (root pos + quat first)",
            )
        return "named", False
    if "body_names" in arrays:
        if width != len(JOINT_NAMES):
            raise _unknown(
                path, arrays, f"key 'joint_pos' has {width} columns without 'joint_names'"
            )
        return "named", False
    count = _body_count(arrays)
    g1 = len(g1_body_names())
    if width == len(JOINT_NAMES) and count in (g1, g1 - 1):
        return "mjlab", native
    if width == len(JOINT_NAMES) + 7:
        raise fail(
            path,
            f"key 'joint_pos' has {width} columns (root pos + quat + 29 joints?) but there is no key 'joint_names'; add the {width - 7} joint names",
        )
    why = (
        f"key 'joint_pos' has {width} columns and body arrays have B={count}, without name arrays "
        f"(mjlab needs 29 joint columns and B={g1 - 1} or {g1}); add 'joint_names' and 'body_names'"
    )
    raise _unknown(path, arrays, why)


# ---------------------------------------------------------------------------------------------
# NPZ conventions
# ---------------------------------------------------------------------------------------------


def _fps(path: Path, arrays: Mapping[str, np.ndarray], fps_in: float | None) -> tuple[float, str]:
    if "fps" not in arrays:
        if fps_in is None:
            raise fail(
                path,
                "missing key 'fps'; give the source frame rate: g1-motion convert IN OUT --fps-in N",
            )
        return float(fps_in), "--fps-in"
    value = np.asarray(arrays["fps"])
    if value.size != 1 or value.dtype.kind not in "iuf":
        raise fail(
            path, f"key 'fps' must be one number, got dtype {value.dtype} shape {value.shape}"
        )
    fps = float(value.reshape(()))
    if not math.isfinite(fps) or fps <= 0:
        raise fail(path, f"key 'fps'={fps} must be a positive number; fix the export")
    if fps_in is not None and not math.isclose(fps, fps_in):
        raise fail(path, f"key 'fps'={fps:g} disagrees with --fps-in {fps_in:g}; drop --fps-in")
    return fps, "key 'fps'"


def _body_states(
    path: Path, arrays: Mapping[str, np.ndarray], names: Sequence[str], frames: int
) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(pos [T, B, 3], raw quat [T, B, 4])`` of the body arrays."""
    for key in _BODY_KEYS:
        if key not in arrays:
            raise fail(
                path, f"missing key '{key}'; body names are given, so export the body poses too"
            )
    pos = float_array(path, "body_pos_w", arrays, 3)
    raw = float_array(path, "body_quat_w", arrays, 3)
    for key, arr, width in (("body_pos_w", pos, 3), ("body_quat_w", raw, 4)):
        if arr.shape[1:] != (len(names), width):
            raise fail(
                path,
                f"key '{key}' has shape {arr.shape}; expected (T, {len(names)}, {width}) for {len(names)} body names",
            )
        check_frame_count(path, key, arr, frames)
        check_frames(path, key, arr)
    return pos, raw


def _named_bodies(
    path: Path,
    arrays: Mapping[str, np.ndarray],
    names: Sequence[str],
    frames: int,
    choice: QuatOrder,
) -> tuple[BodyStates, tuple[str, ...], str, str]:
    """The G1 bodies among ``names`` (wxyz), the ignored names and the body quaternion order."""
    pos, raw = _body_states(path, arrays, names, frames)
    known = set(g1_body_names())
    keep = [i for i, n in enumerate(names) if n in known]
    ignored = tuple(n for n in names if n not in known)
    if not keep:
        raise fail(
            path,
            f"key 'body_names' has no G1 body (first names: {list(names)[:5]}); use the G1 29-DoF body names",
        )
    kept = tuple(names[i] for i in keep)
    order_source = "stated by the convention (wxyz)"
    order: str = "wxyz"
    if _ROOT_BODY in kept:
        col = keep[kept.index(_ROOT_BODY)]
        _, order, order_source = find_quat_order(
            path, "body_quat_w", raw[:, col], choice, stated="wxyz"
        )
    elif choice != "auto":
        order, order_source = choice, "--quat-order"
    body_quat = check_unit(path, "body_quat_w", as_wxyz(raw[:, keep], order))
    return BodyStates(kept, pos[:, keep], body_quat), ignored, order, order_source


def _joint_pos(path: Path, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    joint_pos = float_array(path, "joint_pos", arrays, 2)
    check_frames(path, "joint_pos", joint_pos)
    return joint_pos


def _read_root_included(
    path: Path, arrays: Mapping[str, np.ndarray], fps: tuple[float, str], choice: QuatOrder
) -> SourceMotion:
    joint_pos = _joint_pos(path, arrays)
    names = read_names(path, "joint_names", arrays["joint_names"])
    cols, extra = map_joints(path, "joint_names", names)
    frames = joint_pos.shape[0]
    bodies, ignored, reference = None, (), None
    if "body_names" in arrays:
        body_names = read_names(path, "body_names", arrays["body_names"])
        bodies, ignored, _, _ = _named_bodies(path, arrays, body_names, frames, choice)
        if _ROOT_BODY in bodies.names:
            reference = bodies.quat[:, bodies.names.index(_ROOT_BODY)]
    elif any(key in arrays for key in _BODY_KEYS):
        raise fail(
            path,
            "body arrays without key 'body_names'; add the body names (root-included files name their bodies)",
        )
    root_quat, order, order_source = find_quat_order(
        path, "joint_pos", joint_pos[:, 3:7], choice, stated="wxyz", reference=reference
    )
    return SourceMotion(
        path=path,
        convention="root-included",
        native=False,
        fps=fps[0],
        fps_source=fps[1],
        root_pos=joint_pos[:, 0:3],
        root_quat=quat.continuous_sign(root_quat),
        joint_pos=joint_pos[:, 7:][:, cols],
        quat_order=order,
        quat_order_source=order_source,
        bodies=bodies,
        ignored_joints=extra,
        ignored_bodies=ignored,
    )


@dataclass(frozen=True)
class _Reading:
    """One way to read a body-rooted NPZ: joints in G1 order and the G1 bodies."""

    joint_pos: np.ndarray
    extra_joints: tuple[str, ...]
    bodies: BodyStates
    ignored_bodies: tuple[str, ...]
    quat_order: str
    quat_order_source: str
    tree_order: str


def _tree_orders(arrays: Mapping[str, np.ndarray]) -> tuple[str | None, ...]:
    """None (by name) when both name arrays exist; else the orders a name-less file may use."""
    if "joint_names" in arrays and "body_names" in arrays:
        return (None,)
    return (_DEPTH_FIRST, _BREADTH_FIRST)


def _positional_names(
    path: Path, arrays: Mapping[str, np.ndarray], order: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Joint and body names a name-less file has by position in ``order``."""
    count = _body_count(arrays)
    g1 = g1_body_names()
    if "body_names" not in arrays and count not in (len(g1), len(g1) - 1):
        raise fail(
            path,
            f"key 'body_pos_w' has B={count} bodies without 'body_names'; accepted are {len(g1) - 1} or {len(g1)} (the G1's bodies), or add 'body_names'",
        )
    bodies, joints = (g1[1:], JOINT_NAMES) if order == _DEPTH_FIRST else breadth_first_names()
    return joints, (g1[:1] + bodies if count == len(g1) else bodies)


def _reading(
    path: Path,
    arrays: Mapping[str, np.ndarray],
    raw: np.ndarray,
    order: str | None,
    choice: QuatOrder,
) -> _Reading:
    joint_names, body_names = (
        (None, None) if order is None else _positional_names(path, arrays, order)
    )
    if "joint_names" in arrays:
        joint_names = read_names(path, "joint_names", arrays["joint_names"])
    elif raw.shape[1] != len(JOINT_NAMES):
        raise fail(
            path,
            f"key 'joint_pos' has {raw.shape[1]} columns; without 'joint_names' it must hold the 29 G1 joints",
        )
    if "body_names" in arrays:
        body_names = read_names(path, "body_names", arrays["body_names"])
    cols, extra = map_joints(path, "joint_names", joint_names)
    bodies, ignored, qorder, qsource = _named_bodies(path, arrays, body_names, raw.shape[0], choice)
    if _ROOT_BODY not in bodies.names:
        raise fail(
            path,
            f"key 'body_names' has no '{_ROOT_BODY}'; the root pose comes from the pelvis body (or write joint_pos as root pos + quat + joints)",
        )
    return _Reading(raw[:, cols], extra, bodies, ignored, qorder, qsource, order or "by name")


def _position_residual(reading: _Reading) -> float:
    """Largest body position error of our forward kinematics over a few frames (m)."""
    bodies = reading.bodies
    frames = np.unique(np.linspace(0, bodies.pos.shape[0] - 1, _ORDER_FRAMES).astype(int))
    root = bodies.names.index(_ROOT_BODY)
    pos, _ = forward_poses(
        bodies.pos[frames, root], bodies.quat[frames, root], reading.joint_pos[frames]
    )
    ids = [g1_body_names().index(n) for n in bodies.names]
    return float(np.linalg.norm(pos[:, ids] - bodies.pos[frames], axis=-1).max())


def _pick_reading(readings: list[_Reading]) -> _Reading:
    """The only reading, or for a name-less file the tree order our forward kinematics agrees
    with: breadth-first only when it matches and depth-first (the stated order) does not."""
    if len(readings) == 1:
        return readings[0]
    depth, breadth = readings
    depth_err, breadth_err = _position_residual(depth), _position_residual(breadth)
    if breadth_err < _ORDER_MATCH_M <= depth_err:
        label = f"{_BREADTH_FIRST} (detected: forward kinematics match within {breadth_err:.2g} m)"
        return dataclasses.replace(breadth, tree_order=label)
    how = "matches" if depth_err < _ORDER_MATCH_M else "stated; neither order matches"
    return dataclasses.replace(depth, tree_order=f"{_DEPTH_FIRST} ({how} forward kinematics)")


def _read_body_rooted(
    path: Path,
    arrays: Mapping[str, np.ndarray],
    convention: Convention,
    native: bool,
    fps: tuple[float, str],
    choice: QuatOrder,
) -> SourceMotion:
    """``mjlab``, ``named`` and ``g1soak``: the root pose is the pelvis body's pose."""
    raw = _joint_pos(path, arrays)
    frames = raw.shape[0]
    reading = _pick_reading([_reading(path, arrays, raw, o, choice) for o in _tree_orders(arrays)])
    bodies = reading.bodies
    root = bodies.names.index(_ROOT_BODY)
    clip_ends: tuple[int, ...] = ()
    if "clip_ends" in arrays:
        if fps[0] != MOTION_FPS:
            raise fail(
                path,
                f"key 'clip_ends' marks a clip set, which must be at {MOTION_FPS} fps, not {fps[0]:g}; rebuild the clip set",
            )
        clip_ends = tuple(int(e) for e in check_clip_ends(path, arrays["clip_ends"], frames))
    return SourceMotion(
        path=path,
        convention=convention,
        # a name-less file in PhysX order has our shapes but not our bodies: convert it
        native=native and not reading.tree_order.startswith(_BREADTH_FIRST),
        fps=fps[0],
        fps_source=fps[1],
        root_pos=bodies.pos[:, root],
        root_quat=quat.continuous_sign(bodies.quat[:, root]),
        joint_pos=reading.joint_pos,
        quat_order=reading.quat_order,  # type: ignore[arg-type]
        quat_order_source=reading.quat_order_source,
        tree_order=reading.tree_order,
        bodies=bodies,
        ignored_joints=reading.extra_joints,
        ignored_bodies=reading.ignored_bodies,
        clip_ends=clip_ends,
    )


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def read_source(
    path: str | Path, *, fps_in: float | None = None, quat_order: QuatOrder = "auto"
) -> SourceMotion:
    """Read a clip in any recognised convention.

    Args:
        path: an ``.npz`` or ``.csv`` file.
        fps_in: the source frame rate where the file has none (CSV, NPZ without ``fps``); for
            an NPZ with ``fps`` it must agree.
        quat_order: the root quaternion's component order; ``auto`` detects it.

    Raises:
        MotionError: unreadable file, unknown convention or a broken rule; one line naming the
            key and the fix.
    """
    path = Path(path)
    if fps_in is not None and not (math.isfinite(fps_in) and fps_in > 0):
        raise fail(path, f"--fps-in {fps_in} must be a positive number")
    if quat_order not in ("auto", "wxyz", "xyzw"):
        raise fail(path, f"--quat-order {quat_order!r} must be auto, wxyz or xyzw")
    if path.is_dir():
        msg = "is a folder; pass one .npz or .csv clip (g1-motion import checks a library folder)"
        raise fail(path, msg)
    if not path.is_file():
        raise fail(path, "does not exist; pass an existing .npz or .csv file")
    if path.suffix.lower() == ".csv":
        return read_csv(path, fps_in, quat_order)
    arrays = read_arrays(path)
    convention, native = detect_convention(path, arrays)
    fps = _fps(path, arrays, fps_in)
    if convention == "root-included":
        return _read_root_included(path, arrays, fps, quat_order)
    return _read_body_rooted(path, arrays, convention, native, fps, quat_order)
