"""The run's final env steps/s: the host's rate over the last ``FINAL_SPAN_S`` seconds of updates.

A metric window (``training.log_interval`` iterations, one by default) lasts milliseconds at
GPU speeds, so a rate over the last window alone is the lead of an asynchronous host over the
device, not a rate: a canonical H200 soak's last window read 545,025 env steps/s against a
steady 118k. Over ten seconds that lead (a few ticks) is below a percent. A run shorter than
the span reports its whole training span, from the end of its first update.
"""

from __future__ import annotations

import collections

FINAL_SPAN_S = 10.0


class SpanRate:
    """Env steps/s between the newest mark and the newest mark at least ``span_s`` older."""

    def __init__(self, span_s: float = FINAL_SPAN_S) -> None:
        self.span_s = span_s
        self._marks: collections.deque[tuple[float, int]] = collections.deque()

    def add(self, at: float, env_steps: int) -> None:
        """One update's end: host seconds ``at`` (monotonic) and the env steps released by then."""
        marks = self._marks
        marks.append((at, env_steps))
        while len(marks) > 2 and at - marks[1][0] >= self.span_s:
            marks.popleft()

    def env_steps_per_sec(self) -> float | None:
        """None before two marks, or when they share a clock reading."""
        if len(self._marks) < 2:
            return None
        (t0, s0), (t1, s1) = self._marks[0], self._marks[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None
