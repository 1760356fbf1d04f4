"""Test doubles honouring the env and learner interfaces of docs/architecture.md.

Importable as a top-level module in the spawned collector (the tests put this directory
on sys.path, which spawn passes to the child). The fake env encodes (tick, env id) in
observation columns 0 and 1, so the fake replay can check the commit order of every row.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from dataclasses import dataclass

import torch

from contracts.env_spec import EnvSpec
from trainer.algo.fusion import CycleFusion
from trainer.config.defaults import default_algo_cfg, default_scene_cfg, default_task_cfg

OBS, COBS, ACT = 160, 289, 29
SPEC = EnvSpec(obs_dim=OBS, critic_obs_dim=COBS, action_dim=ACT)


class FakeBackendError(RuntimeError):
    """Raised by the fake simulator backend; typed like a trainer.sim error."""


FakeBackendError.__module__ = "trainer.sim.fake"


@dataclass
class StepResult:
    obs: torch.Tensor
    critic_obs: torch.Tensor
    terminal_obs: torch.Tensor
    terminal_critic_obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    reward_terms: dict
    episode_return: torch.Tensor
    episode_length: torch.Tensor


class FakeBackend:
    num_threads = None  # no CPU physics pool

    def close(self) -> None:
        """Nothing native to free."""

    def diagnostics(self) -> dict:
        return {
            "available": False,
            "backend_type": "fake",
            "unavailable_reason": "fake backend has no diagnostics",
        }


class FakeEnv:
    """Episodes of ``episode_len`` steps (truncation); env 0 terminates every 3rd step."""

    spec = SPEC

    def __init__(
        self,
        num_envs: int,
        device: str,
        episode_len: int = 4,
        fail_at_tick: int | None = None,
        backend_fail_at_tick: int | None = None,
        hang_at_tick: int | None = None,
        kill_self_at_tick: int | None = None,
        step_sleep_s: float = 0.0,
        build_sleep_s: float = 0.0,
        fail_at_build: bool = False,
        build_marker: str | None = None,
        built_marker: str | None = None,
    ) -> None:
        if build_marker is not None:
            open(build_marker, "w").close()  # "the env build has begun"
        time.sleep(build_sleep_s)  # a slow env build (compile, graph capture)
        if fail_at_build:
            raise FakeBackendError("the fake backend could not load its model")
        if built_marker is not None:
            open(built_marker, "w").close()  # "the env build has ended"
        self.setup_seconds = {"build": build_sleep_s}
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.backend = FakeBackend()
        self.motion = None  # no clip: the manifest records no motion
        self.episode_len = episode_len
        self.fail_at_tick = fail_at_tick
        self.backend_fail_at_tick = backend_fail_at_tick
        self.hang_at_tick = hang_at_tick
        self.kill_self_at_tick = kill_self_at_tick
        self.step_sleep_s = step_sleep_s
        self.tick = 0
        self.length = torch.zeros(num_envs, device=self.device)
        self.ret = torch.zeros(num_envs, device=self.device)

    def _obs(self, tick: int) -> tuple[torch.Tensor, torch.Tensor]:
        obs = torch.zeros(self.num_envs, OBS, device=self.device)
        obs[:, 0] = tick
        obs[:, 1] = torch.arange(self.num_envs, device=self.device)
        cobs = torch.zeros(self.num_envs, COBS, device=self.device)
        cobs[:, 0] = tick
        return obs, cobs

    def reset_all(self):
        return self._obs(0)

    def check_health(self) -> None:
        """The fake simulator never overflows; its failures are the constructor's options."""

    def step(self, actions: torch.Tensor) -> StepResult:
        t = self.tick
        if self.fail_at_tick is not None and t == self.fail_at_tick:
            raise ValueError(f"fake env failure at tick {t}")
        if self.backend_fail_at_tick is not None and t == self.backend_fail_at_tick:
            raise FakeBackendError(f"fake backend failure at tick {t}")
        if self.kill_self_at_tick is not None and t == self.kill_self_at_tick:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.hang_at_tick is not None and t == self.hang_at_tick:
            while True:
                time.sleep(0.05)
        if self.step_sleep_s:
            time.sleep(self.step_sleep_s)
        assert actions.shape == (self.num_envs, ACT)
        self.tick += 1
        reward = torch.full((self.num_envs,), 0.5, device=self.device)
        self.length += 1
        self.ret += reward
        truncated = self.length >= self.episode_len
        terminated = torch.zeros_like(truncated)
        terminated[0] = self.tick % 3 == 0
        truncated &= ~terminated
        done = terminated | truncated
        ep_return, ep_length = self.ret.clone(), self.length.clone()
        self.length = torch.where(done, torch.zeros_like(self.length), self.length)
        self.ret = torch.where(done, torch.zeros_like(self.ret), self.ret)
        obs, cobs = self._obs(self.tick)
        return StepResult(
            obs=obs,
            critic_obs=cobs,
            terminal_obs=obs.clone(),
            terminal_critic_obs=cobs.clone(),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            reward_terms={"tracking": reward.mean(), "action_rate": -0.1 * reward.mean()},
            episode_return=ep_return,
            episode_length=ep_length,
        )


