"""``training.resume_from`` on the real stack: `python -m trainer train --sim mujoco` at a tiny
size trains, then a second process resumes from a middle checkpoint into a new run directory
and finishes; mismatched or unreadable checkpoints fail closed, bad paths are usage errors."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
from pathlib import Path

import pytest
import torch

from contracts.jsonio import load_strict
from contracts.schemas import validate
from harness.soak.verdict import judge_run_dir
from tests.trainer.runtime.train_cmd import train_argv
from trainer.rundir.checkpoint import load_checkpoint

pytestmark = pytest.mark.slow

NUM_ENVS, WARMUP, SAVE_INTERVAL = 4, 2, 2
TINY = [
    "algo.batch_size=8",
    f"algo.learning_starts={WARMUP}",
    f"algo.save_interval={SAVE_INTERVAL}",
    "algo.replay_buffer_n=16",
    "training.no_play=true",
    "training.replay_ingress_slot_rows=2",
    "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz",
]


def _train(run_dir: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    argv = train_argv(run_dir, *TINY, *overrides)
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


def _resume(
    run_dir: Path, checkpoint: Path, *overrides: str, max_iterations: int = 5
) -> subprocess.CompletedProcess[str]:
    return _train(
        run_dir,
        *overrides,
        f"algo.max_iterations={max_iterations}",
        f"training.resume_from={checkpoint}",
    )


def _snapshot(run_dir: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run_dir.iterdir()}


def _flat(state: object, prefix: str = "") -> dict[str, object]:
    if isinstance(state, dict):
        out: dict[str, object] = {}
        for key, value in state.items():
            out.update(_flat(value, f"{prefix}{key}."))
        return out
    if isinstance(state, (list, tuple)):
        out = {}
        for i, value in enumerate(state):
            out.update(_flat(value, f"{prefix}{i}."))
        return out
    return {prefix: state}


def _assert_same_state(actual: dict, expected: dict) -> None:
    a, e = _flat(actual), _flat(expected)
    assert a.keys() == e.keys()
    for key, value in e.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(a[key].cpu(), value.cpu()), key
        else:
            assert a[key] == value, key


@pytest.fixture(scope="module")
def lineage(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 4-iteration run (model_2, model_4), then a resume from model_2 to iteration 5.

    The first run's collector is a process, the resumed run's a thread: a checkpoint does
    not depend on where the collector ran."""
    root = tmp_path_factory.mktemp("resume")
    cache = root / "xdg-cache"
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(cache))
    mp.delenv("G1SOAK_ASSET_DIR", raising=False)
    try:
        first = root / "first"
        done = _train(first, f"algo.num_envs={NUM_ENVS}", "algo.max_iterations=4")
        assert done.returncode == 0, done.stderr[-4000:]
        before = _snapshot(first)
        second = root / "second"
        done = _resume(
            second,
            first / "model_2.pt",
            f"algo.num_envs={NUM_ENVS}",
            "training.collector_placement=thread",
        )
        assert done.returncode == 0, done.stderr[-4000:]
        assert _snapshot(first) == before, "the resumed run changed the old run directory"
    finally:
        mp.undo()
    return {"root": root, "first": first, "second": second, "cache": cache}


