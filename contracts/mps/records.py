"""cumps ownership records: where they live, how they are written, when they are live.

A record is the only evidence cumps (and the trainer) accept that a control daemon is
ours: ``${XDG_CACHE_HOME:-~/.cache}/g1soak/cumps/<name>/daemon.json``, mode 0600, written
once and never overwritten (docs/contracts.md §cumps). It is live only if UID, host, control PID and
the PID's Linux start time (field 22 of ``/proc/<pid>/stat``) all still match; a PID alone is
never enough. As an extra guard against a PID and start tick that repeat after a reboot, the
process must also have started before the record was written (boot time + ticks).
A stale record is quarantined to ``.stale/<name>-<epoch_ms>`` before its name is reused.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from contracts import procfs
from contracts.errors import HarnessError, StrictJsonError, UsageError
from contracts.jsonio import dumps_strict, load_strict
from contracts.schemas import validate

SCHEMA_NAME = "cumps_record.v1.json"
RECORD_FILE = "daemon.json"
STALE_DIR = ".stale"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
# created_at has one-second resolution and /proc/stat btime may jitter by a second.
_START_SLACK_S = 5.0

RecordState = Literal["live", "stale", "foreign", "invalid"]


class RecordError(HarnessError):
    """A record is missing, unreadable, foreign or in the wrong state for the request."""


@dataclass(frozen=True, kw_only=True)
class DaemonRecord:
    """The fields of ``schemas/cumps_record.v1.json``."""

    schema_version: int = 1
    name: str
    uid: int
    host: str
    topology_mode: str
    gpu_uuids: tuple[str, ...]
    pipe_directory: str
    log_directory: str
    pid: int
    process_start_ticks: int
    created_at: str

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["gpu_uuids"] = list(self.gpu_uuids)
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> DaemonRecord:
        values = dict(doc)
        values["gpu_uuids"] = tuple(values["gpu_uuids"])
        return cls(**values)

    def environment(self) -> dict[str, str]:
        """The variables a client (or ``quit``) needs to reach this daemon."""
        return {
            "CUDA_VISIBLE_DEVICES": ",".join(self.gpu_uuids),
            "CUDA_MPS_PIPE_DIRECTORY": self.pipe_directory,
            "CUDA_MPS_LOG_DIRECTORY": self.log_directory,
        }


@dataclass(frozen=True)
class RecordEntry:
    """One record folder as found on disk, classified."""

    name: str
    path: Path
    record: DaemonRecord | None
    state: RecordState
    reason: str


def cache_root() -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/g1soak/cumps`` (a relative XDG_CACHE_HOME is ignored)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "g1soak" / "cumps"


def record_path(name: str) -> Path:
    return cache_root() / name / RECORD_FILE


def check_name(name: str) -> str:
    """Return ``name`` if it matches ``^[a-z0-9][a-z0-9-]{0,63}$``; raise UsageError otherwise."""
    if not NAME_RE.match(name):
        raise UsageError(
            f"--name {name!r} must match ^[a-z0-9][a-z0-9-]{{0,63}}$ (lowercase letters, digits, dashes)"
        )
    return name


def default_name(gpu_uuid: str) -> str:
    """``gpu-<full uuid without "GPU-">`` (the seed's naming)."""
    return "gpu-" + gpu_uuid[len("GPU-") :]


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def this_host() -> str:
    return platform.node()


def load_record(path: Path) -> DaemonRecord:
    """Read and validate one record file.

    Raises:
        RecordError: unreadable, not strict JSON or not valid against the schema.
    """
    try:
        doc = load_strict(path)
    except FileNotFoundError as err:
        raise RecordError(f"no cumps record at {path}") from err
    except (OSError, StrictJsonError) as err:
        raise RecordError(f"unreadable cumps record {path}: {err}") from err
    violations = validate(doc, SCHEMA_NAME)
    if violations:
        raise RecordError(f"invalid cumps record {path}: {violations[0]}")
    return DaemonRecord.from_json(doc)


def _boot_time_s() -> float | None:
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def _proc_uid(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def classify(record: DaemonRecord) -> tuple[RecordState, str]:
    """Classify a record as live, stale or foreign, with the reason.

    Foreign: another UID or host wrote it (never acted on). Live: the PID runs, as our UID,
    with the recorded start ticks, and started before the record was written. Else stale.
    """
    uid = os.getuid()
    host = this_host()
    if record.uid != uid:
        return "foreign", f"record belongs to uid {record.uid}, not {uid}"
    if record.host != host:
        return "foreign", f"record belongs to host {record.host!r}, not {host!r}"
    stat = procfs.read_stat(record.pid)
    if stat is None or stat.state in ("Z", "X"):
        return "stale", f"control pid {record.pid} is not running"
    if stat.start_time_ticks != record.process_start_ticks:
        return "stale", (
            f"pid {record.pid} was reused (start ticks {stat.start_time_ticks}, "
            f"recorded {record.process_start_ticks})"
        )
    owner = _proc_uid(record.pid)
    if owner != uid:
        return "stale", f"pid {record.pid} runs as uid {owner}, not {uid}"
    boot = _boot_time_s()
    if boot is not None:
        started = boot + record.process_start_ticks / procfs.clock_ticks_per_second()
        created = dt.datetime.strptime(record.created_at, "%Y-%m-%dT%H:%M:%SZ")
        created_s = created.replace(tzinfo=dt.UTC).timestamp()
        if started > created_s + _START_SLACK_S:
            return "stale", f"pid {record.pid} started after the record was written (reboot?)"
    return "live", "uid, host, pid and start time match"


def read_entry(folder: Path) -> RecordEntry:
    path = folder / RECORD_FILE
    try:
        record = load_record(path)
    except RecordError as err:
        return RecordEntry(folder.name, path, None, "invalid", str(err))
    state, reason = classify(record)
    return RecordEntry(folder.name, path, record, state, reason)


def list_entries(*, include_foreign: bool = False) -> list[RecordEntry]:
    """All record folders under the cache root (``.stale`` excluded), sorted by name.

    Foreign records are left out unless ``include_foreign`` (listings ignore them).
    """
    root = cache_root()
    if not root.is_dir():
        return []
    entries = []
    for folder in sorted(root.iterdir()):
        if folder.name.startswith(".") or not (folder / RECORD_FILE).exists():
            continue
        entry = read_entry(folder)
        if entry.state == "foreign" and not include_foreign:
            continue
        entries.append(entry)
    return entries


def live_records() -> list[DaemonRecord]:
    """This (UID, host)'s live records."""
    return [e.record for e in list_entries() if e.state == "live" and e.record is not None]


def _make_private_dirs(path: Path) -> None:
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass


def write_record(record: DaemonRecord) -> Path:
    """Write ``record`` once: validated, mode 0600, never overwriting an existing file.

    The bytes go to an ``O_EXCL`` temp file that is fsynced and then hard-linked to
    ``daemon.json``; ``link`` fails if the name exists, so a reader never sees a partial
    record and an existing record is never replaced.

    Raises:
        RecordError: the record is invalid or the name already has a record.
    """
    violations = validate(record.to_json(), SCHEMA_NAME)
    if violations:
        raise RecordError(f"refusing to write an invalid cumps record: {violations[0]}")
    folder = cache_root() / check_name(record.name)
    _make_private_dirs(folder)
    target = folder / RECORD_FILE
    tmp = folder / f".{RECORD_FILE}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(dumps_strict(record.to_json()))
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError as err:
            raise RecordError(
                f"a cumps record already exists at {target}; it is never overwritten"
            ) from err
    finally:
        tmp.unlink(missing_ok=True)
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return target


def quarantine(name: str) -> Path:
    """Move ``<root>/<name>`` to ``<root>/.stale/<name>-<epoch_ms>``; return the new path."""
    source = cache_root() / name
    stale_root = cache_root() / STALE_DIR
    _make_private_dirs(stale_root)
    target = stale_root / f"{name}-{int(time.time() * 1000)}"
    while target.exists():
        target = stale_root / f"{name}-{int(time.time() * 1000) + 1}"
    os.rename(source, target)
    return target


def remove_record(name: str) -> None:
    """Unlink ``<name>/daemon.json`` and drop the folder when nothing else is in it."""
    folder = cache_root() / name
    (folder / RECORD_FILE).unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        pass  # something else lives there; keep it
