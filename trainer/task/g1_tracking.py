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

The pieces live in their own modules: the motion reference (device table, frames, sampler:
:mod:`trainer.task.motion.reference`), the reward term table (:mod:`trainer.task.terms`),
the reset targets (:mod:`trainer.task.reset`), the packed outputs
(:mod:`trainer.task.outputs`) and the phase runner (:mod:`trainer.task.phases`), which runs
the eight phases of a step eagerly or as CUDA graphs; :mod:`trainer.task.acceleration`
compiles and captures them at construction.

Host synchronization. On a device-resident backend (mjwarp) nothing in ``step`` waits for the
GPU: non-finite actions are zeroed on the device and counted in a device flag that
:meth:`G1TrackingEnv.check_health` raises on (once per log interval), and the reset of step 8
always runs as a masked update that draws a fixed amount from the reset generator, so the
empty-mask case needs no host test. On the CPU backend the env checks both directly: non-finite
actions raise at once and an all-false reset mask skips the reset without drawing. The public
:meth:`G1TrackingEnv.reset_rows` (tests, probe) returns early on an empty mask on every
backend, leaving the reset generator untouched (TASK.md §8, §9.5).

Step phases. :meth:`G1TrackingEnv.step_phases` hands the :data:`STEP_PHASES` out one by one on
every backend, so ``g1-backend-probe`` times the very phases training runs (it swaps
``select`` for its scheduled rows). On a staged backend the physics phases are the backend's
Warp graphs; on the CPU backend they are its host ``step`` and ``reset_rows``.

Evaluation mode. :meth:`G1TrackingEnv.evaluation` (``trainer/task/eval_mode.py``) runs fixed
episodes: explicit start frames (a tensor input of the compiled reset), no observation noise
(the scale tensor the graphs read is zeroed in place, the config is untouched), no reset noise
(fixed noise-free uniforms instead of generator draws), no auto-reset
(:meth:`G1TrackingEnv.step_without_reset` runs the first four phases only) and done rows held
at their terminal state; each step returns per-row conditions, weighted reward terms, the
scored frame and the robot and reference states.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from contracts.env_spec import EnvSpec
from trainer.sim.backend import BackendFailure, DiagnosticEntry, SimBackend, make_backend
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
from trainer.task import acceleration
from trainer.task import observations as obs_terms
from trainer.task import terminations as term
from trainer.task.config import REWARD_TERM_NAMES, G1TrackingCfg
from trainer.task.motion.reference import MotionReference, relative_reference
from trainer.task.outputs import SAMPLER_DIAG_NAMES, StepOutputs, StepResult
from trainer.task.phases import NO_RESET_PHASES, STEP_PHASES, PhaseRunner
from trainer.task.reset import ResetNoise
from trainer.task.state import TrackedState
from trainer.task.terms import RewardTable, TermConstants, TermInputs

if TYPE_CHECKING:
    import mujoco

    from trainer.task.eval_mode import EvalMode
    from trainer.task.motion import MotionClip, ResolvedMotion
    from trainer.task.sampler import AdaptiveSampler

__all__ = ["STEP_PHASES", "G1TrackingEnv", "StepResult", "make_env"]

_ROOT = TRACKED_BODY_NAMES.index("pelvis")  # reset root, tracked column 0
_COND_NAMES = term.CONDITION_NAMES
_NUM_TERMINAL = len(term.TERMINATION_NAMES)
_CLIP_END = _COND_NAMES.index("motion_clip_end")
_NUM_JOINTS = len(JOINT_NAMES)
_NUM_TRACKED = len(TRACKED_BODY_NAMES)
_STATE_FIELDS = tuple(f.name for f in dataclasses.fields(TrackedState))


def _state_shapes(n: int) -> tuple[tuple[int, ...], ...]:
    """Shapes of the :class:`TrackedState` fields for ``n`` rows."""
    j, b = _NUM_JOINTS, _NUM_TRACKED
    return ((n, j), (n, j), (n, b, 3), (n, b, 4), (n, b, 3), (n, b, 3))


