"""The learning verdict clip by clip: on a clip set, did every clip end as good as its best?

An ``evaluation.json`` point of a clip set carries each clip's metrics (``clips``). For every
clip this module finds the clip's own best point (the point criterion of docs/evaluation.md,
uniform success then R-MPKPE, on that clip's metrics) and compares the final point with it
by the verdict's rules: success may trail by the relative ``margin``, and by more than one
of the clip's episodes (a count of 16 moves in steps of 6.25 %); R-MPKPE by the ``margin``
and the absolute tolerance. The worst clip's final success meets ``min_clip_success_rate``.
Pure; no torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

HEADLINE_METRICS: tuple[str, ...] = ("success_rate", "mpkpe_mm", "r_mpkpe_mm")
"""The metrics the verdict records of a point (or of a clip at a point)."""
MAX_NAMED_CLIPS = 6
"""Clips a finding names before it says how many more (a reason stays one readable line)."""


def pct(value: float) -> str:
    """A fraction as a percentage with one decimal, e.g. ``98.3 %``."""
    return f"{value * 100:.1f} %"


def success_drop(final_rate: float, final_n: int, best_rate: float, best_n: int) -> str:
    """The episode counts behind a success drop and its size in standard errors of the
    difference of the two rates, e.g. ``98 of 128 episodes against 112 of 128, a drop of 2.3
    standard errors``: a reader tells a drop within sampling noise (under about 2) from one
    beyond it. The standard-error part is left out when both rates are 0 or 1."""
    counts = (
        f"{round(final_rate * final_n)} of {final_n} episodes against "
        f"{round(best_rate * best_n)} of {best_n}"
    )
    variance = final_rate * (1 - final_rate) / final_n + best_rate * (1 - best_rate) / best_n
    if variance <= 0:
        return counts
    return (
        f"{counts}, a drop of {(best_rate - final_rate) / math.sqrt(variance):.1f} standard errors"
    )


def same_clip_points(
    points: Sequence[Mapping[str, Any]], final: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """The points that carry per-clip metrics of ``final``'s clips, in their order."""
    names = [c["clip"] for c in final.get("clips", [])]
    return [p for p in points if names and [c["clip"] for c in p.get("clips", [])] == names]


def _uniform(point: Mapping[str, Any], clip: int) -> Mapping[str, Any]:
    return point["clips"][clip]["modes"]["uniform"]


def _rank(point: Mapping[str, Any], clip: int) -> tuple[float, float, int] | None:
    uniform = _uniform(point, clip)
    success, r_mpkpe = uniform["success_rate"], uniform["r_mpkpe_mm"]
    if success is None or r_mpkpe is None:
        return None
    return (success, -r_mpkpe, -point["iteration"])


def _headline(uniform: Mapping[str, Any]) -> dict[str, Any]:
    return {k: uniform[k] for k in HEADLINE_METRICS}


def _behind(
    final: Mapping[str, Any], best: Mapping[str, Any], margin: float, tolerance_mm: float
) -> list[str]:
    """The metrics on which ``final`` trails ``best`` beyond the rules (module docstring)."""
    out = []
    fs, bs, episodes = final["success_rate"], best["success_rate"], final["episodes"]
    lost = fs is not None and bs is not None and fs < bs * (1 - margin)
    if lost and (bs - fs) * episodes > 1 + 1e-9:
        out.append("success_rate")
    fr, br = final["r_mpkpe_mm"], best["r_mpkpe_mm"]
    worse = fr is not None and br is not None and fr > br * (1 + margin)
    if worse and fr - br > tolerance_mm:
        out.append("r_mpkpe_mm")
    return out


def clip_records(
    points: Sequence[Mapping[str, Any]], final_iteration: int, margin: float, tolerance_mm: float
) -> list[dict[str, Any]] | None:
    """One record per clip (final, best and what regressed), or None without per-clip points.

    Points without the final point's ``clips`` (a single clip, or an older document) are
    skipped; the final point must carry them.
    """
    final = next((p for p in points if p["iteration"] == final_iteration), None)
    judged = [] if final is None else same_clip_points(points, final)
    if not judged:
        return None
    records = []
    for index, name in enumerate(c["clip"] for c in final["clips"]):
        ranked = [(r, p) for p in judged if (r := _rank(p, index)) is not None]
        best = max(ranked, key=lambda item: item[0])[1] if ranked else final
        final_uniform, best_uniform = _uniform(final, index), _uniform(best, index)
        records.append(
            {
                "clip": name,
                "episodes": final_uniform["episodes"],
                "best_iteration": best["iteration"],
                "final": _headline(final_uniform),
                "best": _headline(best_uniform),
                "regressed": _behind(final_uniform, best_uniform, margin, tolerance_mm),
            }
        )
    return records


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_NAMED_CLIPS])
    more = len(items) - MAX_NAMED_CLIPS
    return shown + (f" and {more} more" if more > 0 else "")


def behind_message(records: Sequence[Mapping[str, Any]], final_iteration: int) -> str | None:
    """The ``clip_behind_best`` finding's message, or None when no clip regressed."""
    regressed = [r for r in records if r["regressed"]]
    if not regressed:
        return None
    regressed.sort(key=lambda r: (r["best"]["r_mpkpe_mm"] or 0) - (r["final"]["r_mpkpe_mm"] or 0))
    parts = []
    for r in regressed:
        if "r_mpkpe_mm" in r["regressed"]:
            detail = (
                f"R-MPKPE {r['final']['r_mpkpe_mm']:.1f} mm vs {r['best']['r_mpkpe_mm']:.1f} mm"
            )
        else:
            detail = (
                f"success {pct(r['final']['success_rate'])} vs {pct(r['best']['success_rate'])}"
            )
        parts.append(f"{r['clip']} ({detail} at iteration {r['best_iteration']})")
    return (
        f"{len(regressed)} of {len(records)} clips ended (iteration {final_iteration}) behind "
        f"their own best point by more than the margin: {_listed(parts)}"
    )


def floor_message(records: Sequence[Mapping[str, Any]], floor: float | None) -> str | None:
    """The ``clip_success_below_floor`` finding's message, or None when every clip meets it."""
    if floor is None:
        return None
    below = [r for r in records if (s := r["final"]["success_rate"]) is not None and s < floor]
    if not below:
        return None
    below.sort(key=lambda r: r["final"]["success_rate"])
    parts = [f"{r['clip']} ({pct(r['final']['success_rate'])})" for r in below]
    return (
        f"{len(below)} of {len(records)} clips end below --min-clip-success-rate "
        f"{pct(floor)} of uniform-start success: {_listed(parts)}"
    )
