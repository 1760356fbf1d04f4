"""Running a tool as a child command from the repository root, with a timeout that stops its
whole process group, everything it printed appended to one log (the GPU smoke and the
scaling sweep both run their steps through it)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import harness
from contracts.errors import UsageError

STOP_GRACE_S = 60.0  # after SIGTERM on a timeout, before SIGKILL of the step's group
MPS_OVERRIDE = "training.cuda_process_sharing=mps"
"""The trainer override of a step that joins the cumps daemon (``cumps_argv``)."""


@dataclass
class Finished:
    """A finished command: exit status, what it printed, how long it took."""

    rc: int
    output: str
    seconds: float
    timed_out: bool = False
    errors: str = ""
    """stderr of a captured step (streamed steps merge it into ``output``)."""


class Runner:
    """Runs step commands from ``cwd``; appends everything they print to ``log``."""

    def __init__(self, log: IO[str], cwd: Path, note: Callable[[str], None]) -> None:
        self.log = log
        self.cwd = cwd
        self.note = note

    def _header(self, title: str, argv: Sequence[str]) -> None:
        self.log.write(f"\n===== {title}: {' '.join(argv)}\n")
        self.log.flush()

    def stream(self, title: str, argv: Sequence[str], timeout_s: float) -> Finished:
        """Run with stdout and stderr merged, streamed into the log as they come."""
        self._header(title, argv)
        start = time.monotonic()
        proc = subprocess.Popen(
            list(argv),
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # its own group: a timeout can stop all of it
        )
        expired = threading.Event()
        timer = threading.Timer(timeout_s, self._stop, args=(proc, expired))
        timer.start()
        chunks: list[str] = []
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                self.log.write(line)
                chunks.append(line)
        except BaseException:  # Ctrl-C or SIGTERM of ours: its own group would outlive us
            timer.cancel()
            self._stop(proc, threading.Event())
            raise
        rc = proc.wait()
        timer.cancel()
        self.log.flush()
        return Finished(rc, "".join(chunks), time.monotonic() - start, expired.is_set())

    @staticmethod
    def _stop(proc: subprocess.Popen[str], expired: threading.Event) -> None:
        expired.set()
        proc.terminate()  # g1-soak stops its trainer on SIGTERM
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it exited between the wait and the kill

    def capture(self, title: str, argv: Sequence[str], timeout_s: float) -> Finished:
        """Run with stdout kept apart (it is parsed); both end up in the log."""
        self._header(title, argv)
        start = time.monotonic()
        try:
            done = subprocess.run(
                list(argv),
                cwd=self.cwd,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            self.log.write(_text(err.stdout) + _text(err.stderr))
            return Finished(-signal.SIGKILL, _text(err.stdout), time.monotonic() - start, True)
        self.log.write(done.stdout + done.stderr)
        self.log.flush()
        return Finished(done.returncode, done.stdout, time.monotonic() - start, errors=done.stderr)


def _text(value: str | bytes | None) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value or ""


def repo_root() -> Path:
    """The checkout holding ``harness`` (the steps run there), else the working directory."""
    root = Path(harness.__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else Path.cwd()


def resolve_out(out: Path | None, prefix: str, holds: Sequence[str]) -> Path:
    """``--out``, else ``$OUT``, else a new temporary directory named ``prefix...``; refuse
    one that already holds any of ``holds`` (a run's log, document or step folders)."""
    if out is None and os.environ.get("OUT"):
        out = Path(os.environ["OUT"])
    if out is None:
        return Path(tempfile.mkdtemp(prefix=prefix))
    out = out.resolve()
    for name in holds:
        if (out / name).exists():
            raise UsageError(f"--out {out} already holds {name}; pass an empty or new directory")
    out.mkdir(parents=True, exist_ok=True)
    return out


def cumps_argv(python: str, verb: str) -> list[str]:
    """A ``cumps`` step (``start``, ``stop``) as ``<python> -m harness.mps.cli <verb>``."""
    return [python, "-m", "harness.mps.cli", verb]


def exit_reason(what: str, rc: int, output: str) -> str:
    """``<what> exited <rc>``, with the command's last ``error:`` line when it printed one."""
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    return f"{what} exited {rc}" + (
        f": {errors[-1].removeprefix('error:').strip()}" if errors else ""
    )
