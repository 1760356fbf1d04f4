"""progress.jsonl: the trainer's liveness lines (docs/contracts.md §run-directory, improvement).

One strict-JSON line per shutdown-phase transition and one at least every 10 s of training:
``{time_utc, phase, iteration, total_env_steps, env_steps_per_sec, iterations_per_sec,
rate_window_s, training_elapsed_s, loop_tick}``. Lines are appended with a single ``write`` +
flush, so a reader never sees half a line in practice and the file only grows.

A heartbeat thread writes lines whatever the main thread does, so the file growing proves
only that the process is alive. ``loop_tick`` is the training loop's own counter (the tick it
is at; null before training): a heartbeat line repeats it, so the soak judges a training
phase's liveness on it (docs/soak.md, "Liveness").

The rates are **windowed** (``WindowedRate``): env steps and iterations over the last
``rate_window_s`` seconds of updates, never one iteration's instantaneous rate, which swings
by orders of magnitude with asynchronous GPU work, compiles and checkpoint writes. ``g1-soak``
shows the same fields in its status line, so both read the same number (docs/soak.md).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from contracts import rundir
from contracts.jsonio import dumps_strict

PROGRESS_INTERVAL_S = 10.0
RATE_WINDOW_S = 10.0


def utc_now() -> str:
    """docs/contracts.md §conventions timestamp ``YYYY-MM-DDTHH:MM:SSZ``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def fmt_clock(seconds: float) -> str:
    """``HH:MM:SS`` of a non-negative duration."""
    s = int(seconds)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass(frozen=True)
class Rates:
    env_steps_per_sec: float
    iterations_per_sec: float


class WindowedRate:
    """Env steps and iterations per second over the last ``window_s`` seconds of samples.

    The window ends at the newest sample and starts at the newest sample that is at least
    ``window_s`` older, so the span is ``>= window_s`` (by at most one sample gap) and the
    rate is an average over it. Until the samples span a full window there is no rate
    (None), which keeps the first compile-heavy iterations out of the number.
    """

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s={window_s!r} must be > 0")
        self.window_s = float(window_s)
        self._samples: collections.deque[tuple[float, int, int]] = collections.deque()

    def add(self, t: float, env_steps: int, iteration: int) -> None:
        """Record the counters at time ``t`` (seconds, non-decreasing)."""
        samples = self._samples
        if samples and t < samples[-1][0]:
            raise ValueError(f"time went backwards: {t} < {samples[-1][0]}")
        samples.append((t, env_steps, iteration))
        boundary = t - self.window_s
        # Keep exactly one sample at or before the window's start.
        while len(samples) >= 2 and samples[1][0] <= boundary:
            samples.popleft()

    def rates(self) -> Rates | None:
        """The rates over the window ending at the newest sample, or None (under a window)."""
        if len(self._samples) < 2:
            return None
        t0, steps0, iter0 = self._samples[0]
        t1, steps1, iter1 = self._samples[-1]
        span = t1 - t0
        if span < self.window_s:
            return None
        return Rates((steps1 - steps0) / span, (iter1 - iter0) / span)


class ProgressWriter:
    """Appends progress lines to ``<run_dir>/progress.jsonl``.

    Args:
        run_dir: the run directory (must exist).
        interval_s: the longest gap between two training lines (10 s by contract; at most
            that).
        echo: also render every line for a person on this stream (``train`` passes stderr).
        max_iterations: the run's iteration target or cap (None: none), shown in the line.
        duration_s: the run's training time budget (None: none), shown in the line.
        clock: monotonic seconds (a test seam; ``time.monotonic``).
        loop_tick: reads the training loop's tick counter (None: the line's ``loop_tick``
            is null); only the loop may advance what it reads.
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        interval_s: float = PROGRESS_INTERVAL_S,
        echo: IO[str] | None = None,
        max_iterations: int | None = None,
        duration_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        loop_tick: Callable[[], int | None] | None = None,
    ) -> None:
        self.path = Path(run_dir) / rundir.PROGRESS
        self._echo = echo
        self._max_iterations = max_iterations
        self._duration_s = duration_s
        self._clock = clock
        self._loop_tick = loop_tick
        self._started = clock()
        self._training_start: float | None = None
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._interval_s = interval_s
        self._last_line = 0.0
        self.iteration = 0
        self.total_env_steps = 0
        self.rate = WindowedRate()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def start_heartbeat(self, current_phase: Callable[[], str]) -> None:
        """Also write a line from a background thread whenever ``interval_s`` passed without
        one, so long compiles or graph captures on the main thread still show progress."""

        def beat() -> None:
            while not self._stop.wait(min(1.0, self._interval_s)):
                if self._clock() - self._last_line >= self._interval_s:
                    self.write(current_phase())

        self._heartbeat = threading.Thread(target=beat, name="progress-heartbeat", daemon=True)
        self._heartbeat.start()

    def start_training(self) -> None:
        """Mark the start of training (``training_elapsed_s`` counts from here)."""
        with self._lock:
            self._training_start = self._clock()

    def set_counters(self, *, iteration: int, total_env_steps: int) -> None:
        """Set the counters the next line shows without recording a rate sample."""
        with self._lock:
            self.iteration = iteration
            self.total_env_steps = total_env_steps

    def write(self, phase: str) -> None:
        """Append one line for ``phase`` with the current counters (thread-safe)."""
        with self._lock:
            self._write_locked(phase)

    def line(self, phase: str) -> dict:
        """The JSON object of a line for ``phase`` now (not written)."""
        rates = self.rate.rates()
        start = self._training_start
        return {
            "time_utc": utc_now(),
            "phase": phase,
            "iteration": self.iteration,
            "total_env_steps": self.total_env_steps,
            "env_steps_per_sec": None if rates is None else rates.env_steps_per_sec,
            "iterations_per_sec": None if rates is None else rates.iterations_per_sec,
            "rate_window_s": self.rate.window_s,
            "training_elapsed_s": None if start is None else round(self._clock() - start, 3),
            "loop_tick": None if self._loop_tick is None else self._loop_tick(),
        }

    def _write_locked(self, phase: str) -> None:
        if self._file is None:
            return
        line = self.line(phase)
        self._file.write(dumps_strict(line, indent=None))
        self._file.flush()
        self._last_line = self._clock()
        if self._echo is not None:
            self._echo.write(self.render(line) + "\n")
            self._echo.flush()

    def render(self, line: dict) -> str:
        """One human line: elapsed time, phase, iteration (of the target), env steps, rate."""
        clock = fmt_clock(self._clock() - self._started)
        target = f"/{self._max_iterations}" if self._max_iterations else ""
        budget = ""
        if self._duration_s is not None:
            trained = line["training_elapsed_s"] or 0.0
            budget = f" (trained {fmt_clock(trained)} of {fmt_clock(self._duration_s)})"
        rate = line["env_steps_per_sec"]
        window = f"{line['rate_window_s']:g} s"
        speed = "" if rate is None else f" ({rate:,.0f} env steps/s ({window}))"
        return (
            f"train: {clock} {line['phase']} iteration {line['iteration']}{target}{budget} "
            f"env steps {line['total_env_steps']:,}{speed}"
        )

    def update(self, phase: str, *, iteration: int, total_env_steps: int) -> None:
        """Record counters and a rate sample; append a line if ``interval_s`` passed since
        the last one."""
        now = self._clock()
        with self._lock:
            self.iteration = iteration
            self.total_env_steps = total_env_steps
            self.rate.add(now, total_env_steps, iteration)
            if now - self._last_line >= self._interval_s:
                self._write_locked(phase)

    def close(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
