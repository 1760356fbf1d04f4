"""The run's time budget, ``training.duration_seconds`` (docs/runtime.md, "Time budget").

A time-budgeted run trains until ``duration_seconds`` of training time (from
``training/startup_complete``) have passed, then ends through the normal path: the tick that
finds the budget spent is the last one, with its update, final log and checkpoint, the
collector stops after it and the learner commits it. ``algo.max_iterations`` is then a cap
(null: none). Without a budget the run is sized in iterations, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

UNBOUNDED_TICKS = 2**62
"""Tick limit of a run without an iteration cap: the budget ends it (int64-safe)."""


class TimeBudget:
    """``duration_seconds`` of training, measured on ``clock`` (monotonic seconds)."""

    def __init__(
        self, duration_s: float | None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.duration_s = None if duration_s is None else float(duration_s)
        self._clock = clock
        self._start: float | None = None
        self._end: float | None = None
        self._checked_s: float | None = None
        """Training seconds at the last :meth:`spent` reading (forecasts reuse it)."""

    def start(self) -> None:
        """Training begins now."""
        self._start = self._clock()

    def stop(self) -> None:
        """Training ended now (``elapsed_s`` stays at this value)."""
        if self._start is not None and self._end is None:
            self._end = self._clock()

    def elapsed_s(self) -> float | None:
        """Training seconds so far, or until ``stop``."""
        if self._start is None:
            return None
        return (self._end if self._end is not None else self._clock()) - self._start

    def spent(self) -> bool:
        """True once the budget has run out (never without a budget)."""
        if self.duration_s is None or self._start is None:
            return False
        self._checked_s = self._clock() - self._start
        return self._checked_s >= self.duration_s

    @property
    def checked_s(self) -> float | None:
        """Training seconds at the last :meth:`spent` reading; None before one."""
        return self._checked_s

    def forecast_iterations(self, done: int, *, base: int = 0) -> int | None:
        """Iterations the run will have made when the budget ends, at the rate so far.

        ``done`` iterations since :meth:`start`, on top of ``base`` made before it (a resumed
        lineage), measured at the last :meth:`spent` check (no extra clock reading). None
        without a budget or before any measured progress.
        """
        elapsed = self._checked_s
        if self.duration_s is None or elapsed is None or elapsed <= 0 or done <= 0:
            return None
        remaining = max(self.duration_s - elapsed, 0.0)
        return base + done + int(done / elapsed * remaining)

    def record(
        self, *, max_iterations: int | None, stopped_by: str | None, final_iteration: int
    ) -> dict[str, Any]:
        """``run_summary.time_budget``: what was planned and what was reached."""
        elapsed = self.elapsed_s()
        return {
            "duration_seconds": self.duration_s,
            "max_iterations": max_iterations,
            "stopped_by": stopped_by,
            "final_iteration": final_iteration,
            "training_seconds": None if elapsed is None else round(elapsed, 3),
        }
