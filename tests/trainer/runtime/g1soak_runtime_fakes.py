"""Test doubles honouring the env and learner interfaces of docs/architecture.md.

Importable as a top-level module in the spawned collector (the tests put this directory
on sys.path, which spawn passes to the child). The fake env encodes (tick, env id) in
observation columns 0 and 1, so the fake replay can check the commit order of every row.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

import torch

OBS, COBS, ACT = 160, 289, 29


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
    def diagnostics(self) -> dict:
        return {
            "available": False,
            "backend_type": "fake",
            "unavailable_reason": "fake backend has no diagnostics",
        }


class FakeEnv:
    """Episodes of ``episode_len`` steps (truncation); env 0 terminates every 3rd step."""

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
    ) -> None:
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.backend = FakeBackend()
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


def pack(obs, next_obs, action, reward, terminated, truncated, cobs, next_cobs):
    done = (terminated | truncated).float()
    trunc = (truncated & ~terminated).float()
    return torch.cat(
        [obs, next_obs, action, reward[:, None], done[:, None], trunc[:, None], cobs, next_cobs],
        dim=1,
    )


class FakeReplay:
    """Checks that rows arrive in tick order, then env order (FLASHSAC.md §7)."""

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
        self, num_envs: int, device: torch.device, raise_at_iteration: int | None = None
    ) -> None:
        self.replay = FakeReplay(num_envs)
        self.device = device
        self.updates = 0
        self.raise_at_iteration = raise_at_iteration
        self.committed_at_update: list[int] = []

    def act(self, obs: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        return torch.tanh(obs[:, 2 : 2 + ACT] * 0.0 + 0.1)

    def prepare_iteration(self) -> None:
        self.committed_at_update.append(self.replay.committed)

    def update_cycle(self) -> dict:
        self.updates += 1
        if self.raise_at_iteration is not None and self.updates == self.raise_at_iteration:
            raise FloatingPointError(f"fake learner failure at iteration {self.updates}")
        return {"Loss/critic": torch.tensor(1.0 / self.updates), "Loss/actor": torch.tensor(-0.5)}

    def cuda_graph_diagnostics(self) -> dict:
        return {"requested": False, "enabled": False, "disable_reason": "fake learner"}

    def state_dict(self) -> dict:
        return {"updates": self.updates}