class G1TrackingEnv:
    """The G1 motion-tracking task on a physics backend (see the module docstring).

    Args:
        cfg: task configuration.
        backend: physics backend with ``num_envs`` worlds of ``model``.
        model: the compiled scene the backend runs (names → ids, joint ranges).
        motion: reference clip(s), 14 tracked bodies, 50 fps.
        seed: seeds the reset generator (``seed``) and the observation-noise generator
            (``seed + 1``), both on the backend device.
        cuda_graph: capture the torch part of ``step`` as CUDA graphs (mjwarp on CUDA only;
            recorded as ``task_cuda_graph`` in the backend diagnostics).
        static_outputs: return views of the fixed output buffer from ``step`` instead of a
            fresh copy (the caller must be done with them before the next ``step``).
        compile_backend: ``torch.compile`` backend for the phase arithmetic (``"inductor"`` on
            CUDA; tests use ``"aot_eager"`` on CPU); None steps eagerly. Recorded as
            ``task_compile`` in the backend diagnostics.
    """

    spec = EnvSpec(
        obs_dim=obs_terms.ACTOR_OBS_DIM,
        critic_obs_dim=obs_terms.CRITIC_OBS_DIM,
        action_dim=_NUM_JOINTS,
    )
    """The widths every consumer sizes from (observations, actions, replay rows)."""
    actor_obs_dim = spec.obs_dim
    critic_obs_dim = spec.critic_obs_dim
    action_dim = spec.action_dim

    def __init__(
        self,
        cfg: G1TrackingCfg,
        backend: SimBackend,
        model: mujoco.MjModel,
        motion: MotionClip,
        *,
        seed: int = 0,
        cuda_graph: bool = True,
        static_outputs: bool = False,
        compile_backend: str | None = None,
    ) -> None:
        init_start = time.perf_counter()
        expected_fps = round(1.0 / cfg.ctrl_dt)
        if motion.fps != expected_fps:
            msg = f"motion fps={motion.fps} must equal 1/ctrl_dt={expected_fps} (no resampling)"
            raise ValueError(msg)
        self.cfg = cfg
        self.backend = backend
        self.num_envs = backend.num_envs
        self.device = backend.device
        self.max_episode_steps = cfg.max_episode_steps
        self.seed = seed
        self.static_outputs = static_outputs
        # Backends with staged launches (mjwarp) run the reset inside step as fixed work and
        # zero non-finite actions on the device: their step reads nothing back to the host.
        self._staged = hasattr(backend, "launch_step") and hasattr(backend, "reset_staging")
        self._init_model_constants(model)
        self.reference = MotionReference(motion, cfg, self.device)
        self.reset_generator = torch.Generator(device=self.device)
        self.reset_generator.manual_seed(seed)
        self.obs_generator = torch.Generator(device=self.device)
        self.obs_generator.manual_seed(seed + 1)
        self._init_state()
        self._runner = self._make_runner()
        self._use_eager_functions()
        self.reset_all()
        self.setup_seconds: dict[str, float] = {"task_init": time.perf_counter() - init_start}
        """Wall seconds of the construction steps (``task_init``, ``task_compile``,
        ``task_graph_capture``; ``make_env`` adds ``scene``, ``motion`` and ``backend``)."""
        self._compile_entry, self._graph_entry = acceleration.accelerate(
            self, compile_backend=compile_backend, cuda_graph=cuda_graph
        )

    def _init_model_constants(self, model: mujoco.MjModel) -> None:
        """Ids, joint slices and ranges from the model; the reward table and reset noise."""
        dev, cfg = self.device, self.cfg
        self._anchor = TRACKED_BODY_NAMES.index(ANCHOR_BODY_NAME)
        self._body_ids = torch.as_tensor(body_ids(model, TRACKED_BODY_NAMES), device=dev)
        self._ee_cols = torch.as_tensor(
            [TRACKED_BODY_NAMES.index(b) for b in EE_BODY_NAMES], device=dev
        )
        u_cols = torch.as_tensor(
            [TRACKED_BODY_NAMES.index(b) for b in UNDESIRED_CONTACT_BODY_NAMES], device=dev
        )
        qadr = [int(model.jnt_qposadr[model.joint(j).id]) for j in JOINT_NAMES]
        vadr = [int(model.jnt_dofadr[model.joint(j).id]) for j in JOINT_NAMES]
        self._q_slice = slice(qadr[0], qadr[0] + len(qadr))
        self._v_slice = slice(vadr[0], vadr[0] + len(vadr))
        contiguous = range(qadr[0], qadr[0] + _NUM_JOINTS), range(vadr[0], vadr[0] + _NUM_JOINTS)
        if qadr != list(contiguous[0]) or vadr != list(contiguous[1]):
            msg = "model hinge joints are not contiguous after the free joint; use build_g1_model"
            raise ValueError(msg)
        jid = [model.joint(j).id for j in JOINT_NAMES]
        f32 = {"dtype": torch.float32, "device": dev}
        self._q_lo = torch.as_tensor(model.jnt_range[jid, 0], **f32)
        self._q_hi = torch.as_tensor(model.jnt_range[jid, 1], **f32)
        self._q_default = torch.as_tensor(DEFAULT_JOINT_POS, **f32)
        self._noise_scale = obs_terms.actor_noise_scale(cfg, dev)  # read by the graphs
        self._configured_noise_scale = self._noise_scale.clone()
        self._observation_noise = True
        constants = TermConstants(
            anchor=self._anchor,
            joint_lower=self._q_lo,
            joint_upper=self._q_hi,
            undesired_columns=u_cols,
            contact_height_m=cfg.undesired_contact_height_m,
        )
        self.rewards = RewardTable(cfg.rewards, constants, dev)
        self._reset_noise = ResetNoise(cfg, self._q_lo, self._q_hi, _ROOT)

    def _init_state(self) -> None:
        """Per-row task state, phase hand-over buffers and step I/O, preallocated and updated
        in place, never rebound (the graphs hold them)."""
        n, dev, spec = self.num_envs, self.device, self.spec
        f32 = {"dtype": torch.float32, "device": dev}
        self.frame = torch.zeros(n, dtype=torch.long, device=dev)
        self.episode_step = torch.zeros(n, dtype=torch.long, device=dev)
        self.actions = torch.zeros(n, spec.action_dim, **f32)
        self.prev_actions = torch.zeros(n, spec.action_dim, **f32)
        self.episode_return = torch.zeros(n, **f32)
        self.rel_body_pos = torch.zeros(n, _NUM_TRACKED, 3, **f32)
        self.rel_body_quat = torch.zeros(n, _NUM_TRACKED, 4, **f32)
        self.obs = torch.zeros(n, spec.obs_dim, **f32)
        self.critic_obs = torch.zeros(n, spec.critic_obs_dim, **f32)
        self._nonfinite_action_rows = torch.zeros((), dtype=torch.long, device=dev)
        # Phase hand-over buffers: exchange → update (robot, reference), update → select
        # (clip end), select → stage_reset/finish (reset mask).
        self._robot_buf = TrackedState(*(torch.zeros(s, **f32) for s in _state_shapes(n)))
        self._ref_buf = TrackedState(*(torch.zeros(s, **f32) for s in _state_shapes(n)))
        # Per-row outputs of the update (public through step_without_reset): conditions,
        # weighted reward terms and the scored frame.
        self._conds = torch.zeros(n, len(_COND_NAMES), dtype=torch.bool, device=dev)
        self._row_terms = torch.zeros(n, len(REWARD_TERM_NAMES), **f32)
        self._step_frame = torch.zeros(n, dtype=torch.long, device=dev)
        # Start-frame inputs of the compiled reset: always tensors, so explicit start frames
        # never change what the compiled function sees (no recompile).
        self._no_frames = torch.zeros(n, dtype=torch.long, device=dev)
        self._not_explicit = torch.zeros(n, dtype=torch.bool, device=dev)
        self._noiseless_draws = self._reset_noise.noiseless(n)
        self._reset_mask = torch.zeros(n, dtype=torch.bool, device=dev)
        self._host_reset: tuple[Tensor, Tensor] | None = None  # unstaged stage → physics
        # Step I/O: the action input and the packed outputs (one byte buffer, typed views).
        self._act_in = torch.zeros(n, spec.action_dim, **f32)
        self._ctrl_out = (
            self.backend.ctrl if self._staged else torch.zeros(n, spec.action_dim, **f32)
        )
        self._outputs = StepOutputs(n, spec, dev)
        self._out = self._outputs.fields

    # ------------------------------------------------------------------ state gathering
    @property
    def motion(self) -> MotionClip:
        """The reference clip(s) the env tracks."""
        return self.reference.clip

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

    def reference_state(self, frames: Tensor) -> TrackedState:
        """The reference at ``frames [N]`` gathered from the device motion table (one gather)."""
        return self.reference.state(frames)

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

    def reset_rows(self, mask: Tensor, frames: Tensor | None = None, *, noise: bool = True) -> None:
        """Reset the selected rows (tests, probe, evaluation). An empty mask draws nothing and
        changes nothing; ``frames [N]`` overrides the sampled start frames (a tensor input of
        the compiled reset: no recompile). ``noise=False`` draws nothing from the reset
        generator and starts each row exactly at the reference of its frame (needs
        ``frames``)."""
        if not noise and frames is None:
            msg = "reset_rows(noise=False) needs explicit start frames"
            raise ValueError(msg)
        mask = mask.to(device=self.device, dtype=torch.bool)
        if not bool(mask.any()):
            return
        if frames is not None:
            frames = frames.to(device=self.device, dtype=torch.long)
        self._reset_masked(mask, frames, noise=noise)

    def reset_all(self) -> tuple[Tensor, Tensor]:
        """Reset every row; returns copies of ``(obs [N, obs_dim], critic_obs [N, critic])``."""
        self._reset_masked(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        return self.obs.clone(), self.critic_obs.clone()

    def set_observation_noise(self, enabled: bool) -> None:
        """Switch the actor observation noise on (the configured half-widths) or off
        (evaluation) without touching the config. The compiled and captured phases read the
        scale tensor, which is changed in place, so this holds on a compiled env too."""
        source = self._configured_noise_scale if enabled else torch.zeros_like(self._noise_scale)
        self._noise_scale.copy_(source)
        self._observation_noise = bool(enabled)

    @property
    def observation_noise(self) -> bool:
        """Whether the actor observations carry their configured noise."""
        return self._observation_noise

    def evaluation(self) -> EvalMode:
        """The env's evaluation mode (docs/evaluation.md): explicit start frames, no noise, no
        auto-reset, done rows held at their terminal state, per-row step outputs."""
        from trainer.task.eval_mode import EvalMode

        return EvalMode(self)

    # ------------------------------------------------------------------ step phases
    # The phases read and write only fixed tensors (state, ``_act_in``, ``_out``, hand-over
    # buffers, backend views and staging), so each can be replayed as a CUDA graph.
    def _cores(self) -> dict[str, Callable]:
        """The phase arithmetic ``torch.compile`` compiles (``_fns`` holds what runs)."""
        return {
            "actions": self._actions_core,
            "exchange": self._exchange_core,
            "update": self._update_core,
            "prepare": self._prepare_core,
            "finish": self._finish_core,
        }

    def _use_eager_functions(self) -> None:
        self._fns: dict[str, Callable] = self._cores()

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
        if not self._staged:
            self._host_reset = self._prepare_reset(mask) if bool(mask.any()) else None
            return
        qpos, qvel = self._prepare_reset(mask)
        mask_in, qpos_in, qvel_in, ctrl_in = self.backend.reset_staging
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
        b = self.backend
        if self._staged:
            physics = {"physics_step": b.launch_step, "physics_reset": b.launch_reset}
            return PhaseRunner(torch_phases, physics, getattr(b, "torch_stream", None))
        physics = {
            "physics_step": lambda: b.step(self._ctrl_out),
            "physics_reset": self._physics_reset_host,
        }
        return PhaseRunner(torch_phases, physics, None)

    # ------------------------------------------------------------------ step
    @contextmanager
    def phase_stream(self) -> Iterator[None]:
        """Run the block on the backend's stream, ordered after and before the caller's: where
        :meth:`step_phases` callables must run. A no-op on backends without one."""
        with self._runner.on_stream():
            yield

    def step_phases(self) -> list[tuple[str, Callable[[], None]]]:
        """The :data:`STEP_PHASES` of one step as ``(name, run)`` pairs: graph replays when
        captured, else the eager phases. Running them in order inside :meth:`phase_stream` is
        exactly :meth:`step` after the actions are staged (write them with
        ``stage_actions``). The ``select`` phase may be replaced by a writer of
        :attr:`reset_mask` (the probe's scheduled rows)."""
        return list(self._runner.runs)

    @property
    def staged(self) -> bool:
        """True when the backend has staged device launches (no host work inside a step)."""
        return self._staged

    def stage_actions(self, actions: Tensor) -> None:
        """Write ``actions [N, 29]`` into the step's fixed action input."""
        self._act_in.copy_(actions)

    @property
    def reset_mask(self) -> Tensor:
        """[N] bool, the rows step 8 resets (written by ``select``); fixed buffer."""
        return self._reset_mask

    @property
    def clip_end(self) -> Tensor:
        """[N] bool, rows at their clip's last frame after ``update``; fixed buffer (view)."""
        return self._conds[:, _CLIP_END]

    def step(self, actions: Tensor) -> StepResult:
        """Advance one control step (TASK.md §1); see the module docstring for sync rules."""
        self._act_in.copy_(actions)
        with self._runner.on_stream():
            self._runner.run()
        return self._outputs.result(fresh=not self.static_outputs)

    def step_without_reset(self, actions: Tensor) -> StepResult:
        """Steps 1-7 of a control step and no reset (evaluation, :meth:`evaluation`).

        Done rows are not reset: they keep their terminal state and observation, and the
        result carries the per-row fields (``frame``, ``conditions``, ``row_reward_terms``,
        ``robot``, ``reference``). On a staged backend the step replays the training step's
        own graphs of the first four phases, so it costs no compile or capture. Every tensor
        is a view of a fixed buffer, overwritten by the next step.
        """
        self._act_in.copy_(actions)
        with self._runner.on_stream():
            self._runner.run(NO_RESET_PHASES)
            self._publish_obs()
        return dataclasses.replace(
            self._outputs.result(fresh=False),
            frame=self._step_frame,
            conditions=self._conds,
            row_reward_terms=self._row_terms,
            robot=self._robot_buf,
            reference=self._ref_buf,
        )

    def _restart(self, failures: Tensor) -> None:
        """Restore the sampler statistics ``failures``, reseed both generators and reset every
        row (after warm-up or compile steps)."""
        self.sampler.failures.copy_(failures)
        self._nonfinite_action_rows.zero_()
        self.reset_generator.manual_seed(self.seed)
        self.obs_generator.manual_seed(self.seed + 1)
        self.reset_all()

    # ------------------------------------------------------------------ cold path
    @property
    def task_compile(self) -> DiagnosticEntry:
        """Whether the phase arithmetic runs compiled (``torch.compile``), and why not."""
        return self._compile_entry

    @property
    def task_cuda_graph(self) -> DiagnosticEntry:
        """Whether the torch part of ``step`` runs as CUDA graphs, and why not."""
        return self._graph_entry

    def check_health(self) -> None:
        """Raise :class:`BackendFailure` on non-finite actions or physics overflow (syncs)."""
        bad = int(self._nonfinite_action_rows)
        if bad:
            msg = f"{bad} env rows received non-finite actions (zeroed); the policy diverged"
            raise BackendFailure(msg)
        self.backend.check_health()

    def diagnostics(self) -> dict:
        """``backend_diagnostics`` of the backend (CONTRACTS §4.3); on mjwarp it carries the
        ``task_cuda_graph`` entry of this env."""
        return self.backend.diagnostics()


def make_env(
    task_cfg: G1TrackingCfg,
    *,
    sim_backend: str,
    num_envs: int,
    device: torch.device | str,
    seed: int,
    motion: MotionClip | None = None,
    resolved_motion: ResolvedMotion | None = None,
    model: mujoco.MjModel | None = None,
    backend_options: dict | None = None,
    cuda_graph: bool = True,
    static_outputs: bool = False,
    compile_backend: str | None | bool = True,
) -> G1TrackingEnv:
    """Build the scene, resolve and load the motion, create the backend and the env.

    Args:
        task_cfg: task configuration.
        sim_backend: ``"mjwarp"`` or ``"mujoco"``.
        num_envs: parallel worlds.
        device: torch device of all task tensors.
        seed: task seed (reset generator ``seed``, obs-noise generator ``seed + 1``).
        motion: an already loaded clip (skips resolution).
        resolved_motion: the clip preflight resolved (path and digest): loaded from exactly
            that path and checked against that digest (``MotionError`` naming both digests
            when the file changed). With neither, ``task_cfg.motion_file`` is resolved here.
        model: an already built scene; otherwise ``build_g1_model(task_cfg.scene)``.
        backend_options: extra keyword arguments for the backend constructor.
        cuda_graph: capture the torch part of ``step`` as CUDA graphs (mjwarp on CUDA).
        static_outputs: ``step`` returns views of a fixed buffer instead of fresh copies.
        compile_backend: ``True`` (default) compiles the phases with inductor when
            ``task_cfg.torch_compile`` is set and ``device`` is CUDA; a backend name forces
            that backend; ``None``/``False`` steps eagerly.
    """
    t0 = time.perf_counter()
    model = build_g1_model(task_cfg.scene) if model is None else model
    t1 = time.perf_counter()
    if motion is None:
        from trainer.task.motion import load_resolved_motion, resolve_motion

        if resolved_motion is None:
            resolved_motion = resolve_motion(task_cfg.motion_file, hub_repo=task_cfg.hub_repo)
        motion = load_resolved_motion(resolved_motion, model)
    t2 = time.perf_counter()
    options = {"decimation": task_cfg.scene.decimation}
    if sim_backend == "mjwarp":
        options.update(nconmax=task_cfg.scene.nconmax, njmax=task_cfg.scene.njmax)
    options.update(backend_options or {})
    backend = make_backend(sim_backend, model, num_envs, device, **options)
    t3 = time.perf_counter()
    if not math.isclose(model.opt.timestep * backend.decimation, task_cfg.ctrl_dt):
        msg = f"model timestep {model.opt.timestep} x decimation != ctrl_dt {task_cfg.ctrl_dt}"
        raise ValueError(msg)
    if compile_backend is True:
        on_cuda = torch.device(device).type == "cuda"
        compile_backend = "inductor" if task_cfg.torch_compile and on_cuda else None
    env = G1TrackingEnv(
        task_cfg,
        backend,
        model,
        motion,
        seed=seed,
        cuda_graph=cuda_graph,
        static_outputs=static_outputs,
        compile_backend=compile_backend or None,
    )
    env.setup_seconds.update(scene=t1 - t0, motion=t2 - t1, backend=t3 - t2)
    return env
