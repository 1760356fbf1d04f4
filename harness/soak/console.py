"""The trainer's own words: the tail of ``soak-console.log`` and its last ``error:`` line.

A trainer that fails says why on its console (our ``train`` prints exactly one
``error: <message>`` line); the soak quotes that line in its reason and keeps the last
:data:`TAIL_LINES` lines in the artifact (``console_tail``), so the verdict, the artifact
and the report carry the cause, not only the return code. ANSI escapes and carriage-return
redraws are removed; each kept line is cut to :data:`MAX_LINE_CHARS`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["MAX_LINE_CHARS", "TAIL_LINES", "error_line", "exit_reason", "read_tail"]

TAIL_LINES = 40
MAX_LINE_CHARS = 1000
_READ_BYTES = 256 * 1024
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _clean(line: str) -> str:
    line = _ANSI.sub("", line.rstrip("\r")).rsplit("\r", 1)[-1].rstrip()
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 3] + "..."


def read_tail(path: Path, lines: int = TAIL_LINES) -> list[str] | None:
    """The last ``lines`` non-blank lines of the console log, oldest first; None when it
    cannot be read."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - _READ_BYTES))
            data = handle.read()
    except OSError:
        return None
    text = data.decode("utf-8", errors="replace")
    if len(data) == _READ_BYTES and size > _READ_BYTES:
        text = text.split("\n", 1)[-1]  # the first line read may be cut
    kept = [_clean(line) for line in text.split("\n")]
    return [line for line in kept if line.strip()][-lines:]


def error_line(tail: Sequence[str] | None) -> str | None:
    """The last ``error: ...`` line of the tail, or None."""
    for line in reversed(tail or ()):
        if line.lstrip().startswith("error:"):
            return line.strip()
    return None


def exit_reason(returncode: int, console_log: Path) -> str:
    """``trainer exited with returncode N``, plus the trainer's last ``error:`` line."""
    line = error_line(read_tail(console_log))
    reason = f"trainer exited with returncode {returncode}"
    return reason if line is None else f"{reason}: {line}"
