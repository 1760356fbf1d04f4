"""The torch phases of the tracking step and the task maths they run (docs/task.md).

:class:`TrackingPhases` holds what one control step computes on the env's state: actions and
position targets, the state exchange, the update (terminations, rewards through the term table,
sampler, frame advance, observations), the reset targets and the post-reset observations. Each
phase is a method over fixed tensors, and the arithmetic of each is a ``_<name>_core`` function
that ``torch.compile`` may replace (:meth:`set_phase_functions`). :class:`~trainer.task.g1_tracking.G1TrackingEnv`
inherits it and owns the state; the phase runner (:mod:`trainer.task.phases`) runs the phases.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from trainer.sim.backend import BackendFailure
from trainer.task import observations as obs_terms
from trainer.task import terminations as term
from trainer.task.outputs import SAMPLER_DIAG_NAMES
from trainer.task.phases import PhaseRunner
from trainer.task.reference import relative_reference
from trainer.task.state import TrackedState
from trainer.task.terms import TermInputs

if TYPE_CHECKING:
    from trainer.sim.backend import SimBackend, StagedSimBackend
    from trainer.task.config import G1TrackingCfg
    from trainer.task.reference import MotionReference
    from trainer.task.reset import ResetNoise
    from trainer.task.sampler import AdaptiveSampler
    from trainer.task.terms import RewardTable

__all__ = ["TrackingPhases"]

_COND_NAMES = term.CONDITION_NAMES
_NUM_TERMINAL = len(term.TERMINATION_NAMES)
_STATE_FIELDS = tuple(f.name for f in dataclasses.fields(TrackedState))


class TrackingPhases:
    """The step phases and task maths of :class:`~trainer.task.g1_tracking.G1TrackingEnv`."""

    # Set by G1TrackingEnv.__init__ (the state every phase reads and writes in place).
    cfg: G1TrackingCfg
    backend: SimBackend
    reference: MotionReference
    rewards: RewardTable
    num_envs: int
    device: torch.device
    max_episode_steps: int
    actor_obs_dim: int
    frame: Tensor
    episode_step: Tensor
    actions: Tensor
    prev_actions: Tensor
    episode_return: Tensor
    rel_body_pos: Tensor
    rel_body_quat: Tensor
    obs: Tensor
    critic_obs: Tensor
    reset_generator: torch.Generator
    obs_generator: torch.Generator
    _stager: StagedSimBackend | None
    """The backend's staged launches (``backend.staged()``), None on a host-bridged backend."""
    _staged: bool
    _fns: dict[str, Callable]
    _out: dict[str, Tensor]
    _reset_noise: ResetNoise

    @property
    def sampler(self) -> AdaptiveSampler:
        """The adaptive start-frame sampler of the motion reference."""
        return self.reference.sampler

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

    # ------------------------------------------------------------------ terms
    def _term_inputs(self, ref: TrackedState, robot: TrackedState) -> TermInputs:
        return TermInputs(
            ref, robot, self.rel_body_pos, self.rel_body_quat, self.actions, self.prev_actions
        )

    def reward_terms(self, ref: TrackedState, robot: TrackedState) -> dict[str, Tensor]:
        """Unweighted reward terms against ``ref`` and the stored relative reference. [N] each"""
        return self.rewards.terms(self._term_inputs(ref, robot))

    def termination_terms(self, ref: TrackedState, robot: TrackedState) -> dict[str, Tensor]:
        """Terminal and truncation conditions at the current frame. [N] bool each"""
        a, cfg = self._anchor, self.cfg
        last_frame = self.reference.last_frame_of[self.frame]
        return {
            "anchor_pos": term.anchor_pos(ref, robot, a, cfg.anchor_pos_z_threshold_m),
            "anchor_ori": term.anchor_ori(ref, robot, a, cfg.anchor_ori_threshold),
            "ee_body_pos": term.ee_body_pos(
                self.rel_body_pos, robot, self._ee_cols, cfg.ee_body_pos_z_threshold_m
            ),
            "time_out": term.time_out(self.episode_step, self.max_episode_steps),
            "motion_clip_end": term.motion_clip_end(self.frame, last_frame),
        }

    def _obs_noise(self) -> Tensor:
        """U(0, 1) [N, obs_dim] from the observation generator (drawn eagerly: dynamo does not
        trace ``generator=``, so compiled and eager phases draw the same numbers)."""
        shape = (self.num_envs, self.actor_obs_dim)
        return torch.rand(shape, generator=self.obs_generator, device=self.device)

    def _observe(self, robot: TrackedState, noise: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Relative reference and observations at the current frame for all rows; ``noise``
        is :meth:`_obs_noise`."""
        ref = self.reference.state(self.frame)
        a = self._anchor
        rel_pos, rel_quat = relative_reference(
            ref, robot.body_pos_w[:, a], robot.body_quat_w[:, a], a
        )
        b = self.backend
        clean = obs_terms.actor_observation(
            ref, robot, b.pelvis_lin_vel_b, b.torso_gyro_b, self._q_default, self.actions, a
        )
        critic = obs_terms.critic_observation(clean, robot, b.pelvis_lin_vel_b, a)
        actor = torch.addcmul(clean, 2.0 * noise - 1.0, self._noise_scale)
        return rel_pos, rel_quat, actor, critic

    # ------------------------------------------------------------------ reset
    def _prepare_reset(
        self, mask: Tensor, frames: Tensor | None = None, *, noise: bool = True
    ) -> tuple[Tensor, Tensor]:
        """Draw start frames and reset targets for all rows (fixed draws) and reset the task
        state of the ``mask`` rows; returns the backend targets ``(qpos, qvel)``. Without
        ``noise`` nothing is drawn: the targets are the reference at the start frames."""
        if noise:
            draws = self._reset_noise.draw(self.sampler, self.num_envs, self.reset_generator)
        else:
            draws = self._noiseless_draws
        if frames is None:
            return self._fns["prepare"](mask, *draws, self._no_frames, self._not_explicit)
        explicit = torch.ones_like(self._not_explicit)
        return self._fns["prepare"](mask, *draws, frames, explicit)

    def _prepare_core(
        self,
        mask: Tensor,
        u_bin: Tensor,
        u_frac: Tensor,
        u: Tensor,
        frames: Tensor,
        explicit: Tensor,
    ) -> tuple[Tensor, Tensor]:
        sampled = self.sampler.frames_from(u_bin, u_frac)
        start = torch.where(explicit, frames, sampled)
        qpos, qvel = self._reset_noise.targets(self.reference.state(start), u)
        col = mask[:, None]
        self.frame.copy_(torch.where(mask, start, self.frame))
        self.episode_step.masked_fill_(mask, 0)
        self.episode_return.masked_fill_(mask, 0.0)
        self.actions.masked_fill_(col, 0.0)
        self.prev_actions.masked_fill_(col, 0.0)
        return qpos, qvel

    def _finish_reset(self, mask: Tensor) -> None:
        """Observe the (already forwarded) backend and overwrite the ``mask`` rows' relative
        reference and observations."""
        self._fns["finish"](mask, self._obs_noise())

    def _finish_core(self, mask: Tensor, noise: Tensor) -> None:
        rel_pos, rel_quat, actor, critic = self._observe(self.robot_state(), noise)
        col = mask[:, None]
        self.rel_body_pos.copy_(torch.where(mask[:, None, None], rel_pos, self.rel_body_pos))
        self.rel_body_quat.copy_(torch.where(mask[:, None, None], rel_quat, self.rel_body_quat))
        self.obs.copy_(torch.where(col, actor, self.obs))
        self.critic_obs.copy_(torch.where(col, critic, self.critic_obs))

    def _reset_masked(
        self, mask: Tensor, frames: Tensor | None = None, *, noise: bool = True
    ) -> None:
        """Reset the rows of ``mask`` as a masked update (fixed random draws, no sync)."""
        qpos, qvel = self._prepare_reset(mask, frames, noise=noise)
        self.backend.reset_rows(mask, qpos, qvel)
        self._finish_reset(mask)

    # ------------------------------------------------------------------ step phases
    # The phases read and write only fixed tensors (state, ``_act_in``, ``_out``, hand-over
    # buffers, backend views and staging), so each can be replayed as a CUDA graph.
    def phase_cores(self) -> dict[str, Callable]:
        """The phase arithmetic by name, eager: what ``torch.compile`` compiles
        (:mod:`trainer.task.acceleration`)."""
        return {
            "actions": self._actions_core,
            "exchange": self._exchange_core,
            "update": self._update_core,
            "prepare": self._prepare_core,
            "finish": self._finish_core,
        }

    def set_phase_functions(self, fns: dict[str, Callable]) -> None:
        """Run ``fns`` (compiled :meth:`phase_cores`, same names) as the phase arithmetic."""
        if sorted(fns) != sorted(self.phase_cores()):
            msg = f"phase functions {sorted(fns)} != {sorted(self.phase_cores())}"
            raise ValueError(msg)
        self._fns = dict(fns)

    def use_eager_phases(self) -> None:
        """Run the eager :meth:`phase_cores` (construction, or a compile that failed)."""
        self._fns = self.phase_cores()

    def _phase_actions(self) -> None:
        """Step 1: sanitise the staged actions, action history, position targets → ctrl.
        Unstaged steps reject non-finite actions on the host first (the CPU backend would)."""
        if not self._staged:
            self._require_finite_actions()
        self._fns["actions"]()

    def _actions_core(self) -> None:
        a = self._act_in
        if self._staged:
            finite = torch.isfinite(a).all(-1)  # [N]
            self._nonfinite_action_rows += (~finite).sum()
            a = torch.where(finite[:, None], a, 0.0)
        self.apply_actions(a, out=self._ctrl_out)

    def _require_finite_actions(self) -> None:
        finite = torch.isfinite(self._act_in).all(-1)
        if not bool(finite.all()):
            row = int(torch.nonzero(~finite)[0, 0])
            msg = f"non-finite action in env row {row}; the policy diverged (NaN/Inf)"
            raise BackendFailure(msg)

    def _phase_exchange(self) -> None:
        """Backend views and the reference at frame k → the fixed robot/reference buffers."""
        self._fns["exchange"]()

    def _exchange_core(self) -> None:
        robot, ref = self.robot_state(), self.reference.state(self.frame)
        for buf, src in ((self._robot_buf, robot), (self._ref_buf, ref)):
            for name in _STATE_FIELDS:
                getattr(buf, name).copy_(getattr(src, name))

    def _phase_update(self) -> None:
        """Steps 3-7: clock, terminations, rewards, sampler, k, terminal observations."""
        self.episode_step += 1
        self._update(self._robot_buf, self._ref_buf)

    def _phase_select(self) -> None:
        """Step 8's rows: the done rows (the probe swaps in its scheduled rows)."""
        self._reset_mask.copy_(self._out["done"])

    def apply_actions(self, actions: Tensor, out: Tensor | None = None) -> Tensor:
        """Steps 1-2: shift the action history and return the joint position targets.

        Args:
            actions: [N, 29] the policy's actions (used as given: no finiteness check).
            out: optional [N, 29] buffer for the targets (``step`` passes its fixed one).

        Returns:
            ctrl [N, 29] = default joint positions + action_scale * applied action, where the
            applied action is the previous one under ``simulate_action_latency``.
        """
        self.prev_actions.copy_(self.actions)
        self.actions.copy_(actions)
        applied = self.prev_actions if self.cfg.simulate_action_latency else self.actions
        return torch.add(self._q_default, applied, alpha=self.cfg.action_scale, out=out)

    def update_state(self, robot: TrackedState, ref: TrackedState) -> dict[str, Tensor]:
        """Steps 4-7 after physics and the episode clock, for every row: terminations,
        rewards, sampler update, frame advance, observations (into the env state and the step
        outputs). Done rows are *not* reset here.

        Returns:
            The termination conditions by name, each [N] bool.
        """
        return dict(zip(_COND_NAMES, self._update(robot, ref).unbind(-1), strict=True))

    def _update(self, robot: TrackedState, ref: TrackedState) -> Tensor:
        """:meth:`update_state` with the conditions as one [N, 5] tensor (``_COND_NAMES``)."""
        conds, outs = self._fns["update"](robot, ref, self._obs_noise())
        o = self._out
        for name, value in outs.items():
            o[name].copy_(value)
        o["terminal_obs"].copy_(self.obs)
        o["terminal_critic_obs"].copy_(self.critic_obs)
        o["episode_return"].copy_(self.episode_return)
        o["episode_length"].copy_(self.episode_step)
        return conds

    def _update_core(
        self, robot: TrackedState, ref: TrackedState, noise: Tensor
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The arithmetic of :meth:`update_state`: updates the env state in place and returns
        ``(conditions [N, 5], step outputs by field)``. The outputs are copied into the packed
        output buffer outside, because its fields are dtype views of one byte buffer, which
        ``torch.compile`` cannot mutate."""
        conds_d = self.termination_terms(ref, robot)
        conds = torch.stack([conds_d[k] for k in _COND_NAMES], dim=-1)  # [N, 5] bool
        terminal = conds[:, :_NUM_TERMINAL].any(-1)
        truncation = conds[:, _NUM_TERMINAL:].any(-1)
        terminated, truncated, done = term.split_done(terminal, truncation)
        values = self.rewards.values(self._term_inputs(ref, robot))  # [N, 9]
        weighted = values * self.rewards.weights
        reward = weighted.sum(-1) * self.cfg.ctrl_dt  # [N]
        self.episode_return += reward
        self.sampler.update(terminated, self.frame)
        self._step_frame.copy_(self.frame)
        self.frame += (~done).long()
        rel_pos, rel_quat, actor, critic = self._observe(robot, noise)
        self.rel_body_pos.copy_(rel_pos)
        self.rel_body_quat.copy_(rel_quat)
        self.obs.copy_(actor)
        self.critic_obs.copy_(critic)
        self._conds.copy_(conds)
        self._row_terms.copy_(weighted)
        diag = self.sampler.diagnostics()
        info = torch.cat(
            (conds.float().mean(0), torch.stack([diag[k] for k in SAMPLER_DIAG_NAMES]))
        )
        outs = {
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "done": done,
            "reward_terms": weighted.mean(0),
            "info": info,
        }
        return conds, outs

    def _phase_stage_reset(self) -> None:
        """Step 8, first half: reset targets for every row and the task state of the selected
        rows (fixed draws). Staged: into the backend's staging buffers. Unstaged: held for
        ``physics_reset``, and an empty mask skips the reset without drawing."""
        mask = self._reset_mask
        if self._stager is None:
            self._host_reset = self._prepare_reset(mask) if bool(mask.any()) else None
            return
        qpos, qvel = self._prepare_reset(mask)
        mask_in, qpos_in, qvel_in, ctrl_in = self._stager.reset_staging
        mask_in.copy_(mask)
        qpos_in.copy_(qpos)
        qvel_in.copy_(qvel)
        ctrl_in.zero_()

    def _physics_reset_host(self) -> None:
        """Unstaged ``physics_reset``: the backend's host reset of the staged rows, if any."""
        if self._host_reset is not None:
            self.backend.reset_rows(self._reset_mask, *self._host_reset)

    def _phase_finish(self) -> None:
        """Step 8, second half: observations of the reset rows and the obs outputs."""
        if self._staged or self._host_reset is not None:
            self._finish_reset(self._reset_mask)
        self._host_reset = None
        self._publish_obs()

    def _publish_obs(self) -> None:
        """Copy the post-reset observations into the step outputs."""
        self._out["obs"].copy_(self.obs)
        self._out["critic_obs"].copy_(self.critic_obs)

    def _make_runner(self) -> PhaseRunner:
        torch_phases = {
            "actions": self._phase_actions,
            "exchange": self._phase_exchange,
            "update": self._phase_update,
            "select": self._phase_select,
            "stage_reset": self._phase_stage_reset,
            "finish": self._phase_finish,
        }
        staged, b = self._stager, self.backend
        if staged is not None:
            physics = {"physics_step": staged.launch_step, "physics_reset": staged.launch_reset}
            return PhaseRunner(torch_phases, physics, staged.torch_stream)
        physics = {
            "physics_step": lambda: b.step(self._ctrl_out),
            "physics_reset": self._physics_reset_host,
        }
        return PhaseRunner(torch_phases, physics, None)
