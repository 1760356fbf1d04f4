"""End-to-end runtime runs with real processes (fake env + fake learner, CPU)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import g1soak_runtime_fakes as fakes
import numpy as np
import psutil
import pytest

from contracts.jsonio import load_strict, write_json_atomic
from contracts.schemas import validate
from harness.soak.verdict import judge_run_dir
from trainer.config.defaults import default_scene_cfg, default_task_cfg
from trainer.cpu_threads import plan_training_threads
from trainer.runtime.learner_loop import run_training
from trainer.runtime.shutdown import STARTUP_PHASES
from trainer.sim.scene import build_g1_model
from trainer.task.motion import arrays_sha256, generate_synthetic_dance

pytestmark = pytest.mark.slow


def _hooks(ctx, learner_box=None, env_factory=fakes.make_fake_env, **env_kwargs):
    def learner_factory(ctx, device):
        learner = fakes.FakeLearner(ctx.algo_cfg.num_envs, device, **(learner_box or {}))
        hooks_state["learner"] = learner
        return learner

    hooks_state: dict = {}
    return hooks_state, {
        "learner_factory": learner_factory,
        "env_factory": env_factory,
        "env_kwargs": {"num_envs": ctx.algo_cfg.num_envs, "device": "cpu", **env_kwargs},
        "pack_fn": fakes.pack,
    }


def _write_run_config(ctx) -> None:
    write_json_atomic(
        ctx.run_dir / "run_config.json", {"run": {}, "config": ctx.config, "overrides": []}
    )


def _children_of_me() -> list[psutil.Process]:
    """Live children, minus multiprocessing's resource tracker (it exits with this process)."""
    live = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(
                p.cmdline()
            ):
                live.append(p)
        except psutil.NoSuchProcess:  # exited between the listing and the read: not live
            continue
    return live


def _shutdown(run_dir: Path) -> dict:
    return load_strict(run_dir / "run_summary.json")["runtime_manifest"]["shutdown"]


