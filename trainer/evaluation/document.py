"""``evaluation.json``, the run summary's ``evaluation`` section and the ``Eval/*`` scalars.

The document follows ``schemas/evaluation.v1.json``: :func:`contracts.rundir.write` validates
it before every atomic write (``train`` rewrites it after each evaluated point, so a reader
always sees a complete, valid file) and :func:`contracts.rundir.read` on every read. ``best`` is the point with the highest uniform-start success
rate, ties broken by the lowest uniform-start R-MPKPE (then the earliest iteration); a point
with either of those null never wins.
"""

from __future__ import annotations

from typing import Any

from contracts import rundir
from trainer.evaluation.metrics import METRIC_NAMES
from trainer.evaluation.protocol import START_MODES, Protocol

__all__ = [
    "BEST_CRITERION",
    "EVALUATION_SCHEMA",
    "EVAL_TAGS",
    "best_point",
    "build_document",
    "eval_scalars",
    "eval_tag",
    "final_point",
    "motion_record",
    "summary_section",
]

EVALUATION_SCHEMA = rundir.SCHEMAS[rundir.EVALUATION]
BEST_CRITERION = "uniform_success_rate_then_r_mpkpe"


def eval_tag(mode: str, metric: str) -> str:
    """The TensorBoard tag of one metric of one start mode, e.g. ``Eval/uniform_r_mpkpe_mm``."""
    return f"Eval/{mode}_{metric}"


EVAL_TAGS: tuple[str, ...] = tuple(eval_tag(m, k) for m in START_MODES for k in METRIC_NAMES)
"""Every ``Eval/*`` tag (registered in schemas/metric_registry.v1.json)."""


def _rank(point: dict[str, Any]) -> tuple[float, float, int] | None:
    uniform = point["modes"]["uniform"]
    success, r_mpkpe = uniform["success_rate"], uniform["r_mpkpe_mm"]
    if success is None or r_mpkpe is None:
        return None
    return (success, -r_mpkpe, -point["iteration"])


def best_point(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The best point by :data:`BEST_CRITERION`, or None when none has both metrics."""
    ranked = [(rank, p) for p in points if (rank := _rank(p)) is not None]
    return max(ranked, key=lambda item: item[0])[1] if ranked else None


def final_point(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The final policy's point of ``doc`` (None while the run is still training)."""
    final = doc.get("final_iteration")
    return next((p for p in doc["points"] if p["iteration"] == final), None)


def motion_record(motion_id: str, sha256: str, num_frames: int, fps: float) -> dict[str, Any]:
    return {"motion_id": motion_id, "sha256": sha256, "num_frames": num_frames, "fps": fps}


def build_document(
    protocol: Protocol, motion: dict[str, Any], points: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ``evaluation.json`` document of ``points`` (any order; one per iteration)."""
    ordered = sorted(points, key=lambda p: p["iteration"])
    iterations = [p["iteration"] for p in ordered]
    if len(set(iterations)) != len(iterations):
        raise ValueError(f"evaluation points repeat an iteration: {iterations}")
    final = next((p["iteration"] for p in ordered if p["source"] == "final"), None)
    best = best_point(ordered)
    return {
        "schema_version": 1,
        "protocol": protocol.to_json(),
        "motion": motion,
        "points": ordered,
        "final_iteration": final,
        "best": None
        if best is None
        else {"iteration": best["iteration"], "criterion": BEST_CRITERION},
    }


def summary_section(
    *,
    doc: dict[str, Any] | None = None,
    path: str | None = None,
    failure: str | None = None,
    skipped: str | None = None,
    wall_time_s: float | None = None,
) -> dict[str, Any]:
    """``run_summary.evaluation`` (``$defs/summary_section`` of schemas/evaluation.v1.json).

    Args:
        doc: the run's ``evaluation.json`` document, when one was written.
        path: where it is, relative to the run directory.
        failure: the evaluator's one-line error (status ``failed``).
        skipped: why no evaluation ran (status ``skipped``).
        wall_time_s: seconds the evaluation took inside the run.
    """
    points = doc["points"] if doc is not None else []
    final = final_point(doc) if doc is not None else None
    best = None
    if doc is not None and doc["best"] is not None:
        best = next(p for p in points if p["iteration"] == doc["best"]["iteration"])
    section: dict[str, Any] = {"status": "evaluated", "path": path, "points": len(points)}
    if skipped is not None:
        section |= {"status": "skipped", "reason": skipped}
    elif failure is not None:
        section |= {"status": "failed", "reason": failure}
    elif final is None:
        section |= {"status": "failed", "reason": "the evaluation recorded no final point"}
    elif best is None:
        reason = (
            "no evaluated point has a finite uniform-start success rate and R-MPKPE "
            "(the policy or the physics diverged)"
        )
        section |= {"status": "failed", "reason": reason}
    section["final"] = final
    section["best"] = best if section["status"] == "evaluated" else None
    if wall_time_s is not None:
        section["wall_time_s"] = round(max(0.0, wall_time_s), 3)
    return section


def eval_scalars(point: dict[str, Any]) -> dict[str, float]:
    """The ``Eval/*`` scalars of one point (a null metric is written as NaN: visible)."""
    out: dict[str, float] = {}
    for mode in START_MODES:
        metrics = point["modes"][mode]
        for name in METRIC_NAMES:
            value = metrics[name]
            out[eval_tag(mode, name)] = float("nan") if value is None else float(value)
    return out
