"""Where on a clip the failed episodes of an evaluation ended, read by a person.

``evaluation.json`` keeps each failed episode's end frame exactly (``failure_frames``, clip
frames at ``motion.fps``). :func:`failure_spans` groups them into spans of clip time, frames
no more than :data:`GAP_S` apart in one span, largest first, so a view can say "24 of the
30 failures ended at 26.8-27.1 s": a policy that fails at one moment of the clip (a glitch
of the reference, a move it never learned) reads differently from one that fails anywhere.
Pure; no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["GAP_S", "FailureSpan", "describe_failures", "failure_spans"]

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
