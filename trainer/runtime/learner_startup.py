"""The learner's startup phases (``startup/begin`` .. ``startup/collector_start``).

Thread plan, memory budget and device checks come first; then a collector process is
started, so its env build (the slowest startup step) overlaps everything after: the
learner, the inference ring and replay ingress, the metrics writer, the resume, and the
learner's graph capture. The ring, the ingress and the tick count reach the collector at
``startup/collector_start`` (docs/runtime.md, "Startup overlap"); startup ends once the
collector reports its env built. A collector thread takes turns with the learner instead
(a CUDA graph capture does not survive another thread's allocations): it is started at
``startup/collector_start``, and the learner captures once the env is built.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from contracts.env_spec import EnvSpec
from contracts.names import ShutdownPhase
from trainer.config.checks import resolve_resume_path
from trainer.config.schema import RunContext
from trainer.cpu_threads import apply_torch_threads, plan_training_threads
from trainer.runtime.collector import CollectorResources
from trainer.runtime.collector_handle import CollectorHandle, EnvFactory
from trainer.runtime.control import Word
from trainer.runtime.evaluation_stage import LearnerEvaluation
from trainer.runtime.inference_ring import InferenceRing
from trainer.runtime.liveness import STALE_AFTER_S, Waiter
from trainer.runtime.metrics_pump import MetricsPump
from trainer.runtime.protocols import Learner
from trainer.runtime.replay_ingress import ReplayIngress
from trainer.runtime.run_checkpoints import RunCheckpoints
from trainer.runtime.run_state import LearnerResources, RunPlan, RunState
from trainer.runtime.shared_tensors import StorageWatch, shared_tensors
from trainer.runtime.shutdown import ShutdownTracker
from trainer.runtime.signals import SignalGuard

logger = logging.getLogger(__name__)

LearnerFactory = Callable[[RunContext, torch.device], Learner]
PackFn = Callable[..., torch.Tensor]


def _task_env_spec() -> EnvSpec:
    """The G1 task's sizes, known before the collector builds the env (torch-free)."""
    from trainer.task.spec import G1_TRACKING_SPEC

    return G1_TRACKING_SPEC


def _default_learner(ctx: RunContext, spec: EnvSpec, device: torch.device) -> Learner:
    from trainer.algo.learner import FlashSacLearner

    return FlashSacLearner(ctx.algo_cfg, spec, num_envs=ctx.algo_cfg.num_envs, device=device)


def _default_pack_fn() -> PackFn:
    from trainer.algo.replay import pack_transitions

    return pack_transitions


@dataclass(frozen=True)
class StartupHooks:
    """The runtime's test seams (``run_training(ctx, **hooks)``); None: the real thing."""

    learner_factory: LearnerFactory | None = None
    env_factory: EnvFactory | None = None
    env_kwargs: dict[str, Any] | None = None
    """``env_factory``'s keyword arguments (the env then owns its motion and threads)."""
    pack_fn: PackFn | None = None
    env_spec: EnvSpec = field(default_factory=_task_env_spec)
    """What the env will report: sizes the learner, ring and ingress before it exists; the
    collector checks its env's ``spec`` against it at the hand-over."""
    stale_after_s: float = STALE_AFTER_S


@dataclass(frozen=True)
class RunParts:
    """The parts of one run that startup builds into (trainer/runtime/learner_loop.py)."""

    ctx: RunContext
    plan: RunPlan
    state: RunState
    resources: LearnerResources
    collector: CollectorHandle
    pump: MetricsPump
    checkpoints: RunCheckpoints
    evaluation: LearnerEvaluation
    tracker: ShutdownTracker
    signals: SignalGuard


