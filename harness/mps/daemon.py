"""Start and stop user-owned CUDA MPS control daemons (docs/contracts.md §cumps start/stop steps).

``start_daemon`` prepares private (0700) pipe and log directories, refuses anything it
cannot prove is inert, runs ``nvidia-cuda-mps-control -d`` with the GPU and both MPS
directory variables, waits for the control pipe, checks readiness with ``get_server_list``,
verifies the daemon's identity from its PID file and start time, and only then writes the
ownership record. ``stop_entry`` acts only on a record whose ownership evidence still
matches and never sends ``quit`` to a pipe it cannot tie to that record. Logs are kept.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from contracts import procfs
from contracts.errors import HarnessError, UsageError
from contracts.mps import records
from contracts.mps.gpus import Topology
from contracts.mps.probe import (
    CONTROL_BIN,
    CONTROL_PIPE,
    PID_FILE,
    is_control_daemon,
    pipe_kind,
    read_pid_file,
    run_control,
)
from contracts.paths import absolute

MAX_CONTROL_PATH_BYTES = 95  # `<pipe>/control`; `control_privileged` must still fit sun_path
CONTROL_WAIT_S = 5.0
READY_TIMEOUT_S = 5.0
QUIT_WAIT_S = 10.0
LAUNCH_TIMEOUT_S = 10.0
LOG_TAIL_LINES = 12
ORPHAN_SOCKETS = ("control", "control_privileged", "log")
INERT_FILES = (PID_FILE, "control_lock")
LAUNCH_LOG = "cumps-launch.log"
_POLL_S = 0.05


@dataclass(frozen=True)
class DaemonPaths:
    """Where a daemon's pipes and logs go, and whether that is the default root."""

    pipe_directory: Path
    log_directory: Path
    default_root: Path | None  # `<tmp>/cumps/<name>` when defaults were used


def default_root() -> Path:
    return Path(tempfile.gettempdir()) / "cumps"


def resolve_paths(name: str, pipe_dir: str | None, log_dir: str | None) -> DaemonPaths:
    """Default ``<tmp>/cumps/<name>/{pipe,log}``; explicit paths are made absolute
    (``contracts.paths``: relative to the CWD) and must be distinct.

    Raises:
        UsageError: pipe == log, or ``<pipe>/control`` longer than 95 bytes.
    """
    base = default_root() / name
    pipe = absolute(pipe_dir) if pipe_dir else base / "pipe"
    log = absolute(log_dir) if log_dir else base / "log"
    if os.path.realpath(pipe) == os.path.realpath(log):
        raise UsageError(
            f"pipe and log directories must differ (both {pipe}); pass another --log-dir"
        )
    control = os.fsencode(str(pipe / CONTROL_PIPE))
    if len(control) > MAX_CONTROL_PATH_BYTES:
        raise UsageError(
            f"control pipe path {pipe / CONTROL_PIPE} is {len(control)} bytes; the limit is "
            f"{MAX_CONTROL_PATH_BYTES} (Unix socket path limit); pass a shorter --pipe-dir"
        )
    is_default = pipe_dir is None and log_dir is None
    return DaemonPaths(pipe, log, base if is_default else None)


def check_private_dir(path: Path) -> None:
    """Refuse a path that is not a real directory owned by us with no group/other access."""
    try:
        info = os.lstat(path)
    except FileNotFoundError as err:
        raise HarnessError(f"{path} does not exist") from err
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise HarnessError(
            f"{path} is not a directory (symlinks are refused); remove it or pick another path"
        )
    if info.st_uid != os.getuid():
        raise HarnessError(
            f"{path} is owned by uid {info.st_uid}, not {os.getuid()}; refusing it, pass --pipe-dir/--log-dir"
        )
    if info.st_mode & 0o077:
        raise HarnessError(
            f"{path} has mode {stat.S_IMODE(info.st_mode):04o} (group/world access); "
            f"run `chmod 700 {path}` or pick another path"
        )


def ensure_private_dir(path: Path, *, check_created_parents: Path | None = None) -> None:
    """Create ``path`` (and missing parents) with mode 0700 and check it.

    With ``check_created_parents``, every level from that folder down to ``path`` must also
    be private (used for the shared default root under the temp dir).
    """
    missing = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            continue  # raced with another creator; the checks below decide
        os.chmod(folder, 0o700)  # mkdir's mode is filtered by the umask
    levels = [path]
    if check_created_parents is not None:
        probe = path.parent
        while True:
            levels.append(probe)
            if probe == check_created_parents or probe == probe.parent:
                break
            probe = probe.parent
    for folder in levels:
        check_private_dir(folder)


