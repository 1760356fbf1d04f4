"""run_summary, metrics, progress and checkpoint writers (docs/contracts.md §run-directory, §run-summary, §metric-schema)."""

from __future__ import annotations

import json
import time

import pytest
import torch

from contracts.identity import RunIdentity
from contracts.jsonio import load_strict
from contracts.schemas import validate
from trainer.rundir.checkpoint import is_checkpoint_iteration, load_checkpoint, save_checkpoint
from trainer.rundir.metrics import MetricsWriter, UnknownMetricTag, check_learner_tags, tag_entry
from trainer.rundir.progress import ProgressWriter
from trainer.rundir.summary import (
    RunFailure,
    RunProgress,
    RuntimeRecord,
    SummaryInvalid,
    build_summary,
    write_failed_summary,
    write_summary,
)


def _identity(run_dir) -> RunIdentity:
    return RunIdentity(
        run_dir=str(run_dir),
        algo="flashsac",
        task="g1_motion_tracking",
        sim="mujoco",
        start_time_utc="2026-11-29T00:00:00Z",
        seed=1,
        configured_seed=1,
        configured_seed_source="config",
    )


def test_preflight_failure_summary_validates_and_names_the_phase(tmp_path):
    doc = write_failed_summary(
        _identity(tmp_path),
        RunFailure(
            classification="learner_failure",
            owner="learner",
            phase="startup/cuda_preflight",
            exception=RuntimeError("CUDA is not available; use --sim mujoco"),
        ),
    )
    on_disk = load_strict(tmp_path / "run_summary.json")
    assert on_disk == doc
    assert validate(on_disk, "run_summary.v1.json") == []
    shutdown = on_disk["runtime_manifest"]["shutdown"]
    assert (shutdown["classification"], shutdown["owner"], shutdown["phase"]) == (
        "learner_failure",
        "learner",
        "startup/cuda_preflight",
    )
    assert shutdown["exception"] == {
        "type": "RuntimeError",
        "message": "CUDA is not available; use --sim mujoco",
    }
    assert on_disk["status"] == "failed" and on_disk["error_type"] == "RuntimeError"
    assert on_disk["runtime_manifest"]["cuda_process_sharing"]["effective"] is None
    # the identity's eight fields, each under its document key
    assert {k: on_disk[k] for k in _identity(tmp_path).document_fields()} == {
        "algo": "flashsac",
        "task": "g1_motion_tracking",
        "sim_backend": "mujoco",
        "log_dir": str(tmp_path),
        "start_time_utc": "2026-11-29T00:00:00Z",
        "configured_seed": 1,
        "configured_seed_source": "config",
        "effective_seed": 1,
    }


def test_failed_summary_with_a_broken_manifest_falls_back_to_the_minimal_form(tmp_path):
    doc = write_failed_summary(
        _identity(tmp_path),
        RunFailure(
            classification="collector_failure",
            owner="collector",
            phase="training/learner_update",
            exception=ValueError("x" * 20000),
        ),
        runtime=RuntimeRecord(manifest={"replay_ingress": {"occupancy": -1}}),
    )
    assert validate(doc, "run_summary.v1.json") == []
    assert set(doc) == {
        "status",
        "metric_schema_version",
        "runtime_manifest",
        "error_type",
        "error",
    }
    shutdown = doc["runtime_manifest"]["shutdown"]
    assert shutdown["classification"] == "collector_failure"  # the original failure is kept
    assert shutdown["cleanup"]["errors"][-1]["type"] == "SummaryInvalid"
    assert len(doc["error"]) == 16000


def test_invalid_completed_summary_is_never_written(tmp_path):
    doc = build_summary(
        _identity(tmp_path),
        RunProgress(wall_time_sec=1.0, completed_iterations=1, total_env_steps=8),
        runtime_manifest={},
        outcome={},
    )
    with pytest.raises(SummaryInvalid, match="run_summary.v1.json"):
        write_summary(tmp_path, doc)
    assert not (tmp_path / "run_summary.json").exists()


