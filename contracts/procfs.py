"""Small /proc readers shared by the soak monitor, cumps and the trainer.

Process identity is (pid, start time in clock ticks), field 22 of ``/proc/<pid>/stat``
counted after the last ``)`` because ``comm`` may contain spaces and parentheses.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` the harness uses."""

    pid: int
    comm: str
    state: str
    ppid: int
    pgid: int
    session: int
    start_time_ticks: int


def parse_stat(text: str) -> ProcStat:
    """Parse the text of ``/proc/<pid>/stat``."""
    open_paren = text.index("(")
    close_paren = text.rindex(")")
    pid = int(text[:open_paren].strip())
    comm = text[open_paren + 1 : close_paren]
    rest = text[close_paren + 2 :].split()
    # rest[0] is field 3 (state); field N is rest[N - 3].
    return ProcStat(
        pid=pid,
        comm=comm,
        state=rest[0],
        ppid=int(rest[1]),
        pgid=int(rest[2]),
        session=int(rest[3]),
        start_time_ticks=int(rest[19]),
    )


def live_stat(text: str) -> ProcStat | None:
    """``parse_stat``, or None for a process the kernel is already releasing.

    Between its exit and the end of its reap, once its signal state is gone, Linux reports
    the process group and the session of a process as -1 (and its parent as 0): it is in no
    group any more, so for every caller it has vanished.
    """
    stat = parse_stat(text)
    return None if stat.pgid < 0 or stat.session < 0 else stat


def read_stat(pid: int) -> ProcStat | None:
    """Read ``/proc/<pid>/stat``; None when the process is gone, being released or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            return live_stat(handle.read())
    except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError, IndexError):
        return None


def start_time_ticks(pid: int) -> int | None:
    """Main-thread start time of ``pid`` in clock ticks since boot, or None if gone."""
    stat = read_stat(pid)
    return None if stat is None else stat.start_time_ticks


def is_same_process(pid: int, start_ticks: int) -> bool:
    """True iff ``pid`` is alive, not a zombie, and still has the recorded start time."""
    stat = read_stat(pid)
    return (
        stat is not None and stat.start_time_ticks == start_ticks and stat.state not in ("Z", "X")
    )


def clock_ticks_per_second() -> int:
    return os.sysconf("SC_CLK_TCK")
