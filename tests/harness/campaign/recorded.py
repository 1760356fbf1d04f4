"""A cell's recorded evaluation and learning verdict, for campaign tables and comparisons."""

from __future__ import annotations

from typing import Any


def learning_result(verdict: str, *r_mpkpe: float) -> dict[str, Any]:
    """The ``evaluation`` and ``learning`` fields of an attempt whose points read ``r_mpkpe``."""
    points = [
        {"iteration": 1000 * (i + 1), "success_rate": 1.0, "r_mpkpe_mm": value}
        for i, value in enumerate(r_mpkpe)
    ]
    best = min(range(len(r_mpkpe)), key=lambda i: r_mpkpe[i])

    def figures(index: int) -> dict[str, Any]:
        return {
            "iteration": 1000 * (index + 1), "success_rate": 1.0,
            "r_mpkpe_mm": r_mpkpe[index], "mpkpe_mm": 2 * r_mpkpe[index],
        }  # fmt: skip

    return {
        "evaluation": {
            "status": "evaluated", "points": len(r_mpkpe),
            "final": figures(len(r_mpkpe) - 1), "best": figures(best),
        },
        "learning": {"verdict": verdict, "reason": None, "findings": [], "points": points},
    }  # fmt: skip
