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
without a header) carry the G1's own names in MuJoCo order by definition of the convention.
Every rule that fails raises :class:`~trainer.task.motion.MotionError` naming the key and the
fix, on one line.
"""

from __future__ import annotations

import csv
import math
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from trainer.motion_import import quat
from trainer.motion_import.model import g1_body_names
from trainer.sim.scene import JOINT_NAMES, TRACKED_BODY_NAMES
from trainer.task.motion import MOTION_FPS, REQUIRED_KEYS, MotionError, check_clip_ends

__all__ = [
    "CONVENTIONS",
    "CSV_DEFAULT_FPS",
    "QUAT_UNIT_TOL",
    "BodyStates",
    "Convention",
    "QuatOrder",
    "SourceMotion",
    "detect_convention",
    "read_arrays",
    "read_source",
]

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

CSV_DEFAULT_FPS = 30
"""Frame rate of a CSV when ``--fps-in`` is not given (the common retargeted-clip rate)."""
QUAT_UNIT_TOL = 1e-3
"""A source quaternion's norm must be within this of 1 (the motion contract's tolerance)."""
_UPRIGHT = 0.5
"""A pelvis reading counts as upright when its body z axis has world z above this (60° tilt)."""
_REFERENCE_MATCH_RAD = 1e-2
_ROOT_BODY = "pelvis"
_BODY_KEYS = ("body_pos_w", "body_quat_w")
_PROVENANCE_KEY = "import_convention"


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
    ignored_joints: tuple[str, ...] = ()
    """Source joints that are not G1 hinges (e.g. hand joints); not used."""
    ignored_bodies: tuple[str, ...] = ()
    """Source bodies that are not G1 bodies; not used."""
    clip_ends: tuple[int, ...] = ()
    """Exclusive end frames of a clip set's clips (``clip_ends``); empty for one clip."""

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])


# ---------------------------------------------------------------------------------------------
# Small validated readers
# ---------------------------------------------------------------------------------------------


def _fail(path: Path, what: str) -> MotionError:
    return MotionError(f"motion file '{path}': {what}")


