"""The ``play`` section of ``run_summary.json`` (``schemas/run_summary.v1.json#/$defs/play``).

``status`` is ``ok`` (video, filmstrip and ONNX written, the ONNX verified), ``failed``
(``reason`` names every part that failed and why; parts that worked are still listed) or
``skipped`` (``training.no_play=true``). :func:`record_play` puts the section into the run's
summary through :func:`contracts.rundir.set_summary_section` (validated against the schema,
written atomically). A run directory without a summary (a run still training) is left alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from contracts import rundir

__all__ = ["PlayRecord", "record_play", "skipped", "summary_rows"]


@dataclass
class PlayRecord:
    """One play, as recorded (paths absolute; None where that output was not written)."""

    status: str = "ok"
    reason: str | None = None
    checkpoint: str | None = None
    motion_id: str | None = None
    motion_sha256: str | None = None
    frames: int | None = None
    gl_backend: str | None = None
    video: str | None = None
    filmstrip: str | None = None
    onnx: str | None = None
    onnx_max_abs_error: float | None = None
    onnx_tolerance: float | None = None
    mean_body_pos_error_m: float | None = None
    timings_s: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list, repr=False)

    def fail(self, part: str, message: str) -> None:
        """Note that ``part`` (``video``, ``onnx``, ...) failed."""
        self.failures.append(f"{part}: {message}")

    def section(self) -> dict[str, Any]:
        """The JSON section; ``status``/``reason`` follow from :meth:`fail` calls."""
        doc = asdict(self)
        doc.pop("failures")
        if self.failures:
            doc["status"], doc["reason"] = "failed", "; ".join(self.failures)
        doc["timings_s"] = {k: round(max(0.0, v), 3) for k, v in self.timings_s.items()}
        return doc


def skipped(reason: str) -> dict[str, Any]:
    """The section of a play that did not run."""
    return PlayRecord(status="skipped", reason=reason).section()


def record_play(run_dir: Path, section: dict[str, Any]) -> Path | None:
    """Set ``play`` in ``<run_dir>/run_summary.json``; return the path, or None without one.

    Raises:
        ValueError: the updated summary would violate the schema (nothing is written).
        OSError, StrictJsonError: the summary cannot be read or written.
    """
    return rundir.set_summary_section(run_dir, "play", section)


def summary_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows for ``train``'s outcome table: the play status and its outputs."""
    play = summary.get("play")
    if not isinstance(play, dict):
        return []
    status = str(play.get("status"))
    rows = [("play", status if not play.get("reason") else f"{status}: {play['reason'][:200]}")]
    for key in ("video", "onnx"):
        if play.get(key):
            rows.append((f"play {key}", str(play[key])))
    return rows
