"""Read-only MPS probes shared by ``cumps doctor`` and the trainer (pure Python, torch-free).

What a control pipe is (``socket``, ``fifo`` or ``missing``), whether a control daemon
answers ``get_server_list`` on it (the real client reads the command on stdin), which
server PID it reports (fallback: the daemon's PID file), and which recorded daemon covers a
GPU. ``observe_ambient`` records the host's MPS state for a run that did not ask for MPS
and never raises.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from contracts import procfs
from contracts.errors import HarnessError
from contracts.mps import records

CONTROL_BIN = "nvidia-cuda-mps-control"
CONTROL_PIPE = "control"
PID_FILE = "nvidia-cuda-mps-control.pid"
DEFAULT_PIPE_DIRECTORY = "/tmp/nvidia-mps"
CONTROL_TIMEOUT_S = 5.0

PipeKind = Literal["socket", "fifo", "missing"]


class SelectionError(HarnessError):
    """No single MPS control pipe could be chosen for a GPU; the message names ``cumps start``."""


@dataclass(frozen=True)
class ControlResult:
    """Outcome of one ``nvidia-cuda-mps-control`` client command."""

    returncode: int | None  # None: not run (binary missing) or timed out
    stdout: str
    error: str | None

    @property
    def answered(self) -> bool:
        return self.returncode == 0


def pipe_kind(path: str | os.PathLike[str]) -> PipeKind | None:
    """``socket``/``fifo`` by file type, ``missing`` if absent, None for anything else."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError:
        return None
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISFIFO(mode):
        return "fifo"
    return None