def _run_failing(ctx, hooks, *, exit_code: int = 1) -> tuple[dict, dict]:
    """Run a training that must fail (exit 1, or 128 + the signal that cancelled it); return
    its schema-valid summary and shutdown record."""
    assert run_training(ctx, **hooks) == exit_code
    summary = load_strict(ctx.run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    return summary, summary["runtime_manifest"]["shutdown"]


def test_completed_run_passes_the_soak_checks(make_ctx):
    ctx = make_ctx(training={"replay_ingress_slot_rows": 4})
    _write_run_config(ctx)
    state, hooks = _hooks(ctx)
    assert run_training(ctx, **hooks) == 0
    summary = load_strict(ctx.run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    warmup = 2  # max(learning_starts=2, ceil(16 / 8))
    assert summary["status"] == "completed"
    assert summary["completed_iterations"] == 6
    assert summary["total_env_steps"] == (warmup + 6) * 8
    ingress = summary["runtime_manifest"]["replay_ingress"]
    assert (
        ingress["published_sequence"]
        == ingress["release_sequence"]
        == summary["total_env_steps"] // 4
    )
    assert ingress["occupancy"] == 0 and ingress["high_water_occupancy"] > 0
    flight = summary["runtime_manifest"]["inference_flight"]
    assert (
        flight["queue_depth"] == 0
        and flight["publication_lag"] == 0
        and flight["max_in_flight"] == 1
    )
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert shutdown["classification"] == "normal_completion"
    assert shutdown["phase"] == "finalize/logger_finish"
    assert shutdown["cleanup"]["errors"] == []
    assert shutdown["collector"]["exitcode"] == 0
    # Every update saw exactly the rows of the ticks before it (one-tick prefetch).
    assert state["learner"].committed_at_update == [(warmup + i) * 8 for i in range(6)]
    assert state["learner"].replay.committed == summary["total_env_steps"]
    assert sorted(p.name for p in ctx.run_dir.glob("model_*.pt")) == ["model_4.pt", "model_6.pt"]
    assert len(list(ctx.run_dir.glob("events.out.tfevents.*"))) == 1
    assert summary["final_mean_reward"] is not None and summary["mean_episode_length"] is not None
    # the whole-training rate: every committed row over the span the time budget measured
    span = summary["time_budget"]["training_seconds"]
    assert summary["training_env_steps_per_sec"] == pytest.approx(
        summary["total_env_steps"] / span, rel=0.05
    )
    lines = [json.loads(line) for line in (ctx.run_dir / "progress.jsonl").read_text().splitlines()]
    phases = [line["phase"] for line in lines]
    assert phases[0] == "startup/begin" and phases[-1] == "finalize/logger_finish"
    assert "training/startup_complete" in phases
    verdict = judge_run_dir(ctx.run_dir, monitor_reasons=[], monitor_classification=None)
    assert verdict.status == "passed", verdict.reasons
    assert [p.cmdline() for p in _children_of_me()] == []


def test_learner_exception_is_a_learner_failure(make_ctx):
    ctx = make_ctx()
    _, hooks = _hooks(ctx, learner_box={"raise_at_iteration": 2})
    summary, shutdown = _run_failing(ctx, hooks)
    assert (shutdown["classification"], shutdown["owner"]) == ("learner_failure", "learner")
    assert shutdown["phase"] == "training/learner_update"
    assert shutdown["exception"]["type"] == "FloatingPointError"
    assert shutdown["collector"]["alive"] is False
    assert summary["status"] == "failed"
    assert [p.cmdline() for p in _children_of_me()] == []


def test_collector_builds_its_env_while_the_learner_builds_its_own(make_ctx, tmp_path):
    # The fake learner refuses to finish construction until the env build has begun, so
    # this run only completes when the collector is spawned before the learner is built.
    marker = tmp_path / "env-build-started"
    ctx = make_ctx()
    _, hooks = _hooks(ctx, learner_box={"wait_for_file": str(marker)}, build_marker=str(marker))
    assert run_training(ctx, **hooks) == 0
    summary = load_strict(ctx.run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    timings = summary["runtime_manifest"]["timings"]
    startup = timings["startup"]
    assert tuple(startup["phases_s"]) == STARTUP_PHASES  # every one, in contract order
    collector = startup["collector"]
    assert set(collector) >= {"process_up", "env_build", "env_build_parts", "resources_wait"}
    assert collector["env_build_parts"] == {"build": 0.0}
    # Every learner is asked to capture (the fake one has no graphs: a no-op, still timed).
    assert isinstance(startup["learner_capture_s"], float) and startup["learner_capture_s"] >= 0
    # Launch -> first iteration covers the runtime's startup phases and more.
    assert timings["startup_to_first_iteration_s"] > sum(startup["phases_s"].values())
    assert startup["launch_to_runtime_s"] >= 0


def test_learner_failure_while_the_collector_builds_its_env_stops_it(make_ctx):
    ctx = make_ctx()
    _, hooks = _hooks(ctx, learner_box={"fail_at_build": True}, build_sleep_s=60.0)
    started = time.monotonic()
    _, shutdown = _run_failing(ctx, hooks)
    # Terminated mid-build, not waited out: its build alone would take 60 s.
    assert time.monotonic() - started < 50
    assert (shutdown["classification"], shutdown["owner"]) == ("learner_failure", "learner")
    assert shutdown["phase"] == "startup/replay_resources"
    assert shutdown["exception"]["type"] == "MemoryError"
    assert shutdown["collector"]["alive"] is False
    assert shutdown["collector"]["signal_name"] == "SIGTERM"
    assert [p.cmdline() for p in _children_of_me()] == []


def test_env_build_failure_is_reported_at_collector_start(make_ctx):
    ctx = make_ctx()
    _, hooks = _hooks(ctx, fail_at_build=True)
    _, shutdown = _run_failing(ctx, hooks)
    assert (shutdown["classification"], shutdown["owner"]) == (
        "backend_worker_failure",
        "collector",
    )
    assert shutdown["phase"] == "startup/collector_start"
    assert shutdown["exception"]["type"] == "FakeBackendError"
    assert shutdown["collector"]["exitcode"] == 1
    assert [p.cmdline() for p in _children_of_me()] == []


def test_env_whose_spec_differs_from_the_planned_one_fails_closed_at_the_hand_over(
    make_ctx, caplog
):
    ctx = make_ctx()
    caplog.set_level(logging.WARNING, logger="trainer.runtime.learner_shutdown")
    _, hooks = _hooks(ctx)
    planned = dataclasses.replace(fakes.SPEC, action_dim=fakes.ACT + 1)
    _, shutdown = _run_failing(ctx, {**hooks, "env_spec": planned})
    assert (shutdown["classification"], shutdown["owner"]) == ("collector_failure", "collector")
    assert shutdown["phase"] == "startup/collector_start"
    assert shutdown["exception"]["type"] == "ValueError"
    message = shutdown["exception"]["message"]
    assert str(fakes.SPEC) in message and str(planned) in message and "\n" not in message
    assert shutdown["collector"]["exitcode"] == 1
    # The collector had received the ring and ingress: it frees them before it exits.
    assert [r.message for r in caplog.records if "freeing" in r.message] == []
    assert [p.cmdline() for p in _children_of_me()] == []


@pytest.mark.parametrize(
    ("env_kwargs", "classification", "error_type"),
    [
        pytest.param({"fail_at_tick": 3}, "collector_failure", "ValueError", id="collector-raises"),
        pytest.param(
            {"backend_fail_at_tick": 3},
            "backend_worker_failure",
            "FakeBackendError",
            id="backend-raises",
        ),
        pytest.param(
            {"kill_self_at_tick": 3}, "collector_failure", "CollectorDied", id="collector-killed"
        ),
    ],
)
def test_collector_failures_are_classified(make_ctx, env_kwargs, classification, error_type):
    ctx = make_ctx()
    _, hooks = _hooks(ctx, **env_kwargs)
    summary, shutdown = _run_failing(ctx, hooks)
    assert (shutdown["classification"], shutdown["owner"]) == (classification, "collector")
    assert shutdown["exception"]["type"] == error_type
    assert shutdown["collector"]["alive"] is False
    if "kill_self_at_tick" in env_kwargs:
        assert (
            shutdown["collector"]["exitcode"] == -9
            and shutdown["collector"]["signal_name"] == "SIGKILL"
        )
        assert summary["status"] == "collector_died"
    else:
        assert shutdown["collector"]["exitcode"] == 1
        assert summary["status"] == "failed"
    assert [p.cmdline() for p in _children_of_me()] == []


def test_diverged_policy_on_mjwarp_fails_at_the_collector_health_check(make_ctx, tmp_path):
    """NaN actions through the real collector on MJWarp (Warp's CPU device): the env zeroes
    them on the device, so only the collector's health check can stop the run."""
    pytest.importorskip("mujoco_warp")
    motion = tmp_path / "synthetic_dance.npz"
    np.savez(motion, **generate_synthetic_dance(build_g1_model(default_scene_cfg())))
    ctx = make_ctx()  # collector_metrics_interval=1: a health check after every tick
    _, hooks = _hooks(
        ctx,
        learner_box={"nan_actions": True, "check_order": False},
        env_factory=fakes.make_warp_cpu_env,
        motion_path=str(motion),
    )
    summary, shutdown = _run_failing(ctx, hooks)
    assert summary["status"] == "failed"
    assert (shutdown["classification"], shutdown["owner"]) == (
        "backend_worker_failure",
        "collector",
    )
    # The collector raised after stepping tick 0; the learner was waiting for tick 1.
    assert shutdown["phase"] == "training/wait_for_inference_request"
    assert shutdown["coordination_tick"] == 1
    assert shutdown["exception"]["type"] == "BackendFailure"
    message = shutdown["exception"]["message"]
    assert "8 env rows received non-finite actions (zeroed); the policy diverged" in message
    assert "collector health check after tick 0" in message
    assert shutdown["collector"]["exitcode"] == 1
    verdict = judge_run_dir(ctx.run_dir, monitor_reasons=[], monitor_classification=None)
    assert verdict.status == "failed"
    assert [p.cmdline() for p in _children_of_me()] == []


def _npz_sha256(path: Path) -> str:
    with np.load(path) as npz:
        return arrays_sha256({key: npz[key] for key in npz.files})


def _synthetic_clip(path: Path, joint_offset: float = 0.0) -> Path:
    arrays = generate_synthetic_dance(build_g1_model(default_scene_cfg()))
    arrays["joint_pos"] = arrays["joint_pos"] + np.float32(joint_offset)
    np.savez(path, **arrays)
    return path


def _real_env_run(make_ctx, clip: Path, motion_file: str) -> tuple[Any, dict]:
    """A context and hooks whose collector builds the real G1 env (CPU mujoco) from the
    production kwargs: ``motion_file`` as configured, ``clip`` as preflight resolved it.
    Only the learner is a fake."""
    ctx = dataclasses.replace(
        make_ctx(),
        task_cfg=default_task_cfg(motion_file=motion_file),
        motion_path=clip,
        motion_source="path",
        motion_sha256=_npz_sha256(clip),
    )

    def learner_factory(ctx, device):
        return fakes.FakeLearner(ctx.algo_cfg.num_envs, device, check_order=False)

    return ctx, {"learner_factory": learner_factory}


def test_collector_loads_exactly_the_clip_preflight_resolved(make_ctx, tmp_path):
    clip = _synthetic_clip(tmp_path / "resolved.npz")
    # Resolving the configured id again would fail: only the preflight path can be loaded.
    ctx, hooks = _real_env_run(make_ctx, clip, motion_file=str(tmp_path / "elsewhere.npz"))
    assert run_training(ctx, **hooks) == 0
    summary = load_strict(ctx.run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    assert summary["runtime_manifest"]["motion"] == {
        "path": str(clip),
        "sha256": ctx.motion_sha256,
    }
    # The thread plan reached both processes and the physics pool (docs/runtime.md).
    plan = plan_training_threads(learner_device="cpu", collector_device="cpu", sim_backend="mujoco")
    threads = summary["runtime_manifest"]["cpu_threads"]
    assert threads["cpus"] == plan.cpus and threads["torch_source"] == plan.torch_source
    assert threads["collector_physics"] == plan.collector_physics
    if plan.torch_source == "rule":
        assert (threads["learner_torch"], threads["collector_torch"]) == (plan.learner_torch, 1)


def test_clip_swapped_after_preflight_is_a_classified_collector_failure(make_ctx, tmp_path):
    clip = _synthetic_clip(tmp_path / "clip.npz")
    ctx, hooks = _real_env_run(make_ctx, clip, motion_file=str(clip))
    preflight_sha = ctx.motion_sha256
    _synthetic_clip(clip, joint_offset=1e-3)  # replaced between preflight and the env build
    summary, shutdown = _run_failing(ctx, hooks)
    assert summary["status"] == "failed"
    assert (shutdown["classification"], shutdown["owner"]) == ("collector_failure", "collector")
    assert shutdown["phase"] == "startup/collector_start"
    assert shutdown["exception"]["type"] == "MotionError"
    message = shutdown["exception"]["message"]
    assert f"motion file '{clip}' changed after preflight" in message
    assert f"preflight resolved sha256 {preflight_sha}" in message
    assert f"hash to sha256 {_npz_sha256(clip)}" in message
    assert [p.cmdline() for p in _children_of_me()] == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_to_the_learner_is_external_cancellation(make_ctx, signum):
    ctx = make_ctx(algo={"max_iterations": 100000})
    _, hooks = _hooks(ctx, step_sleep_s=0.002)

    def interrupt_when_training() -> None:
        progress = ctx.run_dir / "progress.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if progress.exists() and "training/startup_complete" in progress.read_text():
                break
            time.sleep(0.05)
        time.sleep(0.3)
        os.kill(os.getpid(), signum)

    thread = threading.Thread(target=interrupt_when_training)
    thread.start()
    try:
        assert run_training(ctx, **hooks) == 128 + signum
    finally:
        thread.join()
    summary = load_strict(ctx.run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    assert summary["status"] == "cancelled"
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert (shutdown["classification"], shutdown["owner"]) == ("external_cancellation", "external")
    assert shutdown["phase"].startswith("training/")
    assert shutdown["collector"]["alive"] is False
    assert shutdown["exception"]["type"] == "ExternalCancellation"
    assert [p.cmdline() for p in _children_of_me()] == []


def test_hung_collector_is_not_timed_out_while_busy_but_a_deadlock_is(make_ctx):
    # A collector that hangs inside env.step is BUSY: no deadline. We stop the run by
    # killing it, which must be a collector failure, never a stale tick.
    ctx = make_ctx()
    _, hooks = _hooks(ctx, hang_at_tick=2)

    def kill_collector() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            kids = _children_of_me()
            if (
                kids
                and (ctx.run_dir / "progress.jsonl").exists()
                and "training/startup_complete" in (ctx.run_dir / "progress.jsonl").read_text()
            ):
                time.sleep(1.0)
                for kid in kids:
                    with contextlib.suppress(psutil.NoSuchProcess):  # a short-lived helper
                        kid.kill()
                return
            time.sleep(0.05)

    thread = threading.Thread(target=kill_collector)
    thread.start()
    try:
        assert run_training(ctx, stale_after_s=0.5, **hooks) == 1
    finally:
        thread.join()
    shutdown = _shutdown(ctx.run_dir)
    assert shutdown["classification"] == "collector_failure"
    assert shutdown["collector"]["signal_name"] == "SIGKILL"


def test_unsupported_env_steps_per_sync_fails_closed_with_a_summary(make_ctx):
    ctx = make_ctx(training={"env_steps_per_sync": 2})
    _, hooks = _hooks(ctx)
    _, shutdown = _run_failing(ctx, hooks)
    assert (shutdown["classification"], shutdown["phase"]) == ("learner_failure", "startup/begin")
    assert "env_steps_per_sync=2" in shutdown["exception"]["message"]
    assert shutdown["collector"] is None


# -- training.collector_placement=thread -------------------------------------------------------
def _thread_ctx(make_ctx, algo=None, **training):
    return make_ctx(training={"collector_placement": "thread", **training}, algo=algo)


def _collector_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "g1soak-collector"]


def test_a_collector_thread_run_completes_in_one_process_and_passes_the_soak_checks(make_ctx):
    ctx = _thread_ctx(make_ctx, replay_ingress_slot_rows=4)
    _write_run_config(ctx)
    state, hooks = _hooks(ctx)
    assert run_training(ctx, **hooks) == 0
    summary = load_strict(ctx.run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    manifest = summary["runtime_manifest"]
    assert manifest["collector_placement"] == "thread"
    assert manifest["inference_transport"] == "in_process"
    assert manifest["inference_memory_budget"]["ipc_event_count"] == 0
    shutdown = manifest["shutdown"]
    assert shutdown["classification"] == "normal_completion"
    assert shutdown["cleanup"]["errors"] == []
    # A thread has no exit code; it ended, and no process was ever spawned for it.
    assert shutdown["collector"] == {
        "alive": False,
        "exitcode": None,
        "signal": None,
        "signal_name": None,
    }
    assert summary["total_env_steps"] == (2 + 6) * 8
    assert state["learner"].committed_at_update == [(2 + i) * 8 for i in range(6)]
    assert manifest["timings"]["startup"]["collector"]["env_build"] >= 0
    verdict = judge_run_dir(ctx.run_dir, monitor_reasons=[], monitor_classification=None)
    assert verdict.status == "passed", verdict.reasons
    assert _children_of_me() == [] and _collector_threads() == []


@pytest.mark.parametrize(
    ("env_kwargs", "classification", "error_type", "phase"),
    [
        pytest.param(
            {"fail_at_tick": 3}, "collector_failure", "ValueError", "training/", id="raises"
        ),
        pytest.param(
            {"backend_fail_at_tick": 3},
            "backend_worker_failure",
            "FakeBackendError",
            "training/",
            id="backend-raises",
        ),
        pytest.param(
            {"fail_at_build": True},
            "backend_worker_failure",
            "FakeBackendError",
            "startup/collector_start",
            id="env-build-fails",
        ),
    ],
)
def test_collector_thread_failures_are_classified_without_an_exit_code(
    make_ctx, env_kwargs, classification, error_type, phase
):
    ctx = _thread_ctx(make_ctx)
    _, hooks = _hooks(ctx, **env_kwargs)
    summary, shutdown = _run_failing(ctx, hooks)
    assert (shutdown["classification"], shutdown["owner"]) == (classification, "collector")
    assert shutdown["exception"]["type"] == error_type
    assert shutdown["phase"].startswith(phase)
    assert shutdown["collector"] == {
        "alive": False,
        "exitcode": None,
        "signal": None,
        "signal_name": None,
    }
    assert summary["status"] == "failed"
    assert _collector_threads() == []


def test_a_learner_failure_stops_the_collector_thread(make_ctx):
    ctx = _thread_ctx(make_ctx)
    _, hooks = _hooks(ctx, learner_box={"raise_at_iteration": 2})
    _, shutdown = _run_failing(ctx, hooks)
    assert (shutdown["classification"], shutdown["phase"]) == (
        "learner_failure",
        "training/learner_update",
    )
    assert shutdown["collector"]["alive"] is False
    assert _collector_threads() == []


def test_the_learner_captures_only_after_the_collector_thread_built_its_env(make_ctx, tmp_path):
    # In one process a capture must not overlap the env's build; the fake learner's capture
    # fails unless the env build has finished (its marker is written when the build ends).
    marker = tmp_path / "env-built"
    ctx = _thread_ctx(make_ctx)
    _, hooks = _hooks(
        ctx,
        learner_box={"capture_needs_file": str(marker)},
        built_marker=str(marker),
        build_sleep_s=0.5,
    )
    assert run_training(ctx, **hooks) == 0


def test_a_signal_cancels_a_collector_thread_run(make_ctx):
    ctx = _thread_ctx(make_ctx, algo={"max_iterations": 100000})
    _, hooks = _hooks(ctx, step_sleep_s=0.002)
    progress = ctx.run_dir / "progress.jsonl"

    def interrupt_when_training() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if progress.exists() and "training/startup_complete" in progress.read_text():
                break
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=interrupt_when_training)
    thread.start()
    try:
        summary, shutdown = _run_failing(ctx, hooks, exit_code=128 + signal.SIGTERM)
    finally:
        thread.join()
    assert summary["status"] == "cancelled"
    assert (shutdown["classification"], shutdown["owner"]) == ("external_cancellation", "external")
    assert shutdown["collector"]["alive"] is False
    assert _collector_threads() == []


def test_a_collector_thread_builds_its_env_only_after_the_learner_built_its_own(make_ctx, tmp_path):
    # One CUDA context: the learner's allocations must not overlap the env's graph captures.
    marker = tmp_path / "env-build-started"
    ctx = _thread_ctx(make_ctx)
    seen: list[bool] = []

    def learner_factory(ctx, device):
        seen.append(marker.exists())
        return fakes.FakeLearner(ctx.algo_cfg.num_envs, device)

    _, hooks = _hooks(ctx, build_marker=str(marker))
    assert run_training(ctx, **{**hooks, "learner_factory": learner_factory}) == 0
    assert seen == [False] and marker.exists()
