"""Retargeted CSV clips: one row per frame, root position (3), root quaternion (4), joints.

Without a header the 29 joints are in G1 XML order (36 columns); a header row names the
columns, and the joints (columns 7..) are matched by name. A CSV has no frame rate: it is
:data:`CSV_DEFAULT_FPS` unless ``--fps-in`` says otherwise. Its quaternion is xyzw unless
detected otherwise (:func:`~trainer.motion_import.validate.find_quat_order`).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from trainer.motion_import import quat
from trainer.motion_import.source import QuatOrder, SourceMotion
from trainer.motion_import.validate import (
    check_frames,
    fail,
    find_quat_order,
    map_joints,
    read_names,
)
from trainer.sim.scene import JOINT_NAMES

__all__ = ["CSV_DEFAULT_FPS", "read_csv"]

CSV_DEFAULT_FPS = 30
"""Frame rate of a CSV when ``--fps-in`` is not given (the common retargeted-clip rate)."""


def _csv_rows(path: Path) -> tuple[list[str] | None, np.ndarray]:
    """``(header names or None, values [T, C])``; blank and ``#`` lines are skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise fail(path, f"cannot be read as UTF-8 text ({type(err).__name__}: {err})") from err
    rows = [
        (line, [c.strip() for c in cells])
        for line, cells in enumerate(csv.reader(text.splitlines()), start=1)
        if any(c.strip() for c in cells) and not cells[0].lstrip().startswith("#")
    ]
    if not rows:
        raise fail(path, "has no rows; a CSV clip needs one row per frame")
    header = None
    try:
        [float(c) for c in rows[0][1]]
    except ValueError:
        header, rows = rows[0][1], rows[1:]
    width = len(header) if header is not None else len(rows[0][1])
    values = np.empty((len(rows), width))
    for r, (line, cells) in enumerate(rows):
        if len(cells) != width:
            raise fail(path, f"line {line} has {len(cells)} columns; every row needs {width}")
        try:
            values[r] = [float(c) for c in cells]
        except ValueError as err:
            raise fail(path, f"line {line}: {err}; every cell must be a number") from err
    return header, values


def read_csv(path: Path, fps_in: float | None, choice: QuatOrder) -> SourceMotion:
    header, values = _csv_rows(path)
    if header is None:
        if values.shape[1] != 7 + len(JOINT_NAMES):
            raise fail(
                path,
                f"has {values.shape[1]} columns; expected 36 (root pos 3, root quat 4, 29 joints in G1 order) or a header row naming the joint columns",
            )
        names: tuple[str, ...] = JOINT_NAMES
    else:
        names = read_names(path, "header", np.asarray(header[7:], dtype=str))
    cols, extra = map_joints(path, "header", names)
    check_frames(path, f"columns 0-{values.shape[1] - 1}", values)
    root_quat, order, order_source = find_quat_order(
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
        tree_order="by name" if header is not None else "G1 XML order (stated)",
        ignored_joints=extra,
    )
