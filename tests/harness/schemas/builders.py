"""Builders of valid run_summary documents and run directories for the verdict and schema tests.

``make_completed_summary()`` returns a fresh, fully valid completed summary (docs/contracts.md §run-summary)
whose replay-ingress counters satisfy every docs/contracts.md §verdict invariant; tests mutate one field at a time.
``make_run_dir(tmp_path, summary)`` lays out a run directory that passes docs/contracts.md §verdict step 4.4.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from contracts.jsonio import dumps_strict, write_json_atomic

NUM_ENVS = 64
LEARNING_STARTS = 2
MAX_ITERATIONS = 30
SAVE_INTERVAL = 10
TOTAL_ENV_STEPS = (LEARNING_STARTS + MAX_ITERATIONS) * NUM_ENVS  # 2048 rows = 32 chunks of 64


def make_shutdown(**over: Any) -> dict[str, Any]:
    shutdown: dict[str, Any] = {
        "classification": "normal_completion",
        "owner": "learner",
        "phase": "finalize/logger_finish",
        "iteration": MAX_ITERATIONS,
        "coordination_tick": LEARNING_STARTS + MAX_ITERATIONS,
        "inference_epoch": 1,
        "exception": None,
        "collector": {"alive": False, "exitcode": 0, "signal": None, "signal_name": None},
        "cleanup": {"errors": []},
        "replay_ingress": None,
        "inference_ring": {
            "capacity": 1,
            "device": "cuda:0",
            "epoch": 1,
            "published_tick": 32,
            "observation_tick": 32,
            "action_tick": 32,
            "consumed_tick": 32,
            "closed": True,
        },
    }
    shutdown.update(over)
    return shutdown


def make_replay_ingress() -> dict[str, Any]:
    chunks = TOTAL_ENV_STEPS // NUM_ENVS
    return {
        "ingress_depth": 2,
        "ingress_slot_rows": NUM_ENVS,
        "published_sequence": chunks,
        "release_sequence": chunks,
        "occupancy": 0,
        "high_water_occupancy": 2,
        "backpressure_waits": 3,
        "backpressure_wait_s": 0.25,
        "early_returns": 0,
        "dropped_batches": 0,
        "closed_returns": 0,
        "stop_returns": 0,
    }


def make_learner_acceleration() -> dict[str, Any]:
    """``cuda_graph.learner`` of a CUDA run on the owner's defaults, nothing fallen back."""
    on = {"requested": True, "enabled": True, "disable_reason": None}
    fusions = dict.fromkeys(("renorm", "losses", "networks", "combo_kernels"), True)
    fusions["multi_kernel"] = False
    return {
        **on,
        "act_graph": dict(on),
        "compile": {**on, "compile_threads": 1},
        "fusion": {"requested": fusions, "enabled": dict(fusions), "disable_reason": None},
        "act_stream": {"enabled": True, "priority": -3},
        "precision": "bf16",
        "tf32_matmul": True,
        "fallbacks": [],
    }


def make_manifest() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "inference_ring_capacity": 1,
        "collector_metrics_interval": 100,
        "collector_backend_device": "cuda:0",
        "collector_placement": "process",
        "inference_flight": {
            "queue_depth": 0,
            "publication_lag": 0,
            "max_in_flight": 1,
            "max_publication_lag": 1,
        },
        "replay_ingress": make_replay_ingress(),
        "inference_memory_budget": {"ipc_event_count": 3},
        "cuda_graph": {"env": None, "learner": make_learner_acceleration()},
        "backend_diagnostics": {
            "available": True,
            "backend_type": "mjwarp",
            "diagnostics": {
                "cuda_graph": {"requested": True, "enabled": True, "disable_reason": None},
                "selected_reset_sensor_refresh": {
                    "requested": True,
                    "enabled": True,
                    "disable_reason": None,
                },
                "device_reset_randomization": {
                    "requested": False,
                    "enabled": False,
                    "disable_reason": "DR-free owner: reset randomization not negotiated",
                },
            },
        },
        "cuda_process_sharing": {
            "configured": None,
            "effective": None,
            "validated": False,
            "rank": 0,
            "world_size": 1,
            "learner_device": "cuda:0",
            "collector_device": "cuda:0",
            "learner_gpu_uuid": "GPU-00000000-1111-2222-3333-444444444444",
            "collector_gpu_uuid": "GPU-00000000-1111-2222-3333-444444444444",
            "pipe_directory_env": None,
            "pipe_directory": "/tmp/nvidia-mps",
            "control_pipe": None,
            "control_pipe_kind": "missing",
            "server_pid": None,
            "ambient_server": False,
        },
        "shutdown": make_shutdown(),
        "runtime_limits": {
            "free": "diagnostics are allowed",
            "num_envs": NUM_ENVS,
            "warmup_ticks": LEARNING_STARTS,
            "max_iterations": MAX_ITERATIONS,
            "start_iteration": 0,
        },
    }


