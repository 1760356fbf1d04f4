"""Terminations and truncations of the tracking task (docs/task.md §terminations-and-truncations), each a ``[num_envs]`` bool.

Terminal conditions (``anchor_pos``, ``anchor_ori``, ``ee_body_pos``) end the episode without
bootstrapping; truncations (``time_out``, ``motion_clip_end``) bootstrap from the terminal
observation. :func:`split_done` applies our rule that ``truncated`` excludes terminated rows.
"""

from __future__ import annotations

from torch import Tensor

from trainer.task.math import projected_gravity_z
from trainer.task.state import TrackedState

__all__ = [
    "CONDITION_NAMES",
    "TERMINATION_NAMES",
    "TRUNCATION_NAMES",
    "anchor_ori",
    "anchor_pos",
    "ee_body_pos",
    "motion_clip_end",
    "split_done",
    "time_out",
]

TERMINATION_NAMES = ("anchor_pos", "anchor_ori", "ee_body_pos")
TRUNCATION_NAMES = ("time_out", "motion_clip_end")
CONDITION_NAMES = (*TERMINATION_NAMES, *TRUNCATION_NAMES)
"""Every condition in the env's order: the columns of ``StepResult.conditions``."""


def time_out(episode_step: Tensor, max_episode_steps: int) -> Tensor:
    """episode_step ≥ max_episode_steps (500)."""
    return episode_step >= max_episode_steps


def motion_clip_end(frame: Tensor, last_frame: Tensor) -> Tensor:
    """k ≥ the row's last clip frame (T − 1 for one clip)."""
    return frame >= last_frame


def anchor_pos(ref: TrackedState, robot: TrackedState, anchor: int, threshold: float) -> Tensor:
    """|p*_a.z − p_a.z| > threshold."""
    return (ref.body_pos_w[:, anchor, 2] - robot.body_pos_w[:, anchor, 2]).abs() > threshold


def anchor_ori(ref: TrackedState, robot: TrackedState, anchor: int, threshold: float) -> Tensor:
    """|g(q*_a) − g(q_a)| > threshold, g = projected-gravity z."""
    g_ref = projected_gravity_z(ref.body_quat_w[:, anchor])
    g_robot = projected_gravity_z(robot.body_quat_w[:, anchor])
    return (g_ref - g_robot).abs() > threshold


def ee_body_pos(
    rel_body_pos_w: Tensor, robot: TrackedState, ee_columns: Tensor, threshold: float
) -> Tensor:
    """Any EE body with |p̂_b.z − p_b.z| > threshold (p̂_b.z = p*_b.z: heights only)."""
    dz = rel_body_pos_w.index_select(1, ee_columns)[..., 2]
    dz = dz - robot.body_pos_w.index_select(1, ee_columns)[..., 2]
    return (dz.abs() > threshold).any(-1)


def split_done(terminal: Tensor, truncation: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Return ``(terminated, truncated, done)``; truncated excludes terminated rows."""
    truncated = truncation & ~terminal
    return terminal, truncated, terminal | truncation
