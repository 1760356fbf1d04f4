"""Shared trainer fixtures: the G1 model, the synthetic clip and env factories on the CPU MuJoCo
backend and on MJWarp over Warp's CPU device."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import mujoco
import numpy as np
import pytest
import torch

from trainer.config.defaults import default_scene_cfg, default_task_cfg
from trainer.sim.scene import build_g1_model
from trainer.task.g1_tracking import G1TrackingEnv, make_env
from trainer.task.motion import MotionClip, generate_synthetic_dance, load_motion

G1_NUM_ENVS = 4
"""Rows of a default ``make_g1_env()`` env."""


@pytest.fixture(scope="module")
def g1_model() -> mujoco.MjModel:
    """The G1 scene model (one per test module)."""
    return build_g1_model(default_scene_cfg())


@pytest.fixture(scope="module")
def g1_clip(g1_model, tmp_path_factory) -> MotionClip:
    """The offline synthetic dance clip, written as NPZ and loaded like a real one."""
    path = tmp_path_factory.mktemp("motion") / "synthetic_dance.npz"
    np.savez(path, **generate_synthetic_dance(g1_model))
    return load_motion(path, g1_model)


@pytest.fixture
def make_g1_env(g1_model, g1_clip) -> Callable[..., G1TrackingEnv]:
    """Factory of G1 envs on the CPU MuJoCo backend over the synthetic clip.

    ``make_g1_env(num_envs=4, seed=0, static_outputs=False, num_threads=2,
    compile_backend=True, **cfg_overrides)``; the keyword overrides replace fields of the
    ``default_task_cfg()``.
    """

    def factory(
        num_envs: int = G1_NUM_ENVS,
        seed: int = 0,
        static_outputs: bool = False,
        num_threads: int = 2,
        compile_backend: str | bool | None = True,
        **over,
    ) -> G1TrackingEnv:
        return make_env(
            dataclasses.replace(default_task_cfg(), **over),
            sim_backend="mujoco",
            num_envs=num_envs,
            device="cpu",
            seed=seed,
            motion=g1_clip,
            model=g1_model,
            backend_options={"num_threads": num_threads},
            static_outputs=static_outputs,
            compile_backend=compile_backend,
        )

    return factory


@pytest.fixture
def make_warp_cpu_env(g1_model, g1_clip) -> Callable[..., G1TrackingEnv]:
    """Factory of G1 envs on MJWarp over Warp's CPU device (a staged backend without CUDA).

    ``make_warp_cpu_env(num_envs, seed=1, **env_kwargs)``; skips without mujoco_warp.
    """
    pytest.importorskip("mujoco_warp")
    from trainer.sim.mjwarp import MjWarpBackend

    def factory(num_envs: int, seed: int = 1, **kwargs) -> G1TrackingEnv:
        backend = MjWarpBackend(
            g1_model,
            num_envs,
            torch.device("cpu"),
            default_scene_cfg(),
            warp_device="cpu",
            _allow_cpu_for_tests=True,
        )
        return G1TrackingEnv(default_task_cfg(), backend, g1_model, g1_clip, seed=seed, **kwargs)

    return factory


@pytest.fixture
def make_cuda_env(g1_model, g1_clip) -> Callable[..., G1TrackingEnv]:
    """Factory of G1 envs on MJWarp over CUDA (``gpu`` tests only).

    ``make_cuda_env(num_envs, **make_env_kwargs)``, seed 11, ``default_task_cfg()``.
    """

    def factory(num_envs: int, **kwargs) -> G1TrackingEnv:
        return make_env(
            default_task_cfg(),
            sim_backend="mjwarp",
            num_envs=num_envs,
            device="cuda",
            seed=11,
            motion=g1_clip,
            model=g1_model,
            **kwargs,
        )

    return factory


LEARNER_FALLBACK_REASON = "graph warm-up/capture failed: BackendCompilerFailed('x')"


@pytest.fixture
def learner_fell_back(monkeypatch: pytest.MonkeyPatch) -> str:
    """Every learner reports a fusion fallback at capture; returns the reason it records."""
    from trainer.algo.learner import FlashSacLearner

    honest = FlashSacLearner.cuda_graph_diagnostics

    def fell_back(self: FlashSacLearner) -> dict:
        fallback = {"feature": "fusion", "reason": LEARNER_FALLBACK_REASON}
        return {**honest(self), "fallbacks": [fallback]}

    monkeypatch.setattr(FlashSacLearner, "cuda_graph_diagnostics", fell_back)
    return LEARNER_FALLBACK_REASON
