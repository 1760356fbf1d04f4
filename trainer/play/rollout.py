"""The deterministic policy over the whole clip: one CPU MuJoCo env, from frame 0 to the end.

Play always simulates with CPU MuJoCo (one env), whatever backend trained the policy: the
task code is shared, so the physics is the training task's. Three things differ from a
training episode, by design (docs/play.md):

- the policy acts with its mean, ``tanh(mu)`` (no exploration noise);
- no observation noise and no reset noise: the robot starts exactly on the reference's
  frame 0 and sees clean observations;
- no early termination and no time-out: the episode runs to the clip's last frame, so a robot
  that falls stays down while the reference goes on.

The rollout records what the renderer and the ONNX check need: the robot's and the reference's
``qpos`` per frame, the mean world position error of the 14 tracked bodies, and the
observations the policy saw.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from contracts.names import Backend

if TYPE_CHECKING:
    import mujoco

    from trainer.task.config import G1TrackingCfg
    from trainer.task.motion import MotionClip

__all__ = ["Rollout", "play_task_cfg", "run_rollout"]

Policy = Callable[[Tensor], Tensor]
"""``obs [1, obs_dim]`` → ``actions [1, action_dim]`` (CPU tensors)."""


@dataclass(frozen=True)
class Rollout:
    """One played clip, frame by frame (``T`` frames, frame 0 = the start pose)."""

    robot_qpos: np.ndarray
    """[T, nq] the simulated robot."""
    ref_qpos: np.ndarray
    """[T, nq] the reference at the same frame (root from the pelvis, then the joints)."""
    body_pos_error_m: np.ndarray
    """[T] mean over the 14 tracked bodies of |p_robot − p_ref| in the world frame, m."""
    observations: np.ndarray
    """[T, obs_dim] float32, the observation the policy acted on at each frame."""
    ctrl_dt: float

    @property
    def num_frames(self) -> int:
        return int(self.robot_qpos.shape[0])


def play_task_cfg(cfg: G1TrackingCfg, num_frames: int) -> G1TrackingCfg:
    """The training task config with noise, resets and early endings switched off."""
    names = [f.name for f in dataclasses.fields(cfg)]
    noise = {name: 0.0 for name in names if name.startswith("noise_")}
    reset = {
        name: (0.0,) * len(value) if isinstance(value, tuple) else 0.0
        for name in names
        if name.startswith("reset_") and (value := getattr(cfg, name)) is not None
    }
    return dataclasses.replace(
        cfg,
        **noise,
        **reset,
        anchor_pos_z_threshold_m=math.inf,
        anchor_ori_threshold=math.inf,
        ee_body_pos_z_threshold_m=math.inf,
        episode_length_s=(num_frames + 1) * cfg.ctrl_dt,
    )


def _ref_qpos(motion: MotionClip, frames: int, nq: int) -> np.ndarray:
    root = 0  # the pelvis, the free joint's body (tracked column 0)
    qpos = np.zeros((frames, nq))
    qpos[:, 0:3] = motion.body_pos_w[:frames, root]
    qpos[:, 3:7] = motion.body_quat_w[:frames, root]
    qpos[:, 7:] = motion.joint_pos[:frames]
    return qpos


def run_rollout(
    policy: Policy, task_cfg: G1TrackingCfg, model: mujoco.MjModel, motion: MotionClip
) -> Rollout:
    """Play the first clip of ``motion`` from frame 0 to its last frame.

    Raises:
        BackendFailure: the physics diverged (non-finite actions or accelerations).
    """
    from trainer.task.g1_tracking import make_env

    frames = int(motion.clip_ends[0])
    cfg = play_task_cfg(task_cfg, frames)
    env = make_env(
        cfg,
        sim_backend=Backend.MUJOCO,
        num_envs=1,
        device="cpu",
        seed=0,
        motion=motion,
        model=model,
        backend_options={"num_threads": 1},
        cuda_graph=False,
        compile_backend=None,
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(
        1
    )  # one env's tiny ops: a thread pool only adds overhead (6x on 2 busy cores)
    try:
        env.reset_rows(torch.ones(1, dtype=torch.bool), frames=torch.zeros(1, dtype=torch.long))
        robot = np.zeros((frames, model.nq))
        error = np.zeros(frames)
        obs = np.zeros((frames, env.actor_obs_dim), dtype=np.float32)
        with torch.no_grad():
            for k in range(frames):
                if k:
                    env.step(policy(env.obs))
                    env.check_health()
                robot[k] = env.backend.qpos[0].double().numpy()
                ref = env.reference_state(env.frame)
                delta = env.robot_state().body_pos_w - ref.body_pos_w
                error[k] = float(delta.norm(dim=-1).mean())
                obs[k] = env.obs[0].numpy()
    finally:
        torch.set_num_threads(threads)
        env.backend.close()
    return Rollout(
        robot_qpos=robot,
        ref_qpos=_ref_qpos(motion, frames, model.nq),
        body_pos_error_m=error,
        observations=obs,
        ctrl_dt=float(task_cfg.ctrl_dt),
    )
