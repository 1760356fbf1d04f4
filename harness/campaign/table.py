"""The campaign table: one row per cell, as a rich table (terminal) and an HTML page.

Both read only ``campaign.json`` (and, for an attempt still in flight, whether its
``started.json`` exists: a task writes it when the attempt begins on its node).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from harness.campaign import spread
from harness.campaign.cell import STARTED_FILE

HEADERS = ("cell", "status", "tries", "host", "GPU", "steps/s", "success", "resid", "wall s")
NUMERIC = ("tries", "steps/s", "success", "resid", "wall s")
_STYLES = {
    "passed": "green",
    "failed": "red",
    "lost": "magenta",
    "error": "red",
    "interrupted": "yellow",
}


def _last(cell: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return cell["attempts"][-1] if cell["attempts"] else None


def shown_status(cell: Mapping[str, Any], directory: Path) -> str:
    """The cell's status; an unfinished one is ``queued`` or ``running`` by its last attempt."""
    attempt = _last(cell)
    if cell["status"] != "pending" or attempt is None or attempt["status"] != "submitted":
        return cell["status"]
    started = (directory / attempt["directory"] / STARTED_FILE).exists()
    return "running" if started else "queued"


def _number(value: Any, digits: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return f"{value:,.{digits}f}"


def row(cell: Mapping[str, Any], directory: Path, *, short: bool = True) -> list[str]:
    """The table cells of one campaign cell, as text (``short``: 8 hex digits of the GPU)."""
    attempt = _last(cell) or {}
    throughput = attempt.get("throughput") or {}
    final = (attempt.get("evaluation") or {}).get("final") or {}
    residual = attempt.get("residual_process_count")
    uuid = attempt.get("gpu_uuid")
    return [
        cell["id"],
        shown_status(cell, directory),
        str(len(cell["attempts"])),
        attempt.get("host") or "-",
        (uuid[4:12] if short else uuid) if uuid else "-",
        _number(throughput.get("steady_env_steps_per_sec"), 1),
        _number(final.get("success_rate"), 3),
        "-" if residual is None else str(residual),
        _number(attempt.get("wall_time_s"), 1),
    ]


def headline(doc: Mapping[str, Any]) -> str:
    counts = doc["counts"]
    shown = ", ".join(f"{counts[key]} {key}" for key in counts if counts[key])
    verdict = doc["verdict"] or "-"
    return (
        f"campaign {doc['name']}: {doc['status']}, verdict {verdict} ({shown}); "
        f"wall {doc['wall_time_s']:.1f} s; {doc['directory']}"
    )


def reasons(doc: Mapping[str, Any]) -> list[str]:
    """``<cell>: <reason>`` for every cell that has one."""
    return [f"{cell['id']}: {cell['reason']}" for cell in doc["cells"] if cell["reason"]]


def rich_table(doc: Mapping[str, Any], directory: Path) -> Table:
    table = Table(title=headline(doc), title_justify="left", box=box.SIMPLE_HEAD)
    for name in HEADERS:
        table.add_column(
            name, justify="right" if name in NUMERIC else "left", no_wrap=name in HEADERS[:2]
        )
    for cell in doc["cells"]:
        cells = row(cell, directory)
        style = _STYLES.get(cell["status"])
        cells[1] = f"[{style}]{cells[1]}[/]" if style else cells[1]
        table.add_row(*cells)
    return table


def spread_table(doc: Mapping[str, Any]) -> Table | None:
    """Each configuration over its seeds (``spread``); None when every one ran a single seed."""
    groups = spread.shown(doc)
    if not groups:
        return None
    table = Table(title=spread.TITLE, title_justify="left", box=box.SIMPLE_HEAD)
    for name in spread.HEADERS:
        if name in spread.NUMERIC:
            table.add_column(name, justify="right", no_wrap=True)
        else:
            table.add_column(name, min_width=12, overflow="fold")
    for group in groups:
        table.add_row(*spread.row(group))
    return table


def print_table(doc: Mapping[str, Any], directory: Path, console: Console) -> None:
    """The table, the spread over seeds where there is one, then every cell's reason."""
    console.print(rich_table(doc, directory))
    over_seeds = spread_table(doc)
    if over_seeds is not None:
        console.print(over_seeds)
    for line in reasons(doc):
        console.print(line, markup=False, highlight=False)


def _html_spread(doc: Mapping[str, Any]) -> str:
    groups = spread.shown(doc)
    if not groups:
        return ""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in spread.HEADERS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(text)}</td>" for text in spread.row(g)) + "</tr>"
        for g in groups
    )
    return (
        f"<h2>{html.escape(spread.TITLE)}</h2>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def _link(path: str | None, label: str) -> str:
    if not path:
        return ""
    return f'<a href="{html.escape(path, quote=True)}">{html.escape(label)}</a>'


def render_html(doc: Mapping[str, Any], directory: Path) -> str:
    """``index.html``: the table with links to every attempt's report, artifact and log."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in (*HEADERS, "reason", "files"))
    body = []
    for cell in doc["cells"]:
        cells = row(cell, directory, short=False)
        links = []
        for attempt in cell["attempts"]:
            number = attempt["number"]
            parts = [
                _link(attempt["report"], "report"),
                _link(attempt["artifact"], "artifact"),
                _link(attempt["log"], "log"),
            ]
            joined = " ".join(p for p in parts if p) or html.escape(attempt["status"])
            links.append(f"#{number}: {joined}")
        status_class = html.escape(cell["status"])
        tds = "".join(f"<td>{html.escape(text)}</td>" for text in cells)
        reason = html.escape(cell["reason"] or "")
        body.append(
            f'<tr class="{status_class}">{tds}<td>{reason}</td><td>{"<br>".join(links)}</td></tr>'
        )
    title = html.escape(headline(doc))
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f"<title>campaign {html.escape(doc['name'])}</title><style>"
        "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
        "tr.passed td:nth-child(2){color:#070}tr.failed td:nth-child(2),"
        "tr.error td:nth-child(2){color:#b00}tr.lost td:nth-child(2){color:#909}"
        f"</style></head><body><h1>{title}</h1>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"{_html_spread(doc)}"
        f'<p>campaign.json: <a href="campaign.json">campaign.json</a></p></body></html>\n'
    )
