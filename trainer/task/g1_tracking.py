"""``G1TrackingEnv``: the vectorised, tensor-native G1 motion-tracking task (TASK.md).

The env owns no physics: it drives a :class:`~trainer.sim.backend.SimBackend` and computes
every term with batched torch ops on the backend's device, over preallocated buffers. One
control step follows TASK.md §1 exactly:

1. ``a_prev ← a``, ``a ← a_t``, ``ctrl ← q_default + scale·a`` (``a_prev`` with latency).
2. ``backend.step`` (3 substeps, no forward afterwards).
3. ``episode_step += 1``.
4. Terminations, then rewards, against frame k (the frame the policy observed).
5. Sampler failure update at frame k.
6. ``k ← k + 1`` for rows that are not done.
7. Relative reference and observations for all rows (= the terminal observation of done rows).
8. Reset the done rows and overwrite their observations.

Host synchronization. On a device-resident backend (mjwarp) nothing in ``step`` waits for the
GPU: non-finite actions are zeroed on the device and counted in a device flag that
:meth:`G1TrackingEnv.check_health` raises on (once per log interval), and the reset of step 8
always runs as a masked update that draws a fixed amount from the reset generator, so the
empty-mask case needs no host test. On the CPU backend the env checks both directly: non-finite
actions raise at once and an all-false done mask skips the reset without drawing. The public
:meth:`G1TrackingEnv.reset_rows` (tests, probe) returns early on an empty mask on every
backend, leaving the reset generator untouched (TASK.md §8, §9.5).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from trainer.sim.backend import BackendFailure, SimBackend, make_backend
from trainer.sim.scene import (
    ANCHOR_BODY_NAME,
    DEFAULT_JOINT_POS,
    EE_BODY_NAMES,
    JOINT_NAMES,
    TRACKED_BODY_NAMES,
    UNDESIRED_CONTACT_BODY_NAMES,
    body_ids,
    build_g1_model,
)
from trainer.task import observations as obs_terms
from trainer.task import rewards as rew
from trainer.task import terminations as term
from trainer.task.config import REWARD_TERM_NAMES, G1TrackingCfg
from trainer.task.math import quat_apply_inverse, quat_from_euler_xyz, quat_mul
from trainer.task.sampler import AdaptiveSampler
from trainer.task.state import TrackedState

if TYPE_CHECKING:
    import mujoco

    from trainer.task.motion import MotionClip

__all__ = ["G1TrackingEnv", "StepResult", "make_env"]

log = logging.getLogger(__name__)

_ROOT = TRACKED_BODY_NAMES.index("pelvis")  # reset root, tracked column 0


@dataclass
class StepResult:
    """What one control step returns; every tensor is freshly allocated (safe to keep)."""

    obs: Tensor
    """[N, 160] after resets: what the policy sees next."""
    critic_obs: Tensor
    """[N, 289] after resets."""
    terminal_obs: Tensor
    """[N, 160] step-7 observation (replay next_obs); equals ``obs`` where not done."""
    terminal_critic_obs: Tensor
    """[N, 289] step-7 critic observation."""
    reward: Tensor
    """[N] ctrl_dt · Σ wᵢ·termᵢ."""
    terminated: Tensor
    """[N] bool, terminal conditions."""
    truncated: Tensor
    """[N] bool, time-out or clip end, excluding terminated rows."""
    done: Tensor
    """[N] bool, terminated | truncated."""
    reward_terms: dict[str, Tensor]
    """``reward/<term>`` → env mean of wᵢ·termᵢ before the dt factor (scalar tensors)."""
    episode_return: Tensor
    """[N] return of the episode that ended (valid where done)."""
    episode_length: Tensor
    """[N] length in control steps of the episode that ended (valid where done)."""
    info: dict[str, Tensor]
    """Termination rates and sampler diagnostics (scalar tensors, stay on device)."""


class G1TrackingEnv:
    """The G1 motion-tracking task on a physics backend (see the module docstring).

    Args:
        cfg: task configuration.
        backend: physics backend with ``num_envs`` worlds of ``model``.
        model: the compiled scene the backend runs (names → ids, joint ranges).
        motion: reference clip(s), 14 tracked bodies, 50 fps.
        seed: seeds the reset generator (``seed``) and the observation-noise generator
            (``seed + 1``), both on the backend device.
    """

    actor_obs_dim = obs_terms.ACTOR_OBS_DIM
    critic_obs_dim = obs_terms.CRITIC_OBS_DIM
    action_dim = len(JOINT_NAMES)

    def __init__(
        self,
        cfg: G1TrackingCfg,
        backend: SimBackend,
        model: mujoco.MjModel,
        motion: MotionClip,
        *,
        seed: int = 0,
    ) -> None:
        expected_fps = round(1.0 / cfg.ctrl_dt)
        if motion.fps != expected_fps:
            msg = f"motion fps={motion.fps} must equal 1/ctrl_dt={expected_fps} (no resampling)"
            raise ValueError(msg)
        self.cfg = cfg
        self.backend = backend
        self.num_envs = n = backend.num_envs
        self.device = dev = backend.device
        self.max_episode_steps = cfg.max_episode_steps
        self._sync_free = backend.name == "mjwarp"
        self._anchor = TRACKED_BODY_NAMES.index(ANCHOR_BODY_NAME)
        self._body_ids = torch.as_tensor(body_ids(model, TRACKED_BODY_NAMES), device=dev)
        self._ee_cols = torch.as_tensor(
            [TRACKED_BODY_NAMES.index(b) for b in EE_BODY_NAMES], device=dev
        )
        self._u_cols = torch.as_tensor(
            [TRACKED_BODY_NAMES.index(b) for b in UNDESIRED_CONTACT_BODY_NAMES], device=dev
        )
        qadr = [int(model.jnt_qposadr[model.joint(j).id]) for j in JOINT_NAMES]
        vadr = [int(model.jnt_dofadr[model.joint(j).id]) for j in JOINT_NAMES]
        self._q_slice = slice(qadr[0], qadr[0] + len(qadr))
        self._v_slice = slice(vadr[0], vadr[0] + len(vadr))
        if qadr != list(range(qadr[0], qadr[0] + 29)) or vadr != list(range(vadr[0], vadr[0] + 29)):
            msg = "model hinge joints are not contiguous after the free joint; use build_g1_model"
            raise ValueError(msg)
        jid = [model.joint(j).id for j in JOINT_NAMES]
        f32 = {"dtype": torch.float32, "device": dev}
        self._q_lo = torch.as_tensor(model.jnt_range[jid, 0], **f32)
        self._q_hi = torch.as_tensor(model.jnt_range[jid, 1], **f32)
        self._q_default = torch.as_tensor(DEFAULT_JOINT_POS, **f32)
        self._noise_scale = obs_terms.actor_noise_scale(cfg, dev)
        self._weights = cfg.reward_weights()
        self._sigmas = {
            name: float(getattr(cfg, f"sigma_{name}"))
            for name in REWARD_TERM_NAMES
            if hasattr(cfg, f"sigma_{name}")
        }
        self._reset_scale = torch.as_tensor(
            (
                *cfg.reset_root_pos_range_m,
                *cfg.reset_root_rpy_range_rad,
                *cfg.reset_root_lin_vel_range,
                *cfg.reset_root_ang_vel_range,
                *([cfg.reset_joint_pos_range_rad] * 29),
            ),
            **f32,
        )  # [41]

        # Motion table: one device tensor per quantity, 14 tracked columns. [T, ...]
        self.motion = motion
        self._m_joint_pos = torch.as_tensor(motion.joint_pos, **f32)
        self._m_joint_vel = torch.as_tensor(motion.joint_vel, **f32)
        self._m_body_pos = torch.as_tensor(motion.body_pos_w, **f32)
        self._m_body_quat = torch.as_tensor(motion.body_quat_w, **f32)
        self._m_body_lin_vel = torch.as_tensor(motion.body_lin_vel_w, **f32)
        self._m_body_ang_vel = torch.as_tensor(motion.body_ang_vel_w, **f32)
        num_frames = motion.num_frames
        ends = torch.as_tensor(motion.clip_ends, dtype=torch.long)
        clip_of = torch.bucketize(torch.arange(num_frames), ends, right=True)
        self._last_frame_of = (ends[clip_of] - 1).to(dev)  # [T] last frame of f's clip
        self.sampler = AdaptiveSampler(
            num_frames,
            dev,
            bin_frames=cfg.sampler_bin_frames,
            alpha=cfg.sampler_alpha,
            uniform_ratio=cfg.sampler_uniform_ratio,
            kernel_size=cfg.sampler_kernel_size,
            kernel_lambda=cfg.sampler_kernel_lambda,
            start_ratio=cfg.sampling_start_ratio,
        )

        self.reset_generator = torch.Generator(device=dev)
        self.reset_generator.manual_seed(seed)
        self.obs_generator = torch.Generator(device=dev)
        self.obs_generator.manual_seed(seed + 1)

        # Per-row task state (preallocated; updated in place).
        self.frame = torch.zeros(n, dtype=torch.long, device=dev)
        self.episode_step = torch.zeros(n, dtype=torch.long, device=dev)
        self.actions = torch.zeros(n, 29, **f32)
        self.prev_actions = torch.zeros(n, 29, **f32)
        self.episode_return = torch.zeros(n, **f32)
        self.rel_body_pos = torch.zeros(n, 14, 3, **f32)
        self.rel_body_quat = torch.zeros(n, 14, 4, **f32)
        self.obs = torch.zeros(n, self.actor_obs_dim, **f32)
        self.critic_obs = torch.zeros(n, self.critic_obs_dim, **f32)
        self._nonfinite_action_rows = torch.zeros((), dtype=torch.long, device=dev)
        self.reset_all()

    # ------------------------------------------------------------------ state gathering
    def robot_state(self) -> TrackedState:
        """The robot's tracked state read from the backend views."""
        b, ids = self.backend, self._body_ids
        return TrackedState(
            joint_pos=b.qpos[:, self._q_slice],
            joint_vel=b.qvel[:, self._v_slice],
            body_pos_w=b.xpos.index_select(1, ids),
            body_quat_w=b.xquat.index_select(1, ids),
            body_lin_vel_w=b.body_lin_vel_w.index_select(1, ids),
            body_ang_vel_w=b.body_ang_vel_w.index_select(1, ids),
        )

    def reference_state(self, frames: Tensor) -> TrackedState:
        """The reference at ``frames [N]`` gathered from the device motion table."""
        return TrackedState(
            joint_pos=self._m_joint_pos[frames],
            joint_vel=self._m_joint_vel[frames],
            body_pos_w=self._m_body_pos[frames],
            body_quat_w=self._m_body_quat[frames],
            body_lin_vel_w=self._m_body_lin_vel[frames],
            body_ang_vel_w=self._m_body_ang_vel[frames],
        )

    # ------------------------------------------------------------------ terms
    def reward_terms(self, ref: TrackedState, robot: TrackedState) -> dict[str, Tensor]:
        """Unweighted reward terms against ``ref`` and the stored relative reference. [N] each"""
        a, s = self._anchor, self._sigmas
        return {
            "motion_global_root_pos": rew.motion_global_root_pos(
                ref, robot, a, s["motion_global_root_pos"]
            ),
            "motion_global_root_ori": rew.motion_global_root_ori(
                ref, robot, a, s["motion_global_root_ori"]
            ),
            "motion_body_pos": rew.motion_body_pos(self.rel_body_pos, robot, s["motion_body_pos"]),
            "motion_body_ori": rew.motion_body_ori(self.rel_body_quat, robot, s["motion_body_ori"]),
            "motion_body_lin_vel": rew.motion_body_lin_vel(ref, robot, s["motion_body_lin_vel"]),
            "motion_body_ang_vel": rew.motion_body_ang_vel(ref, robot, s["motion_body_ang_vel"]),
            "action_rate_l2": rew.action_rate_l2(self.actions, self.prev_actions),
            "joint_limit": rew.joint_limit(robot.joint_pos, self._q_lo, self._q_hi),
            "undesired_contacts": rew.undesired_contacts(
                robot, self._u_cols, self.cfg.undesired_contact_height_m
            ),
        }

    def termination_terms(self, ref: TrackedState, robot: TrackedState) -> dict[str, Tensor]:
        """Terminal and truncation conditions at the current frame. [N] bool each"""
        a, cfg = self._anchor, self.cfg
        return {
            "anchor_pos": term.anchor_pos(ref, robot, a, cfg.anchor_pos_z_threshold_m),
            "anchor_ori": term.anchor_ori(ref, robot, a, cfg.anchor_ori_threshold),
            "ee_body_pos": term.ee_body_pos(
                self.rel_body_pos, robot, self._ee_cols, cfg.ee_body_pos_z_threshold_m
            ),
            "time_out": term.time_out(self.episode_step, self.max_episode_steps),
            "motion_clip_end": term.motion_clip_end(self.frame, self._last_frame_of[self.frame]),
        }

    def _observe(self, robot: TrackedState) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Relative reference and observations at the current frame for all rows."""
        ref = self.reference_state(self.frame)
        a = self._anchor
        rel_pos, rel_quat = rew.relative_reference(
            ref, robot.body_pos_w[:, a], robot.body_quat_w[:, a], a
        )
        b = self.backend
        clean = obs_terms.actor_observation(
            ref, robot, b.pelvis_lin_vel_b, b.torso_gyro_b, self._q_default, self.actions, a
        )
        critic = obs_terms.critic_observation(clean, robot, b.pelvis_lin_vel_b, a)
        noise = torch.rand(clean.shape, generator=self.obs_generator, device=self.device)
        actor = clean + (2.0 * noise - 1.0) * self._noise_scale
        return rel_pos, rel_quat, actor, critic

    # ------------------------------------------------------------------ reset
    def _reset_targets(self, frames: Tensor) -> tuple[Tensor, Tensor]:
        """Noisy reset state of every row at ``frames`` (TASK.md §8). qpos [N, 36], qvel [N, 35]"""
        n = self.num_envs
        u = torch.rand(n, 41, generator=self.reset_generator, device=self.device)
        noise = (2.0 * u - 1.0) * self._reset_scale  # [N, 41]
        ref = self.reference_state(frames)
        root_pos = ref.body_pos_w[:, _ROOT] + noise[:, 0:3]
        q_noise = quat_from_euler_xyz(noise[:, 3], noise[:, 4], noise[:, 5])
        root_quat = quat_mul(q_noise, ref.body_quat_w[:, _ROOT])
        lin_vel = ref.body_lin_vel_w[:, _ROOT] + noise[:, 6:9]
        ang_vel_w = ref.body_ang_vel_w[:, _ROOT] + noise[:, 9:12]
        ang_vel_b = quat_apply_inverse(root_quat, ang_vel_w)  # free joint stores body frame
        joint_pos = torch.clamp(ref.joint_pos + noise[:, 12:41], self._q_lo, self._q_hi)
        qpos = torch.cat((root_pos, root_quat, joint_pos), dim=-1)
        qvel = torch.cat((lin_vel, ang_vel_b, ref.joint_vel), dim=-1)
        return qpos, qvel

    def _reset_masked(self, mask: Tensor, frames: Tensor | None = None) -> None:
        """Reset the rows of ``mask`` as a masked update (fixed random draws, no sync)."""
        sampled = self.sampler.sample(self.num_envs, self.reset_generator)
        start = sampled if frames is None else frames
        qpos, qvel = self._reset_targets(start)
        self.backend.reset_rows(mask, qpos, qvel)
        col = mask[:, None]
        self.frame.copy_(torch.where(mask, start, self.frame))
        self.episode_step.masked_fill_(mask, 0)
        self.episode_return.masked_fill_(mask, 0.0)
        self.actions.masked_fill_(col, 0.0)
        self.prev_actions.masked_fill_(col, 0.0)
        rel_pos, rel_quat, actor, critic = self._observe(self.robot_state())
        self.rel_body_pos.copy_(torch.where(mask[:, None, None], rel_pos, self.rel_body_pos))
        self.rel_body_quat.copy_(torch.where(mask[:, None, None], rel_quat, self.rel_body_quat))
        self.obs.copy_(torch.where(col, actor, self.obs))
        self.critic_obs.copy_(torch.where(col, critic, self.critic_obs))

    def reset_rows(self, mask: Tensor, frames: Tensor | None = None) -> None:
        """Reset the selected rows (tests, probe). An empty mask draws nothing and changes
        nothing; ``frames [N]`` overrides the sampled start frames."""
        mask = mask.to(device=self.device, dtype=torch.bool)
        if not bool(mask.any()):
            return
        if frames is not None:
            frames = frames.to(device=self.device, dtype=torch.long)
        self._reset_masked(mask, frames)

    def reset_all(self) -> tuple[Tensor, Tensor]:
        """Reset every row; returns copies of ``(obs [N, 160], critic_obs [N, 289])``."""
        self._reset_masked(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        return self.obs.clone(), self.critic_obs.clone()

    # ------------------------------------------------------------------ step
    def _sanitize_actions(self, actions: Tensor) -> Tensor:
        finite = torch.isfinite(actions).all(-1)  # [N]
        if not self._sync_free:
            if not bool(finite.all()):
                row = int(torch.nonzero(~finite)[0, 0])
                msg = f"non-finite action in env row {row}; the policy diverged (NaN/Inf)"
                raise BackendFailure(msg)
            return actions
        self._nonfinite_action_rows += (~finite).sum()
        return torch.where(finite[:, None], actions, torch.zeros_like(actions))

    def step(self, actions: Tensor) -> StepResult:
        """Advance one control step (TASK.md §1); see the module docstring for sync rules."""
        actions = self._sanitize_actions(actions.to(self.device, torch.float32))
        # 1. action history and position targets.
        self.prev_actions.copy_(self.actions)
        self.actions.copy_(actions)
        applied = self.prev_actions if self.cfg.simulate_action_latency else self.actions
        ctrl = self._q_default + self.cfg.action_scale * applied
        # 2.-3. physics, episode clock.
        self.backend.step(ctrl)
        self.episode_step += 1
        # 4. terminations, then rewards, at frame k.
        robot = self.robot_state()
        ref = self.reference_state(self.frame)
        conds = self.termination_terms(ref, robot)
        terminal = conds["anchor_pos"] | conds["anchor_ori"] | conds["ee_body_pos"]
        truncation = conds["time_out"] | conds["motion_clip_end"]
        terminated, truncated, done = term.split_done(terminal, truncation)
        values = self.reward_terms(ref, robot)
        weighted = {name: self._weights[name] * values[name] for name in REWARD_TERM_NAMES}
        reward = self.cfg.ctrl_dt * torch.stack(list(weighted.values())).sum(0)  # [N]
        self.episode_return += reward
        # 5. sampler statistics at frame k.
        self.sampler.update(terminated, self.frame)
        # 6. advance k for rows that continue.
        self.frame += (~done).long()
        # 7. relative reference and observations (terminal observations of done rows).
        rel_pos, rel_quat, actor, critic = self._observe(robot)
        self.rel_body_pos.copy_(rel_pos)
        self.rel_body_quat.copy_(rel_quat)
        self.obs.copy_(actor)
        self.critic_obs.copy_(critic)
        terminal_obs, terminal_critic = actor, critic
        episode_return = self.episode_return.clone()
        episode_length = self.episode_step.clone()
        # 8. reset done rows (fixed-cost masked update on the sync-free path).
        if self._sync_free or bool(done.any()):
            self._reset_masked(done)
        info = {f"Episode_Termination/{k}": v.float().mean() for k, v in conds.items()}
        info.update(self.sampler.diagnostics())
        return StepResult(
            obs=self.obs.clone(),
            critic_obs=self.critic_obs.clone(),
            terminal_obs=terminal_obs,
            terminal_critic_obs=terminal_critic,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            done=done,
            reward_terms={f"reward/{k}": v.mean() for k, v in weighted.items()},
            episode_return=episode_return,
            episode_length=episode_length,
            info=info,
        )

    # ------------------------------------------------------------------ cold path
    def check_health(self) -> None:
        """Raise :class:`BackendFailure` on non-finite actions or physics overflow (syncs)."""
        bad = int(self._nonfinite_action_rows)
        if bad:
            msg = f"{bad} env rows received non-finite actions (zeroed); the policy diverged"
            raise BackendFailure(msg)
        self.backend.check_health()

    def diagnostics(self) -> dict:
        """``backend_diagnostics`` of the backend (CONTRACTS §4.3)."""
        return self.backend.diagnostics()


def make_env(
    task_cfg: G1TrackingCfg,
    *,
    sim_backend: str,
    num_envs: int,
    device: torch.device | str,
    seed: int,
    motion: MotionClip | None = None,
    model: mujoco.MjModel | None = None,
    backend_options: dict | None = None,
) -> G1TrackingEnv:
    """Build the scene, resolve and load the motion, create the backend and the env.

    Args:
        task_cfg: task configuration.
        sim_backend: ``"mjwarp"`` or ``"mujoco"``.
        num_envs: parallel worlds.
        device: torch device of all task tensors.
        seed: task seed (reset generator ``seed``, obs-noise generator ``seed + 1``).
        motion: an already loaded clip (skips resolution); otherwise ``task_cfg.motion_file``.
        model: an already built scene; otherwise ``build_g1_model(task_cfg.scene)``.
        backend_options: extra keyword arguments for the backend constructor.
    """
    model = build_g1_model(task_cfg.scene) if model is None else model
    if motion is None:
        from trainer.task.motion import load_motion, resolve_motion

        resolved = resolve_motion(task_cfg.motion_file, hub_repo=task_cfg.hub_repo)
        motion = load_motion(resolved.path, model)
    options = {"decimation": task_cfg.scene.decimation}
    if sim_backend == "mjwarp":
        options.update(nconmax=task_cfg.scene.nconmax, njmax=task_cfg.scene.njmax)
    options.update(backend_options or {})
    backend = make_backend(sim_backend, model, num_envs, device, **options)
    if not math.isclose(model.opt.timestep * backend.decimation, task_cfg.ctrl_dt):
        msg = f"model timestep {model.opt.timestep} x decimation != ctrl_dt {task_cfg.ctrl_dt}"
        raise ValueError(msg)
    return G1TrackingEnv(task_cfg, backend, model, motion, seed=seed)
