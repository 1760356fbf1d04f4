"""Actor (160) and critic (289) observations of the tracking task (docs/task.md §observations).

Terms are pure functions of the reference and robot :class:`TrackedState` at frame k.
:data:`ACTOR_OBS_LAYOUT` and :data:`CRITIC_OBS_LAYOUT` fix each term's offset and width;
tests and docs read them, and :func:`actor_noise_scale` turns the configured noise
half-widths into one ``[160]`` vector so noise is a single fused op per step.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainer.task.config import G1TrackingCfg
from trainer.task.math import quat_apply_inverse, quat_conjugate, quat_mul, rot6_from_quat
from trainer.task.spec import (
    ACTOR_OBS_DIM,
    ACTOR_OBS_LAYOUT,
    CRITIC_OBS_DIM,
    CRITIC_OBS_LAYOUT,
    NUM_TRACKED,
)
from trainer.task.state import TrackedState

__all__ = [
    "ACTOR_OBS_DIM",
    "ACTOR_OBS_LAYOUT",
    "CRITIC_OBS_DIM",
    "CRITIC_OBS_LAYOUT",
    "actor_noise_scale",
    "actor_observation",
    "body_ori_b",
    "body_pos_b",
    "critic_observation",
    "motion_anchor_ori_b",
    "motion_anchor_pos_b",
]


def motion_anchor_pos_b(ref: TrackedState, robot: TrackedState, anchor: int) -> Tensor:
    """R_aᵀ(p*_a − p_a), reference anchor position in the robot anchor frame. [N, 3]"""
    q_a = robot.body_quat_w[:, anchor]
    return quat_apply_inverse(q_a, ref.body_pos_w[:, anchor] - robot.body_pos_w[:, anchor])


def motion_anchor_ori_b(ref: TrackedState, robot: TrackedState, anchor: int) -> Tensor:
    """rot6(R_aᵀ R*_a). [N, 6]"""
    rel = quat_mul(quat_conjugate(robot.body_quat_w[:, anchor]), ref.body_quat_w[:, anchor])
    return rot6_from_quat(rel)


def body_pos_b(robot: TrackedState, anchor: int) -> Tensor:
    """R_aᵀ(p_b − p_a) for the 14 bodies, body-major. [N, 42]"""
    q_a = robot.body_quat_w[:, anchor : anchor + 1].expand(-1, NUM_TRACKED, -1)
    delta = robot.body_pos_w - robot.body_pos_w[:, anchor : anchor + 1]  # [N, 14, 3]
    return quat_apply_inverse(q_a, delta).flatten(1)


def body_ori_b(robot: TrackedState, anchor: int) -> Tensor:
    """rot6(R_aᵀ R_b) for the 14 bodies, body-major. [N, 84]"""
    q_a_inv = quat_conjugate(robot.body_quat_w[:, anchor : anchor + 1])  # [N, 1, 4]
    return rot6_from_quat(quat_mul(q_a_inv, robot.body_quat_w)).flatten(1)


def actor_observation(
    ref: TrackedState,
    robot: TrackedState,
    pelvis_lin_vel_b: Tensor,
    torso_gyro_b: Tensor,
    default_joint_pos: Tensor,
    actions: Tensor,
    anchor: int,
) -> Tensor:
    """The noise-free actor observation in :data:`ACTOR_OBS_LAYOUT` order. [N, 160]"""
    return torch.cat(
        (
            ref.joint_pos,
            ref.joint_vel,
            motion_anchor_pos_b(ref, robot, anchor),
            motion_anchor_ori_b(ref, robot, anchor),
            pelvis_lin_vel_b,
            torso_gyro_b,
            robot.joint_pos - default_joint_pos,
            robot.joint_vel,
            actions,
        ),
        dim=-1,
    )


def critic_observation(
    actor_obs_clean: Tensor, robot: TrackedState, pelvis_lin_vel_b: Tensor, anchor: int
) -> Tensor:
    """The critic observation: noise-free actor terms, body terms, velocimeter again. [N, 289]"""
    return torch.cat(
        (actor_obs_clean, body_pos_b(robot, anchor), body_ori_b(robot, anchor), pelvis_lin_vel_b),
        dim=-1,
    )


def actor_noise_scale(cfg: G1TrackingCfg, device: torch.device) -> Tensor:
    """Per-element uniform noise half-width of the actor observation. [160]"""
    per_term = {
        "motion_anchor_pos_b": cfg.noise_motion_anchor_pos,
        "motion_anchor_ori_b": cfg.noise_motion_anchor_ori,
        "base_lin_vel": cfg.noise_base_lin_vel,
        "base_ang_vel": cfg.noise_base_ang_vel,
        "joint_pos": cfg.noise_joint_pos,
        "joint_vel": cfg.noise_joint_vel,
    }
    scale = torch.zeros(ACTOR_OBS_DIM, dtype=torch.float32)
    for name, offset, width in ACTOR_OBS_LAYOUT:
        scale[offset : offset + width] = per_term.get(name, 0.0)
    return scale.to(device)