def test_metrics_writer_accepts_registered_and_open_tags_only(tmp_path):
    writer = MetricsWriter(tmp_path)
    writer.write(
        8,
        {
            "Train/iteration": 1,
            "reward/tracking": 0.5,
            "Loss/aux_l2": 0.1,
            "Train/mean_reward": None,
        },
    )
    with pytest.raises(UnknownMetricTag, match="perf/steps_per_sec"):
        writer.write(16, {"perf/steps_per_sec": 1.0})
    with pytest.raises(UnknownMetricTag):
        writer.write(16, {"reward/mean": 1.0})  # excluded open-pattern name
    with pytest.raises(ValueError, match="total env steps"):
        writer.write(4, {"Train/iteration": 2})
    writer.close()
    events = list(tmp_path.glob("events.out.tfevents.*"))
    assert len(events) == 1
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(events[0]), size_guidance={"scalars": 0})
    acc.Reload()
    assert set(acc.Tags()["scalars"]) == {"Train/iteration", "reward/tracking", "Loss/aux_l2"}
    assert [e.step for e in acc.Scalars("Train/iteration")] == [8]


def test_learner_map_cannot_inject_logger_or_collector_tags():
    check_learner_tags(["Loss/critic", "Policy/temperature", "Loss/aux_q"])
    for tag in ("Perf/total_fps", "Train/iteration", "Train/mean_reward", "reward/tracking"):
        with pytest.raises(UnknownMetricTag, match="owned by"):
            check_learner_tags([tag])
    assert tag_entry("Perf/iteration_time")["unit"]


def test_progress_lines_are_strict_json_with_the_contract_keys(tmp_path):
    progress = ProgressWriter(tmp_path, interval_s=0.0)
    progress.write("startup/begin")
    progress.update("training/learner_update", iteration=3, total_env_steps=24)
    progress.close()
    lines = [json.loads(line) for line in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert [line["phase"] for line in lines] == ["startup/begin", "training/learner_update"]
    assert set(lines[1]) == {
        "time_utc",
        "phase",
        "iteration",
        "total_env_steps",
        "env_steps_per_sec",
        "iterations_per_sec",
        "rate_window_s",
        "training_elapsed_s",
        "loop_tick",
    }
    assert lines[1]["loop_tick"] is None  # no training loop behind this writer
    assert lines[1]["iteration"] == 3 and lines[1]["env_steps_per_sec"] is None
    assert lines[1]["rate_window_s"] == 10.0 and lines[1]["training_elapsed_s"] is None


def test_checkpoints_at_multiples_of_save_interval_and_the_final_iteration(tmp_path):
    saved = [k for k in range(13) if is_checkpoint_iteration(k, save_interval=5, final=k == 12)]
    assert saved == [5, 10, 12]
    # A time budget ends the run at whatever iteration found it spent.
    assert is_checkpoint_iteration(7, save_interval=5, final=True)
    assert not is_checkpoint_iteration(0, save_interval=5, final=True)
    path = save_checkpoint(
        tmp_path, iteration=5, total_env_steps=40, learner_state={"w": torch.ones(2)}
    )
    assert path.name == "model_5.pt"
    state = load_checkpoint(path)
    assert state["iteration"] == 5 and torch.equal(state["learner"]["w"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["model_5.pt"]  # no temp file left


def test_progress_heartbeat_writes_while_the_main_thread_is_busy(tmp_path):

    progress = ProgressWriter(tmp_path, interval_s=0.05)
    progress.write("startup/begin")
    progress.start_heartbeat(lambda: "startup/learner_prepare")
    time.sleep(1.3)  # a long compile on the main thread
    progress.close()
    phases = [
        json.loads(line)["phase"] for line in (tmp_path / "progress.jsonl").read_text().splitlines()
    ]
    assert phases[0] == "startup/begin" and "startup/learner_prepare" in phases[1:]


def test_heartbeat_lines_repeat_the_loop_tick_only_the_loop_advances(tmp_path):
    tick = {"value": 7}
    progress = ProgressWriter(tmp_path, interval_s=0.05, loop_tick=lambda: tick["value"])
    progress.start_heartbeat(lambda: "training/learner_update")
    path = tmp_path / "progress.jsonl"
    deadline = time.monotonic() + 30
    while path.read_text().count("\n") < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    tick["value"] = 8
    progress.write("training/learner_update")
    progress.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    ticks = [line["loop_tick"] for line in lines]
    # the heartbeats repeat the loop's counter; only the loop moved it from 7 to 8
    assert ticks.count(7) >= 3 and ticks == sorted(ticks) and set(ticks) == {7, 8}
