"""Write or check the generated block of a checked-in Markdown page (docs_gen, support-matrix).

Each generator keeps its own marker functions; this module holds the shared page handling:
reading the page, the ``--check`` comparison and the atomic ``--write``, with one message set.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import HarnessError
from contracts.jsonio import write_atomic_text

__all__ = ["GeneratedPage"]


def _read_page(path: Path) -> str:
    """The page's text; HarnessError when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise HarnessError(f"cannot read {path}: {err.strerror or err}") from err


@dataclass(frozen=True)
class GeneratedPage:
    """A page whose block between markers is generated."""

    shown: str
    """The page as messages name it (repository-relative)."""
    what: str
    """What messages call the block, e.g. ``"schema reference"``."""
    stale: str
    """The whole ``--check`` failure message (spelled out: docs/troubleshooting.md quotes it)."""
    committed: Callable[[str], str | None]
    """The block as the page holds it (None without valid markers)."""
    replace: Callable[[str, str], str]
    """The page with its block replaced (raises without valid markers)."""

    def sync(self, path: Path, block: str, *, check: bool) -> None:
        """With ``check``, raise HarnessError unless the page at ``path`` holds ``block``;
        else write it there. HarnessError also when the page cannot be read."""
        page = _read_page(path)
        if check:
            if self.committed(page) != block:
                raise HarnessError(self.stale)
            sys.stderr.write(f"{self.shown}: {self.what} is up to date\n")
            return
        updated = self.replace(page, block)
        if updated != page:
            write_atomic_text(path, updated)
            sys.stderr.write(f"{self.shown}: {self.what} rewritten\n")
        else:
            sys.stderr.write(f"{self.shown}: {self.what} already up to date\n")
