"""Fixtures for runtime tests: a RunContext factory and the fakes module on sys.path."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # spawn passes sys.path to the collector


@pytest.fixture
def make_ctx(tmp_path):
    """Factory: a real RunContext for a tiny CPU run (fake env/learner are hooks)."""
    from trainer.algo.config import FlashSacCfg
    from trainer.config.schema import RunContext, SeedInfo, TrainingCfg

    def factory(*, training: dict | None = None, algo: dict | None = None) -> RunContext:
        run_dir = tmp_path / "run"
        run_dir.mkdir(exist_ok=True)
        training_cfg = TrainingCfg(
            task_name="G1MotionTracking",
            sim_backend="mujoco",
            play_only=False,
            no_play=True,
            log_dir=str(run_dir),
            device="cpu",
            inference_slot_capacity=1,
            replay_ingress_depth=2,
            replay_ingress_slot_rows=None,
            collector_metrics_interval=1,
            cuda_process_sharing=None,
            env_steps_per_sync=1,
            log_interval=1,
            motion_hub="skip",
        )
        if training:
            training_cfg = replace(training_cfg, **training)
        algo_cfg = FlashSacCfg(
            num_envs=8,
            max_iterations=6,
            batch_size=16,
            learning_starts=2,
            save_interval=4,
            replay_buffer_n=16,
        )
        if algo:
            algo_cfg = replace(algo_cfg, **algo)
        return RunContext(
            run_dir=run_dir,
            algo="flashsac",
            task="g1_motion_tracking",
            sim_backend="mujoco",
            training=training_cfg,
            algo_cfg=algo_cfg,
            task_cfg=None,
            learner_device="cpu",
            collector_device="cpu",
            seed=SeedInfo(configured_seed=1, configured_seed_source="config", effective_seed=1),
            start_time_utc="2026-11-29T00:00:00Z",
            motion_id="motions/g1/synthetic_dance.npz",
            motion_path=Path("/nonexistent.npz"),
            motion_source="test",
            motion_sha256="0" * 64,
            scene_xml=Path("/nonexistent.xml"),
            config={
                "algo": {
                    "save_interval": algo_cfg.save_interval,
                    "max_iterations": algo_cfg.max_iterations,
                }
            },
            overrides=(),
            cuda_process_sharing=None,
            memory_estimate_bytes=0,
        )

    return factory
