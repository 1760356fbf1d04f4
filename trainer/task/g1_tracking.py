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

Step phases. A step on a staged backend (mjwarp) is eight phases in a fixed order, each
reading and writing only fixed buffers (:data:`STEP_PHASES`)::

    actions (sanitise, ctrl) · physics_step (Warp graph) · exchange (backend views and the
    reference frame → fixed buffers) · update (clock, terms, rewards, sampler, k, terminal obs)
    · select (reset mask = done) · stage_reset (start frames, reset targets → backend staging)
    · physics_reset (Warp graph) · finish (post-reset observations, outputs)

:meth:`G1TrackingEnv.step_phases` hands them out one by one, so ``g1-backend-probe`` times the
very phases training runs (it swaps ``select`` for its scheduled rows).

CUDA graphs. On mjwarp with a CUDA device each torch phase is captured at construction as one
``torch.cuda.CUDAGraph`` (one shared memory pool) and replayed on Warp's stream between the
backend's two Warp graphs. The graphs record the same Python methods the eager path runs. The
reset and observation generators are registered with the graphs (philox offsets advance on
every replay: fresh numbers each step, the same stream as eager). Capture failure falls back to
eager with the reason in ``diagnostics()["diagnostics"]["task_cuda_graph"]``, never silently.

Evaluation mode. :meth:`G1TrackingEnv.evaluation` (``trainer/task/eval_mode.py``) runs fixed
episodes: explicit start frames (a tensor input of the compiled reset), no observation noise
(the scale tensor the graphs read is zeroed in place, the config is untouched), no reset noise
(fixed noise-free uniforms instead of generator draws), no auto-reset (:meth:`G1TrackingEnv.step_without_reset` replays the first four phases only) and
done rows held at their terminal state; each step returns per-row conditions, weighted reward
terms, the scored frame and the robot and reference states. Training never pays for it: the
update phase writes three small per-row buffers, nothing else changes.

torch.compile. With ``compile_backend`` (make_env: ``inductor`` when ``env.torch_compile`` and
the device is CUDA) the arithmetic of each torch phase is compiled before capture, so a phase is
a handful of fused kernels instead of hundreds of small ones. Random draws stay eager (dynamo
does not trace ``generator=``) and are passed in, so the compiled and eager steps draw the same
numbers. A compile failure reverts to the eager functions with the reason in
``task_compile``; it never disables the graphs silently.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from trainer.compile_mode import compile_in_process
from trainer.sim.backend import BackendFailure, DiagnosticEntry, SimBackend
from trainer.sim.factory import make_backend
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

    from trainer.task.eval_mode import EvalMode
    from trainer.task.motion import MotionClip, ResolvedMotion

__all__ = ["STEP_PHASES", "G1TrackingEnv", "StepResult", "make_env"]

log = logging.getLogger(__name__)

_ROOT = TRACKED_BODY_NAMES.index("pelvis")  # reset root, tracked column 0
_COND_NAMES = term.CONDITION_NAMES
_NUM_TERMINAL = len(term.TERMINATION_NAMES)
_SAMPLER_DIAG_NAMES = ("sampler/entropy", "sampler/top1_prob", "sampler/top1_bin_frac")
_INFO_NAMES = (*(f"Episode_Termination/{k}" for k in _COND_NAMES), *_SAMPLER_DIAG_NAMES)
_REWARD_TAGS = tuple(f"reward/{k}" for k in REWARD_TERM_NAMES)
_ALIGN = 16  # byte alignment of each field in the packed output buffer
_WARMUP_STEPS = 2  # eager steps on the side stream before capture
_CLIP_END = _COND_NAMES.index("motion_clip_end")
_NO_RESET_PHASES = ("actions", "physics_step", "exchange", "update")
"""The phases of :meth:`G1TrackingEnv.step_without_reset` (steps 1-7, no reset)."""
STEP_PHASES = (
    "actions",
    "physics_step",
    "exchange",
    "update",
    "select",
    "stage_reset",
    "physics_reset",
    "finish",
)
"""The phases of one control step on a staged backend, in order (module docstring)."""
_COMPILED = ("actions", "exchange", "update", "prepare", "finish")
"""Functions ``compile_backend`` compiles (``_<name>_core`` methods)."""