def make_fake_env(*, num_envs: int, device: str, **kwargs) -> FakeEnv:
    return FakeEnv(num_envs, device, **kwargs)


def make_warp_cpu_env(*, num_envs: int, device: str, motion_path: str, seed: int = 1):
    """The real G1 env on MJWarp over Warp's CPU device (a staged backend without CUDA).

    It zeroes non-finite actions on the device and reports them only in ``check_health``,
    exactly as on the GPU; ``motion_path`` is an NPZ the test wrote.
    """
    from trainer.sim.mjwarp import MjWarpBackend
    from trainer.sim.scene import build_g1_model
    from trainer.task.g1_tracking import G1TrackingEnv
    from trainer.task.motion import load_motion

    model = build_g1_model(default_scene_cfg())
    backend = MjWarpBackend(
        model,
        num_envs,
        torch.device(device),
        default_scene_cfg(),
        warp_device="cpu",
        _allow_cpu_for_tests=True,
    )
    clip = load_motion(motion_path, model)
    return G1TrackingEnv(default_task_cfg(), backend, model, clip, seed=seed)


def pack(obs, next_obs, action, reward, terminated, truncated, cobs, next_cobs):
    done = (terminated | truncated).float()
    trunc = (truncated & ~terminated).float()
    return torch.cat(
        [obs, next_obs, action, reward[:, None], done[:, None], trunc[:, None], cobs, next_cobs],
        dim=1,
    )


KEPT: list[torch.Tensor] = []
"""What ``pack_and_keep`` leaked (lives in the collector process)."""


def pack_and_keep(obs, *rest):
    """``pack`` that also keeps the ring slot it was given (a collector leaking a shared view)."""
    KEPT.append(obs)
    return pack(obs, *rest)


