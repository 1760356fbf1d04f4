"""The text of learning judged over seeds: the per-seed table, the verdict table, the lines.

Reads ``campaign.json``'s ``over_seeds`` section only (recomputed at every save by
:mod:`harness.campaign.seeds`), so ``soak-campaign status`` shows it without Ray.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.campaign.spec import motion_label

SEED_TITLE = (
    "per seed: the soak's learning verdict; uniform-start R-MPKPE (mm) of the final and the "
    "best evaluation point, and the mean of the last points"
)
CONFIG_TITLE = (
    "over seeds: olympic score (best and worst seed dropped) of the last points' mean, "
    "with the range over seeds"
)
CONFIG_HEADERS = ("config", "verdict", "failed", "R-MPKPE", "min–max", "success", "min–max")
NUMERIC = ("seed", "failed", "R-MPKPE", "min–max", "success")
SEED_NUMERIC = ("seed", "final", "best", "best at", "success")
NO_WRAP = ("learning", "verdict")


def judged(doc: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The judged configurations, or None for a campaign not judged over seeds."""
    section = doc.get("over_seeds")
    return None if section is None else list(section["configurations"])


def window(doc: Mapping[str, Any]) -> int:
    return int(doc["over_seeds"]["config"]["window_points"])


def _label(doc: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """The motion alone when every cell shares one override set and one sim."""
    overrides = {cell["override"] for cell in doc["cells"]}
    sims = {cell["sim"] for cell in doc["cells"]}
    motion = motion_label(config["motion"])
    if len(overrides) == 1 and len(sims) == 1:
        return motion
    return f"{config['override']} · {motion} · {config['sim']}"


def _mm(value: Any) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _rate(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _span(values: Sequence[float] | None, digits: int) -> str:
    return "-" if values is None else f"{values[0]:,.{digits}f}–{values[1]:,.{digits}f}"


def seed_headers(doc: Mapping[str, Any]) -> tuple[str, ...]:
    last = "last" if window(doc) == 1 else f"last {window(doc)}"
    return ("config", "seed", "learning", "final", "best", "best at", last, "success")


def seed_numeric(headers: Sequence[str]) -> tuple[str, ...]:
    """The right-aligned columns of the per-seed table (its ``last`` column included)."""
    return (*SEED_NUMERIC, headers[6])


def seed_rows(doc: Mapping[str, Any], found: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for config in found:
        label = _label(doc, config)
        for seed in config["seeds"]:
            best_at = seed["best_iteration"]
            rows.append(
                [
                    label,
                    str(seed["seed"]),
                    seed["outcome"],
                    _mm(seed["final_r_mpkpe_mm"]),
                    _mm(seed["best_r_mpkpe_mm"]),
                    "-" if best_at is None else f"{best_at:,}",
                    _mm(seed["window_r_mpkpe_mm"]),
                    _rate(seed["final_success_rate"]),
                ]
            )
    return rows


def config_rows(doc: Mapping[str, Any], found: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    return [
        [
            _label(doc, config),
            config["verdict"],
            f"{config['failing_seeds']}/{len(config['seeds'])}",
            _mm(config["olympic_r_mpkpe_mm"]),
            _span(config["r_mpkpe_range_mm"], 1),
            _rate(config["olympic_success_rate"]),
            _span(config["success_rate_range"], 3),
        ]
        for config in found
    ]


def verdict_lines(doc: Mapping[str, Any]) -> list[str]:
    """One line per configuration that failed, then the campaign's verdict over seeds."""
    found = judged(doc)
    if found is None:
        return []
    lines = [
        f"{_label(doc, config)}: {config['verdict']} over seeds: {'; '.join(config['reasons'])}"
        for config in found
        if config["reasons"]
    ]
    passed = sum(1 for config in found if config["verdict"] == "passed")
    allowed = doc["over_seeds"]["config"]["max_failing_seeds"]
    lines.append(
        f"judged over seeds: {passed} of {len(found)} configuration(s) passed (a configuration "
        f"fails when more than {allowed} seed(s) fail)"
    )
    return lines
