"""The evaluation stage of a run, in-process: the collector's ``evaluate_run`` on real
checkpoint files, the learner's plan and sections, and the backfilled Eval/* scalars."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from contracts import rundir
from contracts.schemas import validate
from harness.metrics.events import read_scalars
from trainer.algo.networks import Actor
from trainer.config.evaluation import EvalCfg
from trainer.evaluation.document import eval_scalars
from trainer.rundir.checkpoint import save_checkpoint
from trainer.rundir.metrics import MetricsWriter, UnknownMetricTag
from trainer.runtime.evaluation_stage import EvalPlan, LearnerEvaluation, evaluate_run

SECTION = {"$ref": "evaluation.v1.json#/$defs/summary_section"}
ON_TINY = EvalCfg(enabled=True, uniform_episodes=3, frame0_episodes=1)


def _save(run_dir: Path, iteration: int) -> Path:
    torch.manual_seed(iteration)
    actor = Actor(160, 29, 32, 1)
    return save_checkpoint(
        run_dir,
        iteration=iteration,
        total_env_steps=iteration * 8,
        learner_state={"actor": actor.state_dict()},
    )


def _plan(run_dir: Path) -> EvalPlan:
    return EvalPlan(str(run_dir), uniform_episodes=3, frame0_episodes=1, motion_id="short")


def test_evaluate_run_writes_every_checkpoint_up_to_the_final_one(tmp_path, make_replay_env):
    for k in (2, 4, 6):
        _save(tmp_path, k)
    env = make_replay_env(8)
    outcome = evaluate_run(env, _plan(tmp_path), final_iteration=4)
    assert outcome["status"] == "evaluated" and outcome["wall_time_s"] > 0
    doc = rundir.read(tmp_path / rundir.EVALUATION)
    assert [p["iteration"] for p in doc["points"]] == [2, 4]  # model_6 is after the final
    assert [p["source"] for p in doc["points"]] == ["checkpoint", "final"]
    assert doc["points"][0]["checkpoint"] == "model_2.pt" and doc["points"][0]["env_steps"] == 16
    assert doc["final_iteration"] == 4 and doc["motion"]["motion_id"] == "short"
    assert doc["protocol"]["uniform_episodes"] == 3 and doc["protocol"]["sim_backend"] == "mujoco"
    assert all(len(p["checkpoint_sha256"]) == 64 for p in doc["points"])


def test_a_missing_final_checkpoint_is_a_failed_outcome_not_a_crash(tmp_path, make_replay_env):
    _save(tmp_path, 2)
    outcome = evaluate_run(make_replay_env(4), _plan(tmp_path), final_iteration=3)
    assert outcome["status"] == "failed"
    assert "the final policy model_3.pt is not in" in outcome["reason"]
    assert not (tmp_path / rundir.EVALUATION).exists()


def test_a_foreign_checkpoint_fails_the_evaluation_with_its_name(tmp_path, make_replay_env):
    (tmp_path / "model_2.pt").write_bytes(b"not a checkpoint")
    outcome = evaluate_run(make_replay_env(4), _plan(tmp_path), final_iteration=2)
    assert outcome["status"] == "failed" and "model_2.pt cannot be loaded" in outcome["reason"]


def _ctx(tmp_path: Path, cfg: EvalCfg | None) -> SimpleNamespace:
    return SimpleNamespace(run_dir=tmp_path, eval_cfg=cfg, motion_id="motions/g1/x.npz")


def test_the_learner_plans_the_resolved_episode_counts_or_skips(tmp_path):
    on = LearnerEvaluation(
        _ctx(tmp_path, EvalCfg(enabled=True, uniform_episodes=None, frame0_episodes=None))
    )
    assert on.plan(1024) == EvalPlan(str(tmp_path), 128, 16, "motions/g1/x.npz")
    off = LearnerEvaluation(
        _ctx(tmp_path, EvalCfg(enabled=False, uniform_episodes=8, frame0_episodes=1))
    )
    assert off.plan(1024) is None
    assert (
        off.failed_run_section("training/learner_update")["reason"]
        == "disabled by eval.enabled=false"
    )
    absent = LearnerEvaluation(_ctx(tmp_path, None))
    assert absent.plan(4) is None and "no eval section" in absent.skip_reason()


def test_failed_run_sections_say_whether_the_evaluation_had_begun(tmp_path):
    stage = LearnerEvaluation(
        _ctx(tmp_path, EvalCfg(enabled=True, uniform_episodes=2, frame0_episodes=1))
    )
    before = stage.failed_run_section("training/learner_update")
    assert before["status"] == "skipped" and "before its evaluation" in before["reason"]
    stage.requested = True
    during = stage.failed_run_section("finalize/evaluation")
    assert during["status"] == "failed" and "during its evaluation" in during["reason"]
    for section in (before, during):
        assert validate(section, "evaluation.v1.json", schema=SECTION) == []


def test_eval_scalars_are_backfilled_at_their_checkpoints_steps(tmp_path, make_replay_env):
    for k in (2, 4):
        _save(tmp_path, k)
    evaluate_run(make_replay_env(8), _plan(tmp_path), final_iteration=4)
    doc = rundir.read(tmp_path / rundir.EVALUATION)
    writer = MetricsWriter(tmp_path / "tb")
    writer.write(100, {"Train/iteration": 4})  # training wrote later steps already
    for point in doc["points"]:
        writer.write_evaluation(point["env_steps"], eval_scalars(point))
    with pytest.raises(ValueError, match="Eval/frame0_success_rate"):
        writer.write_evaluation(1, eval_scalars(doc["points"][0]))
    with pytest.raises(UnknownMetricTag, match="only Eval/"):
        writer.write_evaluation(200, {"Train/iteration": 1.0})
    writer.close()
    (event_file,) = (tmp_path / "tb").glob("events.out.tfevents.*")
    scalars = read_scalars(event_file)
    assert [e.step for e in scalars["Eval/uniform_success_rate"]] == [16, 32]
    assert [e.step for e in scalars["Train/iteration"]] == [100]
    assert all(math.isfinite(e.value) for e in scalars["Eval/uniform_r_mpkpe_mm"])


@pytest.mark.slow  # evaluates two runs' checkpoints
def test_a_resumed_run_writes_only_its_own_points_on_its_own_axis(tmp_path, make_replay_env):
    for k in (2, 4, 6):  # model_2 was carried over from the earlier run (lineage: 16 steps)
        _save(tmp_path, k)
    stage = LearnerEvaluation(_ctx(tmp_path, ON_TINY))
    evaluate_run(make_replay_env(8), _plan(tmp_path), final_iteration=6)
    writer = MetricsWriter(tmp_path / "tb")
    runtime = SimpleNamespace(writer=writer, start_iteration=2, lineage_env_steps=16)
    stage._write_scalars(runtime, rundir.read(tmp_path / rundir.EVALUATION))
    writer.close()
    (event_file,) = (tmp_path / "tb").glob("events.out.tfevents.*")
    assert [e.step for e in read_scalars(event_file)["Eval/uniform_mpkpe_mm"]] == [16, 32]