def control_environment(
    pipe_dir: str, log_dir: str | None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["CUDA_MPS_PIPE_DIRECTORY"] = pipe_dir
    if log_dir is not None:
        env["CUDA_MPS_LOG_DIRECTORY"] = log_dir
    return env


def run_control(
    command: str,
    env: Mapping[str, str],
    *,
    timeout_s: float = CONTROL_TIMEOUT_S,
) -> ControlResult:
    """Send one command to the control daemon named by ``env`` (stdin, as the real client reads it)."""
    binary = shutil.which(CONTROL_BIN, path=env.get("PATH", os.defpath))
    if binary is None:
        return ControlResult(None, "", f"{CONTROL_BIN} is not on PATH")
    try:
        proc = subprocess.run(
            [binary],
            input=command + "\n",
            capture_output=True,
            text=True,
            env=dict(env),
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ControlResult(
            None, "", f"{CONTROL_BIN} {command!r} did not answer within {timeout_s:g} s"
        )
    except OSError as err:
        return ControlResult(None, "", f"{CONTROL_BIN} could not run: {err}")
    error = None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        error = f"{CONTROL_BIN} {command!r} exited {proc.returncode}" + (
            f": {tail[-1]}" if tail else ""
        )
    return ControlResult(proc.returncode, proc.stdout, error)


def parse_server_list(text: str) -> list[int]:
    """PIDs printed by ``get_server_list``, one per line; other lines are ignored."""
    return [int(line.strip()) for line in text.splitlines() if line.strip().isdigit()]


def read_pid_file(*dirs: str | os.PathLike[str] | None) -> int | None:
    """The PID in the first readable ``nvidia-cuda-mps-control.pid`` among ``dirs``."""
    for folder in dirs:
        if folder is None:
            continue
        try:
            text = (Path(folder) / PID_FILE).read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            continue
        if text.isdigit() and int(text) > 0:
            return int(text)
    return None


def is_control_daemon(pid: int) -> bool:
    """True iff ``pid`` is a running ``nvidia-cuda-mps-control`` (comm, or argv[0]/[1] name)."""
    stat_ = procfs.read_stat(pid)
    if stat_ is None or stat_.state in ("Z", "X"):
        return False
    if stat_.comm == CONTROL_BIN[:15]:
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return False
    return any(os.path.basename(arg.decode("utf-8", "replace")) == CONTROL_BIN for arg in argv[:2])


@dataclass
class PipeProbe:
    """What a control pipe directory looked like and whether a daemon answered on it."""

    pipe_directory: str
    control_pipe: str
    control_pipe_kind: PipeKind | None
    accessible: bool
    answered: bool
    server_pids: list[int] = field(default_factory=list)
    pid_file_pid: int | None = None
    error: str | None = None

    @property
    def server_pid(self) -> int | None:
        """First PID from ``get_server_list``; the PID file's when the list is empty."""
        if self.server_pids:
            return self.server_pids[0]
        return self.pid_file_pid if self.answered else None

    @property
    def ok(self) -> bool:
        return self.error is None


def probe_pipe(
    pipe_dir: str, log_dir: str | None = None, *, base_env: Mapping[str, str] | None = None
) -> PipeProbe:
    """Check ``<pipe_dir>/control`` and ask the daemon for its servers.

    The first unmet condition lands in ``error`` (None when the pipe is a readable and
    writable socket or FIFO, the daemon answered, and a server PID is known).
    """
    control = str(Path(pipe_dir) / CONTROL_PIPE)
    kind = pipe_kind(control)
    accessible = kind in ("socket", "fifo") and os.access(control, os.R_OK | os.W_OK)
    result = PipeProbe(
        pipe_directory=pipe_dir,
        control_pipe=control,
        control_pipe_kind=kind,
        accessible=accessible,
        answered=False,
        pid_file_pid=read_pid_file(pipe_dir, log_dir),
    )
    if kind not in ("socket", "fifo"):
        result.error = f"control pipe {control} is {kind or 'not a socket or FIFO'}"
        return result
    if not accessible:
        result.error = f"control pipe {control} is not readable and writable by uid {os.getuid()}"
        return result
    answer = run_control("get_server_list", control_environment(pipe_dir, log_dir, base_env))
    result.answered = answer.answered
    if not answer.answered:
        result.error = f"no control daemon answered on {control}: {answer.error}"
        return result
    result.server_pids = parse_server_list(answer.stdout)
    if result.server_pid is None:
        result.error = (
            f"control daemon on {control} reported no server PID and has no readable {PID_FILE}"
        )
    return result


@dataclass(frozen=True)
class PipeSelection:
    """The pipe a client should use for one GPU, and why."""

    pipe_directory: str
    log_directory: str | None
    source: Literal["environment", "record"]
    record: records.DaemonRecord | None


def _same_dir(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def select_pipe(gpu_uuid: str | None, environ: Mapping[str, str] | None = None) -> PipeSelection:
    """Choose the control pipe: an explicit ``CUDA_MPS_PIPE_DIRECTORY`` wins, else the single
    live recorded daemon covering ``gpu_uuid``.

    Raises:
        SelectionError: no or several live records cover the GPU (message names ``cumps start``).
    """
    env = os.environ if environ is None else environ
    live = records.live_records()
    explicit = env.get("CUDA_MPS_PIPE_DIRECTORY")
    if explicit:
        match = next((rec for rec in live if _same_dir(rec.pipe_directory, explicit)), None)
        return PipeSelection(
            explicit, env.get("CUDA_MPS_LOG_DIRECTORY") or None, "environment", match
        )
    if gpu_uuid is None:
        raise SelectionError(
            "cannot tell which physical GPU the learner uses, so no cumps daemon can be selected; "
            "set CUDA_VISIBLE_DEVICES=<GPU uuid>, then run `cumps start`"
        )
    covering = [rec for rec in live if gpu_uuid in rec.gpu_uuids]
    if not covering:
        raise SelectionError(
            f"no live cumps daemon covers {gpu_uuid}; run `cumps start` (or set "
            "CUDA_MPS_PIPE_DIRECTORY for a hand-started daemon)"
        )
    if len(covering) > 1:
        names = ", ".join(rec.name for rec in covering)
        raise SelectionError(
            f"{len(covering)} live cumps daemons cover {gpu_uuid} ({names}); keep one "
            "(`cumps stop --name <name>`; `cumps start` creates one) or set CUDA_MPS_PIPE_DIRECTORY"
        )
    rec = covering[0]
    return PipeSelection(rec.pipe_directory, rec.log_directory, "record", rec)


def observe_ambient(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The host's MPS state for a run without MPS configured; never raises.

    Returns ``pipe_directory_env`` (raw variable), ``pipe_directory`` (the variable or
    ``/tmp/nvidia-mps``), ``control_pipe``, ``control_pipe_kind``, ``server_pid`` and
    ``ambient_server`` (a daemon answered on the effective pipe). Unresolvable facts are None.
    """
    out: dict[str, Any] = {
        "pipe_directory_env": None,
        "pipe_directory": None,
        "control_pipe": None,
        "control_pipe_kind": None,
        "server_pid": None,
        "ambient_server": False,
    }
    try:
        env = os.environ if environ is None else environ
        raw = env.get("CUDA_MPS_PIPE_DIRECTORY")
        out["pipe_directory_env"] = raw if isinstance(raw, str) else None
        pipe_dir = raw if isinstance(raw, str) and raw else DEFAULT_PIPE_DIRECTORY
        out["pipe_directory"] = pipe_dir
        control = str(Path(pipe_dir) / CONTROL_PIPE)
        out["control_pipe"] = control
        kind = pipe_kind(control)
        out["control_pipe_kind"] = kind
        if kind in ("socket", "fifo"):
            log_dir = env.get("CUDA_MPS_LOG_DIRECTORY") or None
            answer = run_control("get_server_list", control_environment(pipe_dir, log_dir, env))
            if answer.answered:
                out["ambient_server"] = True
                pids = parse_server_list(answer.stdout)
                out["server_pid"] = pids[0] if pids else read_pid_file(pipe_dir, log_dir)
    except Exception:  # noqa: BLE001 - ambient observation is a diagnostic: it must never fail a run
        return out
    return out