def read_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz``; an unreadable key is named (pickled object arrays)."""
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise _fail(
            path,
            f"not a readable .npz ({type(err).__name__}: {err}); re-export it with numpy.savez",
        ) from err
    with npz:
        out = {}
        for key in npz.files:
            try:
                out[key] = np.asarray(npz[key])
            except ValueError as err:
                raise _fail(
                    path,
                    f"key '{key}' cannot be read without pickle ({err}); store names as a string array, e.g. np.asarray(names, dtype=str)",
                ) from err
    return out


def _names(path: Path, key: str, raw: np.ndarray) -> tuple[str, ...]:
    arr = np.asarray(raw).reshape(-1)
    if arr.dtype.kind not in "US":
        raise _fail(path, f"key '{key}' has dtype {arr.dtype}; store the names as strings")
    names = tuple(v.decode() if isinstance(v, bytes) else str(v) for v in arr.tolist())
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if not name.strip():
            raise _fail(path, f"key '{key}' has an empty name at column {i}; name every column")
        if name in seen:
            raise _fail(
                path,
                f"key '{key}' names '{name}' twice (columns {seen[name]} and {i}); each name must be unique",
            )
        seen[name] = i
    return names


def _float_array(path: Path, key: str, arrays: Mapping[str, np.ndarray], ndim: int) -> np.ndarray:
    arr = arrays[key]
    if arr.dtype.kind not in "iuf":
        raise _fail(path, f"key '{key}' has dtype {arr.dtype}; expected floats")
    if arr.ndim != ndim:
        raise _fail(path, f"key '{key}' has shape {arr.shape}; expected {ndim} dimensions")
    return arr.astype(np.float64)


def _check_frames(path: Path, key: str, arr: np.ndarray) -> None:
    """T ≥ 2 and no NaN/inf frame."""
    if arr.shape[0] < 2:
        raise _fail(path, f"key '{key}' has T={arr.shape[0]} frames; a clip needs at least 2")
    bad = ~np.isfinite(arr.reshape(arr.shape[0], -1))
    if bad.any():
        frame, col = (int(i) for i in np.argwhere(bad)[0])
        frames = int(bad.any(axis=1).sum())
        raise _fail(
            path,
            f"key '{key}' has NaN/inf at frame {frame} (flat column {col}; {frames} bad frames); drop or fill those frames in the exporter",
        )


def _check_unit(path: Path, key: str, q: np.ndarray) -> np.ndarray:
    """Normalised copy of ``q [T, ..., 4]`` after checking every norm is 1 within tolerance."""
    norms = np.linalg.norm(q, axis=-1)
    off = np.abs(norms - 1.0) > QUAT_UNIT_TOL
    if off.any():
        where = tuple(int(i) for i in np.argwhere(off)[0])
        raise _fail(
            path,
            f"key '{key}' has a quaternion of norm {norms[where]:.6f} at index {where}; quaternions must be unit (within {QUAT_UNIT_TOL}): normalise them in the exporter",
        )
    return q / norms[..., None]


def _frame_count(path: Path, key: str, arr: np.ndarray, frames: int) -> None:
    if arr.shape[0] != frames:
        raise _fail(
            path,
            f"key '{key}' has {arr.shape[0]} frames but 'joint_pos' has {frames}; export whole clips",
        )


def _fps(path: Path, arrays: Mapping[str, np.ndarray], fps_in: float | None) -> tuple[float, str]:
    if "fps" not in arrays:
        if fps_in is None:
            raise _fail(
                path,
                "missing key 'fps'; give the source frame rate: g1-motion convert IN OUT --fps-in N",
            )
        return float(fps_in), "--fps-in"
    value = np.asarray(arrays["fps"])
    if value.size != 1 or value.dtype.kind not in "iuf":
        raise _fail(
            path, f"key 'fps' must be one number, got dtype {value.dtype} shape {value.shape}"
        )
    fps = float(value.reshape(()))
    if not math.isfinite(fps) or fps <= 0:
        raise _fail(path, f"key 'fps'={fps} must be a positive number; fix the export")
    if fps_in is not None and not math.isclose(fps, fps_in):
        raise _fail(path, f"key 'fps'={fps:g} disagrees with --fps-in {fps_in:g}; drop --fps-in")
    return fps, "key 'fps'"


def _map_joints(path: Path, key: str, names: Sequence[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Columns of the 29 G1 joints in ``names`` and the names that are not G1 joints."""
    index = {name: i for i, name in enumerate(names)}
    missing = [n for n in JOINT_NAMES if n not in index]
    extra = tuple(n for n in names if n not in JOINT_NAMES)
    if missing:
        raise _fail(
            path,
            f"key '{key}' lacks G1 joints {missing} (unmatched names in the file: {list(extra)}); rename the columns to the G1 29-DoF joint names",
        )
    return np.asarray([index[n] for n in JOINT_NAMES], dtype=np.int64), extra


# ---------------------------------------------------------------------------------------------
# Quaternion component order
# ---------------------------------------------------------------------------------------------


def _as_wxyz(raw: np.ndarray, order: str) -> np.ndarray:
    return raw if order == "wxyz" else raw[..., [3, 0, 1, 2]]


