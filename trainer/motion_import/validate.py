"""Validated readers of a source clip's fields, each failing with one line naming key and fix.

Arrays without pickle, name arrays (unique, non-empty), frame counts and finiteness, unit
quaternions, joints by name, and the root quaternion's component order.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from trainer.motion_import import quat
from trainer.motion_import.source import QuatOrder
from trainer.sim.scene import JOINT_NAMES
from trainer.task.motion.clip import MotionError

__all__ = [
    "QUAT_UNIT_TOL",
    "as_wxyz",
    "check_frame_count",
    "check_frames",
    "check_unit",
    "fail",
    "find_quat_order",
    "float_array",
    "map_joints",
    "read_arrays",
    "read_names",
]

QUAT_UNIT_TOL = 1e-3
"""A source quaternion's norm must be within this of 1 (the motion contract's tolerance)."""
_UPRIGHT = 0.5
"""A pelvis reading counts as upright when its body z axis has world z above this (60° tilt)."""
_REFERENCE_MATCH_RAD = 1e-2


def fail(path: Path, what: str) -> MotionError:
    """The one-line error of a source file: ``motion file '<path>': <what>``."""
    return MotionError(f"motion file '{path}': {what}")


def read_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz``; an unreadable key is named (pickled object arrays).

    A file that is not a zip archive is refused before numpy sees it: numpy would try it as
    a pickle and suggest loading it unsafely.
    """
    if path.is_file() and not zipfile.is_zipfile(path):
        if path.suffix.lower() != ".npz":
            what = f"is a '{path.suffix}' file" if path.suffix else "has no .npz or .csv suffix"
            raise fail(path, f"{what}; g1-motion reads .npz and .csv clips, pass one of them")
        raise fail(path, "is not an .npz archive; re-export it with numpy.savez")
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise fail(
            path,
            f"not a readable .npz ({type(err).__name__}: {err}); re-export it with numpy.savez",
        ) from err
    with npz:
        out = {}
        for key in npz.files:
            try:
                out[key] = np.asarray(npz[key])
            except ValueError as err:
                raise fail(
                    path,
                    f"key '{key}' holds Python objects, which are never unpickled; store names "
                    "as a string array, e.g. np.asarray(names, dtype=str)",
                ) from err
    return out


def read_names(path: Path, key: str, raw: np.ndarray) -> tuple[str, ...]:
    arr = np.asarray(raw).reshape(-1)
    if arr.dtype.kind not in "US":
        raise fail(path, f"key '{key}' has dtype {arr.dtype}; store the names as strings")
    names = tuple(v.decode() if isinstance(v, bytes) else str(v) for v in arr.tolist())
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if not name.strip():
            raise fail(path, f"key '{key}' has an empty name at column {i}; name every column")
        if name in seen:
            raise fail(
                path,
                f"key '{key}' names '{name}' twice (columns {seen[name]} and {i}); each name must be unique",
            )
        seen[name] = i
    return names


def float_array(path: Path, key: str, arrays: Mapping[str, np.ndarray], ndim: int) -> np.ndarray:
    arr = arrays[key]
    if arr.dtype.kind not in "iuf":
        raise fail(path, f"key '{key}' has dtype {arr.dtype}; expected floats")
    if arr.ndim != ndim:
        raise fail(path, f"key '{key}' has shape {arr.shape}; expected {ndim} dimensions")
    return arr.astype(np.float64)


def check_frames(path: Path, key: str, arr: np.ndarray) -> None:
    """T ≥ 2 and no NaN/inf frame."""
    if arr.shape[0] < 2:
        raise fail(path, f"key '{key}' has T={arr.shape[0]} frames; a clip needs at least 2")
    bad = ~np.isfinite(arr.reshape(arr.shape[0], -1))
    if bad.any():
        frame, col = (int(i) for i in np.argwhere(bad)[0])
        frames = int(bad.any(axis=1).sum())
        raise fail(
            path,
            f"key '{key}' has NaN/inf at frame {frame} (flat column {col}; {frames} bad frames); drop or fill those frames in the exporter",
        )


