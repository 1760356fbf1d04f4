"""The text and the JSON of ``soak-campaign compare`` (``harness.campaign.compare``).

The terminal output fits 80 columns: a table per clip and seed (baseline final and best
R-MPKPE, candidate final and best, the finals' difference), a table per clip of each side's
over-seeds result (verdict, failing seeds, olympic score, range over seeds, the candidate's
difference), one line per reason the candidate failed, and the verdict line. ``--wide`` adds
each seed's outcome and the iteration of its best point. ``--json`` prints
:func:`document`, validated against ``schemas/campaign_compare.v1.json`` first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from contracts.errors import HarnessError
from contracts.schemas import validate
from harness.campaign.compare import SIDES, Comparison

SCHEMA_FILE = "campaign_compare.v1.json"
SEED_TITLE = "per clip and seed: uniform-start R-MPKPE (mm), final and best evaluation point"
SEED_HEADERS = ("clip", "seed", "base final", "best", "cand final", "best", "Δ final")
WIDE_SEED_HEADERS = ("base", "best at", "cand", "best at")
CLIP_TITLE = (
    "over seeds: olympic R-MPKPE (mm) of the last points' mean, best and worst seed dropped"
)
CLIP_HEADERS = ("clip", "run", "verdict", "failed", "olympic", "min–max", "Δ")


def _mm(value: Any) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _signed(value: Any) -> str:
    return "-" if value is None else f"{value:+,.1f}"


def _span(values: Any) -> str:
    return "-" if values is None else f"{values[0]:,.1f}–{values[1]:,.1f}"


def _at(seed: Mapping[str, Any]) -> str:
    return "-" if seed["best_iteration"] is None else f"{seed['best_iteration']:,}"


def _table(title: str, headers: tuple[str, ...], numeric: int) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    for index, name in enumerate(headers):
        right = index >= numeric and name not in ("run", "verdict", "base", "cand")
        table.add_column(name, justify="right" if right else "left", overflow="fold")
    return table


def seed_table(result: Comparison, *, wide: bool = False) -> Table:
    table = _table(SEED_TITLE, SEED_HEADERS + (WIDE_SEED_HEADERS if wide else ()), 1)
    for pair in result.seeds:
        base, cand = pair.baseline, pair.candidate
        row = [
            pair.motion, str(pair.seed), _mm(base["final_r_mpkpe_mm"]),
            _mm(base["best_r_mpkpe_mm"]), _mm(cand["final_r_mpkpe_mm"]),
            _mm(cand["best_r_mpkpe_mm"]), _signed(pair.final_difference_mm),
        ]  # fmt: skip
        if wide:
            row += [base["outcome"], _at(base), cand["outcome"], _at(cand)]
        table.add_row(*row)
    return table


def clip_table(result: Comparison) -> Table:
    table = _table(CLIP_TITLE, CLIP_HEADERS, 3)
    for clip in result.clips:
        for name, config in zip(SIDES, (clip.baseline, clip.candidate), strict=True):
            table.add_row(
                clip.motion if name == SIDES[0] else "",
                name,
                config["verdict"],
                f"{config['failing_seeds']}/{len(config['seeds'])}",
                _mm(config["olympic_r_mpkpe_mm"]),
                _span(config["r_mpkpe_range_mm"]),
                "" if name == SIDES[0] else _signed(clip.difference_mm),
            )
    return table


def verdict_line(result: Comparison) -> str:
    rule = (
        f"passed over seeds on every clip, olympic R-MPKPE at most {result.margin:.0%} or "
        f"{result.tolerance_mm:g} mm (whichever is more) above the baseline's"
    )
    if result.passed:
        return f"candidate passed: {rule} ({len(result.clips)} clip(s))"
    failed = [clip.motion for clip in result.clips if not clip.passed]
    return f"candidate failed on {', '.join(failed)}: it must have {rule}"


def lines(result: Comparison) -> list[str]:
    """The lines under the tables: the two directories, each reason, the verdict."""
    found = [
        f"{name}: {side.directory}"
        + (f" (--override {' '.join(side.overrides)})" if side.overrides else "")
        for name, side in zip(SIDES, (result.baseline, result.candidate), strict=True)
    ]
    found += [reason for clip in result.clips for reason in clip.reasons]
    found.append(verdict_line(result))
    return found


def print_comparison(result: Comparison, console: Console, *, wide: bool = False) -> None:
    console.print(seed_table(result, wide=wide))
    console.print(clip_table(result))
    for line in lines(result):
        console.print(line, markup=False, highlight=False)


def _side(config: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "verdict": config["verdict"],
        "reasons": list(config["reasons"]),
        "failing_seeds": config["failing_seeds"],
        "olympic_r_mpkpe_mm": config["olympic_r_mpkpe_mm"],
        "r_mpkpe_range_mm": config["r_mpkpe_range_mm"],
    }


def _seed(seed: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("outcome", "final_r_mpkpe_mm", "best_r_mpkpe_mm", "best_iteration")
    return {key: seed[key] for key in keys}


def document(result: Comparison) -> dict[str, Any]:
    """The comparison as one JSON document, valid against the schema.

    Raises:
        HarnessError: it does not validate (a bug: nothing is printed).
    """
    doc = {
        "schema_version": 1,
        "verdict": "passed" if result.passed else "failed",
        "reasons": [reason for clip in result.clips for reason in clip.reasons],
        "margin": result.margin,
        "tolerance_mm": result.tolerance_mm,
        "margin_source": result.margin_source,
        **{
            name: {
                "directory": str(side.directory.absolute()),
                "name": side.doc["name"],
                "campaign_id": side.doc["campaign_id"],
                "candidate_overrides": side.overrides,
            }
            for name, side in zip(SIDES, (result.baseline, result.candidate), strict=True)
        },
        "seeds": [
            {
                "motion": pair.motion,
                "seed": pair.seed,
                "sim": pair.sim,
                "baseline": _seed(pair.baseline),
                "candidate": _seed(pair.candidate),
                "final_difference_mm": pair.final_difference_mm,
            }
            for pair in result.seeds
        ],
        "clips": [
            {
                "motion": clip.motion,
                "sim": clip.sim,
                "passed": clip.passed,
                "baseline": _side(clip.baseline),
                "candidate": _side(clip.candidate),
                "difference_mm": clip.difference_mm,
                "reasons": list(clip.reasons),
            }
            for clip in result.clips
        ],
    }
    violations = validate(doc, SCHEMA_FILE)
    if violations:
        raise HarnessError(f"the comparison would be invalid JSON: {violations[0]}")
    return doc
