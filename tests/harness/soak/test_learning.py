"""The learning verdict: non-finite losses and metrics, final vs best, the floor, and what
happens when there is nothing to judge (harness.soak.learning, via judge_run_dir)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contracts.errors import UsageError
from contracts.jsonio import write_json_atomic
from contracts.schemas import validate
from harness.soak.learning import LearningCfg, judge_learning, learning_cfg
from harness.soak.learning_clips import success_drop
from harness.soak.verdict import judge_run_dir
from tests.harness.metrics.event_files import frame
from tests.harness.schemas.builders import make_completed_summary, make_failed_summary, make_run_dir
from tests.harness.schemas.evaluation_builders import (
    DECLINING_CURVE,
    HEALTHY_CURVE,
    make_clip_evaluation,
    make_evaluation,
    summary_section,
    training_scalars,
    unevaluated_section,
    write_evaluation,
    write_training_events,
)

ENFORCE = LearningCfg(mode="enforce")
LEARNING_SCHEMA = {"$ref": "soak_artifact.0.3.0.json#/$defs/learning"}


def _run(
    root: Path,
    curve=HEALTHY_CURVE,
    *,
    scalars: dict[int, dict[str, float]] | None = None,
    section: dict[str, Any] | None = None,
    doc: dict[str, Any] | None = None,
) -> Path:
    """A completed run directory with events, evaluation.json and run_summary.evaluation."""
    summary = make_completed_summary(str(root))
    doc = make_evaluation(curve) if doc is None else doc
    summary["evaluation"] = summary_section(doc) if section is None else section
    make_run_dir(root, summary)
    write_training_events(root, training_scalars() if scalars is None else scalars)
    write_evaluation(root, doc)
    return root


def _judge(root: Path, cfg: LearningCfg = ENFORCE):
    return judge_run_dir(root, monitor_reasons=[], monitor_classification=None, learning=cfg)


def _learning(root: Path, cfg: LearningCfg = ENFORCE) -> dict[str, Any]:
    learning = _judge(root, cfg).learning
    assert learning is not None
    assert validate(learning, "soak_artifact.0.3.0.json", schema=LEARNING_SCHEMA) == []
    return learning


def _checks(learning: dict[str, Any]) -> list[str]:
    return [f["check"] for f in learning["findings"]]


def test_healthy_run_passes_and_records_points_and_losses(tmp_path: Path) -> None:
    verdict = _judge(_run(tmp_path))
    assert verdict.status == "passed", verdict.failure_reason
    learning = verdict.learning
    assert learning["verdict"] == "passed" and learning["findings"] == []
    evaluation = learning["evaluation"]
    assert [p["iteration"] for p in evaluation["points"]] == [10, 20, 30]
    assert (evaluation["final_iteration"], evaluation["best_iteration"]) == (30, 30)
    assert evaluation["path"] == str(tmp_path / "evaluation.json")
    assert evaluation["points"][-1]["uniform"] == {
        "success_rate": 1.0,
        "mpkpe_mm": 18.9,
        "r_mpkpe_mm": 13.5,
    }
    critic = learning["losses"]["tags"]["Loss/critic"]
    assert critic == {"count": 30, "non_finite": 0, "first_non_finite_env_step": None, "last": 2.0}


def test_each_point_keeps_the_network_it_evaluated(tmp_path: Path) -> None:
    """An averaged-policy run's points say so in the artifact; an older document's do not."""
    doc = make_evaluation(HEALTHY_CURVE)
    for point in doc["points"]:
        point["network"] = "policy_average"
    points = _learning(_run(tmp_path / "avg", doc=doc))["evaluation"]["points"]
    assert [p["network"] for p in points] == ["policy_average"] * 3
    older = _learning(_run(tmp_path / "old"))["evaluation"]["points"]
    assert all("network" not in p for p in older)


def test_without_a_learning_cfg_nothing_is_judged(tmp_path: Path) -> None:
    verdict = judge_run_dir(_run(tmp_path), monitor_reasons=[], monitor_classification=None)
    assert verdict.learning is None and verdict.status == "passed"


def test_the_issues_decline_fails_on_r_mpkpe(tmp_path: Path) -> None:
    verdict = _judge(_run(tmp_path, DECLINING_CURVE))
    assert verdict.failure_classification == "learning_regression"
    # 99.1 % is within 5 % of 100 %; 78.1 mm is far above 12.1 mm.
    assert verdict.failure_reason == (
        "learning regression: final uniform-start R-MPKPE 78.1 mm (iteration 30) is more than "
        "5.0 % and more than 2 mm above the best point's 12.1 mm (iteration 10)"
    )
    assert _checks(verdict.learning) == ["final_behind_best"]
    assert verdict.learning["verdict"] == "regression"


def test_a_success_decline_fails_on_success_rate(tmp_path: Path) -> None:
    verdict = _judge(_run(tmp_path, [(10, 1.0, 13.0), (20, 0.908, 13.0)]))
    assert verdict.failure_reason == (
        "learning regression: final uniform-start success rate 90.8 % (iteration 20) is more "
        "than 5.0 % below the best point's 100.0 % (iteration 10): 58 of 64 episodes against "
        "64 of 64, a drop of 2.5 standard errors"
    )


def test_a_success_decline_says_where_the_final_points_failures_ended(tmp_path: Path) -> None:
    doc = make_evaluation([(10, 1.0, 13.0), (20, 0.908, 13.0)])
    # 6 failed episodes: five around a kick at 10 s (50 fps), one at 6 s
    doc["points"][-1]["modes"]["uniform"]["failure_frames"] = [300, 510, 512, 530, 540, 560]
    verdict = _judge(_run(tmp_path, doc=doc))
    assert verdict.failure_reason is not None
    assert verdict.failure_reason.endswith(
        "a drop of 2.5 standard errors; its failures ended at 10.2–11.2 s ×5 · 6.0 s ×1 of the clip"
    )
    assert validate(verdict.learning, "soak_artifact.0.3.0.json", schema=LEARNING_SCHEMA) == []


@pytest.mark.parametrize(
    ("final", "best", "text"),
    [
        # the regression check's M_Move4 seed 1 on its first GPU run (docs/campaign.md)
        ((0.765625, 128), (0.875, 128), "98 of 128 episodes against 112 of 128, a drop of 2.3"),
        ((0.5, 512), (0.875, 512), "256 of 512 episodes against 448 of 512, a drop of 14.2"),
        ((0.0, 16), (1.0, 16), "0 of 16 episodes against 16 of 16"),
    ],
)
def test_a_success_drop_says_its_counts_and_standard_errors(final, best, text: str) -> None:
    said = success_drop(final[0], final[1], best[0], best[1])
    assert said.startswith(text)
    assert ("standard errors" in said) is (final[0] not in (0.0, 1.0) or best[0] not in (0.0, 1.0))


@pytest.mark.parametrize(
    ("final", "failed"),
    [((0.95, 12.6), False), ((0.949, 12.0), True), ((1.0, 12.6), False), ((1.0, 12.61), True)],
)
def test_margin_is_relative_and_exclusive(tmp_path: Path, final, failed: bool) -> None:
    strict = LearningCfg(mode="enforce", r_mpkpe_tolerance_mm=0.0)
    verdict = _judge(_run(tmp_path, [(10, 1.0, 12.0), (20, *final)]), strict)
    assert (verdict.status == "failed") is failed, verdict.failure_reason


# The H200 seed-form soak's uniform-start points (docs/benchmarks.md "Sixth H200 session").
CONVERGED_WANDER = [
    (30, 1.0, 4.75),
    (40, 1.0, 6.37),
    (50, 1.0, 5.63),
    (60, 1.0, 5.37),
    (65, 1.0, 5.01),
]


def test_a_converged_policys_wander_within_the_tolerance_passes(tmp_path: Path) -> None:
    verdict = _judge(_run(tmp_path, CONVERGED_WANDER))
    assert verdict.status == "passed", verdict.failure_reason
    assert verdict.learning["thresholds"]["r_mpkpe_tolerance_mm"] == 2.0


def test_without_the_tolerance_the_same_wander_fails_as_it_did_on_the_h200(tmp_path: Path) -> None:
    verdict = _judge(
        _run(tmp_path, CONVERGED_WANDER), LearningCfg(mode="enforce", r_mpkpe_tolerance_mm=0.0)
    )
    assert verdict.failure_reason == (
        "learning regression: final uniform-start R-MPKPE 5.0 mm (iteration 65) is more than "
        "5.0 % and more than 0 mm above the best point's 4.8 mm (iteration 30)"
    )


@pytest.mark.parametrize(("final_mm", "failed"), [(6.75, False), (6.76, True), (20.0, True)])
def test_the_tolerance_is_absolute_and_exclusive(
    tmp_path: Path, final_mm: float, failed: bool
) -> None:
    verdict = _judge(_run(tmp_path, [(10, 1.0, 4.75), (20, 1.0, final_mm)]))
    assert (verdict.status == "failed") is failed, verdict.failure_reason


def test_above_40_mm_the_margin_is_the_wider_bound(tmp_path: Path) -> None:
    # best 60 mm: 5 % is 3 mm > 2 mm, so 62.5 mm passes and 63.1 mm fails
    assert _judge(_run(tmp_path / "a", [(10, 1.0, 60.0), (20, 1.0, 62.5)])).status == "passed"
    assert _judge(_run(tmp_path / "b", [(10, 1.0, 60.0), (20, 1.0, 63.1)])).status == "failed"


def test_a_wider_margin_accepts_the_decline(tmp_path: Path) -> None:
    cfg = LearningCfg(mode="enforce", margin=0.1)
    assert _judge(_run(tmp_path, [(10, 1.0, 12.0), (20, 0.92, 13.0)]), cfg).status == "passed"


def test_success_below_the_floor_fails(tmp_path: Path) -> None:
    cfg = LearningCfg(mode="enforce", min_success_rate=0.95)
    verdict = _judge(_run(tmp_path, [(10, 0.9, 13.0), (20, 0.92, 13.0)]), cfg)
    assert verdict.failure_reason == (
        "learning regression: final uniform-start success rate 92.0 % (iteration 20) is below "
        "--min-success-rate 95.0 %"
    )
    assert _checks(_learning(tmp_path, cfg)) == ["success_below_floor"]


def test_a_nan_loss_fails_and_names_the_first_env_step(tmp_path: Path) -> None:
    verdict = _judge(_run(tmp_path, scalars=training_scalars(nan_loss_at=25)))
    assert verdict.failure_classification == "learning_regression"
    assert verdict.failure_reason == (
        "learning regression: Loss/critic is non-finite (nan) from env step 1600 (6 of 30 values)"
    )
    critic = verdict.learning["losses"]["tags"]["Loss/critic"]
    assert critic["non_finite"] == 6 and critic["first_non_finite_env_step"] == 1600
    assert critic["last"] == pytest.approx(1.0 + 24 / 30)


def test_a_null_metric_fails_once_per_point(tmp_path: Path) -> None:
    doc = make_evaluation([(10, 1.0, 12.0), (20, 1.0, None), (30, 1.0, 12.5)])
    verdict = _judge(_run(tmp_path, doc=doc))
    assert verdict.failure_reason == (
        "learning regression: evaluated metrics are non-finite (null) at iteration 20 "
        "(checkpoint): uniform.mpkpe_mm, uniform.r_mpkpe_mm, frame0.mpkpe_mm, frame0.r_mpkpe_mm"
    )


def test_a_null_final_metric_is_not_also_compared(tmp_path: Path) -> None:
    doc = make_evaluation([(10, 1.0, 12.0), (20, None, 12.0)])
    learning = _learning(_run(tmp_path, doc=doc))
    assert _checks(learning) == ["non_finite_metric"]  # the final appears in both documents


def test_many_non_finite_points_are_capped(tmp_path: Path) -> None:
    doc = make_evaluation([(k * 10, 1.0, None) for k in range(1, 8)] + [(80, 1.0, 12.0)])
    learning = _learning(_run(tmp_path, doc=doc))
    messages = [f["message"] for f in learning["findings"]]
    assert len(messages) == 5 and messages[-1] == (
        "... and 3 more evaluation points with non-finite metrics"
    )


def test_regressions_come_before_unverified_findings(tmp_path: Path) -> None:
    _run(tmp_path, DECLINING_CURVE)
    for event_file in tmp_path.glob("events.out.tfevents.*"):
        event_file.unlink()
    verdict = _judge(tmp_path)
    # the missing event file is the run-dir check's schema_violation; it came first
    assert verdict.failure_classification == "schema_violation"
    assert _checks(verdict.learning) == ["final_behind_best", "losses_unreadable"]
    assert verdict.reasons[-1] == (
        f"learning not verified: losses were not checked: {tmp_path} holds 0 "
        "events.out.tfevents.* files, expected one"
    )


HINT = "or pass --learning-mode report to judge resources only"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            None,
            (
                "run_summary has no evaluation section, so the trainer did not evaluate its "
                f"policy; run a trainer that writes evaluation.json, {HINT}"
            ),
        ),
        (
            unevaluated_section("skipped", "training.evaluate=false"),
            f"the evaluation was skipped (training.evaluate=false); evaluate the run, {HINT}",
        ),
        (
            unevaluated_section("failed", "RuntimeError: evaluator exploded"),
            f"the evaluation failed (RuntimeError: evaluator exploded); evaluate the run, {HINT}",
        ),
    ],
)
def test_no_evaluation_fails_closed_in_enforce_mode(
    tmp_path: Path, section: dict[str, Any] | None, message: str
) -> None:
    summary = make_completed_summary(str(tmp_path))
    if section is not None:
        summary["evaluation"] = section
    make_run_dir(tmp_path, summary)
    write_training_events(tmp_path, training_scalars())
    verdict = _judge(tmp_path)
    assert verdict.failure_classification == "learning_unverified"
    assert verdict.failure_reason == "learning not verified: " + message
    assert verdict.learning["verdict"] == "unverified"
    report = _judge(tmp_path, LearningCfg(mode="report"))
    assert report.status == "passed" and report.learning["verdict"] == "unverified"


def test_missing_invalid_and_stale_evaluation_files(tmp_path: Path) -> None:
    run = _run(tmp_path / "missing")
    (run / "evaluation.json").unlink()
    assert _judge(run).failure_reason == (
        f"learning not verified: run_summary $.evaluation.path names {run / 'evaluation.json'}, "
        "which does not exist"
    )
    run = _run(tmp_path / "invalid")
    write_json_atomic(run / "evaluation.json", {"schema_version": 2})
    reason = _judge(run).failure_reason
    assert reason.startswith(f"learning not verified: {run / 'evaluation.json'} is not a valid")
    run = _run(tmp_path / "stale")
    doc = make_evaluation(HEALTHY_CURVE[:2])
    write_evaluation(run, doc)
    assert _judge(run).failure_reason == (
        "learning not verified: evaluation.json final_iteration=20 disagrees with run_summary "
        "$.evaluation.final.iteration=30; the file is stale or from another run"
    )


def test_an_invalid_section_is_a_schema_violation_first(tmp_path: Path) -> None:
    section = summary_section(make_evaluation(HEALTHY_CURVE))
    section["status"] = "done"
    verdict = _judge(_run(tmp_path, section=section))
    assert verdict.failure_classification == "schema_violation"
    assert verdict.reasons[-1].startswith(
        "learning not verified: run_summary $.evaluation is invalid"
    )


def test_damaged_or_loss_free_event_files_are_unverified(tmp_path: Path) -> None:
    run = _run(tmp_path / "damaged")
    event_file = next(run.glob("events.out.tfevents.*"))
    event_file.write_bytes(event_file.read_bytes() + frame(b"x")[:-2])
    assert "losses were not checked" in _judge(run).failure_reason
    assert "truncated record" in _judge(run).failure_reason
    run = _run(tmp_path / "lossless", scalars={64: {"Train/mean_reward": 1.0}})
    assert _judge(run).failure_reason == (
        f"learning not verified: losses were not checked: {event_file.name} holds no Loss/* scalar"
    )


def test_a_failed_run_is_not_judged(tmp_path: Path) -> None:
    make_run_dir(tmp_path, make_failed_summary())
    verdict = _judge(tmp_path)
    assert verdict.failure_classification == "learner_failure"
    assert verdict.learning["verdict"] == "not_judged"
    assert verdict.learning["reason"] == 'the run did not complete (run_summary status "failed")'
    assert judge_learning(tmp_path, None, ENFORCE).reason == "no usable run_summary.json"


def test_report_mode_records_a_regression_without_failing(tmp_path: Path) -> None:
    verdict = _judge(_run(tmp_path, DECLINING_CURVE), LearningCfg(mode="report"))
    assert verdict.status == "passed"
    assert verdict.learning["mode"] == "report" and verdict.learning["verdict"] == "regression"


def test_an_earlier_classification_wins(tmp_path: Path) -> None:
    verdict = judge_run_dir(
        _run(tmp_path, DECLINING_CURVE),
        monitor_reasons=["residual child processes after shutdown: 42"],
        monitor_classification="resource_leak",
        learning=ENFORCE,
    )
    assert verdict.failure_classification == "resource_leak"
    assert verdict.reasons[1].startswith("learning regression: final uniform-start R-MPKPE")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("enforce", 1.0, None), "--learning-margin=1 must be a fraction in [0, 1)"),
        (("enforce", -0.1, None), "--learning-margin=-0.1 must be a fraction in [0, 1)"),
        (("enforce", float("nan"), None), "--learning-margin=nan must be a fraction"),
        (("enforce", 0.05, 1.5), "--min-success-rate=1.5 must be a fraction in [0, 1]"),
        (("loud", 0.05, None), "--learning-mode='loud' must be one of enforce, report"),
        (("enforce", 0.05, None, -1.0), "--learning-tolerance-mm=-1 must be a finite number"),
        (("enforce", 0.05, None, float("inf")), "--learning-tolerance-mm=inf must be a finite"),
        (("enforce", 0.05, None, 2.0, -0.5), "--min-clip-success-rate=-0.5 must be a fraction"),
    ],
)
def test_learning_flags_are_bounds_checked(args, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        learning_cfg(*args)
    assert str(caught.value).startswith(message)
    assert learning_cfg("report", 0.0, 1.0) == LearningCfg(
        mode="report", margin=0.0, min_success_rate=1.0
    )


# -- clip sets ------------------------------------------------------------------------
HELD = [(10, 0.9, 30.0), (20, 1.0, 14.0), (30, 1.0, 13.5)]
DECLINED = [(10, 1.0, 30.0), (20, 1.0, 12.9), (30, 1.0, 28.0)]


def _clips(tmp_path: Path, cfg: LearningCfg = ENFORCE, **curves) -> dict[str, Any]:
    return _learning(_run(tmp_path, doc=make_clip_evaluation(curves)), cfg)


def test_every_clip_holding_passes_and_is_recorded(tmp_path: Path) -> None:
    learning = _clips(tmp_path, kick=HELD, walk=HELD)
    assert learning["verdict"] == "passed", learning["findings"]
    kick, walk = learning["evaluation"]["clips"]
    assert (kick["clip"], walk["clip"]) == ("kick", "walk")
    assert kick["best_iteration"] == 30 and kick["regressed"] == [] and kick["episodes"] == 16


def test_per_joint_errors_in_every_metrics_record_are_read_and_judged_alike(
    tmp_path: Path,
) -> None:
    """Today's writer adds ``joint_pos_error_rad_by_joint`` to every start mode's metrics (of
    each point and clip, inlined in the summary too); the verdict reads it as before."""
    from trainer.evaluation.metrics import JOINT_ERROR_FIELD
    from trainer.sim.scene import JOINT_NAMES

    doc = make_clip_evaluation({"kick": HELD, "spin": DECLINED})
    for point in doc["points"]:
        for holder in (point, *point["clips"]):
            for metrics in holder["modes"].values():
                metrics[JOINT_ERROR_FIELD] = dict.fromkeys(JOINT_NAMES, 0.05)
    learning = _learning(_run(tmp_path / "joints", doc=doc))
    plain = _clips(tmp_path / "plain", kick=HELD, spin=DECLINED)
    assert learning["verdict"] == plain["verdict"] == "regression"  # spin declined
    assert learning["findings"] == plain["findings"]
    assert learning["evaluation"]["clips"] == plain["evaluation"]["clips"]


def test_a_clip_behind_its_own_best_fails_and_is_named(tmp_path: Path) -> None:
    learning = _clips(tmp_path, kick=HELD, spin=DECLINED)
    assert _checks(learning) == ["final_behind_best", "clip_behind_best"]  # the mean, then spin
    assert learning["findings"][1]["message"] == (
        "1 of 2 clips ended (iteration 30) behind their own best point by more than the margin: "
        "spin (R-MPKPE 28.0 mm vs 12.9 mm at iteration 20)"
    )
    spin = learning["evaluation"]["clips"][1]
    assert spin["best_iteration"] == 20 and spin["regressed"] == ["r_mpkpe_mm"]


def test_one_lost_episode_of_a_clip_is_not_a_regression_two_are(tmp_path: Path) -> None:
    one = [(10, 1.0, 12.0), (20, 15 / 16, 12.0)]
    two = [(10, 1.0, 12.0), (20, 14 / 16, 12.0)]
    full = [(10, 1.0, 12.0), (20, 1.0, 12.0)]  # the mean stays within the margin
    assert _checks(_clips(tmp_path / "a", a=one, c=full, d=full, e=full)) == []
    learning = _clips(tmp_path / "b", a=one, b=two, d=full, e=full)
    assert _checks(learning) == ["clip_behind_best"]
    assert "b (success 87.5 % vs 100.0 % at iteration 10)" in learning["findings"][0]["message"]


def test_the_clip_floor_names_the_clips_below_it_worst_first(tmp_path: Path) -> None:
    cfg = learning_cfg("enforce", 0.05, None, 2.0, 0.95)
    flat = [(10, 0.5, 20.0), (20, 0.5, 20.0)]
    worse = [(10, 0.25, 20.0), (20, 0.25, 20.0)]
    learning = _clips(tmp_path, cfg, a=flat, b=worse, c=[(10, 1.0, 9.0), (20, 1.0, 9.0)])
    assert _checks(learning) == ["clip_success_below_floor"]
    assert learning["thresholds"]["min_clip_success_rate"] == 0.95
    assert learning["findings"][0]["message"] == (
        "2 of 3 clips end below --min-clip-success-rate 95.0 % of uniform-start success: "
        "b (25.0 %), a (50.0 %)"
    )


def test_a_finding_names_a_few_clips_then_counts_the_rest(tmp_path: Path) -> None:
    curves = {f"clip{k:02d}": DECLINED for k in range(9)}
    finding = _clips(tmp_path, **curves)["findings"][-1]
    assert finding["message"].startswith("9 of 9 clips ended")
    assert finding["message"].endswith("and 3 more")
