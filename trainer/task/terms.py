"""The reward term table: every term of ``env.rewards`` bound to its function (docs/task.md).

``env.rewards.<term>: {weight, sigma}`` (:class:`~trainer.task.config.RewardTerm`) holds the
values; :data:`TERMS` binds each name of :data:`~trainer.task.config.REWARD_TERM_NAMES` to
the function of :mod:`trainer.task.rewards` that computes it from one :class:`TermInputs`.
:class:`RewardTable` evaluates all of them into one ``[N, 9]`` tensor in that order, so the
weighting and the step reward ``ctrl_dt · Σ wᵢ·termᵢ`` are one product and one sum.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from trainer.task import rewards as rew
from trainer.task.config import REWARD_TERM_NAMES, RewardTerm
from trainer.task.state import TrackedState

__all__ = ["TERMS", "RewardTable", "TermConstants", "TermInputs"]


@dataclass(frozen=True)
class TermConstants:
    """What the terms read that is fixed for the env's lifetime."""

    anchor: int
    """Tracked-body column of the anchor."""
    joint_lower: Tensor
    """[29] XML joint range, lower bound."""
    joint_upper: Tensor
    """[29] XML joint range, upper bound."""
    undesired_columns: Tensor
    """Tracked-body columns of the undesired-contact bodies."""
    contact_height_m: float
    """``env.undesired_contact_height_m``."""


@dataclass(frozen=True)
class TermInputs:
    """What the terms read at one step: the states and the env's relative reference."""

    ref: TrackedState
    robot: TrackedState
    rel_body_pos: Tensor
    """[N, 14, 3] relative reference positions (built at the previous observation)."""
    rel_body_quat: Tensor
    """[N, 14, 4] relative reference orientations."""
    actions: Tensor
    """[N, 29] a_t."""
    prev_actions: Tensor
    """[N, 29] a_{t−1}."""


TermFn = Callable[[TermInputs, TermConstants, float | None], Tensor]
"""A term: ``(inputs, constants, sigma) → [N]`` (sigma is None for a penalty term)."""

TERMS: dict[str, TermFn] = {
    "motion_global_root_pos": lambda x, c, s: rew.motion_global_root_pos(
        x.ref, x.robot, c.anchor, s
    ),
    "motion_global_root_ori": lambda x, c, s: rew.motion_global_root_ori(
        x.ref, x.robot, c.anchor, s
    ),
    "motion_body_pos": lambda x, c, s: rew.motion_body_pos(x.rel_body_pos, x.robot, s),
    "motion_body_ori": lambda x, c, s: rew.motion_body_ori(x.rel_body_quat, x.robot, s),
    "motion_body_lin_vel": lambda x, c, s: rew.motion_body_lin_vel(x.ref, x.robot, s),
    "motion_body_ang_vel": lambda x, c, s: rew.motion_body_ang_vel(x.ref, x.robot, s),
    "action_rate_l2": lambda x, c, s: rew.action_rate_l2(x.actions, x.prev_actions),
    "joint_limit": lambda x, c, s: rew.joint_limit(x.robot.joint_pos, c.joint_lower, c.joint_upper),
    "undesired_contacts": lambda x, c, s: rew.undesired_contacts(
        x.robot, c.undesired_columns, c.contact_height_m
    ),
}
"""Term name → function, in :data:`~trainer.task.config.REWARD_TERM_NAMES` order."""

if tuple(TERMS) != REWARD_TERM_NAMES:  # the table and the config's term list are one list
    msg = f"TERMS {tuple(TERMS)} differ from REWARD_TERM_NAMES {REWARD_TERM_NAMES}"
    raise AssertionError(msg)


class RewardTable:
    """The configured terms of one env: their weights as a vector and their sigmas."""

    names = REWARD_TERM_NAMES

    def __init__(
        self, rewards: Mapping[str, RewardTerm], constants: TermConstants, device: torch.device
    ) -> None:
        self.constants = constants
        self.weights = torch.as_tensor(
            [rewards[name].weight for name in self.names], dtype=torch.float32, device=device
        )  # [9] in REWARD_TERM_NAMES order
        self._bound = tuple((TERMS[name], rewards[name].sigma) for name in self.names)

    def terms(self, inputs: TermInputs) -> dict[str, Tensor]:
        """Unweighted terms by name. [N] each"""
        c = self.constants
        return {
            name: fn(inputs, c, sigma)
            for name, (fn, sigma) in zip(self.names, self._bound, strict=True)
        }

    def values(self, inputs: TermInputs) -> Tensor:
        """Unweighted terms stacked in :attr:`names` order. [N, 9]"""
        c = self.constants
        return torch.stack([fn(inputs, c, sigma) for fn, sigma in self._bound], dim=-1)