class FakeReplay:
    """Checks that rows arrive in tick order, then env order (docs/flashsac.md §replay)."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.committed = 0

    def commit(self, rows: torch.Tensor) -> None:
        n = rows.shape[0]
        index = torch.arange(self.committed, self.committed + n)
        expected_tick = (index // self.num_envs).float()
        expected_env = (index % self.num_envs).float()
        host = rows.cpu()
        if not torch.equal(host[:, 0], expected_tick) or not torch.equal(host[:, 1], expected_env):
            raise AssertionError(f"replay rows out of order at committed={self.committed}")
        self.committed += n


class FakeLearner:
    def __init__(
        self,
        num_envs: int,
        device: torch.device,
        raise_at_iteration: int | None = None,
        fail_at_build: bool = False,
        wait_for_file: str | None = None,
        keep_inputs: bool = False,
        nan_actions: bool = False,
        check_order: bool = True,
        capture_needs_file: str | None = None,
    ) -> None:
        self.kept: list[torch.Tensor] | None = [] if keep_inputs else None
        self.capture_needs_file = capture_needs_file
        if fail_at_build:
            raise MemoryError("the fake learner could not allocate its replay")
        if wait_for_file is not None:  # e.g. the env build's marker: proves the overlap
            deadline = time.monotonic() + 120
            while not os.path.exists(wait_for_file):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{wait_for_file} never appeared")
                time.sleep(0.02)
        # Only the fake env numbers its rows; a real env's rows are just counted.
        self.replay = (
            FakeReplay(num_envs) if check_order else DeviceReplayStandIn(num_envs * 64, device)
        )
        self.device = device
        self.updates = 0
        self.raise_at_iteration = raise_at_iteration
        self.nan_actions = nan_actions
        self.committed_at_update: list[int] = []
        self.lr_horizons: list[int] = []

    def act(self, obs: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """A constant action; NaN in every row when built with ``nan_actions`` (diverged)."""
        if self.kept is not None:  # a learner leaking the ring's views
            self.kept[:] = [obs, done]
        value = math.nan if self.nan_actions else 0.1
        return torch.full((obs.shape[0], ACT), math.tanh(value), device=obs.device)

    def acting(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()  # the fake acts on the caller's stream

    def prepare_iteration(self) -> None:
        self.committed_at_update.append(self.replay.committed)

    def set_lr_horizon(self, iterations: int) -> None:
        self.lr_horizons.append(iterations)

    def update_cycle(self) -> dict:
        self.updates += 1
        if self.raise_at_iteration is not None and self.updates == self.raise_at_iteration:
            raise FloatingPointError(f"fake learner failure at iteration {self.updates}")
        return {"Loss/critic": torch.tensor(1.0 / self.updates), "Loss/actor": torch.tensor(-0.5)}

    def capture_graphs(self) -> None:
        """Nothing to capture (no CUDA graphs); with ``capture_needs_file``, fails unless that
        file exists (e.g. the env build's end marker: proves no overlap)."""
        if self.capture_needs_file is not None and not os.path.exists(self.capture_needs_file):
            raise RuntimeError(f"captured before {self.capture_needs_file} existed")

    def cuda_graph_diagnostics(self) -> dict:
        """The real learner's shape on the CPU: nothing attempted, nothing fell back."""
        off = {"requested": False, "enabled": False, "disable_reason": "fake learner"}
        flags = dict.fromkeys(CycleFusion.names(), False)
        return {
            **off,
            "act_graph": dict(off),
            "compile": {**off, "compile_threads": None},
            "fusion": {"requested": flags, "enabled": dict(flags), "disable_reason": None},
            "act_stream": {"enabled": False, "priority": None},
            "precision": "fp32",
            "tf32_matmul": False,
            "fallbacks": [],
        }

    def state_dict(self) -> dict:
        return {"updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.updates = int(state["updates"])


def make_run_context(
    run_dir, *, training: dict | None = None, algo: dict | None = None, device: str = "cpu"
):
    """A real RunContext for a tiny run on ``device`` (env/learner come from hooks)."""
    from dataclasses import replace
    from pathlib import Path

    from trainer.config.schema import RunContext, SeedInfo, TrainingCfg

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    training_cfg = TrainingCfg(
        task_name="G1MotionTracking",
        sim_backend="mujoco",
        play_only=False,
        no_play=True,
        log_dir=str(run_dir),
        device=device,
        inference_slot_capacity=1,
        replay_ingress_depth=2,
        replay_ingress_slot_rows=None,
        collector_metrics_interval=1,
        cuda_process_sharing=None,
        collector_stream_priority="default",
        collector_placement="process",
        env_steps_per_sync=1,
        log_interval=1,
        motion_hub="skip",
        resume_from=None,
        duration_seconds=None,
    )
    if training:
        training_cfg = replace(training_cfg, **training)
    algo_cfg = default_algo_cfg(
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
        learner_device=device,
        collector_device=device,
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


def gpu_sleep_ms(ms: float) -> None:
    """Occupy the current CUDA stream for about ``ms`` (one spin kernel, no host sync)."""
    if ms > 0:
        torch.cuda._sleep(int(ms * 1.98e6))  # H200 SM clock ~1.98 GHz


class GpuWorkEnv(FakeEnv):
    """FakeEnv whose step also keeps the GPU busy for ``gpu_ms`` (stands in for MJWarp)."""

    def __init__(self, num_envs: int, device: str, gpu_ms: float = 0.0, **kwargs) -> None:
        super().__init__(num_envs, device, **kwargs)
        self.gpu_ms = gpu_ms

    def step(self, actions: torch.Tensor) -> StepResult:
        gpu_sleep_ms(self.gpu_ms)
        return super().step(actions)


def make_gpu_env(*, num_envs: int, device: str, **kwargs) -> GpuWorkEnv:
    return GpuWorkEnv(num_envs, device, **kwargs)


class DeviceReplayStandIn:
    """A device ring that copies committed rows (no host sync), like DeviceReplay.commit."""

    def __init__(self, capacity: int, device: torch.device) -> None:
        self.rows = torch.zeros(capacity, 930, device=device)
        self.committed = 0

    def commit(self, rows: torch.Tensor) -> None:
        n = rows.shape[0]
        start = self.committed % self.rows.shape[0]
        self.rows[start : start + n].copy_(rows, non_blocking=True)
        self.committed += n


class GpuWorkLearner(FakeLearner):
    """FakeLearner with a device replay and an update that keeps the GPU busy ``update_ms``."""

    def __init__(
        self, num_envs: int, device: torch.device, update_ms: float = 0.0, check_order: bool = False
    ):
        super().__init__(num_envs, device)
        if not check_order:
            self.replay = DeviceReplayStandIn(num_envs * 64, device)
        self.update_ms = update_ms
        self.w = torch.randn(160, 29, device=device) * 0.01
        self.loss = torch.zeros((), device=device)

    def act(self, obs: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        return torch.tanh(obs @ self.w)

    def update_cycle(self) -> dict:
        self.updates += 1
        gpu_sleep_ms(self.update_ms)
        self.loss.add_(1.0)
        return {"Loss/critic": self.loss, "Loss/actor": self.loss * -0.5}
