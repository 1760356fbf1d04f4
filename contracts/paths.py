"""The one path rule of every command: a relative path is taken from the current directory.

``train``, ``g1-soak``, ``soak-run``, ``soak-report``, ``extract-metrics``,
``g1-backend-probe``, ``cumps``, ``support-matrix`` and ``g1-pull-assets`` all accept
relative paths and resolve them the same way, once, before anything is checked or
written, so messages, artifacts and run files always show the absolute path
(docs/guide.md "Paths and exit codes"). Pure Python.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["absolute", "absolute_or_none"]


def absolute(path: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None) -> Path:
    """``path`` made absolute against ``cwd`` (default: the process CWD), ``~`` expanded and
    ``.``/``..`` folded; symlinks are kept (the path the user named is the one shown)."""
    expanded = os.path.expanduser(os.fspath(path))
    base = os.getcwd() if cwd is None else os.fspath(cwd)
    return Path(os.path.normpath(os.path.join(base, expanded)))


def absolute_or_none(path: str | os.PathLike[str] | None) -> Path | None:
    """:func:`absolute` of an optional flag value."""
    return None if path is None else absolute(path)
