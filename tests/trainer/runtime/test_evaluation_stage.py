"""The in-run evaluation hand-shake with real processes (fake env and learner, CPU): an
evaluation that fails is reported and the run still completes; a collector that dies during
the evaluation fails the run, and both summaries say what happened to the evaluation."""

from __future__ import annotations

import dataclasses

import eval_fakes
import g1soak_runtime_fakes as fakes
import pytest

from contracts.jsonio import load_strict
from contracts.schemas import validate
from trainer.config.evaluation import EvalCfg
from trainer.runtime.learner_loop import run_training

pytestmark = pytest.mark.slow

ON = EvalCfg(enabled=True, uniform_episodes=2, frame0_episodes=1)


def _hooks(ctx, learner_cls, env_factory):
    return {
        "learner_factory": lambda ctx, device: learner_cls(ctx.algo_cfg.num_envs, device),
        "env_factory": env_factory,
        "env_kwargs": {"num_envs": ctx.algo_cfg.num_envs, "device": "cpu"},
        "pack_fn": fakes.pack,
    }


def _summary(ctx) -> dict:
    summary = load_strict(ctx.run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    return summary


def test_a_failed_evaluation_is_reported_and_the_run_still_completes(make_ctx):
    ctx = dataclasses.replace(make_ctx(), eval_cfg=ON)
    hooks = _hooks(ctx, fakes.FakeLearner, fakes.make_fake_env)  # checkpoints without an actor
    assert run_training(ctx, **hooks) == 0
    summary = _summary(ctx)
    section = summary["evaluation"]
    assert summary["status"] == "completed" and section["status"] == "failed"
    assert "holds no actor state" in section["reason"] and section["points"] == 0
    assert "finalize/evaluation" in (ctx.run_dir / "progress.jsonl").read_text()


def test_a_collector_that_dies_during_the_evaluation_fails_the_run(make_ctx):
    ctx = dataclasses.replace(make_ctx(), eval_cfg=ON)
    hooks = _hooks(ctx, eval_fakes.ActorLearner, eval_fakes.make_dying_eval_env)
    assert run_training(ctx, **hooks) == 1
    summary = _summary(ctx)
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert (shutdown["classification"], shutdown["phase"]) == (
        "collector_failure",
        "finalize/evaluation",
    )
    section = summary["evaluation"]
    assert section["status"] == "failed" and "during its evaluation" in section["reason"]


def test_a_run_without_an_eval_section_skips_it(make_ctx):
    ctx = make_ctx()
    assert run_training(ctx, **_hooks(ctx, fakes.FakeLearner, fakes.make_fake_env)) == 0
    section = _summary(ctx)["evaluation"]
    assert section["status"] == "skipped" and "no eval section" in section["reason"]