def make_completed_summary(log_dir: str = "/tmp/run") -> dict[str, Any]:
    """A fully valid completed run_summary (fresh copy on every call)."""
    return copy.deepcopy(
        {
            "status": "completed",
            "metric_schema_version": 1,
            "runtime_manifest": make_manifest(),
            "algo": "flashsac",
            "task": "g1_motion_tracking",
            "sim_backend": "mjwarp",
            "log_dir": log_dir,
            "start_time_utc": "2026-11-29T10:00:00Z",
            "end_time_utc": "2026-11-29T10:31:00Z",
            "wall_time_sec": 1860.5,
            "completed_iterations": MAX_ITERATIONS,
            "total_env_steps": TOTAL_ENV_STEPS,
            "configured_seed": 1,
            "configured_seed_source": "config",
            "effective_seed": 1,
            "training_wall_time_sec": 1800.0,
            "tail_iteration_count": 30,
            "tail_window_iterations": 100,
            "final_mean_reward": 12.5,
            "best_mean_reward": 13.0,
            "mean_episode_length": None,
            "last_checkpoint": f"{log_dir}/model_{MAX_ITERATIONS}.pt",
            "final_env_steps_per_sec": 40000.0,
            "tail_env_steps_per_sec": 39000.0,
            "final_learner_replay_rows_per_sec": 1.0e6,
            "final_cycle_wall_ms": 25.0,
            "final_inference_ms": 1.5,
            "final_inference_h2d_ms": None,
            "final_inference_forward_ms": 1.0,
            "final_inference_d2h_ms": 0.2,
            "tf32_matmul": True,
        }
    )


def make_failed_summary(
    classification: str = "learner_failure", **shutdown_over: Any
) -> dict[str, Any]:
    """The minimal failed form of docs/contracts.md §run-summary with a valid producer shutdown."""
    over = {
        "classification": classification,
        "owner": "learner",
        "phase": "training/learner_update",
        "exception": {"type": "RuntimeError", "message": "CUDA error: an illegal memory access"},
    }
    over.update(shutdown_over)
    return {
        "status": "failed",
        "metric_schema_version": 1,
        "runtime_manifest": {"schema_version": 1, "shutdown": make_shutdown(**over)},
        "error_type": "RuntimeError",
        "error": "CUDA error: an illegal memory access",
    }


def make_run_dir(
    root: Path, summary: dict[str, Any] | None = None, *, raw_summary: str | None = None
) -> Path:
    """Create a run dir with run_config.json, one event file, all checkpoints and the summary."""
    root.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        root / "run_config.json",
        {
            "run": {
                "algo": "flashsac",
                "task": "g1_motion_tracking",
                "sim_backend": "mjwarp",
                "log_dir": str(root),
            },
            "config": {
                "algo": {
                    "save_interval": SAVE_INTERVAL,
                    "max_iterations": MAX_ITERATIONS,
                    "num_envs": NUM_ENVS,
                }
            },
            "overrides": [],
        },
    )
    (root / "events.out.tfevents.1764410400.host.123.0").write_bytes(b"")
    for k in range(SAVE_INTERVAL, MAX_ITERATIONS + 1, SAVE_INTERVAL):
        (root / f"model_{k}.pt").write_bytes(b"ckpt")
    if raw_summary is not None:
        (root / "run_summary.json").write_text(raw_summary, encoding="utf-8")
    elif summary is not None:
        (root / "run_summary.json").write_text(dumps_strict(summary), encoding="utf-8")
    return root
