"""What a FlashSAC learner checkpoints: its ``state_dict`` and the in-place restore of one.

The state holds the networks, the target critic, log alpha, every Adam moment and step
count, the three learning-rate schedules, the reward scaler, the exploration noise, the
update counters and, when the run keeps one, the averaged policy
(trainer/rundir/checkpoint.py stores it under ``learner``). The restore copies into the
existing tensors, so graphs the learner already captured stay valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from trainer.algo.policy_average import PolicyAverage

OPTIMIZER_NAMES = ("actor", "critic", "temperature")
"""The learner's optimizers (and their schedules), in the order of ``learner.optimizers``."""
_ADAM_KEYS = ("step", "exp_avg", "exp_avg_sq")
POLICY_AVERAGE_KEY = "policy_average"
"""Where a learner state keeps the averaged policy (``algo.policy_average_rate`` > 0 only)."""


class _Stateful(Protocol):
    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class CheckpointedLearner(Protocol):
    """What of the learner its checkpoint reads and restores (``FlashSacLearner`` is one)."""

    actor: nn.Module
    critic: nn.Module
    critic_target: nn.Module
    log_alpha: Tensor
    optimizers: list[torch.optim.Adam]
    lr_steps: Tensor
    reward_scaler: _Stateful
    exploration: _Stateful
    update_count: int
    iterations: int
    updates_per_step: int
    policy_average: PolicyAverage | None


def state_dict(learner: CheckpointedLearner) -> dict[str, Any]:
    """A detached copy of everything a resume restores."""
    optimizers = {}
    for name, opt in zip(OPTIMIZER_NAMES, learner.optimizers, strict=True):
        states = [opt.state[p] for p in opt.param_groups[0]["params"]]
        optimizers[name] = {key: [s[key].detach().clone() for s in states] for key in _ADAM_KEYS}
    steps = learner.lr_steps.tolist()
    average = learner.policy_average
    return {
        **({} if average is None else {POLICY_AVERAGE_KEY: average.state_dict()}),
        "actor": _cloned(learner.actor),
        "critic": _cloned(learner.critic),
        "critic_target": _cloned(learner.critic_target),
        "log_alpha": learner.log_alpha.detach().clone(),
        "optimizers": optimizers,
        "schedulers": {name: int(step) for name, step in zip(OPTIMIZER_NAMES, steps, strict=True)},
        "reward_scaler": learner.reward_scaler.state_dict(),
        "exploration": learner.exploration.state_dict(),
        "update_count": learner.update_count,
        "iterations": learner.iterations,
    }


def load_state_dict(learner: CheckpointedLearner, state: dict[str, Any]) -> None:
    """Restore ``state_dict`` output into ``learner``'s own tensors."""
    learner.actor.load_state_dict(state["actor"])
    learner.critic.load_state_dict(state["critic"])
    learner.critic_target.load_state_dict(state["critic_target"])
    with torch.no_grad():
        learner.log_alpha.copy_(state["log_alpha"])
        for name, opt in zip(OPTIMIZER_NAMES, learner.optimizers, strict=True):
            saved = state["optimizers"][name]
            params = opt.param_groups[0]["params"]
            if len(saved["exp_avg"]) != len(params):
                raise ValueError(
                    f"checkpoint optimizer {name!r} has {len(saved['exp_avg'])} tensors, expected {len(params)}"
                )
            for i, p in enumerate(params):
                for key in _ADAM_KEYS:
                    opt.state[p][key].copy_(saved[key][i])
        sched = state["schedulers"]
        learner.lr_steps.copy_(
            torch.tensor([sched[name] for name in OPTIMIZER_NAMES], dtype=torch.float32)
        )
    learner.reward_scaler.load_state_dict(state["reward_scaler"])
    learner.exploration.load_state_dict(state["exploration"])
    average = learner.policy_average
    if average is not None:
        saved_average = state.get(POLICY_AVERAGE_KEY)
        if saved_average is None:
            average.restart()  # a checkpoint of a run without one: start from its actor
        else:
            average.load_state_dict(saved_average)
    learner.update_count = int(state["update_count"])
    learner.iterations = int(
        state.get("iterations", learner.update_count // learner.updates_per_step)
    )


def _cloned(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in module.state_dict().items()}


def policy_state(state: Mapping[str, Any]) -> tuple[str, Any]:
    """The policy a checkpoint's learner state deploys, and its key: the averaged policy
    where the run kept one, else the actor (evaluation, play and export read this)."""
    key = POLICY_AVERAGE_KEY if POLICY_AVERAGE_KEY in state else "actor"
    return key, state.get(key)
