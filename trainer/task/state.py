"""The tracked-body state the task terms read: the same shape for robot and reference.

Both the robot (read from a :class:`~trainer.sim.backend.SimBackend`) and the motion
reference (gathered from the device motion table at frame k) are described by a
:class:`TrackedState`, so every observation, reward and termination term is a pure function
of two of them (docs/task.md §observations, §rewards, §terminations-and-truncations). Body tensors hold the 14 tracked bodies in §tracked-bodies
order; the anchor is column ``ANCHOR_TRACKED_INDEX`` (torso_link).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

__all__ = ["TrackedState"]


@dataclass(frozen=True)
class TrackedState:
    """Joint and tracked-body state of ``num_envs`` rows (world frame, quaternions wxyz)."""

    joint_pos: Tensor
    """[num_envs, 29]"""
    joint_vel: Tensor
    """[num_envs, 29]"""
    body_pos_w: Tensor
    """[num_envs, 14, 3]"""
    body_quat_w: Tensor
    """[num_envs, 14, 4]"""
    body_lin_vel_w: Tensor
    """[num_envs, 14, 3] world velocity of each body origin"""
    body_ang_vel_w: Tensor
    """[num_envs, 14, 3] world angular velocity"""
