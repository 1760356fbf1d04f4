"""Process-tree sampling from /proc (docs/contracts.md §samples).

Membership is every descendant of the monitor, found by recursing through
``/proc/<pid>/task/*/children`` (so children of any thread count), plus every same-UID
process whose ``/proc/<pid>/environ`` carries the run's ``G1SOAK_RUN_ID=<id>`` marker: a
descendant that called ``setsid`` or double-forked (and so re-parented to init when no
subreaper is available) is still found. Identity is ``(pid, main-thread start ticks)`` from
:mod:`contracts.procfs`, never the PID alone.

Per process we read RSS (``VmRSS``), the FD table (classified by ``readlink``) and the
command line. Processes that vanish mid-read are skipped, never an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from contracts.procfs import ProcStat, read_stat

FD_CLASSES: tuple[str, ...] = (
    "pipe",
    "socket",
    "memfd",
    "eventfd",
    "eventpoll",
    "nvidia",
    "shared_memory",
    "other",
)
"""The eight FD classes; every key is always present (docs/contracts.md §samples)."""

COMMAND_MAX_CHARS = 512
MARKER_ENV = "G1SOAK_RUN_ID"

DiscoveredBy = Literal["tree", "marker"]


def classify_fd_target(target: str) -> str:
    """Map a ``readlink /proc/<pid>/fd/<n>`` target to one of :data:`FD_CLASSES`."""
    if target.startswith("pipe:"):
        return "pipe"
    if target.startswith("socket:"):
        return "socket"
    # The kernel reports "/memfd:<name> (deleted)"; older kernels drop the slash.
    if target.startswith(("/memfd:", "memfd:")):
        return "memfd"
    if target == "anon_inode:[eventfd]":
        return "eventfd"
    if target == "anon_inode:[eventpoll]":
        return "eventpoll"
    if target.startswith("/dev/nvidia"):
        return "nvidia"
    if target.startswith(("/dev/shm/", "/run/shm/")):
        return "shared_memory"
    return "other"


def empty_fd_classes() -> dict[str, int]:
    return dict.fromkeys(FD_CLASSES, 0)


def read_fd_classes(pid: int) -> tuple[int, dict[str, int]]:
    """Count the open FDs of ``pid`` by class; FDs that vanish while reading are skipped."""
    classes = empty_fd_classes()
    total = 0
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except (FileNotFoundError, ProcessLookupError, PermissionError, NotADirectoryError):
        return 0, classes
    for name in names:
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        classes[classify_fd_target(target)] += 1
        total += 1
    return total, classes


def read_rss_kib(pid: int) -> int:
    """``VmRSS`` of ``pid`` in KiB; 0 when absent (kernel threads, zombies) or gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError, IndexError):
        return 0
    return 0


