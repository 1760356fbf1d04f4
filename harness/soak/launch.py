"""Launching the trainer and ending it (docs/contracts.md §soak-monitor launch, §liveness-and-residuals termination).

The monitor makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER, 1)``) so that
orphaned descendants re-parent to it instead of init and stay visible in the tree; it
reaps them with ``waitpid(WNOHANG)``. The trainer runs in its own session and process
group (pgid = pid), with stdout and stderr in ``<log-dir>/soak-console.log`` and the
caller's environment plus ``PYTHONUNBUFFERED=1``, ``G1SOAK_LOG_DIR`` and the run marker
``G1SOAK_RUN_ID``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from contracts import rundir
from contracts.parent_death import die_with_parent_preexec
from contracts.procfs import is_same_process, read_stat
from harness.soak.proctree import MARKER_ENV, read_children

LOG = logging.getLogger(__name__)

PR_SET_CHILD_SUBREAPER = 36
DEFAULT_STOP_GRACE_S = 60.0
"""SIGTERM to SIGKILL: a cancelled trainer stops its collector, saves its checkpoint and writes
its run summary in this time (the CPU trainer needs ~5 s on two busy cores)."""
TERMINATION_POLL_S = 0.05


def set_child_subreaper() -> bool:
    """Make this process a child subreaper; False (and a log line) where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            LOG.warning("prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d", ctypes.get_errno())
            return False
    except (OSError, AttributeError) as err:
        LOG.warning("prctl unavailable: %s", err)
        return False
    return True


@dataclass
class LaunchedTrainer:
    """A running trainer: its Popen, process group, marker and console log."""

    popen: subprocess.Popen[bytes]
    pgid: int
    soak_id: str
    subreaper: bool
    console_log: Path
    started_monotonic: float
    start_ticks: int | None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()


def trainer_environment(
    log_dir: Path, soak_id: str, base: dict[str, str] | None = None
) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["PYTHONUNBUFFERED"] = "1"
    env["G1SOAK_LOG_DIR"] = str(log_dir)
    env[MARKER_ENV] = soak_id
    return env


def launch_trainer(command: Sequence[str], log_dir: Path) -> LaunchedTrainer:
    """Start ``command`` in a new session with the console log in ``log_dir``.

    Raises:
        OSError: the program cannot be executed (the caller records a failed soak).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    subreaper = set_child_subreaper()
    soak_id = uuid.uuid4().hex
    console_log = log_dir / rundir.SOAK_CONSOLE_LOG
    with open(console_log, "ab") as console:
        popen = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=console,
            stderr=subprocess.STDOUT,
            env=trainer_environment(log_dir, soak_id),
            start_new_session=True,
            close_fds=True,
            # A soak killed outright (SIGKILL) still stops its trainer the normal way: the
            # trainer gets SIGTERM, writes its cancelled summary and checkpoint, and exits.
            preexec_fn=die_with_parent_preexec(signal.SIGTERM),  # noqa: PLW1509 - a syscall only
        )
    stat = read_stat(popen.pid)
    return LaunchedTrainer(
        popen=popen,
        pgid=popen.pid,
        soak_id=soak_id,
        subreaper=subreaper,
        console_log=console_log,
        started_monotonic=time.monotonic(),
        start_ticks=None if stat is None else stat.start_time_ticks,
    )


def reap_orphans(*, keep: int | None) -> list[int]:
    """Reap zombie children of the monitor other than ``keep`` (the trainer, whose status
    Popen must collect). Returns the reaped PIDs."""
    reaped: list[int] = []
    for pid in read_children(os.getpid()):
        if pid == keep:
            continue
        stat = read_stat(pid)
        if stat is None or stat.state not in ("Z", "X"):
            continue
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if done:
            reaped.append(pid)
    return reaped


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _group_has_live_member(pgid: int) -> bool:
    """True while a non-zombie process of the group exists (zombies cannot act)."""
    if not _group_alive(pgid):
        return False
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_stat(int(entry))
            if stat is not None and stat.pgid == pgid and stat.state not in ("Z", "X"):
                return True
    return False


def _wait_until(
    predicate: Callable[[], bool], timeout_s: float, *, tick: Callable[[], None]
) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        tick()
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(TERMINATION_POLL_S)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def terminate_group(
    trainer: LaunchedTrainer, *, timeout_s: float = DEFAULT_STOP_GRACE_S
) -> list[str]:
    """SIGTERM the trainer's group, wait up to ``timeout_s`` polling every 50 ms, then
    SIGKILL. Returns the steps taken (``["SIGTERM"]`` or ``["SIGTERM", "SIGKILL"]``)."""

    def tick() -> None:
        trainer.popen.poll()
        reap_orphans(keep=trainer.pid)

    steps = ["SIGTERM"]
    _signal_group(trainer.pgid, signal.SIGTERM)
    if not _wait_until(lambda: not _group_has_live_member(trainer.pgid), timeout_s, tick=tick):
        steps.append("SIGKILL")
        _signal_group(trainer.pgid, signal.SIGKILL)
        _wait_until(lambda: not _group_has_live_member(trainer.pgid), timeout_s, tick=tick)
    return steps


def terminate_process(
    pid: int, start_ticks: int, *, timeout_s: float = DEFAULT_STOP_GRACE_S
) -> list[str]:
    """The same SIGTERM → wait → SIGKILL sequence for one escaped process, only while its
    identity still matches (a recycled PID is never signalled)."""
    steps: list[str] = []

    def tick() -> None:
        reap_orphans(keep=None)

    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not is_same_process(pid, start_ticks):
            break
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        steps.append(sig.name)
        if _wait_until(lambda: not is_same_process(pid, start_ticks), timeout_s, tick=tick):
            break
    return steps


def wait_returncode(
    trainer: LaunchedTrainer, *, timeout_s: float = DEFAULT_STOP_GRACE_S
) -> int | None:
    """``wait()`` for the trainer's status (negative = killed by that signal)."""
    try:
        return trainer.popen.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