def check_unit(path: Path, key: str, q: np.ndarray) -> np.ndarray:
    """Normalised copy of ``q [T, ..., 4]`` after checking every norm is 1 within tolerance."""
    norms = np.linalg.norm(q, axis=-1)
    off = np.abs(norms - 1.0) > QUAT_UNIT_TOL
    if off.any():
        where = tuple(int(i) for i in np.argwhere(off)[0])
        raise fail(
            path,
            f"key '{key}' has a quaternion of norm {norms[where]:.6f} at index {where}; quaternions must be unit (within {QUAT_UNIT_TOL}): normalise them in the exporter",
        )
    return q / norms[..., None]


def check_frame_count(path: Path, key: str, arr: np.ndarray, frames: int) -> None:
    if arr.shape[0] != frames:
        raise fail(
            path,
            f"key '{key}' has {arr.shape[0]} frames but 'joint_pos' has {frames}; export whole clips",
        )


def map_joints(path: Path, key: str, names: Sequence[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Columns of the 29 G1 joints in ``names`` and the names that are not G1 joints."""
    index = {name: i for i, name in enumerate(names)}
    missing = [n for n in JOINT_NAMES if n not in index]
    extra = tuple(n for n in names if n not in JOINT_NAMES)
    if missing:
        raise fail(
            path,
            f"key '{key}' lacks G1 joints {missing} (unmatched names in the file: {list(extra)}); rename the columns to the G1 29-DoF joint names",
        )
    return np.asarray([index[n] for n in JOINT_NAMES], dtype=np.int64), extra


# ---------------------------------------------------------------------------------------------
# Quaternion component order
# ---------------------------------------------------------------------------------------------


def as_wxyz(raw: np.ndarray, order: str) -> np.ndarray:
    return raw if order == "wxyz" else raw[..., [3, 0, 1, 2]]


def find_quat_order(
    path: Path,
    key: str,
    raw: np.ndarray,
    choice: QuatOrder,
    *,
    stated: Literal["wxyz", "xyzw"],
    reference: np.ndarray | None = None,
) -> tuple[np.ndarray, Literal["wxyz", "xyzw"], str]:
    """Read the root quaternions ``raw [T, 4]`` as wxyz, finding the component order.

    ``choice`` other than ``auto`` is used as given. Otherwise a reference orientation of the
    same body (the producer's pelvis body) decides when exactly one reading matches it;
    without one, the reading in which the pelvis is upright (body z up within 60°) on every
    decisive frame wins. When neither decides, the convention's ``stated`` order is used (NPZ
    conventions state wxyz, retargeted CSVs xyzw) and the returned source says so.

    The upright test decides only on frames where exactly one reading is upright. For a level
    pelvis of yaw ψ the misread up axis has world z cos ψ (xyzw read as wxyz) or −cos ψ (wxyz
    read as xyzw): an xyzw clip facing forward (|ψ| < 60°) reads upright both ways and takes
    the stated order, and so does a wxyz clip facing backward.
    """
    if choice != "auto":
        return check_unit(path, key, as_wxyz(raw, choice)), choice, "--quat-order"
    readings = {order: as_wxyz(raw, order) for order in ("wxyz", "xyzw")}
    if reference is not None:
        unit = {o: q / np.linalg.norm(q, axis=-1, keepdims=True) for o, q in readings.items()}
        match = [
            o
            for o, q in unit.items()
            if np.median(quat.angle_between(q, reference)) < _REFERENCE_MATCH_RAD
        ]
        if len(match) == 1:
            order = match[0]
            return (
                check_unit(path, key, readings[order]),
                order,
                "detected: matches the pelvis body",
            )  # type: ignore[return-value]
    upright = {o: quat.up_z(q) > _UPRIGHT for o, q in readings.items()}
    only_w = int((upright["wxyz"] & ~upright["xyzw"]).sum())
    only_x = int((upright["xyzw"] & ~upright["wxyz"]).sum())
    if only_w and not only_x:
        return check_unit(path, key, readings["wxyz"]), "wxyz", "detected: upright pelvis"
    if only_x and not only_w:
        return check_unit(path, key, readings["xyzw"]), "xyzw", "detected: upright pelvis"
    why = (
        "both readings keep the pelvis upright"
        if not (only_w or only_x)
        else "upright readings differ across frames"
    )
    return check_unit(path, key, readings[stated]), stated, f"stated by the convention ({why})"
