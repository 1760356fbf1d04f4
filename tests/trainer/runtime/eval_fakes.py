"""Fakes for the in-run evaluation hand-shake (importable in the spawned collector).

``ActorLearner`` is the runtime fakes' learner whose checkpoints hold a real actor, so the
collector's evaluation gets as far as the env; ``DyingEvalEnv`` kills its own process the
moment the evaluation touches its motion clip (a collector crash mid-evaluation).
"""

from __future__ import annotations

import os
import signal

import g1soak_runtime_fakes as fakes
import torch

from trainer.algo.networks import Actor


class ActorLearner(fakes.FakeLearner):
    def state_dict(self) -> dict:
        torch.manual_seed(0)
        return {"actor": Actor(160, 29, 16, 1).state_dict(), "updates": self.updates}


class DyingEvalEnv(fakes.FakeEnv):
    @property
    def max_episode_steps(self) -> int:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")


def make_dying_eval_env(*, num_envs: int, device: str, **kwargs) -> DyingEvalEnv:
    return DyingEvalEnv(num_envs, device, **kwargs)