class LearnerStartup:
    """Runs the startup phases in order (see the module docstring)."""

    def __init__(self, parts: RunParts, hooks: StartupHooks) -> None:
        self.parts = parts
        self.hooks = hooks
        self.training = parts.ctx.training

    def run(self) -> None:
        self._devices()
        self._build_resources()
        self._start_collector()

    def _devices(self) -> None:
        """``startup/begin`` .. ``startup/cuda_preflight``, then the collector's spawn."""
        p, hooks = self.parts, self.hooks
        tr, plan = p.tracker, p.plan
        tr.enter(ShutdownPhase.STARTUP_BEGIN)
        self._plan_threads()
        if int(self.training.env_steps_per_sync) != 1:
            raise ValueError(
                f"training.env_steps_per_sync={self.training.env_steps_per_sync} is not supported: "
                "the collector/learner runtime is lock-step; use 1"
            )
        tr.enter(ShutdownPhase.STARTUP_MEMORY_BUDGET)
        replay_rows = int(p.ctx.algo_cfg.replay_buffer_n) * plan.num_envs
        p.resources.memory_budget = {
            "replay_bytes": replay_rows * hooks.env_spec.row_width * 4,
            "preflight_estimate_bytes": p.ctx.memory_estimate_bytes,
        }
        tr.enter(ShutdownPhase.STARTUP_CUDA_PREFLIGHT)
        if plan.device.type == "cuda":
            torch.cuda.set_device(plan.device)
            if not p.collector.interprocess:
                # A collector thread shares this context: each side queues on its own stream.
                p.resources.stream_before = torch.cuda.current_stream(plan.device)
                torch.cuda.set_stream(torch.cuda.Stream(device=plan.device))
        if (
            plan.collector_device.type == "cuda"
            and plan.device.type == "cuda"
            and torch.cuda.get_device_properties(plan.device).uuid
            != torch.cuda.get_device_properties(plan.collector_device).uuid
        ):
            raise RuntimeError(
                f"learner device {plan.device} and collector device {plan.collector_device} are different GPUs; "
                "the runtime needs both on one physical GPU"
            )
        if p.collector.interprocess:
            # The collector builds its env (the slowest startup step) while we build ours.
            self._launch_collector()

    def _launch_collector(self) -> None:
        p, hooks = self.parts, self.hooks
        p.collector.launch(
            p.ctx,
            p.plan,
            p.resources.threads,
            env_factory=hooks.env_factory,
            env_kwargs=hooks.env_kwargs,
        )

    def _plan_threads(self) -> None:
        """Choose every process's thread counts and set the learner's own (docs/runtime.md,
        "CPU threads"); the collector gets its share through its spec."""
        p = self.parts
        threads = plan_training_threads(
            learner_device=str(p.plan.device),
            collector_device=str(p.plan.collector_device),
            sim_backend=str(p.ctx.sim_backend),
        )
        p.resources.threads = threads
        p.resources.torch_threads_before = torch.get_num_threads()
        apply_torch_threads(threads.learner_torch)
        logger.info("threads: %s", threads)

    def _build_resources(self) -> None:
        """``startup/replay_resources`` .. ``startup/logger``: learner, ring, ingress, writer."""
        p, spec = self.parts, self.hooks.env_spec
        tr, plan, res, block = p.tracker, p.plan, p.resources, p.collector.block
        tr.enter(ShutdownPhase.STARTUP_REPLAY_RESOURCES)
        if self.hooks.learner_factory is None:
            res.learner = _default_learner(p.ctx, spec, plan.device)
        else:
            res.learner = self.hooks.learner_factory(p.ctx, plan.device)
        tr.enter(ShutdownPhase.STARTUP_INFERENCE_RESOURCES)
        assert block is not None
        res.ring = InferenceRing(
            capacity=int(self.training.inference_slot_capacity),
            num_envs=plan.num_envs,
            obs_dim=spec.obs_dim,
            critic_obs_dim=spec.critic_obs_dim,
            action_dim=spec.action_dim,
            device=plan.collector_device,
            interprocess=p.collector.interprocess,
        )
        res.ingress = ReplayIngress(
            depth=int(self.training.replay_ingress_depth),
            slot_rows=plan.slot_rows,
            num_envs=plan.num_envs,
            device=plan.collector_device,
            row_width=spec.row_width,
            interprocess=p.collector.interprocess,
        )
        res.shared = StorageWatch(shared_tensors(res.ring, res.ingress))
        block.set(Word.EPOCH, 1)
        tr.inference_epoch = 1
        tr.enter(ShutdownPhase.STARTUP_LOGGER)
        p.pump.open()

    def _start_collector(self) -> None:
        """``startup/learner_prepare`` (resume) and ``startup/collector_start`` (hand-over,
        the learner's graph capture, the collector's readiness)."""
        p = self.parts
        tr, res, block = p.tracker, p.resources, p.collector.block
        assert block is not None and res.learner is not None
        tr.enter(ShutdownPhase.STARTUP_LEARNER_PREPARE)
        resume_from = self.training.resume_from
        if resume_from is not None:
            p.checkpoints.resume(resolve_resume_path(resume_from, Path.cwd()), res.learner, tr)
        res.waiter = waiter = Waiter(
            block,
            side="learner",
            check_peer=p.collector.check,
            interrupt=p.signals.check,
            stale_after_s=self.hooks.stale_after_s,
            yield_while_spinning=not p.collector.interprocess,
        )
        tr.enter(ShutdownPhase.STARTUP_COLLECTOR_START)
        if p.collector.interprocess:
            # Compile and capture the learner's graphs while the collector finishes its env.
            self._hand_over_resources()
            self._capture_learner_graphs()
        else:
            # One process: a CUDA graph capture is invalidated by an allocation or a module
            # load in another thread, so the env builds (and captures) only now that our
            # resources exist, we capture once it is built, and it gets its resources after.
            self._launch_collector()
            waiter.wait(lambda: bool(block.ints[Word.ENV_BUILT]), "the collector to build its env")
            self._capture_learner_graphs()
            self._hand_over_resources()
        waiter.wait(
            lambda: bool(block.ints[Word.COLLECTOR_READY]), "the collector to build its env"
        )
        p.collector.read_info()

    def _capture_learner_graphs(self) -> None:
        p = self.parts
        assert p.resources.learner is not None
        start = time.monotonic()
        p.resources.learner.capture_graphs()
        p.state.learner_capture_s = time.monotonic() - start

    def _hand_over_resources(self) -> None:
        p = self.parts
        res, block, total_ticks = p.resources, p.collector.block, p.state.total_ticks
        assert res.ring is not None and res.ingress is not None and block is not None
        block.set(Word.TICK_LIMIT, total_ticks)
        p.collector.hand_over(
            CollectorResources(
                ring=res.ring,
                ingress=res.ingress,
                pack_fn=self.hooks.pack_fn or _default_pack_fn(),
                env_spec=self.hooks.env_spec,
                num_envs=p.plan.num_envs,
                total_ticks=total_ticks,
                metrics_interval=int(self.training.collector_metrics_interval),
                evaluation=p.evaluation.plan(p.plan.num_envs),
            )
        )
