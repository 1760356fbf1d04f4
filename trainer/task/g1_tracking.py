"""``G1TrackingEnv``: the vectorised, tensor-native G1 motion-tracking task (docs/task.md).

The env owns no physics: it drives a :class:`~trainer.sim.backend.SimBackend` and computes
every term with batched torch ops on the backend's device, over preallocated buffers. One
control step follows docs/task.md §timing-and-step-order exactly:

1. ``a_prev ← a``, ``a ← a_t``, ``ctrl ← q_default + scale·a`` (``a_prev`` with latency).
2. ``backend.step`` (3 substeps, no forward afterwards).
3. ``episode_step += 1``.
4. Terminations, then rewards, against frame k (the frame the policy observed).
5. Sampler failure update at frame k.
6. ``k ← k + 1`` for rows that are not done.
7. Relative reference and observations for all rows (= the terminal observation of done rows).
8. Reset the done rows and overwrite their observations.

The pieces live in their own modules: the motion reference (device table, frames, sampler:
:mod:`trainer.task.reference`), the reward term table (:mod:`trainer.task.terms`),
the reset targets (:mod:`trainer.task.reset`), the packed outputs
(:mod:`trainer.task.outputs`), the step phases and their maths
(:mod:`trainer.task.tracking_phases`, which this class inherits) and the phase runner
(:mod:`trainer.task.phases`), which runs the eight phases of a step eagerly or as CUDA graphs;
:mod:`trainer.task.acceleration` compiles and captures them at construction.

Host synchronization. On a device-resident backend (mjwarp) nothing in ``step`` waits for the
GPU: non-finite actions are zeroed on the device and counted in a device flag that
:meth:`G1TrackingEnv.check_health` raises on (once per log interval), and the reset of step 8
always runs as a masked update that draws a fixed amount from the reset generator, so the
empty-mask case needs no host test. On the CPU backend the env checks both directly: non-finite
actions raise at once and an all-false reset mask skips the reset without drawing. The public
:meth:`G1TrackingEnv.reset_rows` (tests, probe) returns early on an empty mask on every
backend, leaving the reset generator untouched (docs/task.md §reset, §sanity-checks).

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
from trainer.task import acceleration
from trainer.task import observations as obs_terms
from trainer.task import terminations as term
from trainer.task.config import REWARD_TERM_NAMES, G1TrackingCfg
from trainer.task.eval_mode import EvalMode
from trainer.task.outputs import StepOutputs, StepResult
from trainer.task.phases import NO_RESET_PHASES, STEP_PHASES, PhaseRunner
from trainer.task.reference import MotionReference
from trainer.task.reset import ResetNoise
from trainer.task.spec import G1_TRACKING_SPEC
from trainer.task.state import TrackedState
from trainer.task.terms import RewardTable, TermConstants
from trainer.task.tracking_phases import TrackingPhases

if TYPE_CHECKING:
    import mujoco

    from trainer.task.motion import MotionClip, ResolvedMotion

__all__ = ["STEP_PHASES", "G1TrackingEnv", "StepResult", "make_env"]

_ROOT = TRACKED_BODY_NAMES.index("pelvis")  # reset root, tracked column 0
_COND_NAMES = term.CONDITION_NAMES
_CLIP_END = _COND_NAMES.index("motion_clip_end")
_NUM_JOINTS = len(JOINT_NAMES)
_NUM_TRACKED = len(TRACKED_BODY_NAMES)


def _state_shapes(n: int) -> tuple[tuple[int, ...], ...]:
    """Shapes of the :class:`TrackedState` fields for ``n`` rows."""
    j, b = _NUM_JOINTS, _NUM_TRACKED
    return ((n, j), (n, j), (n, b, 3), (n, b, 4), (n, b, 3), (n, b, 3))


class G1TrackingEnv(TrackingPhases):
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

    spec: EnvSpec = G1_TRACKING_SPEC
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
        self._stager = backend.staged()
        self._staged = self._stager is not None
        self._init_model_constants(model)
        self.reference = MotionReference(motion, cfg, self.device)
        self.reset_generator = torch.Generator(device=self.device)
        self.reset_generator.manual_seed(seed)
        self.obs_generator = torch.Generator(device=self.device)
        self.obs_generator.manual_seed(seed + 1)
        self._init_state()
        self._runner = self._make_runner()
        self.use_eager_phases()
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

    def reference_state(self, frames: Tensor) -> TrackedState:
        """The reference at ``frames [N]`` gathered from the device motion table (one gather)."""
        return self.reference.state(frames)

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
        return EvalMode(self)

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
        """Advance one control step (docs/task.md §timing-and-step-order); see the module docstring for sync rules."""
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

    @property
    def phase_runner(self) -> PhaseRunner:
        """The runner of :data:`STEP_PHASES` (eager or graphs; :mod:`trainer.task.acceleration`
        captures it)."""
        return self._runner

    def clear_action_input(self) -> None:
        """Zero the step's fixed action input (warm-up and capture steps)."""
        self._act_in.zero_()

    def restart(self, failures: Tensor) -> None:
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
        """``backend_diagnostics`` of the backend (docs/contracts.md §backend-diagnostics); on mjwarp it carries the
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
