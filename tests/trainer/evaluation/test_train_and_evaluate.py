"""A real tiny CPU `train` run evaluates its checkpoints in-run, and `evaluate` re-evaluates
them from the run directory or one checkpoint (subprocesses: slow)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from contracts.jsonio import load_strict, loads_strict
from contracts.schemas import validate
from harness.metrics.events import read_scalars
from tests.trainer.runtime.train_cmd import train_argv
from trainer.evaluation.metrics import JOINT_ERROR_FIELD
from trainer.sim.scene import JOINT_NAMES

pytestmark = pytest.mark.slow


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CACHE_HOME": str(cache), "HF_HUB_OFFLINE": "1"}


def _evaluate(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "trainer.evaluation.cli"]  # as the `evaluate` script
    return subprocess.run(
        [*argv, *args], check=False, capture_output=True, text=True, timeout=600, env=_env(cache)
    )


TINY = (
    "algo.num_envs=4",
    "algo.batch_size=8",
    "algo.learning_starts=2",
    "training.no_play=true",
    "training.replay_ingress_slot_rows=2",
    "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz",
)
SIX_ITERATIONS = (*TINY, "algo.max_iterations=6", "algo.save_interval=3")
"""4 envs, 6 iterations, checkpoints at 3 and 6."""


def _train(run_dir: Path, cache: Path, *overrides: str) -> str:
    """A tiny CPU ``train`` run (it must succeed); its stdout."""
    proc = subprocess.run(
        train_argv(run_dir, *overrides),
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(cache),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, Path, str]:
    """(run dir, cache, stdout) of one tiny run: 4 envs, 6 iterations, checkpoints at 3 and 6."""
    base = tmp_path_factory.mktemp("evalrun")
    run_dir, cache = base / "run", base / "cache"
    return run_dir, cache, _train(run_dir, cache, *SIX_ITERATIONS)


def test_the_run_evaluates_every_checkpoint_and_says_so_everywhere(run):
    run_dir, _, stdout = run
    summary = load_strict(run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    section = summary["evaluation"]
    assert section["status"] == "evaluated" and section["points"] == 2
    assert section["path"] == "evaluation.json" and section["final"]["iteration"] == 6
    doc = load_strict(run_dir / "evaluation.json")
    assert validate(doc, "evaluation.v1.json") == []
    assert [(p["iteration"], p["source"]) for p in doc["points"]] == [
        (3, "checkpoint"),
        (6, "final"),
    ]
    assert doc["protocol"]["uniform_episodes"] == 4 and doc["protocol"]["frame0_episodes"] == 1
    (event_file,) = run_dir.glob("events.out.tfevents.*")
    scalars = read_scalars(event_file)
    steps = [e.step for e in scalars["Eval/uniform_r_mpkpe_mm"]]
    assert steps == [p["env_steps"] for p in doc["points"]] == [(2 + 3) * 4, (2 + 6) * 4]
    assert any(line.startswith("evaluation, final (iteration 6)") for line in stdout.splitlines())


def test_the_learner_diagnostics_are_in_the_event_file(run):
    """The tags that let a late-run decline explain itself (docs/flashsac.md) are written."""
    from trainer.algo.learner import METRIC_NAMES

    run_dir, _, _ = run
    (event_file,) = run_dir.glob("events.out.tfevents.*")
    scalars = read_scalars(event_file)
    assert set(METRIC_NAMES) <= set(scalars)  # normalize_reward is on: every tag
    last = {tag: scalars[tag][-1].value for tag in METRIC_NAMES}
    assert last["Train/bf16"] == 0.0  # fp32 on the CPU
    assert 0 < last["Train/replay_fill"] <= 1 and last["Train/replay_sample_age"] >= 0
    assert last["Train/lr_critic"] > 0 and last["Train/reward_scale"] > 0
    assert all(math.isfinite(value) for value in last.values())


def test_evaluate_a_run_directory_reproduces_the_in_run_numbers(run, tmp_path):
    run_dir, cache, _ = run
    out = tmp_path / "evaluation.json"
    proc = _evaluate(str(run_dir), "--json", "--output", str(out), cache=cache)
    assert proc.returncode == 0, proc.stderr
    doc = loads_strict(proc.stdout)
    assert validate(doc, "evaluation.v1.json") == [] and load_strict(out) == doc
    in_run = load_strict(run_dir / "evaluation.json")
    assert doc["protocol"] == in_run["protocol"] and doc["final_iteration"] == 6
    for mine, theirs in zip(doc["points"], in_run["points"], strict=True):
        for mode in ("frame0", "uniform"):
            a, b = mine["modes"][mode], theirs["modes"][mode]
            assert a["success_rate"] == b["success_rate"], mode
            # Another env size: actor matmuls round differently in the last bits.
            assert a["mpkpe_mm"] == pytest.approx(b["mpkpe_mm"], rel=1e-4), mode
            # --json carries every joint's error, keyed by the model's joint names.
            assert list(a[JOINT_ERROR_FIELD]) == list(JOINT_NAMES) == list(b[JOINT_ERROR_FIELD])
            for name, value in a[JOINT_ERROR_FIELD].items():
                assert value == pytest.approx(b[JOINT_ERROR_FIELD][name], rel=1e-4, abs=1e-6), name


def test_evaluate_one_checkpoint_prints_the_metrics_by_start_mode(run):
    run_dir, cache, _ = run
    proc = _evaluate(
        str(run_dir / "model_3.pt"), "--episodes", "2", "--frame0-episodes", "1", cache=cache
    )
    assert proc.returncode == 0, proc.stderr
    assert "R-MPKPE, anchor frame (mm)" in proc.stdout and "uniform (2)" in proc.stdout
    assert "iteration 3" in proc.stdout and "worst joints" in proc.stdout


def test_bad_inputs_exit_2_with_one_line(run, tmp_path):
    run_dir, cache, _ = run
    cases = [
        ((str(tmp_path / "missing"),), "does not exist"),
        ((str(tmp_path),), "holds no model_<k>.pt"),
        ((str(run_dir), "--motion", "motions/g1/none.npz"), "none.npz"),
        ((str(run_dir), "--episodes", "0"), "--episodes"),
    ]
    if not torch.cuda.is_available():
        cases.append(((str(run_dir), "--sim", "mjwarp"), "needs a CUDA device"))
    for args, text in cases:
        proc = _evaluate(*args, cache=cache)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(lines) == 1 and lines[0].startswith("error:") and text in lines[0], args


def test_a_time_budgeted_run_evaluates_the_iteration_its_budget_reached(tmp_path):
    """The budget ends the run at whatever iteration it reached: the final checkpoint, the
    evaluation request and evaluation.json all name that iteration, and the soak's learning
    verdict judges the run (nothing about it is unverified)."""
    from harness.soak.learning import UNVERIFIED, LearningCfg, judge_learning

    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    budget = (
        "algo.max_iterations=null",
        "algo.lr_decay_steps=500000",
        "training.duration_seconds=2",
    )
    _train(run_dir, cache, *TINY, *budget, "algo.save_interval=1000")
    summary = load_strict(run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    final = summary["completed_iterations"]
    assert summary["time_budget"]["stopped_by"] == "duration"
    assert summary["time_budget"]["final_iteration"] == final >= 1
    assert summary["last_checkpoint"] == str(run_dir / f"model_{final}.pt")
    section = summary["evaluation"]
    assert section["status"] == "evaluated" and section["final"]["iteration"] == final
    doc = load_strict(run_dir / "evaluation.json")
    assert doc["final_iteration"] == final
    assert doc["points"][-1]["iteration"] == final and doc["points"][-1]["source"] == "final"
    report = judge_learning(run_dir, summary, LearningCfg(mode="report"))
    assert report.verdict != "not_judged"
    assert [f for f in report.findings if f.classification == UNVERIFIED] == []


def test_a_run_with_an_averaged_policy_checkpoints_and_evaluates_the_average(tmp_path):
    """``algo.policy_average_rate`` through the whole runtime: every checkpoint carries the
    average beside the actor, and the run's own evaluation judges the average, not the actor."""
    from trainer.algo.learner_state import POLICY_AVERAGE_KEY
    from trainer.evaluation.policy import load_policy_point
    from trainer.rundir.checkpoint import load_checkpoint

    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    _train(run_dir, cache, *SIX_ITERATIONS, "algo.policy_average_rate=0.5")
    learner = load_checkpoint(run_dir / "model_6.pt", map_location="cpu")["learner"]
    average, actor = learner[POLICY_AVERAGE_KEY], learner["actor"]
    assert average.keys() == actor.keys()
    assert any(not torch.equal(average[k], actor[k]) for k in actor)  # it lags the actor
    point = load_policy_point(run_dir / "model_6.pt", "cpu")
    loaded = point.actor.state_dict()
    assert all(torch.equal(loaded[k], average[k]) for k in average)
    doc = load_strict(run_dir / "evaluation.json")
    assert [(p["iteration"], p["network"]) for p in doc["points"]] == [
        (3, "policy_average"),
        (6, "policy_average"),
    ]
    assert doc["points"][-1]["checkpoint_sha256"] == point.checkpoint_sha256
    # the same run's actor, for the average against it: `evaluate --policy actor`
    proc = _evaluate(str(run_dir / "model_6.pt"), "--policy", "actor", "--json", cache=cache)
    assert proc.returncode == 0, proc.stderr[-3000:]
    actor_doc = loads_strict(proc.stdout)
    assert validate(actor_doc, "evaluation.v1.json") == []
    assert [p["network"] for p in actor_doc["points"]] == ["actor"]
    shown = _evaluate(str(run_dir / "model_6.pt"), cache=cache)
    assert shown.returncode == 0 and "the averaged policy" in shown.stdout
