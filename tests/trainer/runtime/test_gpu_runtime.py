"""The device ring (CUDA IPC tensors + interprocess events) on a real GPU."""

from __future__ import annotations

import g1soak_runtime_fakes as fakes
import pytest
import torch

from contracts.jsonio import load_strict, write_json_atomic
from harness.soak.verdict import judge_run_dir
from trainer.runtime.learner_loop import run_training

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def test_device_ring_commits_every_row_in_order_and_drains(make_ctx):
    ctx = make_ctx(
        device="cuda:0", training={"replay_ingress_slot_rows": 4}, algo={"max_iterations": 50}
    )
    write_json_atomic(
        ctx.run_dir / "run_config.json", {"run": {}, "config": ctx.config, "overrides": []}
    )
    learners = []

    def learner_factory(ctx, device):
        learners.append(
            fakes.GpuWorkLearner(ctx.algo_cfg.num_envs, device, update_ms=0.5, check_order=True)
        )
        return learners[-1]

    rc = run_training(
        ctx,
        learner_factory=learner_factory,
        env_factory=fakes.make_gpu_env,
        env_kwargs={"num_envs": 8, "device": "cuda:0", "gpu_ms": 0.5},
        pack_fn=fakes.pack,
    )
    summary = load_strict(ctx.run_dir / "run_summary.json")
    assert rc == 0, summary.get("error")
    manifest = summary["runtime_manifest"]
    assert manifest["inference_memory_budget"]["ipc_event_count"] == 3
    assert manifest["inference_transport"] == "cuda_ipc"
    assert learners[0].replay.committed == summary["total_env_steps"] == (2 + 50) * 8
    verdict = judge_run_dir(ctx.run_dir, monitor_reasons=[], monitor_classification=None)
    assert verdict.status == "passed", verdict.reasons


def test_a_collector_thread_orders_the_device_ring_with_plain_events(make_ctx):
    ctx = make_ctx(
        device="cuda:0",
        training={"replay_ingress_slot_rows": 4, "collector_placement": "thread"},
        algo={"max_iterations": 50},
    )
    learners = []

    def learner_factory(ctx, device):
        learners.append(
            fakes.GpuWorkLearner(ctx.algo_cfg.num_envs, device, update_ms=0.5, check_order=True)
        )
        return learners[-1]

    rc = run_training(
        ctx,
        learner_factory=learner_factory,
        env_factory=fakes.make_gpu_env,
        env_kwargs={"num_envs": 8, "device": "cuda:0", "gpu_ms": 0.5},
        pack_fn=fakes.pack,
    )
    summary = load_strict(ctx.run_dir / "run_summary.json")
    assert rc == 0, summary.get("error")
    manifest = summary["runtime_manifest"]
    assert manifest["inference_transport"] == "in_process"
    assert manifest["inference_memory_budget"]["ipc_event_count"] == 0
    # Every row arrived, in order, across the two streams of one context.
    assert learners[0].replay.committed == summary["total_env_steps"] == (2 + 50) * 8
    assert torch.cuda.current_stream() == torch.cuda.default_stream()  # restored for us


def test_collector_killed_on_the_device_ring_is_a_collector_failure(make_ctx):
    ctx = make_ctx(device="cuda:0", algo={"max_iterations": 50})

    def learner_factory(ctx, device):
        return fakes.GpuWorkLearner(ctx.algo_cfg.num_envs, device, update_ms=0.5)

    rc = run_training(
        ctx,
        learner_factory=learner_factory,
        env_factory=fakes.make_gpu_env,
        env_kwargs={"num_envs": 8, "device": "cuda:0", "gpu_ms": 0.5, "kill_self_at_tick": 10},
        pack_fn=fakes.pack,
    )
    assert rc == 1
    summary = load_strict(ctx.run_dir / "run_summary.json")
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert shutdown["classification"] == "collector_failure"
    assert shutdown["collector"]["signal_name"] == "SIGKILL"
    assert summary["status"] == "collector_died"
