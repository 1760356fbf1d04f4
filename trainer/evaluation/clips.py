"""Per-clip aggregates of one evaluation point: what a user ranks a library policy by.

A point of a clip set carries each clip's ``modes`` (``evaluation.json`` ``clips``);
:func:`clip_summary` reduces their uniform-start metrics to the mean, median, 90th percentile
and worst clip (docs/evaluation.md, "Per-clip evaluation"). A clip whose metric is null (a
diverged rollout) is the worst clip of that metric.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["SUMMARY_METRICS", "clip_summary"]

SUMMARY_METRICS: dict[str, str] = {
    "success_rate": "min",
    "completed_fraction": "min",
    "mpkpe_mm": "max",
    "r_mpkpe_mm": "max",
    "joint_pos_error_rad": "max",
    "end_effector_pos_error_mm": "max",
}
"""Metric → which end is the worst clip (``min`` for rates, ``max`` for errors)."""


def _stats(values: list[float | None], names: list[str], worst_end: str) -> dict[str, Any]:
    nulls = [n for n, v in zip(names, values, strict=True) if v is None]
    finite = np.array([v for v in values if v is not None], dtype=np.float64)
    if nulls or finite.size == 0:
        return {"mean": None, "median": None, "p90": None, "worst": None,
                "worst_clip": nulls[0] if nulls else names[0]}  # fmt: skip
    pick = np.argmin if worst_end == "min" else np.argmax
    worst = int(pick(np.array(values, dtype=np.float64)))
    tail = 10.0 if worst_end == "min" else 90.0  # the 90th percentile toward the bad end
    return {
        "mean": float(finite.mean()),
        "median": float(np.median(finite)),
        "p90": float(np.percentile(finite, tail)),
        "worst": float(finite[worst]),
        "worst_clip": names[worst],
    }


def clip_summary(clips: Sequence[dict[str, Any]], mode: str = "uniform") -> dict[str, Any]:
    """``{metric: {mean, median, p90, worst, worst_clip}}`` over the clips' ``mode`` metrics.

    ``p90`` is the value 90 % of the clips are better than (the 10th percentile of a rate).
    """
    names = [c["clip"] for c in clips]
    out: dict[str, Any] = {"mode": mode, "clips": len(clips)}
    for metric, worst_end in SUMMARY_METRICS.items():
        values = [c["modes"][mode][metric] for c in clips]
        values = [None if v is None or not math.isfinite(v) else float(v) for v in values]
        out[metric] = _stats(values, names, worst_end)
    return out
