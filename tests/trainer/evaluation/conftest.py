"""Evaluation fixtures: a replay backend that puts every robot exactly on the reference.

``ReplayBackend`` is the CPU MuJoCo backend whose ``step`` ignores the policy and writes the
reference state of the frame each row is about to be scored at (plus a constant offset of
the root and of some joints, if asked), then forwards: the evaluation's hand-checkable ground
truth.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
import torch

from trainer.config.defaults import default_scene_cfg, default_task_cfg
from trainer.sim.mujoco_cpu import MujocoCpuBackend
from trainer.sim.scene import JOINT_NAMES
from trainer.task.g1_tracking import G1TrackingEnv
from trainer.task.math import quat_apply_inverse
from trainer.task.motion import MotionClip


class ReplayBackend(MujocoCpuBackend):
    """Kinematic playback of the clip: after ``step`` each row *is* the reference at the
    env's current frame (the frame the step is scored against), its root shifted by
    ``offset`` and each joint of ``joint_offset`` (name → rad) turned by its amount."""

    def __init__(
        self,
        model,
        num_envs: int,
        clip: MotionClip,
        offset=(0.0, 0.0, 0.0),
        offset_from: int = 0,
        joint_offset: dict[str, float] | None = None,
    ) -> None:
        super().__init__(model, num_envs, torch.device("cpu"), default_scene_cfg(), num_threads=1)
        self.clip = clip
        self.offset = torch.tensor(offset, dtype=torch.float32)
        self.joint_offset = torch.zeros(len(JOINT_NAMES))
        for name, rad in (joint_offset or {}).items():
            self.joint_offset[JOINT_NAMES.index(name)] = rad
        self.offset_from = offset_from
        """The offsets apply from this frame on (a later clip of a clip set only)."""
        self.frames: Callable[[], torch.Tensor] | None = None  # set once the env exists

    def reference_qpos_qvel(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = frames.numpy()
        c = self.clip
        shifted = torch.as_tensor(f >= self.offset_from, dtype=torch.float32)[:, None]
        pos = torch.as_tensor(c.body_pos_w[f, 0]) + shifted * self.offset
        quat = torch.as_tensor(c.body_quat_w[f, 0])
        ang_b = quat_apply_inverse(quat, torch.as_tensor(c.body_ang_vel_w[f, 0]))
        joints = torch.as_tensor(c.joint_pos[f]) + shifted * self.joint_offset
        qpos = torch.cat((pos, quat, joints), dim=-1)
        lin = torch.as_tensor(c.body_lin_vel_w[f, 0])
        qvel = torch.cat((lin, ang_b, torch.as_tensor(c.joint_vel[f])), dim=-1)
        return qpos, qvel

    def step(self, ctrl: torch.Tensor) -> None:
        assert self.frames is not None
        qpos, qvel = self.reference_qpos_qvel(self.frames())
        self.reset_rows(torch.ones(self.num_envs, dtype=torch.bool), qpos, qvel)


SHORT_FRAMES = 80
SHORT_EPISODE_S = 1.0
"""The short clip and time limit of replay envs: frame-0 episodes end at the time limit
(50 steps), late uniform starts at the clip end."""


@pytest.fixture(scope="module")
def short_clip(g1_clip) -> MotionClip:
    """The first :data:`SHORT_FRAMES` frames of the synthetic clip (fast rollouts)."""
    cut = {
        name: getattr(g1_clip, name)[:SHORT_FRAMES]
        for name in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w")
        + ("body_lin_vel_w", "body_ang_vel_w")
    }
    return dataclasses.replace(g1_clip, **cut, clip_ends=np.array([SHORT_FRAMES]))


TWO_CLIP_SPLIT = 40


@pytest.fixture(scope="module")
def two_clip_set(short_clip) -> MotionClip:
    """The short clip cut into a clip set of two named 40-frame clips."""
    return dataclasses.replace(
        short_clip,
        clip_ends=np.array([TWO_CLIP_SPLIT, SHORT_FRAMES]),
        clip_names=("first", "second"),
    )


@pytest.fixture
def make_replay_env(g1_model, short_clip) -> Callable[..., G1TrackingEnv]:
    """``make_replay_env(num_envs, offset=(0, 0, 0), clip=None, offset_from=0,
    joint_offset=None)``: a G1 env on ReplayBackend over the short clip (or ``clip``) with a
    1 s time limit."""

    def factory(
        num_envs: int,
        offset=(0.0, 0.0, 0.0),
        clip: MotionClip | None = None,
        offset_from: int = 0,
        joint_offset: dict[str, float] | None = None,
    ) -> G1TrackingEnv:
        motion = short_clip if clip is None else clip
        backend = ReplayBackend(g1_model, num_envs, motion, offset, offset_from, joint_offset)
        cfg = default_task_cfg(episode_length_s=SHORT_EPISODE_S)
        env = G1TrackingEnv(cfg, backend, g1_model, motion, cuda_graph=False)
        backend.frames = lambda: env.frame
        return env

    return factory
