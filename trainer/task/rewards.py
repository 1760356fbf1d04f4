"""Reward terms of the tracking task (docs/task.md §rewards).

Each term is a pure function returning ``[num_envs]``. The six tracking terms are
``exp(−e/σ²)`` of an error e against the reference at frame k; body position/orientation
terms compare against the *relative* reference
(:func:`trainer.task.reference.relative_reference`), which re-poses the reference around
the robot's anchor with a yaw-only rotation. :mod:`trainer.task.terms` binds each term to its
``env.rewards`` entry; the step reward is ``ctrl_dt · Σ wᵢ·termᵢ``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainer.task.math import (
    quat_error_angle,
)
from trainer.task.state import TrackedState

__all__ = [
    "action_rate_l2",
    "joint_limit",
    "motion_body_ang_vel",
    "motion_body_lin_vel",
    "motion_body_ori",
    "motion_body_pos",
    "motion_global_root_ori",
    "motion_global_root_pos",
    "undesired_contacts",
]


def motion_global_root_pos(ref: TrackedState, robot: TrackedState, anchor: int, sigma: float):
    """exp(−‖p*_a − p_a‖²/σ²), world frame. [N]"""
    err = (ref.body_pos_w[:, anchor] - robot.body_pos_w[:, anchor]).square().sum(-1)
    return torch.exp(-err / sigma**2)


def motion_global_root_ori(ref: TrackedState, robot: TrackedState, anchor: int, sigma: float):
    """exp(−err(q*_a, q_a)²/σ²). [N]"""
    err = quat_error_angle(ref.body_quat_w[:, anchor], robot.body_quat_w[:, anchor]).square()
    return torch.exp(-err / sigma**2)


def motion_body_pos(rel_body_pos_w: Tensor, robot: TrackedState, sigma: float) -> Tensor:
    """exp(−mean_b ‖p̂_b − p_b‖²/σ²) against the relative reference. [N]"""
    err = (rel_body_pos_w - robot.body_pos_w).square().sum(-1).mean(-1)
    return torch.exp(-err / sigma**2)


def motion_body_ori(rel_body_quat_w: Tensor, robot: TrackedState, sigma: float) -> Tensor:
    """exp(−mean_b err(q̂_b, q_b)²/σ²) against the relative reference. [N]"""
    err = quat_error_angle(rel_body_quat_w, robot.body_quat_w).square().mean(-1)
    return torch.exp(-err / sigma**2)


def motion_body_lin_vel(ref: TrackedState, robot: TrackedState, sigma: float) -> Tensor:
    """exp(−mean_b ‖v*_b − v_b‖²/σ²), world frame, not aligned. [N]"""
    err = (ref.body_lin_vel_w - robot.body_lin_vel_w).square().sum(-1).mean(-1)
    return torch.exp(-err / sigma**2)


def motion_body_ang_vel(ref: TrackedState, robot: TrackedState, sigma: float) -> Tensor:
    """exp(−mean_b ‖ω*_b − ω_b‖²/σ²), world frame. [N]"""
    err = (ref.body_ang_vel_w - robot.body_ang_vel_w).square().sum(-1).mean(-1)
    return torch.exp(-err / sigma**2)


def action_rate_l2(actions: Tensor, prev_actions: Tensor) -> Tensor:
    """Σ(a_t − a_{t−1})² of raw actions. [N]"""
    return (actions - prev_actions).square().sum(-1)


def joint_limit(joint_pos: Tensor, lower: Tensor, upper: Tensor) -> Tensor:
    """Σⱼ(max(lo − q, 0) + max(q − hi, 0))² over the XML range. [N]"""
    violation = (lower - joint_pos).clamp_min(0.0) + (joint_pos - upper).clamp_min(0.0)
    return violation.square().sum(-1)


def undesired_contacts(robot: TrackedState, body_columns: Tensor, height_m: float) -> Tensor:
    """Number of U bodies whose origin is below ``height_m`` (a height test, no forces). [N]"""
    z = robot.body_pos_w.index_select(1, body_columns)[..., 2]  # [N, 10]
    return (z < height_m).sum(-1).to(robot.body_pos_w.dtype)