def clean_leftovers(paths: DaemonPaths) -> list[str]:
    """Remove what a dead daemon left behind; refuse anything that may still be in use.

    Orphan sockets are removed only under the default root and only when the PID file does
    not name a live control daemon; inert files (stale PID file, ``control_lock``) only when
    no ``control`` remains. Returns the paths removed.

    Raises:
        HarnessError: a live control daemon owns the pipe, or ``control`` still exists.
    """
    pipe = paths.pipe_directory
    removed: list[str] = []
    pid = read_pid_file(pipe)
    if pid is not None and is_control_daemon(pid):
        raise HarnessError(
            f"a live {CONTROL_BIN} (pid {pid}) already serves {pipe}; use `cumps status`, "
            "or stop it before starting another daemon there"
        )
    if paths.default_root is not None:
        for leaf in ORPHAN_SOCKETS:
            target = pipe / leaf
            if pipe_kind(target) in ("socket", "fifo"):
                target.unlink()
                removed.append(str(target))
    control = pipe / CONTROL_PIPE
    if os.path.lexists(control):
        raise HarnessError(
            f"{control} already exists; another MPS daemon may be using {pipe}. "
            "Stop it or remove the file if you know it is dead, or pass another --pipe-dir"
        )
    for leaf in INERT_FILES:
        target = pipe / leaf
        if os.path.lexists(target) and stat.S_ISREG(os.lstat(target).st_mode):
            target.unlink()
            removed.append(str(target))
    return removed


def log_tail(log_dir: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of ``control.log`` (and the launcher's own output), for error messages."""
    chunks = []
    for leaf in ("control.log", LAUNCH_LOG):
        try:
            text = (log_dir / leaf).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        tail = [line for line in text.splitlines() if line.strip()][-lines:]
        if tail:
            chunks.append(f"--- {log_dir / leaf} (last {len(tail)} lines) ---\n" + "\n".join(tail))
    return "\n".join(chunks) if chunks else f"(no control.log in {log_dir})"


def _wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)


def _launch_env(topology: Topology, paths: DaemonPaths) -> dict[str, str]:
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(topology.uuids)
    env["CUDA_MPS_PIPE_DIRECTORY"] = str(paths.pipe_directory)
    env["CUDA_MPS_LOG_DIRECTORY"] = str(paths.log_directory)
    return env


def _process_start_s(ticks: int) -> float | None:
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1]) + ticks / procfs.clock_ticks_per_second()
    except OSError:
        return None
    return None


def _abort_started(env: dict[str, str], paths: DaemonPaths, launched_at: float) -> str:
    """Quit a daemon we just launched that failed a check; kill it only if it is provably ours."""
    answer = run_control("quit", env, timeout_s=READY_TIMEOUT_S)
    pid = read_pid_file(paths.pipe_directory, paths.log_directory)
    if pid is None:
        return "quit sent; no PID file" if answer.answered else "no control pipe and no PID file"
    # A daemon that took the quit gets the full grace; one that never answered gets a second.
    gone = _wait_for(lambda: not is_control_daemon(pid), QUIT_WAIT_S if answer.answered else 1.0)
    if not gone and _is_ours_since(pid, launched_at):
        os.kill(pid, signal.SIGTERM)
        gone = _wait_for(lambda: not is_control_daemon(pid), 2.0)
        if not gone:
            os.kill(pid, signal.SIGKILL)
            gone = _wait_for(lambda: not is_control_daemon(pid), 2.0)
    if gone:
        for leaf in (*ORPHAN_SOCKETS, *INERT_FILES):
            target = paths.pipe_directory / leaf
            if pipe_kind(target) in ("socket", "fifo") or (
                os.path.lexists(target) and stat.S_ISREG(os.lstat(target).st_mode)
            ):
                target.unlink(missing_ok=True)
        return f"daemon pid {pid} stopped"
    return f"daemon pid {pid} is still running"


def _is_ours_since(pid: int, launched_at: float) -> bool:
    info = procfs.read_stat(pid)
    if info is None or not is_control_daemon(pid):
        return False
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.getuid():
            return False
    except OSError:
        return False
    started = _process_start_s(info.start_time_ticks)
    # btime has one-second resolution: allow a second of slack.
    return started is not None and started >= launched_at - 1.0


