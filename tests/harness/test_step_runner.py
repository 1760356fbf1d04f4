"""The step runner (harness/step_runner.py) with real processes: logging, timeouts that
stop the whole group, stdout kept apart when captured."""

from __future__ import annotations

import io
import os
import signal
import sys
from pathlib import Path

import pytest

from harness import step_runner
from harness.step_runner import Runner


def test_the_runner_logs_and_returns_what_a_step_printed(tmp_path: Path) -> None:
    log = tmp_path / "smoke.log"
    with log.open("w") as handle:
        done = Runner(handle, tmp_path, print).stream(
            "echo", [sys.executable, "-c", "print('hi'); import sys; sys.exit(3)"], 30
        )
    assert (done.rc, done.output, done.timed_out) == (3, "hi\n", False)
    assert log.read_text().endswith("hi\n")


def test_the_runner_stops_a_step_past_its_timeout(tmp_path: Path) -> None:
    with (tmp_path / "smoke.log").open("w") as handle:
        done = Runner(handle, tmp_path, print).stream(
            "hang", [sys.executable, "-c", "import time; time.sleep(300)"], 0.5
        )
    assert done.timed_out and done.rc == -signal.SIGTERM


def test_the_runner_kills_a_step_that_ignores_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(step_runner, "STOP_GRACE_S", 0.5)
    script = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(300)"
    with (tmp_path / "smoke.log").open("w") as handle:
        done = Runner(handle, tmp_path, print).stream(
            "stubborn", [sys.executable, "-c", script], 1.0
        )
    assert done.timed_out and done.rc == -signal.SIGKILL


def test_the_runner_captures_stdout_apart_and_times_out(tmp_path: Path) -> None:
    with (tmp_path / "smoke.log").open("w") as handle:
        runner = Runner(handle, tmp_path, print)
        done = runner.capture(
            "json",
            [sys.executable, "-c", "import sys; print('{}'); print('note', file=sys.stderr)"],
            30,
        )
        late = runner.capture("hang", [sys.executable, "-c", "import time; time.sleep(300)"], 0.5)
    assert (done.rc, done.output) == (0, "{}\n")
    assert late.timed_out


class _InterruptedLog(io.StringIO):
    """A log whose write raises KeyboardInterrupt at the line ``up``, as Ctrl-C would land."""

    def write(self, text: str) -> int:
        if text == "up\n":
            raise KeyboardInterrupt
        return super().write(text)


def test_a_runner_interrupted_mid_step_stops_the_steps_group_first() -> None:
    """With its own session the step would not see our Ctrl-C and would outlive us."""
    script = (
        "import os, time; print(os.getpid(), flush=True); print('up', flush=True); time.sleep(300)"
    )
    log = _InterruptedLog()
    with pytest.raises(KeyboardInterrupt):
        Runner(log, Path.cwd(), print).stream("interrupted", [sys.executable, "-c", script], 60)
    pid = int(log.getvalue().splitlines()[-1])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # terminated and reaped
