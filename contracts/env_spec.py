"""``EnvSpec``: the sizes an environment reports and everything downstream is sized from.

The env (``G1TrackingEnv.spec``) reports its actor-observation, critic-observation and action
widths (docs/task.md "Observations"); the replay row layout follows from them (the packed
rows of docs/architecture.md). The collector ring, the replay ingress, the device replay and the learner take
their widths from one ``EnvSpec`` instead of repeating the numbers.

Pure Python: no torch, so the harness and preflight can size memory without building an env.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REPLAY_ROW_SCALARS", "EnvSpec", "RowLayout"]

REPLAY_ROW_SCALARS = 3
"""Scalar columns of a replay row: reward, done, trunc."""


@dataclass(frozen=True)
class RowLayout:
    """Column slices of one packed fp32 replay row, in storage order: obs, next_obs, action,
    reward, done, trunc, critic_obs, next_critic_obs."""

    obs_dim: int
    critic_obs_dim: int
    action_dim: int

    @property
    def width(self) -> int:
        """``2 obs + action + 3 + 2 critic obs`` columns."""
        return 2 * self.obs_dim + self.action_dim + REPLAY_ROW_SCALARS + 2 * self.critic_obs_dim

    @property
    def obs(self) -> slice:
        return slice(0, self.obs_dim)

    @property
    def next_obs(self) -> slice:
        return slice(self.obs_dim, 2 * self.obs_dim)

    @property
    def action(self) -> slice:
        start = 2 * self.obs_dim
        return slice(start, start + self.action_dim)

    @property
    def reward(self) -> int:
        return 2 * self.obs_dim + self.action_dim

    @property
    def done(self) -> int:
        return self.reward + 1

    @property
    def trunc(self) -> int:
        return self.reward + 2

    @property
    def critic_obs(self) -> slice:
        start = self.reward + REPLAY_ROW_SCALARS
        return slice(start, start + self.critic_obs_dim)

    @property
    def next_critic_obs(self) -> slice:
        start = self.reward + REPLAY_ROW_SCALARS + self.critic_obs_dim
        return slice(start, start + self.critic_obs_dim)


@dataclass(frozen=True)
class EnvSpec:
    """Observation and action widths of an environment, and its replay row layout."""

    obs_dim: int
    """Actor observation width."""
    critic_obs_dim: int
    """Critic (privileged) observation width."""
    action_dim: int
    """Action width (one position target per actuated joint)."""

    def __post_init__(self) -> None:
        for name in ("obs_dim", "critic_obs_dim", "action_dim"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                msg = f"EnvSpec.{name}={value!r} must be an int >= 1"
                raise ValueError(msg)

    @property
    def row(self) -> RowLayout:
        """The packed replay row of one transition."""
        return RowLayout(self.obs_dim, self.critic_obs_dim, self.action_dim)

    @property
    def row_width(self) -> int:
        """fp32 columns of one replay row (930 for the G1 task)."""
        return self.row.width
