"""A trainer that evaluates its checkpoints: ``learning.py LOG_DIR CASE``.

Like a real run it writes the run directory, then, at every checkpoint, trains a little,
evaluates and rewrites evaluation.json with the points so far (``final_iteration`` null
until the final policy is evaluated); at the end it writes the event file and a completed
run_summary with its ``evaluation`` section, and exits 0. Only the learning is wrong, as
CASE says: ``healthy``, ``declining`` (the final policy is much worse than the best),
``nan_loss`` (Loss/critic turns NaN), ``null_metric`` (one point's R-MPKPE is non-finite),
``low_success`` (final success 80 %, steady), ``no_evaluation`` (no evaluation section),
``skipped`` (evaluation switched off), ``clip_declining`` (a clip set of two: ``kick``
holds, ``spin`` ends behind its own best).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rundir

from tests.harness.schemas import evaluation_builders as ev

CURVES: dict[str, ev.Curve] = {
    "healthy": ev.HEALTHY_CURVE,
    "nan_loss": ev.HEALTHY_CURVE,
    "no_evaluation": ev.HEALTHY_CURVE,
    "skipped": ev.HEALTHY_CURVE,
    "declining": ev.DECLINING_CURVE,
    "null_metric": [(10, 1.0, 14.0), (20, 1.0, None), (30, 1.0, 13.5)],
    "low_success": [(10, 0.78, 20.0), (20, 0.8, 19.0), (30, 0.8, 19.0)],
    "clip_declining": ev.HEALTHY_CURVE,
}
CLIP_CURVES: dict[str, dict[str, ev.Curve]] = {
    "clip_declining": {
        "kick": ev.HEALTHY_CURVE,
        "spin": [(10, 1.0, 30.0), (20, 1.0, 12.9), (30, 1.0, 28.0)],
    },
}


def _evaluation(case: str, points: int, *, final: bool = True) -> dict:
    """The evaluation.json of the first ``points`` points."""
    if case in CLIP_CURVES:
        curves = {name: curve[:points] for name, curve in CLIP_CURVES[case].items()}
        return ev.make_clip_evaluation(curves, final=final)
    doc = ev.make_evaluation(CURVES[case][:points], final=final)
    if case == "healthy":  # as today's trainer writes it; the other cases predate the field
        for point in doc["points"]:
            point["network"] = "actor"
    return doc


def main() -> int:
    log_dir = rundir.log_dir_from_argv()
    case = sys.argv[2]
    if case not in CURVES:
        raise SystemExit(f"unknown case {case!r}; one of {', '.join(CURVES)}")
    curve = CURVES[case]
    evaluates = case not in ("no_evaluation", "skipped")
    rundir.start_run(log_dir)
    doc = _evaluation(case, len(curve))
    for k in range(1, len(curve) + 1):
        rundir.train_for(log_dir, 0.1)
        if evaluates:
            ev.write_evaluation(log_dir, _evaluation(case, k, final=k == len(curve)))
    ev.write_training_events(
        log_dir, ev.training_scalars(nan_loss_at=25 if case == "nan_loss" else None)
    )
    summary = rundir.completed(log_dir)
    if case == "skipped":
        summary["evaluation"] = ev.unevaluated_section("skipped", "training.evaluate=false")
    elif evaluates:
        summary["evaluation"] = ev.summary_section(doc)
    rundir.write_summary(log_dir, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