def _output_layout(n: int, actor: int, critic: int) -> tuple[list, int]:
    """(name, byte offset, dtype, shape) of every ``StepResult`` field in one byte buffer."""
    fields = (
        ("obs", torch.float32, (n, actor)),
        ("critic_obs", torch.float32, (n, critic)),
        ("terminal_obs", torch.float32, (n, actor)),
        ("terminal_critic_obs", torch.float32, (n, critic)),
        ("reward", torch.float32, (n,)),
        ("episode_return", torch.float32, (n,)),
        ("episode_length", torch.long, (n,)),
        ("terminated", torch.bool, (n,)),
        ("truncated", torch.bool, (n,)),
        ("done", torch.bool, (n,)),
        ("reward_terms", torch.float32, (len(REWARD_TERM_NAMES),)),
        ("info", torch.float32, (len(_INFO_NAMES),)),
    )
    layout, offset = [], 0
    for name, dtype, shape in fields:
        layout.append((name, offset, dtype, shape))
        nbytes = math.prod(shape) * dtype.itemsize
        offset += -(-nbytes // _ALIGN) * _ALIGN
    return layout, offset


@dataclass
class StepResult:
    """What one control step returns.

    By default every tensor is a view of one fresh per-step allocation (safe to keep across
    steps). With ``G1TrackingEnv(static_outputs=True)`` they are views of the env's fixed output
    buffer instead, overwritten by the next ``step``: read or copy them before stepping again.
    """

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
    # Per-row fields of :meth:`G1TrackingEnv.step_without_reset` (evaluation); None from
    # ``step``, whose training hot path copies nothing it does not need.
    frame: Tensor | None = None
    """[N] long, the reference frame k this step was scored against."""
    conditions: Tensor | None = None
    """[N, 5] bool, the :data:`~trainer.task.terminations.CONDITION_NAMES` conditions."""
    row_reward_terms: Tensor | None = None
    """[N, 9] wᵢ·termᵢ of every row (before the dt factor), ``REWARD_TERM_NAMES`` order."""
    robot: TrackedState | None = None
    """The robot state the terms saw (after physics; the terminal state where done)."""
    reference: TrackedState | None = None
    """The reference at ``frame``."""


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
        self.num_envs = n = backend.num_envs
        self.device = dev = backend.device
        self.max_episode_steps = cfg.max_episode_steps
        self.seed = seed
        self.static_outputs = static_outputs
        # Backends with staged launches (mjwarp) run the reset inside step as fixed work and
        # zero non-finite actions on the device: their step reads nothing back to the host.
        self._staged = hasattr(backend, "launch_step") and hasattr(backend, "reset_staging")
        self._stream = getattr(backend, "torch_stream", None) if self._staged else None
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
        self._noise_scale = obs_terms.actor_noise_scale(cfg, dev)  # read by the graphs
        self._configured_noise_scale = self._noise_scale.clone()
        self._observation_noise = True
        self._weights = cfg.reward_weights()
        self._weight_vec = torch.as_tensor(
            [self._weights[k] for k in REWARD_TERM_NAMES], **f32
        )  # [9] in REWARD_TERM_NAMES order
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

        # Motion table: one [T, 240] device tensor (joint pos/vel, body pos/quat/lin/ang vel of
        # the 14 tracked columns) so a reference lookup is one gather.
        self.motion = motion
        parts = [
            torch.as_tensor(x, **f32).flatten(1)
            for x in (
                motion.joint_pos,
                motion.joint_vel,
                motion.body_pos_w,
                motion.body_quat_w,
                motion.body_lin_vel_w,
                motion.body_ang_vel_w,
            )
        ]
        self._m_table = torch.cat(parts, dim=1).contiguous()
        widths = [p.shape[1] for p in parts]
        bounds = [sum(widths[:i]) for i in range(len(widths) + 1)]
        self._m_slices = [slice(bounds[i], bounds[i + 1]) for i in range(len(widths))]
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
            clip_ends=motion.clip_ends.tolist(),
        )

        self.reset_generator = torch.Generator(device=dev)
        self.reset_generator.manual_seed(seed)
        self.obs_generator = torch.Generator(device=dev)
        self.obs_generator.manual_seed(seed + 1)

        # Per-row task state (preallocated; updated in place, never rebound: graphs hold it).
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
        self._noiseless_draws = (
            torch.zeros(n, **f32),
            torch.zeros(n, **f32),
            torch.full((n, 41), 0.5, **f32),  # 2u - 1 = 0: no reset noise
        )
        self._reset_mask = torch.zeros(n, dtype=torch.bool, device=dev)
        # Step I/O: the action input and the packed outputs (one byte buffer, typed views).
        self._act_in = torch.zeros(n, 29, **f32)
        self._ctrl_out = backend.ctrl if self._staged else torch.zeros(n, 29, **f32)
        self._layout, nbytes = _output_layout(n, self.actor_obs_dim, self.critic_obs_dim)
        self._out_buf = torch.zeros(nbytes, dtype=torch.uint8, device=dev)
        self._out = self._views(self._out_buf)
        self._graphs: dict[str, torch.cuda.CUDAGraph] | None = None
        self._step_runs = self._build_step_runs()
        self._capture_failed = False
        self._fns: dict[str, Callable] = {}
        self._use_eager_functions()
        self.reset_all()
        t0 = time.perf_counter()
        self.setup_seconds: dict[str, float] = {"task_init": t0 - init_start}
        """Wall seconds of the construction steps (``task_init``, ``task_compile``,
        ``task_graph_capture``; ``make_env`` adds ``scene``, ``motion`` and ``backend``)."""
        self._compile_entry = self._setup_compile(compile_backend)
        t1 = time.perf_counter()
        self._graph_entry = self._setup_cuda_graphs(cuda_graph)
        self.setup_seconds.update(task_compile=t1 - t0, task_graph_capture=time.perf_counter() - t1)
        if self._compile_entry.enabled and self._capture_failed:
            # Compiling was fine but capture failed: retry the capture without compile
            # (an inductor kernel that cannot be captured must not cost the graphs).
            reason = f"reverted after graph capture failed: {self._graph_entry.disable_reason}"
            self._use_eager_functions()
            self._compile_entry = DiagnosticEntry(True, False, reason[:300])
            self._capture_failed = False
            self._graph_entry = self._setup_cuda_graphs(cuda_graph)
        set_diag = getattr(backend, "set_diagnostic", None)
        if set_diag is not None:
            set_diag("task_cuda_graph", self._graph_entry)
            set_diag("task_compile", self._compile_entry)

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
        """The reference at ``frames [N]`` gathered from the device motion table (one gather)."""
        row = self._m_table.index_select(0, frames)
        jp, jv, bp, bq, bl, ba = (row[:, s] for s in self._m_slices)
        return TrackedState(
            joint_pos=jp,
            joint_vel=jv,
            body_pos_w=bp.unflatten(1, (-1, 3)),
            body_quat_w=bq.unflatten(1, (-1, 4)),
            body_lin_vel_w=bl.unflatten(1, (-1, 3)),
            body_ang_vel_w=ba.unflatten(1, (-1, 3)),
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

    def _obs_noise(self) -> Tensor:
        """U(0, 1) [N, 160] from the observation generator (drawn eagerly, see module doc)."""
        shape = (self.num_envs, self.actor_obs_dim)
        return torch.rand(shape, generator=self.obs_generator, device=self.device)

    def _observe(self, robot: TrackedState, noise: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Relative reference and observations at the current frame for all rows; ``noise``
        is :meth:`_obs_noise`."""
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
        actor = torch.addcmul(clean, 2.0 * noise - 1.0, self._noise_scale)
        return rel_pos, rel_quat, actor, critic

    # ------------------------------------------------------------------ reset
    def _draw_reset(self) -> tuple[Tensor, Tensor, Tensor]:
        """The reset generator's fixed draws of one reset: start-frame uniforms
        ``(u_bin, u_frac)`` [N] each, then the reset-noise uniforms ``u`` [N, 41]."""
        u_bin, u_frac = self.sampler.draw(self.num_envs, self.reset_generator)
        u = torch.rand(self.num_envs, 41, generator=self.reset_generator, device=self.device)
        return u_bin, u_frac, u

    def _reset_targets(self, frames: Tensor, u: Tensor) -> tuple[Tensor, Tensor]:
        """Noisy reset state of every row at ``frames`` for the uniforms ``u [N, 41]``
        (TASK.md §8). qpos [N, 36], qvel [N, 35]"""
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

    def _prepare_reset(
        self, mask: Tensor, frames: Tensor | None = None, *, noise: bool = True
    ) -> tuple[Tensor, Tensor]:
        """Draw start frames and reset targets for all rows (fixed draws) and reset the task
        state of the ``mask`` rows; returns the backend targets ``(qpos, qvel)``. Without
        ``noise`` nothing is drawn: the targets are the reference at the start frames."""
        draws = self._draw_reset() if noise else self._noiseless_draws
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
        qpos, qvel = self._reset_targets(start, u)
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

    def reset_all(self) -> tuple[Tensor, Tensor]:
        """Reset every row; returns copies of ``(obs [N, 160], critic_obs [N, 289])``."""
        self._reset_masked(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        return self.obs.clone(), self.critic_obs.clone()

    # ------------------------------------------------------------------ step phases
    # The phases read and write only fixed tensors (state, ``_act_in``, ``_out``, hand-over
    # buffers, backend views and staging), so each can be replayed as a CUDA graph.
    def _phase_actions(self) -> None:
        """Step 1: sanitise the staged actions, action history, position targets → ctrl."""
        self._fns["actions"]()

    def _actions_core(self) -> None:
        a = self._act_in
        if self._staged:  # unstaged steps reject non-finite actions on the host first
            finite = torch.isfinite(a).all(-1)  # [N]
            self._nonfinite_action_rows += (~finite).sum()
            a = torch.where(finite[:, None], a, 0.0)
        self.apply_actions(a, out=self._ctrl_out)

    def _phase_exchange(self) -> None:
        """Backend views and the reference at frame k → the fixed robot/reference buffers."""
        self._fns["exchange"]()

    def _exchange_core(self) -> None:
        robot, ref = self.robot_state(), self.reference_state(self.frame)
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
        outputs). Done rows are *not* reset here (``step`` does that; the probe does not).

        Args:
            robot: the tracked robot state read from the backend after physics.
            ref: the reference state at the current frame k.

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
        values_d = self.reward_terms(ref, robot)
        values = torch.stack([values_d[k] for k in REWARD_TERM_NAMES], dim=-1)  # [N, 9]
        weighted = values * self._weight_vec
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
            (conds.float().mean(0), torch.stack([diag[k] for k in _SAMPLER_DIAG_NAMES]))
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
        """Step 8, first half (staged backends): reset targets for every row into the
        backend's staging buffers and the task state of the selected rows (fixed draws)."""
        mask = self._reset_mask
        qpos, qvel = self._prepare_reset(mask)
        mask_in, qpos_in, qvel_in, ctrl_in = self.backend.reset_staging
        mask_in.copy_(mask)
        qpos_in.copy_(qpos)
        qvel_in.copy_(qvel)
        ctrl_in.zero_()

    def _phase_finish(self) -> None:
        """Step 8, second half: observations of the reset rows and the obs outputs."""
        self._finish_reset(self._reset_mask)
        self._publish_obs()

    def _publish_obs(self) -> None:
        """Copy the post-reset observations into the step outputs."""
        self._out["obs"].copy_(self.obs)
        self._out["critic_obs"].copy_(self.critic_obs)

    def _torch_phases(self) -> dict[str, Callable[[], None]]:
        return {
            "actions": self._phase_actions,
            "exchange": self._phase_exchange,
            "update": self._phase_update,
            "select": self._phase_select,
            "stage_reset": self._phase_stage_reset,
            "finish": self._phase_finish,
        }

    # ------------------------------------------------------------------ step
    @contextmanager
    def phase_stream(self) -> Iterator[None]:
        """Run the block on the backend's stream, ordered after and before the caller's: where
        :meth:`step_phases` callables must run. A no-op on backends without one."""
        if self._stream is None:
            yield
            return
        caller = torch.cuda.current_stream(self.device)
        self._stream.wait_stream(caller)
        with torch.cuda.stream(self._stream):
            yield
        caller.wait_stream(self._stream)

    def step_phases(self) -> list[tuple[str, Callable[[], None]]]:
        """The :data:`STEP_PHASES` of one step on a staged backend as ``(name, run)`` pairs:
        graph replays when captured, else the eager phases. Running them in order inside
        :meth:`phase_stream` is exactly :meth:`step` after the actions are staged (write them
        with ``stage_actions``). The ``select`` phase may be replaced by a writer of
        :attr:`reset_mask` (the probe's scheduled rows).

        Raises:
            BackendFailure: the backend has no staged launches (CPU MuJoCo).
        """
        if not self._staged:
            msg = f"sim backend {self.backend.name!r} has no staged launches; use env.step"
            raise BackendFailure(msg)
        return list(self._step_runs)

    def _build_step_runs(self) -> tuple[tuple[str, Callable[[], None]], ...]:
        """The ``(name, run)`` pairs of :meth:`step_phases`; rebuilt only when the graphs
        change, so a step does no per-call lookups (eager phases read ``_fns`` when called)."""
        if not self._staged:
            return ()
        b = self.backend
        runs = self._torch_phases()
        if self._graphs is not None:
            runs = {name: g.replay for name, g in self._graphs.items()}
        runs.update(physics_step=b.launch_step, physics_reset=b.launch_reset)
        return tuple((name, runs[name]) for name in STEP_PHASES)

    @property
    def staged(self) -> bool:
        """True when the backend has staged launches, so :meth:`step_phases` is available."""
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

    def _run_staged(self) -> None:
        """One step on a staged backend: graphs when captured, else the same phases eagerly."""
        for _, run in self._step_runs:
            run()

    def _require_finite_actions(self) -> None:
        """Unstaged steps reject non-finite actions on the host (the CPU backend would too)."""
        finite = torch.isfinite(self._act_in).all(-1)
        if not bool(finite.all()):
            row = int(torch.nonzero(~finite)[0, 0])
            msg = f"non-finite action in env row {row}; the policy diverged (NaN/Inf)"
            raise BackendFailure(msg)

    def step(self, actions: Tensor) -> StepResult:
        """Advance one control step (TASK.md §1); see the module docstring for sync rules."""
        self._act_in.copy_(actions)
        if self._staged:
            with self.phase_stream():
                self._run_staged()
        else:
            self._step_eager_through_update()
            done = self._out["done"]
            if bool(done.any()):
                self._reset_masked(done)
            self._publish_obs()
        return self._result()

    def _step_eager_through_update(self) -> None:
        """Unstaged steps 1-7: actions, physics, state exchange and the task update."""
        self._require_finite_actions()
        self._phase_actions()
        self.backend.step(self._ctrl_out)
        self._phase_exchange()
        self._phase_update()

    def step_without_reset(self, actions: Tensor) -> StepResult:
        """Steps 1-7 of a control step and no reset (evaluation, :meth:`evaluation`).

        Done rows are not reset: they keep their terminal state and observation, and the
        result carries the per-row fields (``frame``, ``conditions``, ``row_reward_terms``,
        ``robot``, ``reference``). On a staged backend the step replays the training step's
        own graphs of the first four phases, so it costs no compile or capture. Every tensor
        is a view of a fixed buffer, overwritten by the next step.
        """
        self._act_in.copy_(actions)
        if self._staged:
            runs = [run for name, run in self._step_runs if name in _NO_RESET_PHASES]
            with self.phase_stream():
                for run in runs:
                    run()
                self._publish_obs()
        else:
            self._step_eager_through_update()
            self._publish_obs()
        return dataclasses.replace(
            self._result(fresh=False),
            frame=self._step_frame,
            conditions=self._conds,
            row_reward_terms=self._row_terms,
            robot=self._robot_buf,
            reference=self._ref_buf,
        )

    def _views(self, buf: Tensor) -> dict[str, Tensor]:
        return {
            name: buf[off : off + math.prod(shape) * dtype.itemsize].view(dtype).view(shape)
            for name, off, dtype, shape in self._layout
        }

    def _result(self, *, fresh: bool | None = None) -> StepResult:
        fresh = not self.static_outputs if fresh is None else fresh
        v = self._views(self._out_buf.clone() if fresh else self._out_buf)
        return StepResult(
            obs=v["obs"],
            critic_obs=v["critic_obs"],
            terminal_obs=v["terminal_obs"],
            terminal_critic_obs=v["terminal_critic_obs"],
            reward=v["reward"],
            terminated=v["terminated"],
            truncated=v["truncated"],
            done=v["done"],
            reward_terms=dict(zip(_REWARD_TAGS, v["reward_terms"].unbind(0), strict=True)),
            episode_return=v["episode_return"],
            episode_length=v["episode_length"],
            info=dict(zip(_INFO_NAMES, v["info"].unbind(0), strict=True)),
        )

    # ------------------------------------------------------------------ CUDA graphs
    def _setup_cuda_graphs(self, requested: bool) -> DiagnosticEntry:
        """Warm up, capture one graph per torch phase and restore the post-``reset_all`` state."""
        if not requested:
            return DiagnosticEntry(False, False, "cuda_graph=False was requested")
        if self.device.type != "cuda":
            return DiagnosticEntry(
                True, False, f"torch device is {self.device.type}; CUDA graphs need CUDA"
            )
        if not self._staged or self._stream is None:
            return DiagnosticEntry(
                True,
                False,
                f"sim backend {self.backend.name!r} has no staged device launches "
                "(only mjwarp on CUDA can be interleaved with torch graphs)",
            )
        failures = self.sampler.failures.clone()
        try:
            self._graphs = self._capture()
            entry = DiagnosticEntry(True, True, None)
        except Exception as err:  # noqa: BLE001 - recorded and logged, then eager
            self._graphs = None
            self._capture_failed = True
            reason = f"torch CUDA graph capture failed: {type(err).__name__}: {err}"
            log.warning("task_cuda_graph disabled, stepping eagerly: %s", reason)
            entry = DiagnosticEntry(True, False, reason)
        self._step_runs = self._build_step_runs()
        # Warm-up steps moved the state and the generators: start over from the same seed, so
        # a graphed env begins exactly where an eager one does.
        self._restart(failures)
        return entry

    def _restart(self, failures: Tensor) -> None:
        """Restore the sampler statistics ``failures``, reseed both generators and reset every
        row (after warm-up or compile steps)."""
        self.sampler.failures.copy_(failures)
        self._nonfinite_action_rows.zero_()
        self.reset_generator.manual_seed(self.seed)
        self.obs_generator.manual_seed(self.seed + 1)
        self.reset_all()

    # ------------------------------------------------------------------ torch.compile
    def _use_eager_functions(self) -> None:
        self._fns = {name: getattr(self, f"_{name}_core") for name in _COMPILED}

    def _setup_compile(self, backend: str | None) -> DiagnosticEntry:
        """Compile the phase functions with ``backend`` and run them once (a full reset and,
        on a staged backend, one step), so compile errors surface here and revert to eager."""
        if backend is None:
            return DiagnosticEntry(False, False, "compile_backend=None was requested")
        failures = self.sampler.failures.clone()
        if backend == "inductor":
            compile_in_process()  # before the first compile: no inductor worker pool
        try:
            self._fns = {
                name: torch.compile(getattr(self, f"_{name}_core"), backend=backend, dynamic=False)
                for name in _COMPILED
            }
            self.reset_all()
            if self._staged:
                self._act_in.zero_()
                with self.phase_stream():
                    self._run_staged()
            entry = DiagnosticEntry(True, True, None)
        except Exception as err:  # noqa: BLE001 - recorded and logged, then eager
            self._use_eager_functions()
            reason = f"torch.compile({backend}) failed: {type(err).__name__}: {err}"[:300]
            log.warning("task_compile disabled, running the phases eagerly: %s", reason)
            entry = DiagnosticEntry(True, False, reason)
        self._restart(failures)
        return entry

    @property
    def task_compile(self) -> DiagnosticEntry:
        """Whether the phase arithmetic runs compiled (``torch.compile``), and why not."""
        return self._compile_entry

    def _capture(self) -> dict[str, torch.cuda.CUDAGraph]:
        self._act_in.zero_()
        with self.phase_stream():
            for _ in range(_WARMUP_STEPS):  # eager, on the backend's (side) stream
                self._run_staged()
        torch.cuda.synchronize(self.device)
        graphs: dict[str, torch.cuda.CUDAGraph] = {}
        pool = None  # one pool: the phases always replay in order on one stream
        gc_was_enabled = gc.isenabled()
        gc.disable()  # a finalizer freeing a Warp array must not land inside a capture
        try:
            for name, phase in self._torch_phases().items():
                graph = torch.cuda.CUDAGraph()
                graph.register_generator_state(self.reset_generator)
                graph.register_generator_state(self.obs_generator)
                with torch.cuda.graph(
                    graph, pool=pool, stream=self._stream, capture_error_mode="thread_local"
                ):
                    phase()
                pool = graph.pool()
                graphs[name] = graph
        finally:
            if gc_was_enabled:
                gc.enable()
        return graphs

    # ------------------------------------------------------------------ cold path
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

    @property
    def task_cuda_graph(self) -> DiagnosticEntry:
        """Whether the torch part of ``step`` runs as CUDA graphs, and why not."""
        return self._graph_entry


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
        backend_options: extra keyword arguments of ``make_backend`` (``num_threads``).
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
    backend = make_backend(
        sim_backend, model, num_envs, device, task_cfg.scene, **(backend_options or {})
    )
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


_STATE_FIELDS = tuple(f.name for f in dataclasses.fields(TrackedState))


def _state_shapes(n: int) -> tuple[tuple[int, ...], ...]:
    """Shapes of the :class:`TrackedState` fields for ``n`` rows (29 joints, 14 bodies)."""
    return ((n, 29), (n, 29), (n, 14, 3), (n, 14, 4), (n, 14, 3), (n, 14, 3))
