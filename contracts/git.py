"""Run one read-only ``git`` query with a timeout: the source-state helper of every record."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["git_output", "git_text"]


def git_output(cwd: Path, *args: str, timeout: float = 2.0) -> bytes | None:
    """stdout of ``git -C cwd <args>``; ``None`` when git is missing, fails or times out."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(cwd), *args], capture_output=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def git_text(cwd: Path, *args: str, timeout: float = 2.0) -> str | None:
    """:func:`git_output` decoded and stripped (``None`` as there)."""
    out = git_output(cwd, *args, timeout=timeout)
    return None if out is None else out.decode("utf-8", errors="replace").strip()
