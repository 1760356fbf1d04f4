"""The campaign table: one row per cell, as a rich table (terminal) and an HTML page.

Both read only ``campaign.json`` (and, for an attempt still in flight, whether its
``started.json`` exists: a task writes it when the attempt begins on its node). The terminal
table fits 80 columns (the cell name folds); ``wide`` adds the host, the GPU and the residual
processes, which the HTML page always shows. A campaign judged over seeds adds a table of
every seed's learning verdict and one of each configuration's verdict (``seeds``).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from harness.campaign import seeds_view, spread
from harness.campaign.cell import STARTED_FILE

HEADERS = (
    "cell", "status", "tries", "host", "GPU", "steps/s", "success", "R-MPKPE", "resid", "wall s",
)  # fmt: skip
NARROW = ("cell", "status", "steps/s", "success", "R-MPKPE", "wall s")
NUMERIC = ("tries", "steps/s", "success", "R-MPKPE", "resid", "wall s")
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
    """The table cells of one campaign cell (``HEADERS``), as text (``short``: 8 hex digits
    of the GPU)."""
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
        spread.rate_text(throughput.get("steady_env_steps_per_sec")),
        _number(final.get("success_rate"), 3),
        _number(final.get("r_mpkpe_mm"), 1),
        "-" if residual is None else str(residual),
        _number(attempt.get("wall_time_s"), 0),
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


def rich_table(doc: Mapping[str, Any], directory: Path, *, wide: bool = False) -> Table:
    """The cell table: ``NARROW`` columns (80 wide, the cell name folds), or all with ``wide``."""
    shown = HEADERS if wide else NARROW
    table = Table(
        title=headline(doc), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
        collapse_padding=True,
    )  # fmt: skip
    for name in shown:
        if name == "cell":
            table.add_column(name, overflow="fold", min_width=12)
        else:
            table.add_column(name, justify="right" if name in NUMERIC else "left", no_wrap=True)
    for cell in doc["cells"]:
        values = dict(zip(HEADERS, row(cell, directory), strict=True))
        style = _STYLES.get(cell["status"])
        if style:
            values["status"] = f"[{style}]{values['status']}[/]"
        table.add_row(*(values[name] for name in shown))
    return table


def spread_table(doc: Mapping[str, Any]) -> Table | None:
    """Each configuration over its seeds (``spread``); None when every one ran a single seed."""
    groups = spread.shown(doc)
    if not groups:
        return None
    table = Table(title=spread.TITLE, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for name in spread.HEADERS:
        if name in spread.NUMERIC:
            table.add_column(name, justify="right", no_wrap=True)
        else:
            table.add_column(name, min_width=12, overflow="fold")
    show = spread.varying(groups)
    for group in groups:
        table.add_row(*spread.row(group, show))
    return table


def _simple_table(title: str, headers: Sequence[str], numeric: Sequence[str]) -> Table:
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
        collapse_padding=True,
    )  # fmt: skip
    for name in headers:
        if name in numeric:
            table.add_column(name, justify="right", no_wrap=True)
        elif name in seeds_view.NO_WRAP:
            table.add_column(name, no_wrap=True)
        else:
            table.add_column(name, overflow="fold", min_width=6)
    return table


def seed_tables(doc: Mapping[str, Any]) -> list[Table]:
    """Judged over seeds: every seed's learning verdict, then each configuration's."""
    found = seeds_view.judged(doc)
    if found is None:
        return []
    headers = seeds_view.seed_headers(doc)
    per_seed = _simple_table(seeds_view.SEED_TITLE, headers, seeds_view.seed_numeric(headers))
    for text in seeds_view.seed_rows(doc, found):
        per_seed.add_row(*text)
    over = _simple_table(seeds_view.CONFIG_TITLE, seeds_view.CONFIG_HEADERS, seeds_view.NUMERIC)
    for text in seeds_view.config_rows(doc, found):
        over.add_row(*text)
    return [per_seed, over]


def print_table(
    doc: Mapping[str, Any], directory: Path, console: Console, *, wide: bool = False
) -> None:
    """The table, the seeds (judged over seeds, else their spread), then every reason."""
    console.print(rich_table(doc, directory, wide=wide))
    judged = seed_tables(doc)
    for table in judged:
        console.print(table)
    over_seeds = None if judged else spread_table(doc)
    if over_seeds is not None:
        console.print(over_seeds)
    for line in [*reasons(doc), *seeds_view.verdict_lines(doc)]:
        console.print(line, markup=False, highlight=False, soft_wrap=wide)


def _html_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(text)}</td>" for text in cells) + "</tr>"
        for cells in rows
    )
    return (
        f"<h2>{html.escape(title)}</h2>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def _html_seeds(doc: Mapping[str, Any]) -> str:
    found = seeds_view.judged(doc)
    if found is None:
        return ""
    lines = "".join(f"<p>{html.escape(line)}</p>" for line in seeds_view.verdict_lines(doc))
    return (
        _html_table(
            seeds_view.SEED_TITLE, seeds_view.seed_headers(doc), seeds_view.seed_rows(doc, found)
        )
        + _html_table(
            seeds_view.CONFIG_TITLE, seeds_view.CONFIG_HEADERS, seeds_view.config_rows(doc, found)
        )
        + lines
    )


def _html_spread(doc: Mapping[str, Any]) -> str:
    if seeds_view.judged(doc) is not None:
        return _html_seeds(doc)
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
