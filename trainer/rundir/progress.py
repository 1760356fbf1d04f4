"""progress.jsonl: the trainer's liveness lines (CONTRACTS §3, improvement).

One strict-JSON line per shutdown-phase transition and one at least every 10 s of training:
``{time_utc, phase, iteration, total_env_steps, env_steps_per_sec}``. Lines are appended
with a single ``write`` + flush, so a reader never sees half a line in practice and the file
only grows (the soak's byte-size progress signal).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from harness.jsonio import dumps_strict

PROGRESS_FILE = "progress.jsonl"
PROGRESS_INTERVAL_S = 10.0


def utc_now() -> str:
    """CONTRACTS §0 timestamp ``YYYY-MM-DDTHH:MM:SSZ``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ProgressWriter:
    """Appends progress lines to ``<run_dir>/progress.jsonl``.

    Args:
        run_dir: the run directory (must exist).
        interval_s: the longest gap between two training lines (10 s by contract; at most
            that).
        echo: also render every line for a person on this stream (``train`` passes stderr).
        max_iterations: the run's iteration target, shown in the rendered line.
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        interval_s: float = PROGRESS_INTERVAL_S,
        echo: IO[str] | None = None,
        max_iterations: int | None = None,
    ) -> None:
        self.path = Path(run_dir) / PROGRESS_FILE
        self._echo = echo
        self._max_iterations = max_iterations
        self._started = time.monotonic()
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._interval_s = interval_s
        self._last_line = 0.0
        self.iteration = 0
        self.total_env_steps = 0
        self.env_steps_per_sec: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def start_heartbeat(self, current_phase: Callable[[], str]) -> None:
        """Also write a line from a background thread whenever ``interval_s`` passed without
        one, so long compiles or graph captures on the main thread still show progress."""

        def beat() -> None:
            while not self._stop.wait(min(1.0, self._interval_s)):
                if time.monotonic() - self._last_line >= self._interval_s:
                    self.write(current_phase())

        self._heartbeat = threading.Thread(target=beat, name="progress-heartbeat", daemon=True)
        self._heartbeat.start()

    def write(self, phase: str) -> None:
        """Append one line for ``phase`` with the current counters (thread-safe)."""
        with self._lock:
            self._write_locked(phase)

    def _write_locked(self, phase: str) -> None:
        if self._file is None:
            return
        line = {
            "time_utc": utc_now(),
            "phase": phase,
            "iteration": self.iteration,
            "total_env_steps": self.total_env_steps,
            "env_steps_per_sec": self.env_steps_per_sec,
        }
        self._file.write(dumps_strict(line, indent=None))
        self._file.flush()
        self._last_line = time.monotonic()
        if self._echo is not None:
            self._echo.write(self.render(line) + "\n")
            self._echo.flush()

    def render(self, line: dict) -> str:
        """One human line: elapsed time, phase, iteration (of the target), env steps, rate."""
        elapsed = int(time.monotonic() - self._started)
        clock = f"{elapsed // 3600:02d}:{elapsed % 3600 // 60:02d}:{elapsed % 60:02d}"
        target = f"/{self._max_iterations}" if self._max_iterations else ""
        rate = line["env_steps_per_sec"]
        speed = "" if rate is None else f" ({rate:,.0f} env steps/s)"
        return (
            f"train: {clock} {line['phase']} iteration {line['iteration']}{target} "
            f"env steps {line['total_env_steps']:,}{speed}"
        )

    def update(
        self, phase: str, *, iteration: int, total_env_steps: int, env_steps_per_sec: float | None
    ) -> None:
        """Record counters; append a line if ``interval_s`` passed since the last one."""
        self.iteration = iteration
        self.total_env_steps = total_env_steps
        self.env_steps_per_sec = env_steps_per_sec
        if time.monotonic() - self._last_line >= self._interval_s:
            self.write(phase)

    def close(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
