"""The thread-count rule of a CPU run (trainer.cpu_threads, docs/runtime.md "CPU threads")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from trainer import cli
from trainer.cpu_threads import (
    ThreadPlan,
    affinity_cpus,
    apply_torch_threads,
    omp_threads,
    plan_probe_threads,
    plan_training_threads,
)


def _plan(cpus: int, learner="cpu", collector="cpu", sim="mujoco", env=None) -> ThreadPlan:
    return plan_training_threads(
        learner_device=learner,
        collector_device=collector,
        sim_backend=sim,
        cpus=cpus,
        environ={} if env is None else env,
    )


@pytest.mark.parametrize(
    ("cpus", "learner", "physics"),
    [(1, 1, 1), (2, 1, 1), (3, 1, 2), (4, 2, 2), (16, 8, 8), (17, 8, 9)],
)
def test_cpu_run_splits_the_cpus_between_the_learner_and_the_physics(cpus, learner, physics):
    plan = _plan(cpus)
    assert plan == ThreadPlan(
        cpus=cpus,
        torch_source="rule",
        learner_torch=learner,
        collector_torch=1,
        collector_physics=physics,
    )
    if cpus > 1:
        assert plan.learner_torch + plan.collector_physics == cpus  # no core is shared


def test_cuda_processes_keep_torch_defaults_and_mujoco_physics_gets_every_cpu():
    mjwarp = _plan(16, learner="cuda:0", collector="cuda:0", sim="mjwarp")
    assert mjwarp == ThreadPlan(
        cpus=16,
        torch_source="torch_default",
        learner_torch=None,
        collector_torch=None,
        collector_physics=None,
    )
    mujoco_on_gpu = _plan(16, learner="cuda:0", collector="cuda:0", sim="mujoco")
    assert (mujoco_on_gpu.learner_torch, mujoco_on_gpu.collector_torch) == (None, None)
    assert mujoco_on_gpu.collector_physics == 16


@pytest.mark.parametrize(
    ("cpus", "omp", "physics"),
    [(16, "4", 12), (2, "8", 1), (2, "1", 1), (1, "2", 1)],
)
def test_omp_num_threads_fixes_torch_threads_and_the_physics_takes_the_rest(cpus, omp, physics):
    plan = _plan(cpus, env={"OMP_NUM_THREADS": omp})
    assert plan.torch_source == "OMP_NUM_THREADS"
    assert (plan.learner_torch, plan.collector_torch) == (None, None)  # torch reads it itself
    assert plan.collector_physics == physics


@pytest.mark.parametrize("text", ["0", "-2", "two", "1.5"])
def test_malformed_omp_num_threads_is_rejected_naming_the_value(text):
    with pytest.raises(ValueError, match=rf"OMP_NUM_THREADS='{text}' must be a positive integer"):
        _plan(2, env={"OMP_NUM_THREADS": text})


def test_blank_omp_num_threads_counts_as_unset():
    assert omp_threads({"OMP_NUM_THREADS": "  "}) is None
    assert _plan(2, env={"OMP_NUM_THREADS": ""}).torch_source == "rule"


def test_probe_child_takes_one_torch_thread_on_the_cpu_only():
    assert plan_probe_threads(device="cpu", environ={}) == 1
    assert plan_probe_threads(device="cuda:0", environ={}) is None
    assert plan_probe_threads(device="cpu", environ={"OMP_NUM_THREADS": "2"}) is None


def test_the_rule_starts_from_the_affinity_mask():
    assert affinity_cpus() == len(os.sched_getaffinity(0))
    assert plan_training_threads(
        learner_device="cpu", collector_device="cpu", sim_backend="mujoco", environ={}
    ).cpus == len(os.sched_getaffinity(0))


def test_apply_torch_threads_sets_the_count_or_leaves_it():
    before = torch.get_num_threads()
    try:
        assert apply_torch_threads(1) == 1 == torch.get_num_threads()
        assert apply_torch_threads(None) == 1
    finally:
        torch.set_num_threads(before)


def test_train_rejects_a_malformed_omp_num_threads_as_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "all")
    log_dir = tmp_path / "run"
    args = ["--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mujoco"]
    code = cli.main([*args, f"training.log_dir={log_dir}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "OMP_NUM_THREADS='all' must be a positive integer" in err
    assert not log_dir.exists()
