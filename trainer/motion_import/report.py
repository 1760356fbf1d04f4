"""What ``g1-motion inspect`` and ``convert`` report about a clip, and what ``list`` finds.

One :class:`Report` per file: the detected convention, frame counts and rates, how the
quaternion order was found, the ignored names, the provenance of a converted file, the
check rows and the joint ranges. ``as_json`` is the ``--json`` document
(``schemas/motion_inspect.v1.json``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from contracts.motions import MOTION_IDS
from trainer.assets import asset_roots
from trainer.motion_import.checks import Check, JointRange, joint_ranges, run_checks
from trainer.motion_import.convert import PROVENANCE_KEYS, Conversion
from trainer.motion_import.resolve import CLIP_SUFFIXES, IMPORT_DIR
from trainer.motion_import.source import CONVENTIONS
from trainer.motion_import.validate import read_arrays
from trainer.task.motion.clip import MotionError

__all__ = [
    "INSPECT_SCHEMA",
    "MOTION_ALIASES",
    "ClipRow",
    "Report",
    "build_report",
    "list_clips",
]

INSPECT_SCHEMA = "motion_inspect.v1.json"
MOTION_ALIASES = MOTION_IDS
"""The short names ``g1-soak --motion`` accepts (one table, the soak's)."""


@dataclass(frozen=True)
class Report:
    """Everything ``inspect`` prints about one file."""

    conversion: Conversion
    checks: list[Check]
    ranges: list[JointRange]
    provenance: dict[str, Any] | None
    clip_count: int

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def summary_rows(self) -> list[tuple[str, str]]:
        src = self.conversion.source
        frames_in = src.num_frames
        rows = [
            ("file", str(src.path)),
            ("convention", f"{src.convention} ({CONVENTIONS[src.convention]})"),
            ("used as", "as it is (our contract)" if src.native else "converted to our contract"),
            ("frames", f"{frames_in} at {src.fps:g} fps ({src.fps_source})"),
            ("duration", f"{(frames_in - 1) / src.fps:.3f} s"),
            ("converted", f"{self.conversion.num_frames} frames at 50 fps"),
            ("root quaternion", f"{src.quat_order} ({src.quat_order_source})"),
            ("joint/body order", src.tree_order),
        ]
        if self.clip_count > 1:
            rows.append(("clips", str(self.clip_count)))
        if src.ignored_joints:
            rows.append(("ignored joints", ", ".join(src.ignored_joints)))
        if src.ignored_bodies:
            rows.append(
                (
                    "ignored bodies",
                    f"{len(src.ignored_bodies)}: {', '.join(src.ignored_bodies[:6])}"
                    + (" ..." if len(src.ignored_bodies) > 6 else ""),
                )
            )
        for key, value in (self.provenance or {}).items():
            rows.append((key, str(value)))
        return rows

    def as_json(self) -> dict[str, Any]:
        conv, src = self.conversion, self.conversion.source
        return {
            "schema_version": 1,
            "file": str(src.path),
            "sha256": conv.source_sha256,
            "convention": src.convention,
            "native": src.native,
            "frames_in": src.num_frames,
            "fps_in": src.fps,
            "fps_source": src.fps_source,
            "duration_s": (src.num_frames - 1) / src.fps,
            "frames": conv.num_frames,
            "fps": int(conv.arrays["fps"]),
            "clips": self.clip_count,
            "quat_order": src.quat_order,
            "quat_order_source": src.quat_order_source,
            "tree_order": src.tree_order,
            "ignored_joints": list(src.ignored_joints),
            "ignored_bodies": list(src.ignored_bodies),
            "provenance": self.provenance,
            "checks": [c.as_dict() for c in self.checks],
            "residual": None
            if conv.residual is None
            else [{"body": r.body, "pos_m": r.pos_m, "ori_rad": r.ori_rad} for r in conv.residual],
            "joint_ranges": [
                {
                    "joint": r.joint,
                    "clip_min": r.clip_min,
                    "clip_max": r.clip_max,
                    "lower": r.lower,
                    "upper": r.upper,
                    "excess": r.excess,
                }
                for r in self.ranges
            ],
            "passed": self.passed,
        }


def _provenance(path: Path) -> dict[str, Any] | None:
    if path.suffix.lower() == ".csv":
        return None
    arrays = read_arrays(path)
    if "import_version" not in arrays:
        return None
    out: dict[str, Any] = {}
    for key in PROVENANCE_KEYS:
        if key in arrays:
            value = np.asarray(arrays[key])
            out[key] = value.item() if value.ndim == 0 else "; ".join(map(str, value.tolist()))
    return out


def build_report(conversion: Conversion) -> Report:
    """The report of a conversion (its checks run here)."""
    src = conversion.source
    return Report(
        conversion=conversion,
        checks=run_checks(conversion),
        ranges=joint_ranges(conversion.arrays["joint_pos"].astype(np.float64)),
        provenance=_provenance(src.path),
        clip_count=max(1, len(src.clip_ends)),
    )


# ---------------------------------------------------------------------------------------------
# list
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClipRow:
    """One clip ``--motion`` can name."""

    name: str
    """What to pass to ``--motion`` (alias, asset id or path)."""
    kind: str
    """``alias``, ``package``, ``cache`` or ``converted``."""
    path: str | None
    frames: int | None
    note: str


def _frames(path: Path) -> tuple[int | None, str]:
    try:
        if path.suffix.lower() == ".csv":
            lines = path.read_text(encoding="utf-8").splitlines()
            return sum(1 for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), "csv"
        arrays = read_arrays(path)
    except (MotionError, OSError, UnicodeDecodeError) as err:
        return None, f"unreadable: {err}"
    frames = arrays["joint_pos"].shape[0] if "joint_pos" in arrays else None
    if "import_source_name" in arrays:
        return (
            frames,
            f"converted from {arrays['import_source_name'].item()} ({arrays['import_convention'].item()})",
        )
    if "clip_ends" in arrays:
        return frames, f"clip set of {arrays['clip_ends'].size} clips"
    return frames, "npz"


def list_clips(roots: Sequence[Path] | None = None) -> list[ClipRow]:
    """The aliases, every clip under ``<root>/motions/`` and the cached conversions."""
    roots = tuple(asset_roots() if roots is None else roots)
    rows: list[ClipRow] = []
    for alias, asset_id in MOTION_ALIASES.items():
        found = next((Path(r) / asset_id for r in roots if (Path(r) / asset_id).is_file()), None)
        rows.append(
            ClipRow(
                alias,
                "alias",
                str(found) if found else None,
                _frames(found)[0] if found else None,
                asset_id if found else f"{asset_id}, not cached yet (made on first use)",
            )
        )
    for root, kind in zip(roots, ("package", "cache"), strict=False):
        base = Path(root) / "motions"
        if not base.is_dir():
            continue
        for path in sorted(
            p for p in base.rglob("*") if p.is_file() and p.suffix.lower() in CLIP_SUFFIXES
        ):
            rel = path.relative_to(root).as_posix()
            converted = rel.startswith(IMPORT_DIR + "/")
            frames, note = _frames(path)
            rows.append(
                ClipRow(
                    rel,  # an asset id: resolution finds it under this root
                    "converted" if converted else kind,
                    str(path),
                    frames,
                    note,
                )
            )
    return rows
