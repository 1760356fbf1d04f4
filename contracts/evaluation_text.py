"""One-line texts of evaluation points for the tables of ``train``, ``g1-soak``, ``evaluate``
and ``soak-report``.

Both run tables end with the run's evaluation (schemas/evaluation.v1.json): the final point
and the best one, as "success 100.0 % (frame 0: 71.9 %), MPKPE 17.9 mm, R-MPKPE 12.1 mm".
A null metric (not finite) reads ``null``, never a number.

Where the failed episodes ended (a mode's ``failure_frames``, clip frames at ``motion.fps``)
reads as spans of clip time (:func:`describe_failures`): frames no more than :data:`GAP_S`
apart share a span, largest first, e.g. "26.8–27.1 s ×24 · 12.3 s ×3", so a policy that fails
at one moment of the clip (a glitch of the reference, a move it never learned) reads
differently from one that fails anywhere. Pure: no I/O, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def _pct(value: float | None) -> str:
    return "null" if value is None else f"{value * 100:.1f} %"


def _mm(value: float | None) -> str:
    return "null" if value is None else f"{value:.1f} mm"


def metrics_text(uniform: Mapping[str, Any], frame0: Mapping[str, Any]) -> str:
    """Uniform-start success (frame-0 success), MPKPE and R-MPKPE of one point."""
    return (
        f"success {_pct(uniform['success_rate'])} (frame 0: {_pct(frame0['success_rate'])}), "
        f"MPKPE {_mm(uniform['mpkpe_mm'])}, R-MPKPE {_mm(uniform['r_mpkpe_mm'])}"
    )


def evaluation_rows(section: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Table rows of ``run_summary.evaluation``: final and best, or why there are none."""
    if not isinstance(section, Mapping):
        return [("evaluation", "-")]
    if section.get("status") != "evaluated":
        return [("evaluation", f"{section.get('status')}: {section.get('reason')}")]
    rows = []
    for label in ("final", "best"):
        point = section[label]
        modes = point["modes"]
        rows.append(
            (
                f"evaluation, {label} (iteration {point['iteration']:,})",
                metrics_text(modes["uniform"], modes["frame0"]),
            )
        )
    return rows


FAILURE_FRAMES_FIELD = "failure_frames"
"""The key of a mode's failure frames in schemas/evaluation.v1.json (the trainer writes it, the
report and ``evaluate`` read it)."""
GAP_S = 0.5
"""Failure frames further apart than this (seconds of clip) start a new span."""
SHOWN_SPANS = 4
"""Spans a description names before it counts the rest."""


@dataclass(frozen=True)
class FailureSpan:
    """Failures that ended between ``first_s`` and ``last_s`` of clip time."""

    first_s: float
    last_s: float
    count: int

    def label(self) -> str:
        """``26.8–27.1 s ×24``, or ``5.0 s ×1`` for a span of one instant."""
        when = f"{self.first_s:.1f}"
        if f"{self.last_s:.1f}" != when:
            when += f"–{self.last_s:.1f}"
        return f"{when} s ×{self.count}"


def failure_spans(frames: Sequence[int], fps: float) -> list[FailureSpan]:
    """The spans of ``frames`` (failure frames at ``fps``), most failures first, then earliest."""
    spans: list[list[int]] = []
    for frame in sorted(frames):
        if spans and (frame - spans[-1][-1]) / fps <= GAP_S:
            spans[-1].append(frame)
        else:
            spans.append([frame])
    out = [FailureSpan(s[0] / fps, s[-1] / fps, len(s)) for s in spans]
    return sorted(out, key=lambda span: (-span.count, span.first_s))


def describe_failures(frames: Sequence[int], fps: float) -> str:
    """``26.8–27.1 s ×24 · 12.3 s ×3 · and 2 more spans (3)``: the largest spans by count."""
    spans = failure_spans(frames, fps)
    text = " · ".join(span.label() for span in spans[:SHOWN_SPANS])
    rest = spans[SHOWN_SPANS:]
    if rest:
        word = "span" if len(rest) == 1 else "spans"
        text += f" · and {len(rest)} more {word} ({sum(s.count for s in rest)})"
    return text