def test_resumed_run_continues_the_global_iteration_count(lineage: dict[str, Path]) -> None:
    first, second = lineage["first"], lineage["second"]
    summary = load_strict(second / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    assert summary["status"] == "completed"
    assert summary["completed_iterations"] == 3  # iterations 3, 4, 5 of max_iterations=5
    assert summary["total_env_steps"] == (WARMUP + 3) * NUM_ENVS  # own warm-up refills replay
    manifest = summary["runtime_manifest"]
    resumed = manifest["resumed_from"]
    assert resumed["path"] == str(first / "model_2.pt")
    assert resumed["iteration"] == 2
    assert resumed["sha256"] == hashlib.sha256((first / "model_2.pt").read_bytes()).hexdigest()
    assert manifest["collector_placement"] == "thread"
    assert manifest["runtime_limits"]["start_iteration"] == 2
    assert manifest["runtime_limits"]["total_ticks"] == WARMUP + 3
    # model_2 stands for the lineage's earlier checkpoint; 4 and 5 are this run's.
    assert sorted(p.name for p in second.glob("model_*.pt")) == [
        "model_2.pt",
        "model_4.pt",
        "model_5.pt",
    ]
    assert (second / "model_2.pt").read_bytes() == (first / "model_2.pt").read_bytes()
    last = load_checkpoint(second / "model_5.pt")
    assert last["iteration"] == 5
    assert last["learner"]["iterations"] == 5
    saved = load_checkpoint(first / "model_2.pt")
    assert last["total_env_steps"] == saved["total_env_steps"] + (WARMUP + 3) * NUM_ENVS
    assert last["meta"]["num_envs"] == NUM_ENVS
    run_config = load_strict(second / "run_config.json")
    assert validate(run_config, "run_config.v1.json") == []
    assert run_config["config"]["training"]["resume_from"] == str(first / "model_2.pt")
    verdict = judge_run_dir(second, monitor_reasons=[], monitor_classification=None)
    assert verdict.status == "passed", verdict.reasons


def test_learner_state_right_after_loading_equals_the_checkpoint(
    lineage: dict[str, Path], tmp_path: Path
) -> None:
    import g1soak_runtime_fakes as fakes

    from trainer.algo.learner import FlashSacLearner
    from trainer.config.loader import load_config
    from trainer.runtime.learner_loop import LearnerRuntime
    from trainer.task.spec import G1_TRACKING_SPEC

    path = lineage["first"] / "model_2.pt"
    loaded = load_config(
        "flashsac",
        "g1_motion_tracking",
        "mujoco",
        [*TINY, f"algo.num_envs={NUM_ENVS}", "algo.max_iterations=5"],
    )
    ctx = dataclasses.replace(
        fakes.make_run_context(tmp_path / "run", training={"resume_from": str(path)}),
        algo_cfg=loaded.algo_cfg,
    )
    runtime = LearnerRuntime(ctx)
    learner = FlashSacLearner(ctx.algo_cfg, G1_TRACKING_SPEC, num_envs=NUM_ENVS, device="cpu")
    fresh = learner.state_dict()
    runtime.checkpoints.resume(path, learner, runtime.tracker)
    saved = load_checkpoint(path)["learner"]
    restored = learner.state_dict()
    _assert_same_state(restored, saved)
    # Parameters, Adam step counts, schedules, reward scaler: all moved off the fresh state.
    assert not torch.equal(restored["actor"]["mu_head.weight"], fresh["actor"]["mu_head.weight"])
    assert restored["optimizers"]["critic"]["step"][0].item() == saved["update_count"] > 0
    assert restored["schedulers"]["critic"] == saved["update_count"]
    assert restored["reward_scaler"]["count"].item() > fresh["reward_scaler"]["count"].item()
    assert learner.update_count == saved["update_count"]
    assert (runtime.state.start_iteration, runtime.state.iteration) == (2, 2)
    assert runtime.tracker.iteration == 2
    assert runtime.state.total_ticks == runtime.plan.warmup + 3


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            [f"algo.num_envs={NUM_ENVS}", "algo.critic_hidden_dim=64"],
            "the checkpoint has algo.critic_hidden_dim=256 but this run has algo.critic_hidden_dim=64",
        ),
        (
            ["algo.num_envs=8"],
            f"the checkpoint has algo.num_envs={NUM_ENVS} but this run has algo.num_envs=8",
        ),
    ],
    ids=["hidden_dim", "num_envs"],
)
def test_mismatched_checkpoint_fails_closed_at_startup(
    lineage: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    overrides: list[str],
    message: str,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(lineage["cache"]))
    run_dir = tmp_path / "run"
    done = _resume(run_dir, lineage["first"] / "model_2.pt", *overrides)
    assert done.returncode == 1, done.stderr[-4000:]
    summary = load_strict(run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    assert summary["status"] == "failed"
    assert summary["completed_iterations"] == 0
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert shutdown["classification"] == "learner_failure"
    assert shutdown["owner"] == "learner"
    assert shutdown["phase"] == "startup/learner_prepare"
    assert summary["error_type"] == "ResumeError"
    assert message in summary["error"]
    assert not list(run_dir.glob("model_*.pt"))  # never silently started from scratch


def test_unreadable_checkpoint_fails_closed_at_startup(
    lineage: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(lineage["cache"]))
    junk = tmp_path / "model_2.pt"
    junk.write_bytes(b"PK\x03\x04 truncated")
    run_dir = tmp_path / "run"
    done = _resume(run_dir, junk, f"algo.num_envs={NUM_ENVS}")
    assert done.returncode == 1, done.stderr[-4000:]
    summary = load_strict(run_dir / "run_summary.json")
    assert summary["runtime_manifest"]["shutdown"]["classification"] == "learner_failure"
    assert f"training.resume_from={junk} cannot be loaded" in summary["error"]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("missing", "is not an existing file"),
        ("directory", "is a directory"),
        ("finished", "is at iteration 4 but algo.max_iterations=4 is the total target"),
    ],
)
def test_bad_resume_from_exits_2_and_writes_nothing(
    lineage: dict[str, Path], tmp_path: Path, target: str, message: str
) -> None:
    path = {
        "missing": lineage["first"] / "model_3.pt",
        "directory": lineage["first"],
        "finished": lineage["first"] / "model_4.pt",
    }[target]
    run_dir = tmp_path / "run"
    done = _resume(run_dir, path, f"algo.num_envs={NUM_ENVS}", max_iterations=4)
    assert done.returncode == 2, done.stderr[-4000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], done.stderr
    assert f"training.resume_from={path}" in errors[0]
    assert not run_dir.exists()
