"""The scaling sweep's table: one row per cell, as plain text or Markdown."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from harness.scaling.plan import Part

HEADERS = [
    "envs", "sharing", "end to end final / tail", "cycle in run ms", "cycle beside ms",
    "env step beside ms (steps/s)", "env step alone ms", "steps",
]  # fmt: skip


ALIGN = ("right", "left", "right", "right", "right", "right", "right", "left")


def _k(rate: float | None) -> str:
    """A rate for the table: thousands above 10k (``122.1k``), else whole steps."""
    if rate is None:
        return "-"
    return f"{rate / 1000:.1f}k" if rate >= 10_000 else f"{rate:,.0f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def cell_status(cell: dict[str, Any]) -> str:
    """failed if a step failed, running while a step is still to come, else the statuses."""
    statuses = [(cell.get(part.value) or {}).get("status") for part in (Part.beside, Part.soak)]
    if "failed" in statuses:
        return "failed"
    if None in statuses:
        return "running"
    return "/".join(sorted(set(statuses)))


def table_rows(doc: dict[str, Any]) -> list[list[str]]:
    alone = {row["num_envs"]: row["step_ms"] for row in (doc["env_alone"] or {}).get("sizes", [])}
    rows = []
    for cell in doc["cells"]:
        soak, beside = cell.get("soak") or {}, cell.get("beside") or {}
        final, tail = soak.get("final_env_steps_per_s"), soak.get("tail_env_steps_per_s")
        rows.append([
            str(cell["num_envs"]),
            cell["sharing"],
            f"{_k(final)} / {_k(tail)}",
            _ms(soak.get("cycle_ms")),
            _ms(beside.get("cycle_ms")),
            f"{_ms(beside.get('env_step_ms'))} ({_k(beside.get('env_steps_per_s'))})",
            _ms(alone.get(cell["num_envs"])),
            cell_status(cell),
        ])  # fmt: skip
    return rows


def render(doc: dict[str, Any], fmt: str) -> str:
    table = tabulate(
        table_rows(doc), headers=HEADERS, tablefmt=fmt, disable_numparse=True, colalign=ALIGN
    )
    head = f"scaling sweep: {doc['status']}"
    gpu = (doc["env_alone"] or {}).get("gpu") or next(
        (c["beside"].get("device") for c in doc["cells"] if (c.get("beside") or {}).get("device")),
        None,
    )
    versions = (doc["env_alone"] or {}).get("versions") or {}
    about = [gpu] if gpu else []
    about += [f"{name} {version}" for name, version in versions.items()]
    head += f" ({'; '.join(about)})" if about else ""
    lines = [head, table, *(f"  failed: {f}" for f in doc["failures"])]
    return "\n".join(lines) + "\n"
