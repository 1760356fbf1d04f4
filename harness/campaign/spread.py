"""The spread of each configuration over its seeds: what a campaign of seeds is for.

One configuration's 3,000-iteration soak, same clip and seed, reached 23 % to 98 % uniform
success on three machines (docs/journal/benchmarks-2026.md, "Seventeenth H200 session"). So a learning
comparison between override sets reads the range over seeds, never one run. Cells group by
(override set, motion, sim) in the campaign's order. Each contributes the final evaluation
(uniform starts) and the steady throughput of its last attempt, where it has them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from harness.campaign.spec import motion_label

HEADERS = ("config", "n", "success", "min–max", "R-MPKPE mm", "min–max", "steps/s")
NUMERIC = HEADERS[1:]
TITLE = (
    "over seeds: mean and range of each configuration's final evaluation (uniform starts); "
    "n: cells evaluated / cells"
)


@dataclass
class Spread:
    """One configuration's figures, one entry per cell that has it."""

    override: str
    motion: str
    sim: str
    cells: int = 0
    success: list[float] = field(default_factory=list)
    r_mpkpe_mm: list[float] = field(default_factory=list)
    steady: list[float] = field(default_factory=list)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _add(values: list[float], value: Any) -> None:
    number = _number(value)
    if number is not None:
        values.append(number)


def spreads(doc: Mapping[str, Any]) -> list[Spread]:
    """The configurations of ``campaign.json`` with their figures over seeds."""
    groups: dict[tuple[str, str, str], Spread] = {}
    for cell in doc["cells"]:
        key = (cell["override"], cell["motion"], cell["sim"])
        group = groups.setdefault(key, Spread(*key))
        group.cells += 1
        attempt = cell["attempts"][-1] if cell["attempts"] else {}
        final = (attempt.get("evaluation") or {}).get("final") or {}
        _add(group.success, final.get("success_rate"))
        _add(group.r_mpkpe_mm, final.get("r_mpkpe_mm"))
        _add(group.steady, (attempt.get("throughput") or {}).get("steady_env_steps_per_sec"))
    return list(groups.values())


def worth_showing(groups: Sequence[Spread]) -> bool:
    """True when some configuration ran more than one seed (else the cell table says it all)."""
    return any(group.cells > 1 for group in groups)


def shown(doc: Mapping[str, Any]) -> list[Spread]:
    """The configurations to table, or [] when each ran a single seed."""
    groups = spreads(doc)
    return groups if worth_showing(groups) else []


def _mean(values: Sequence[float], digits: int) -> str:
    return f"{fmean(values):,.{digits}f}" if values else "-"


def _range(values: Sequence[float], digits: int) -> str:
    return f"{min(values):,.{digits}f}–{max(values):,.{digits}f}" if values else "-"


def config_parts(group: Spread) -> tuple[str, str, str]:
    """Override set, motion (the cells' label, not a file path) and sim of a configuration."""
    return group.override, motion_label(group.motion), group.sim


def varying(groups: Sequence[Spread]) -> tuple[bool, bool, bool]:
    """Which of the three parts differ between configurations: only those tell them apart,
    and a part every row repeats would wrap the 80-column table."""
    parts = [config_parts(group) for group in groups]
    shown = tuple(len({p[i] for p in parts}) > 1 for i in range(3))
    return shown if any(shown) else (False, True, False)  # one configuration: its motion


def row(group: Spread, show: tuple[bool, bool, bool] = (True, True, True)) -> list[str]:
    """The table cells of one configuration, as text; ``show``: which config parts to name."""
    config = " · ".join(part for part, on in zip(config_parts(group), show, strict=True) if on)
    return [
        config,
        f"{len(group.success)}/{group.cells}",
        _mean(group.success, 3),
        _range(group.success, 3),
        _mean(group.r_mpkpe_mm, 1),
        _range(group.r_mpkpe_mm, 1),
        _rate(group.steady),
    ]


def _rate(values: Sequence[float]) -> str:
    """The mean env steps/s (``rate_text``)."""
    return rate_text(fmean(values)) if values else "-"


def rate_text(value: Any) -> str:
    """Env steps/s, ``121.0k`` from a thousand on (a CPU cell runs far fewer); ``-`` for none."""
    number = _number(value)
    if number is None:
        return "-"
    return f"{number / 1000:,.1f}k" if number >= 1000 else f"{number:,.1f}"
