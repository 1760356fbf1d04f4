"""The end-of-soak verdict for a person: rich tables that never grow past the terminal.

Values fold inside their column (a 700-character reason wraps, it does not widen the
table); the width is the terminal's, at most :data:`MAX_WIDTH`. On a passing soak the
trainer's own summary table (``contracts.summary_table``, what ``train`` printed) follows the
soak's. The artifact path and the report command come last as plain lines, whole, so they
can be copied.
"""

from __future__ import annotations

import io
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contracts.summary_table import summary_rows

__all__ = ["MAX_WIDTH", "render_verdict", "table_text"]

MAX_WIDTH = 120


def _width() -> int:
    return max(40, min(MAX_WIDTH, shutil.get_terminal_size((100, 24)).columns))


def table_text(title: str, rows: Sequence[tuple[str, str]], width: int | None = None) -> str:
    """Two columns, the value folded to fit ``width`` (default: the terminal's)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    cols = width or _width()
    utf = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "").startswith("utf")
    buffer = io.StringIO()
    console = Console(file=buffer, width=cols, color_system=None, highlight=False)
    table = Table(
        title=title,
        title_justify="left",
        show_header=False,
        width=cols,
        box=box.SQUARE if utf else box.ASCII,
    )
    table.add_column("key", no_wrap=True)
    table.add_column("value", overflow="fold", ratio=1)
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    return buffer.getvalue().rstrip("\n")


def render_verdict(
    rows: Sequence[tuple[str, str]],
    artifact: Mapping[str, Any],
    artifact_path: Path,
    width: int | None = None,
) -> str:
    """The soak's rows, the trainer's summary when the soak passed, then the paths."""
    parts = [table_text("soak", rows, width)]
    summary = artifact.get("run_summary")
    if artifact.get("status") == "passed" and isinstance(summary, Mapping):
        parts.append(table_text("trainer (run_summary.json)", summary_rows(summary), width))
    parts.append(f"artifact: {artifact_path}\nreport:   soak-report {artifact_path}")
    return "\n".join(parts)
