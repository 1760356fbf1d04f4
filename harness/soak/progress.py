"""Run-directory progress (docs/contracts.md §run-directory, §samples).

Progress is the summed byte size of every regular file under the run directory,
recursively, excluding the harness's own ``soak-console.log``; mtime is reported but
never used for liveness. The last complete line of ``progress.jsonl`` is shown in the
live status line and recorded as ``progress.last`` (addition).

Liveness (``liveness_key``): while that last line is in a ``training/`` phase and carries the
training loop's ``loop_tick``, the trainer is alive only if the tick moves; a heartbeat thread
appends lines whatever the loop does, so bytes alone cannot show a hung loop. Otherwise
(startup and finalize, where compiles and the evaluation legitimately block the loop, or a
trainer without such lines) the byte total must move.
"""

from __future__ import annotations

import os
import stat as stat_mod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts import rundir
from contracts.errors import StrictJsonError
from contracts.jsonio import is_exact_int, loads_strict

TAIL_BYTES = 8192


@dataclass(frozen=True)
class ProgressSample:
    file_count: int
    bytes_total: int
    max_mtime: float | None
    last: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "file_count": self.file_count,
            "bytes_total": self.bytes_total,
            "max_mtime": self.max_mtime,
            "last": self.last,
        }


def _walk(root: Path, excluded: Path) -> tuple[int, int, float | None]:
    file_count = 0
    bytes_total = 0
    max_mtime: float | None = None
    stack = [str(root)]
    excluded_str = str(excluded)
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except (FileNotFoundError, PermissionError):
                continue
            if stat_mod.S_ISDIR(st.st_mode):
                stack.append(entry.path)
            elif stat_mod.S_ISREG(st.st_mode):
                if entry.path == excluded_str:
                    continue
                file_count += 1
                bytes_total += st.st_size
                if max_mtime is None or st.st_mtime > max_mtime:
                    max_mtime = st.st_mtime
    return file_count, bytes_total, max_mtime


def read_last_progress_line(path: Path) -> dict[str, Any] | None:
    """The last complete strict-JSON object line of ``path``; None if none parses."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            tail = handle.read()
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return None
    lines = tail.split(b"\n")
    # A line without its trailing newline may still be being written.
    complete = lines[:-1]
    for raw in reversed(complete):
        raw = raw.strip()
        if not raw:
            continue
        try:
            doc = loads_strict(raw.decode("utf-8"))
        except (StrictJsonError, UnicodeDecodeError):
            return None
        return doc if isinstance(doc, dict) else None
    return None


def sample_progress(
    log_dir: Path, *, console_log_name: str = rundir.SOAK_CONSOLE_LOG
) -> ProgressSample:
    """Measure the run directory now (a missing directory counts as empty)."""
    file_count, bytes_total, max_mtime = _walk(log_dir, log_dir / console_log_name)
    return ProgressSample(
        file_count=file_count,
        bytes_total=bytes_total,
        max_mtime=None if max_mtime is None else round(max_mtime, 6),
        last=read_last_progress_line(log_dir / rundir.PROGRESS),
    )


def training_loop_tick(sample: ProgressSample) -> tuple[str, int] | None:
    """``(phase, loop_tick)`` of the last progress line while it is in a training phase and
    carries the loop's counter; None otherwise."""
    last = sample.last
    if last is None:
        return None
    phase, tick = last.get("phase"), last.get("loop_tick")
    if isinstance(phase, str) and phase.startswith("training/") and is_exact_int(tick):
        return phase, tick
    return None


def liveness_key(sample: ProgressSample) -> tuple[str, int]:
    """What must change for the trainer to count as making progress (see the module
    docstring): ``("loop_tick", n)`` or ``("bytes", n)``."""
    loop = training_loop_tick(sample)
    if loop is not None:
        return "loop_tick", loop[1]
    return "bytes", sample.bytes_total