def _quat_order(
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
        return _check_unit(path, key, _as_wxyz(raw, choice)), choice, "--quat-order"
    readings = {order: _as_wxyz(raw, order) for order in ("wxyz", "xyzw")}
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
                _check_unit(path, key, readings[order]),
                order,
                "detected: matches the pelvis body",
            )  # type: ignore[return-value]
    upright = {o: quat.up_z(q) > _UPRIGHT for o, q in readings.items()}
    only_w = int((upright["wxyz"] & ~upright["xyzw"]).sum())
    only_x = int((upright["xyzw"] & ~upright["wxyz"]).sum())
    if only_w and not only_x:
        return _check_unit(path, key, readings["wxyz"]), "wxyz", "detected: upright pelvis"
    if only_x and not only_w:
        return _check_unit(path, key, readings["xyzw"]), "xyzw", "detected: upright pelvis"
    why = (
        "both readings keep the pelvis upright"
        if not (only_w or only_x)
        else "upright readings differ across frames"
    )
    return _check_unit(path, key, readings[stated]), stated, f"stated by the convention ({why})"


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
    return _fail(
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
            raise _fail(
                path,
                f"key 'joint_names' has {count} names but 'joint_pos' has {width} columns; expected {width} (joints only) or {width - 7} (root pos + quat first)",
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
        raise _fail(
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


def _body_states(
    path: Path, arrays: Mapping[str, np.ndarray], names: Sequence[str], frames: int
) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(pos [T, B, 3], raw quat [T, B, 4])`` of the body arrays."""
    for key in _BODY_KEYS:
        if key not in arrays:
            raise _fail(
                path, f"missing key '{key}'; body names are given, so export the body poses too"
            )
    pos = _float_array(path, "body_pos_w", arrays, 3)
    raw = _float_array(path, "body_quat_w", arrays, 3)
    for key, arr, width in (("body_pos_w", pos, 3), ("body_quat_w", raw, 4)):
        if arr.shape[1:] != (len(names), width):
            raise _fail(
                path,
                f"key '{key}' has shape {arr.shape}; expected (T, {len(names)}, {width}) for {len(names)} body names",
            )
        _frame_count(path, key, arr, frames)
        _check_frames(path, key, arr)
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
        raise _fail(
            path,
            f"key 'body_names' has no G1 body (first names: {list(names)[:5]}); use the G1 29-DoF body names",
        )
    kept = tuple(names[i] for i in keep)
    order_source = "stated by the convention (wxyz)"
    order: str = "wxyz"
    if _ROOT_BODY in kept:
        col = keep[kept.index(_ROOT_BODY)]
        _, order, order_source = _quat_order(
            path, "body_quat_w", raw[:, col], choice, stated="wxyz"
        )
    elif choice != "auto":
        order, order_source = choice, "--quat-order"
    body_quat = _check_unit(path, "body_quat_w", _as_wxyz(raw[:, keep], order))
    return BodyStates(kept, pos[:, keep], body_quat), ignored, order, order_source


def _joint_pos(path: Path, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    joint_pos = _float_array(path, "joint_pos", arrays, 2)
    _check_frames(path, "joint_pos", joint_pos)
    return joint_pos


def _read_root_included(
    path: Path, arrays: Mapping[str, np.ndarray], fps: tuple[float, str], choice: QuatOrder
) -> SourceMotion:
    joint_pos = _joint_pos(path, arrays)
    names = _names(path, "joint_names", arrays["joint_names"])
    cols, extra = _map_joints(path, "joint_names", names)
    frames = joint_pos.shape[0]
    bodies, ignored, reference = None, (), None
    if "body_names" in arrays:
        body_names = _names(path, "body_names", arrays["body_names"])
        bodies, ignored, _, _ = _named_bodies(path, arrays, body_names, frames, choice)
        if _ROOT_BODY in bodies.names:
            reference = bodies.quat[:, bodies.names.index(_ROOT_BODY)]
    elif any(key in arrays for key in _BODY_KEYS):
        raise _fail(
            path,
            "body arrays without key 'body_names'; add the body names (root-included files name their bodies)",
        )
    root_quat, order, order_source = _quat_order(
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


def _read_body_rooted(
    path: Path,
    arrays: Mapping[str, np.ndarray],
    convention: Convention,
    native: bool,
    fps: tuple[float, str],
    choice: QuatOrder,
) -> SourceMotion:
    """``mjlab``, ``named`` and ``g1soak``: the root pose is the pelvis body's pose."""
    joint_pos = _joint_pos(path, arrays)
    frames = joint_pos.shape[0]
    extra: tuple[str, ...] = ()
    if "joint_names" in arrays:
        cols, extra = _map_joints(
            path, "joint_names", _names(path, "joint_names", arrays["joint_names"])
        )
        joint_pos = joint_pos[:, cols]
    elif joint_pos.shape[1] != len(JOINT_NAMES):
        raise _fail(
            path,
            f"key 'joint_pos' has {joint_pos.shape[1]} columns; without 'joint_names' it must hold the 29 G1 joints",
        )
    if "body_names" in arrays:
        names = _names(path, "body_names", arrays["body_names"])
    else:
        count = _body_count(arrays)
        g1 = g1_body_names()
        if count not in (len(g1), len(g1) - 1):
            raise _fail(
                path,
                f"key 'body_pos_w' has B={count} bodies without 'body_names'; accepted are {len(g1) - 1} or {len(g1)} (G1 in MuJoCo order), or add 'body_names'",
            )
        names = g1 if count == len(g1) else g1[1:]
    bodies, ignored, order, order_source = _named_bodies(path, arrays, names, frames, choice)
    if _ROOT_BODY not in bodies.names:
        raise _fail(
            path,
            f"key 'body_names' has no '{_ROOT_BODY}'; the root pose comes from the pelvis body (or write joint_pos as root pos + quat + joints)",
        )
    root = bodies.names.index(_ROOT_BODY)
    clip_ends: tuple[int, ...] = ()
    if "clip_ends" in arrays:
        if fps[0] != MOTION_FPS:
            raise _fail(
                path,
                f"key 'clip_ends' marks a clip set, which must be at {MOTION_FPS} fps, not {fps[0]:g}; rebuild the clip set",
            )
        clip_ends = tuple(int(e) for e in check_clip_ends(path, arrays["clip_ends"], frames))
    return SourceMotion(
        path=path,
        convention=convention,
        native=native,
        fps=fps[0],
        fps_source=fps[1],
        root_pos=bodies.pos[:, root],
        root_quat=quat.continuous_sign(bodies.quat[:, root]),
        joint_pos=joint_pos,
        quat_order=order,  # type: ignore[arg-type]
        quat_order_source=order_source,
        bodies=bodies,
        ignored_joints=extra,
        ignored_bodies=ignored,
        clip_ends=clip_ends,
    )


# ---------------------------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------------------------


def _csv_rows(path: Path) -> tuple[list[str] | None, np.ndarray]:
    """``(header names or None, values [T, C])``; blank and ``#`` lines are skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise _fail(path, f"cannot be read as UTF-8 text ({type(err).__name__}: {err})") from err
    rows = [
        (line, [c.strip() for c in cells])
        for line, cells in enumerate(csv.reader(text.splitlines()), start=1)
        if any(c.strip() for c in cells) and not cells[0].lstrip().startswith("#")
    ]
    if not rows:
        raise _fail(path, "has no rows; a CSV clip needs one row per frame")
    header = None
    try:
        [float(c) for c in rows[0][1]]
    except ValueError:
        header, rows = rows[0][1], rows[1:]
    width = len(header) if header is not None else len(rows[0][1])
    values = np.empty((len(rows), width))
    for r, (line, cells) in enumerate(rows):
        if len(cells) != width:
            raise _fail(path, f"line {line} has {len(cells)} columns; every row needs {width}")
        try:
            values[r] = [float(c) for c in cells]
        except ValueError as err:
            raise _fail(path, f"line {line}: {err}; every cell must be a number") from err
    return header, values


def _read_csv(path: Path, fps_in: float | None, choice: QuatOrder) -> SourceMotion:
    header, values = _csv_rows(path)
    if header is None:
        if values.shape[1] != 7 + len(JOINT_NAMES):
            raise _fail(
                path,
                f"has {values.shape[1]} columns; expected 36 (root pos 3, root quat 4, 29 joints in G1 order) or a header row naming the joint columns",
            )
        names: tuple[str, ...] = JOINT_NAMES
    else:
        names = _names(path, "header", np.asarray(header[7:], dtype=str))
    cols, extra = _map_joints(path, "header", names)
    _check_frames(path, f"columns 0-{values.shape[1] - 1}", values)
    root_quat, order, order_source = _quat_order(
        path, "columns 3-6 (root quaternion)", values[:, 3:7], choice, stated="xyzw"
    )
    fps = float(fps_in) if fps_in is not None else float(CSV_DEFAULT_FPS)
    return SourceMotion(
        path=path,
        convention="csv",
        native=False,
        fps=fps,
        fps_source="--fps-in" if fps_in is not None else f"CSV default ({CSV_DEFAULT_FPS})",
        root_pos=values[:, 0:3],
        root_quat=quat.continuous_sign(root_quat),
        joint_pos=values[:, 7:][:, cols],
        quat_order=order,
        quat_order_source=order_source,
        bodies=None,
        ignored_joints=extra,
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
        raise _fail(path, f"--fps-in {fps_in} must be a positive number")
    if quat_order not in ("auto", "wxyz", "xyzw"):
        raise _fail(path, f"--quat-order {quat_order!r} must be auto, wxyz or xyzw")
    if not path.is_file():
        raise _fail(path, "does not exist; pass an existing .npz or .csv file")
    if path.suffix.lower() == ".csv":
        return _read_csv(path, fps_in, quat_order)
    arrays = read_arrays(path)
    convention, native = detect_convention(path, arrays)
    fps = _fps(path, arrays, fps_in)
    if convention == "root-included":
        return _read_root_included(path, arrays, fps, quat_order)
    return _read_body_rooted(path, arrays, convention, native, fps, quat_order)