def read_command(pid: int) -> str:
    """The command line with NULs turned into spaces, at most 512 characters."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(COMMAND_MAX_CHARS * 4)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", errors="replace")
    return text[:COMMAND_MAX_CHARS]


def read_children(pid: int) -> list[int]:
    """Direct children of every thread of ``pid`` (``/proc/<pid>/task/*/children``)."""
    children: list[int] = []
    task_dir = f"/proc/{pid}/task"
    try:
        tids = os.listdir(task_dir)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return children
    for tid in tids:
        try:
            with open(f"{task_dir}/{tid}/children", encoding="ascii") as handle:
                children.extend(int(tok) for tok in handle.read().split())
        except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
            continue
    return children


def descendants(root_pid: int, *, exclude: Iterable[int] = ()) -> list[int]:
    """All descendants of ``root_pid`` (not ``root_pid`` itself), breadth first.

    Subtrees rooted at a PID in ``exclude`` (the monitor's own helpers) are skipped.
    """
    excluded = set(exclude)
    seen: set[int] = set()
    order: list[int] = []
    frontier = [root_pid]
    while frontier:
        nxt: list[int] = []
        for pid in frontier:
            for child in read_children(pid):
                if child in seen or child in excluded or child == root_pid:
                    continue
                seen.add(child)
                order.append(child)
                nxt.append(child)
        frontier = nxt
    return order


@dataclass
class MarkerScanner:
    """Finds same-UID processes whose initial environment holds the run marker.

    ``/proc/<pid>/environ`` is the environment a program was exec'd with; a negative
    answer is cached per identity so each process is read once, which keeps a sample
    cheap on a busy machine (an exec re-reads because it changes the command, see below).
    """

    soak_id: str
    uid: int = field(default_factory=os.getuid)
    _negative: dict[int, tuple[int, str]] = field(default_factory=dict)

    def scan(self, *, exclude: Iterable[int] = ()) -> list[int]:
        needle = f"{MARKER_ENV}={self.soak_id}".encode()
        excluded = set(exclude)
        excluded.add(os.getpid())
        found: list[int] = []
        alive: set[int] = set()
        try:
            entries = os.listdir("/proc")
        except OSError:
            return found
        for entry in entries:
            if not entry.isdigit():
                continue
            pid = int(entry)
            alive.add(pid)
            if pid in excluded:
                continue
            try:
                if os.stat(f"/proc/{pid}").st_uid != self.uid:
                    continue
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
            stat = read_stat(pid)
            if stat is None:
                continue
            key = (stat.start_time_ticks, stat.comm)
            if self._negative.get(pid) == key:
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as handle:
                    environ = handle.read()
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
            if _environ_has(environ, needle):
                found.append(pid)
            else:
                self._negative[pid] = key
        for pid in list(self._negative):
            if pid not in alive:
                del self._negative[pid]
        return found


def _environ_has(environ: bytes, needle: bytes) -> bool:
    if environ.startswith(needle + b"\0") or environ == needle:
        return True
    return (b"\0" + needle + b"\0") in environ or environ.endswith(b"\0" + needle)


@dataclass(frozen=True)
class ProcessSnapshot:
    """One process at one sample (docs/contracts.md §samples per-process record)."""

    pid: int
    start_time_ticks: int
    ppid: int
    pgid: int
    state: str
    rss_kib: int
    fd_count: int
    fd_classes: dict[str, int]
    command: str
    discovered_by: DiscoveredBy
    escaped: bool

    @property
    def identity(self) -> tuple[int, int]:
        return (self.pid, self.start_time_ticks)

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "start_ticks": [self.start_time_ticks],
            "rss_kib": self.rss_kib,
            "fd_count": self.fd_count,
            "fd_classes": dict(self.fd_classes),
            "command": self.command,
            "start_time_ticks": self.start_time_ticks,
            "ppid": self.ppid,
            "pgid": self.pgid,
            "state": self.state,
            "discovered_by": self.discovered_by,
            "escaped": self.escaped,
        }


def snapshot_process(
    pid: int, *, discovered_by: DiscoveredBy, trainer_pgid: int | None, stat: ProcStat | None = None
) -> ProcessSnapshot | None:
    """Read one process; None if it vanished before its stat could be read."""
    stat = stat if stat is not None else read_stat(pid)
    if stat is None:
        return None
    fd_count, fd_classes = read_fd_classes(pid)
    return ProcessSnapshot(
        pid=pid,
        start_time_ticks=stat.start_time_ticks,
        ppid=stat.ppid,
        pgid=stat.pgid,
        state=stat.state,
        rss_kib=read_rss_kib(pid),
        fd_count=fd_count,
        fd_classes=fd_classes,
        command=read_command(pid),
        discovered_by=discovered_by,
        escaped=trainer_pgid is not None and stat.pgid != trainer_pgid,
    )


@dataclass(frozen=True)
class TreeSample:
    """The ``process`` part of a sample."""

    processes: tuple[ProcessSnapshot, ...]

    @property
    def process_count(self) -> int:
        return len(self.processes)

    @property
    def rss_kib_total(self) -> int:
        return sum(p.rss_kib for p in self.processes)

    @property
    def fd_count_total(self) -> int:
        return sum(p.fd_count for p in self.processes)

    @property
    def fd_classes_total(self) -> dict[str, int]:
        total = empty_fd_classes()
        for proc in self.processes:
            for key, value in proc.fd_classes.items():
                total[key] += value
        return total

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def to_json(self) -> dict[str, Any]:
        return {
            "process_count": self.process_count,
            "rss_kib_total": self.rss_kib_total,
            "fd_count_total": self.fd_count_total,
            "fd_classes_total": self.fd_classes_total,
            "processes": [p.to_json() for p in self.processes],
        }


class ProcessTreeSampler:
    """Samples the trainer's process tree: descendants of ``root_pid`` plus marker hits.

    Args:
        soak_id: the ``G1SOAK_RUN_ID`` value given to the trainer.
        trainer_pgid: process group of the trainer; members outside it are ``escaped``.
        root_pid: whose descendants belong to the tree (the monitor itself by default).
    """

    def __init__(
        self, soak_id: str, *, trainer_pgid: int | None, root_pid: int | None = None
    ) -> None:
        self.root_pid = os.getpid() if root_pid is None else root_pid
        self.trainer_pgid = trainer_pgid
        self.helper_pids: set[int] = set()
        self.marker = MarkerScanner(soak_id)

    def member_pids(self) -> dict[int, DiscoveredBy]:
        members: dict[int, DiscoveredBy] = {}
        for pid in descendants(self.root_pid, exclude=self.helper_pids):
            members[pid] = "tree"
        for pid in self.marker.scan(exclude=self.helper_pids):
            members.setdefault(pid, "marker")
            # Descendants of an escaped process belong to the run as well.
            for child in descendants(pid, exclude=self.helper_pids):
                members.setdefault(child, "marker")
        return members

    def sample(self) -> TreeSample:
        snapshots: list[ProcessSnapshot] = []
        for pid, how in sorted(self.member_pids().items()):
            snap = snapshot_process(pid, discovered_by=how, trainer_pgid=self.trainer_pgid)
            if snap is not None:
                snapshots.append(snap)
        return TreeSample(tuple(snapshots))