def start_daemon(
    topology: Topology, name: str, paths: DaemonPaths, *, foreground: bool
) -> records.DaemonRecord | int:
    """Steps 2-5 of ``cumps start`` (the caller resolved the topology and the old record).

    Returns the written record, or the daemon's exit status with ``foreground``.

    Raises:
        HarnessError: a directory, leftover, readiness or identity check failed; a daemon
            this call launched is asked to quit (and then killed if provably ours) first.
    """
    if not sys.platform.startswith("linux"):
        raise HarnessError(f"cumps needs Linux (this is {sys.platform})")
    if topology.mode != "single_gpu" or len(topology.gpus) != 1:
        raise UsageError(f"cumps start supports only single_gpu, not {topology.mode}")
    for folder in (paths.pipe_directory, paths.log_directory):
        ensure_private_dir(
            folder, check_created_parents=default_root() if paths.default_root else None
        )
    clean_leftovers(paths)
    binary = shutil.which(CONTROL_BIN)
    if binary is None:
        raise HarnessError(
            f"{CONTROL_BIN} is not on PATH; install the NVIDIA driver utilities or fix PATH"
        )
    env = _launch_env(topology, paths)
    if foreground:
        return subprocess.run([binary, "-f"], env=env, check=False).returncode
    launched_at = time.time()
    with open(paths.log_directory / LAUNCH_LOG, "ab") as launch_log:
        try:
            proc = subprocess.run(
                [binary, "-d"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=launch_log,
                stderr=launch_log,
                timeout=LAUNCH_TIMEOUT_S,
                start_new_session=True,
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            outcome = _abort_started(env, paths, launched_at)
            raise HarnessError(
                f"{CONTROL_BIN} -d did not return within {LAUNCH_TIMEOUT_S:g} s ({outcome})\n"
                + log_tail(paths.log_directory)
            ) from err
    if proc.returncode != 0:
        raise HarnessError(
            f"{CONTROL_BIN} -d exited {proc.returncode}\n" + log_tail(paths.log_directory)
        )
    control = paths.pipe_directory / CONTROL_PIPE
    if not _wait_for(lambda: pipe_kind(control) in ("socket", "fifo"), CONTROL_WAIT_S):
        outcome = _abort_started(env, paths, launched_at)
        raise HarnessError(
            f"{control} did not appear within {CONTROL_WAIT_S:g} s ({outcome})\n"
            + log_tail(paths.log_directory)
        )
    ready = run_control("get_server_list", env, timeout_s=READY_TIMEOUT_S)
    if not ready.answered:
        outcome = _abort_started(env, paths, launched_at)
        raise HarnessError(
            f"daemon not ready: {ready.error} ({outcome})\n" + log_tail(paths.log_directory)
        )
    record = _verified_record(topology, name, paths, launched_at)
    if isinstance(record, str):
        outcome = _abort_started(env, paths, launched_at)
        raise HarnessError(
            f"{record}; no record written ({outcome})\n" + log_tail(paths.log_directory)
        )
    try:
        records.write_record(record)
    except records.RecordError as err:
        outcome = _abort_started(env, paths, launched_at)
        raise HarnessError(f"{err} ({outcome})") from err
    return record


def _verified_record(
    topology: Topology, name: str, paths: DaemonPaths, launched_at: float
) -> records.DaemonRecord | str:
    """Build the record from the PID file, or return why the identity cannot be verified."""
    pid_holder: list[int] = []

    def pid_ready() -> bool:
        pid = read_pid_file(paths.pipe_directory, paths.log_directory)
        if pid is not None:
            pid_holder[:] = [pid]
        return pid is not None

    if not _wait_for(pid_ready, 2.0):
        return (
            f"cannot verify the daemon's identity: no readable {PID_FILE} in {paths.pipe_directory}"
        )
    pid = pid_holder[0]
    info = procfs.read_stat(pid)
    if info is None or not is_control_daemon(pid):
        return f"cannot verify the daemon's identity: pid {pid} from {PID_FILE} is not a running {CONTROL_BIN}"
    if not _is_ours_since(pid, launched_at):
        return f"cannot verify the daemon's identity: pid {pid} is not ours or started before this launch"
    return records.DaemonRecord(
        name=name,
        uid=os.getuid(),
        host=records.this_host(),
        topology_mode=topology.mode,
        gpu_uuids=tuple(topology.uuids),
        pipe_directory=str(paths.pipe_directory),
        log_directory=str(paths.log_directory),
        pid=pid,
        process_start_ticks=info.start_time_ticks,
        created_at=records.utc_now(),
    )


def stop_entry(entry: records.RecordEntry) -> str:
    """Stop the daemon behind one of this user's records; return a one-line summary.

    Raises:
        records.RecordError: foreign record (untouched), or stale/invalid record (unlinked,
            ``stale record ...; no control contacted``).
        HarnessError: the pipe is not tied to the record, or the daemon outlived ``quit``.
    """
    if entry.state == "foreign":
        raise records.RecordError(f"record {entry.name!r} is foreign ({entry.reason}); not touched")
    if entry.state != "live" or entry.record is None:
        records.remove_record(entry.name)
        raise records.RecordError(
            f"stale record {entry.name!r} removed ({entry.reason}); no control contacted"
        )
    record = entry.record
    pid_file_pid = read_pid_file(record.pipe_directory, record.log_directory)
    if pid_file_pid != record.pid:
        raise HarnessError(
            f"{record.pipe_directory} is not tied to record {record.name!r} (PID file names "
            f"{pid_file_pid}, record names {record.pid}); no control contacted"
        )
    env = dict(os.environ)
    env.update(record.environment())
    answer = run_control("quit", env, timeout_s=QUIT_WAIT_S)
    gone = _wait_for(
        lambda: not procfs.is_same_process(record.pid, record.process_start_ticks), QUIT_WAIT_S
    )
    if not gone:
        detail = f"; {answer.error}" if answer.error else ""
        raise HarnessError(
            f"daemon {record.name!r} (pid {record.pid}) did not exit within {QUIT_WAIT_S:g} s of quit{detail}; "
            f"record kept, see {record.log_directory}/control.log"
        )
    records.remove_record(record.name)
    return f"stopped {record.name} (pid {record.pid}); logs kept in {record.log_directory}"
