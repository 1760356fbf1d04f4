"""The learner process's runtime: ``run_training(ctx) -> exit code``.

The ``train`` process owns the learner (networks, device replay), the logger and the run
directory writers. Right after its CUDA preflight it spawns ONE collector, which builds the
env while the learner builds its networks, replay, inference ring and replay ingress; the
ring, the ingress and the tick count reach the collector at ``startup/collector_start``
(docs/runtime.md, "Startup overlap"). Then it runs the tick schedule of FLASHSAC.md §6:

    tick t:  wait for obs(t) -> act -> publish action(t)      (the collector steps env t)
             commit tick t-1's transitions (already pushed before obs(t))
             if t >= W: iteration = prepare_iteration() + update_cycle()

Serving the action first lets the update of tick t run while the collector steps the env
with that action. An update at tick t samples every row of ticks < t (a one-tick
prefetch, FLASHSAC.md §7), so tick t is an iteration iff ``t * N >= max(B,
learning_starts * N)``, i.e. ``t >= W``. The run has ``W + max_iterations`` ticks, or
fewer under a time budget (``training.duration_seconds``, trainer/runtime/budget.py): the
first tick ``t >= W`` that finds the budget spent lowers the shared tick limit to ``t + 1``
before its action goes out, so it is the last tick of both processes. After the last one
the learner commits the last tick, so ``total_env_steps = (W + completed_iterations) * N``
and every pushed chunk is released.

Resume (``training.resume_from``): ``startup/learner_prepare`` loads the checkpoint, checks
it against the config and restores the learner before the collector gets its resources
(a failure here terminates the still-building collector); the run then
covers iterations ``k+1 .. max_iterations`` of the global count with its own warm-up
(docs/runtime.md, "Resuming").

Shutdown (CONTRACTS §4.5) is tracked in ``ShutdownTracker``; on success the collector is
quiesced *before* the final flight snapshot, so the manifest shows a drained flight
(queue_depth = publication_lag = 0). Any failure stops the collector, records who failed
in which phase and writes a failed summary; the exit code is 0 iff the run completed.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import math
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import psutil
import torch
import torch.multiprocessing as mp

from trainer.config.checks import resolve_resume_path
from trainer.cpu_threads import ThreadPlan, apply_torch_threads, plan_training_threads
from trainer.evaluation.stage import LearnerEvaluation
from trainer.rundir.checkpoint import (
    ResumeError,
    carry_prior_checkpoints,
    check_matches,
    file_sha256,
    is_checkpoint_iteration,
    read_checkpoint,
    save_checkpoint,
)
from trainer.rundir.metrics import MetricsWriter, check_learner_tags
from trainer.rundir.progress import ProgressWriter
from trainer.rundir.summary import (
    build_summary,
    null_cuda_process_sharing,
    write_failed_summary,
    write_summary,
)
from trainer.runtime.budget import UNBOUNDED_TICKS, TimeBudget
from trainer.runtime.collector import (
    CollectorResources,
    CollectorSpec,
    collector_main,
    read_report,
)
from trainer.runtime.control import ControlBlock, FailureKind, Word
from trainer.runtime.inference_ring import InferenceRing
from trainer.runtime.liveness import STALE_AFTER_S, Waiter
from trainer.runtime.replay_ingress import ROW_WIDTH, ReplayIngress
from trainer.runtime.shared_tensors import (
    HELD_KEY,
    TORCH_WARNING,
    StorageWatch,
    release,
    release_all,
    shared_tensors,
)
from trainer.runtime.shutdown import (
    BENIGN_COLLECTOR_EXITCODES,
    CollectorFailure,
    ExternalCancellation,
    ShutdownTracker,
    classify_exception,
    collector_exit,
    error_entry,
)

logger = logging.getLogger(__name__)

TAIL_WINDOW = 100
COLLECTOR_JOIN_S = 30.0
COLLECTOR_TERM_S = 5.0


def warmup_ticks(learning_starts: int, batch_size: int, num_envs: int) -> int:
    """W = max(learning_starts, ceil(B / N)) (FLASHSAC.md §6)."""
    return max(learning_starts, -(-batch_size // num_envs))


@dataclass(frozen=True)
class Dims:
    obs_dim: int = 160
    critic_obs_dim: int = 289
    action_dim: int = 29
    row_width: int = ROW_WIDTH


def _default_learner_factory(ctx: Any, device: torch.device) -> Any:
    from trainer.algo.learner import FlashSacLearner

    return FlashSacLearner(ctx.algo_cfg, num_envs=ctx.algo_cfg.num_envs, device=device)


def _default_env_factory() -> Callable[..., Any]:
    from trainer.task.g1_tracking import make_env

    return make_env


def _preflight_motion(ctx: Any) -> Any:
    """The clip preflight resolved (``RunContext.motion_*``): the collector loads exactly it."""
    from trainer.task.motion import ResolvedMotion

    return ResolvedMotion(Path(ctx.motion_path), ctx.motion_source, ctx.motion_sha256)


def _default_pack_fn() -> Callable[..., torch.Tensor]:
    from trainer.algo.replay import pack_transitions

    return pack_transitions


class _SignalGuard:
    """SIGINT/SIGTERM set a flag (CONTRACTS §1.1: graceful ``external_cancellation``)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Self:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
            logger.warning("received %s: stopping the run", signal.Signals(signum).name)

    def check(self) -> None:
        if self.signum is not None:
            raise ExternalCancellation(self.signum)

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


class LearnerRuntime:
    """One training run in the learner process (see the module docstring)."""

    def __init__(
        self,
        ctx: Any,
        *,
        learner_factory: Callable[[Any, torch.device], Any] | None = None,
        env_factory: Callable[..., Any] | None = None,
        env_kwargs: dict[str, Any] | None = None,
        pack_fn: Callable[..., torch.Tensor] | None = None,
        dims: Dims = Dims(),
        stale_after_s: float = STALE_AFTER_S,
        budget_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ctx = ctx
        self.run_dir = Path(ctx.run_dir)
        self.training = ctx.training
        self.algo_cfg = ctx.algo_cfg
        self.num_envs = int(self.algo_cfg.num_envs)
        cap = self.algo_cfg.max_iterations
        self.max_iterations: int | None = None if cap is None else int(cap)
        self.budget = TimeBudget(ctx.training.duration_seconds, clock=budget_clock)
        self.warmup = warmup_ticks(
            int(self.algo_cfg.learning_starts), int(self.algo_cfg.batch_size), self.num_envs
        )
        self.start_iteration = 0
        """Global iteration the run starts after (the resumed checkpoint's, else 0)."""
        self.lineage_env_steps = 0
        """Env steps of the earlier runs of a resumed lineage (the checkpoint's count)."""
        self.resumed_from: dict[str, Any] | None = None
        self.total_ticks = self._planned_ticks(0)
        rows = self.training.replay_ingress_slot_rows
        self.slot_rows = self.num_envs if rows is None else int(rows)
        self.device = torch.device(ctx.learner_device)
        self.collector_device = torch.device(ctx.collector_device)
        self.threads: ThreadPlan | None = None
        """Thread counts of this run's processes (chosen at ``startup/begin``)."""
        self._torch_threads_before: int | None = None
        self.dims = dims
        self.stale_after_s = stale_after_s
        self._learner_factory = learner_factory or _default_learner_factory
        self._env_factory = env_factory
        self._env_kwargs = env_kwargs
        self._pack_fn = pack_fn
        self.signals = _SignalGuard()
        self.progress: ProgressWriter | None = None
        self.tracker = ShutdownTracker(on_phase=self._on_phase, check_cancel=self.signals.check)
        self.block: ControlBlock | None = None
        self.ring: InferenceRing | None = None
        self.ingress: ReplayIngress | None = None
        self._shared: StorageWatch | None = None  # the ring's and ingress's tensors, until freed
        self.learner: Any = None
        self.writer: MetricsWriter | None = None
        self.process: Any = None
        self.iteration = 0
        self.start_wall = time.time()
        self.start_mono = time.monotonic()
        self._phase_starts: list[tuple[str, float]] = []
        self._conn: Any = None  # the learner's end of the collector's spawn pipe
        self._handed_over = False  # the collector has its ring and ingress
        self._learner_capture_s: float | None = None
        self.training_start: float | None = None
        self.first_iteration_end: float | None = None
        self.collector_info: dict[str, Any] = {}
        self.reward_terms: list[str] = []
        self.best_mean_reward: float | None = None
        self.last_report: dict[str, float] | None = None
        self.last_checkpoint: str | None = None
        self.learner_metric_names: list[str] | None = None
        self._pending_metrics: collections.deque = collections.deque()
        self._tail: collections.deque = collections.deque(maxlen=TAIL_WINDOW + 1)
        self._window = _Window()
        self.final: dict[str, float | None] = {}
        self.evaluation = LearnerEvaluation(ctx)
        self.stopped_by: str | None = None
        """``iterations`` (the cap ended the run) or ``duration`` (the time budget did)."""

    # -- helpers ------------------------------------------------------------------------
    def _planned_ticks(self, start_iteration: int) -> int:
        """W + the iterations left to the cap; without a cap, unbounded until the budget."""
        if self.max_iterations is None:
            return UNBOUNDED_TICKS
        return self.warmup + self.max_iterations - start_iteration

    def _on_phase(self, phase: str) -> None:
        self._phase_starts.append((phase, time.monotonic()))
        if self.progress is not None:
            # Current counters, so the finalize lines show what the summary will say.
            self.progress.set_counters(
                iteration=self.iteration, total_env_steps=self.total_env_steps
            )
            self.progress.write(phase)

    @property
    def run_iterations(self) -> int:
        """Iterations completed by THIS run (``run_summary.completed_iterations``)."""
        return self.iteration - self.start_iteration

    @property
    def total_env_steps(self) -> int:
        if self.block is None or self.ingress is None:
            return 0
        return self.block.get(Word.INGRESS_RELEASED) * self.slot_rows

    def _check_collector(self) -> None:
        """check_peer of the learner's waits: collector error flag, then process death."""
        block = self.block
        assert block is not None
        if block.ints[Word.COLLECTOR_FAILURE]:
            self._raise_collector_error()
        if self.process is not None and not self.process.is_alive():
            exitcode = self.process.exitcode
            if exitcode in BENIGN_COLLECTOR_EXITCODES and exitcode != 0:
                # A group-wide SIGINT/SIGTERM also reaches us; let our own flag decide.
                time.sleep(0.2)
                self.signals.check()
            if block.ints[Word.COLLECTOR_FAILURE]:
                self._raise_collector_error()
            raise CollectorFailure(
                f"collector process {self.process.pid} exited with code {exitcode}"
                + (
                    f" ({collector_exit(False, exitcode)['signal_name']})"
                    if exitcode and exitcode < 0
                    else ""
                ),
            )

    def _raise_collector_error(self) -> None:
        assert self.block is not None
        kind, text = self.block.read_error()
        type_name, _, message = text.partition("\n")
        classification = (
            "backend_worker_failure" if kind == FailureKind.BACKEND else "collector_failure"
        )
        raise CollectorFailure(
            f"collector raised {type_name}: {message}",
            classification=classification,
            error_type=type_name or "Exception",
        )

    def _interrupt(self) -> None:
        self.signals.check()

    # -- startup --------------------------------------------------------------------------
    def startup(self) -> None:
        tr = self.tracker
        tr.enter("startup/begin")
        self._plan_threads()
        if int(self.training.env_steps_per_sync) != 1:
            raise ValueError(
                f"training.env_steps_per_sync={self.training.env_steps_per_sync} is not supported: "
                "the collector/learner runtime is lock-step; use 1"
            )
        tr.enter("startup/memory_budget")
        replay_rows = int(self.algo_cfg.replay_buffer_n) * self.num_envs
        self.memory_budget = {
            "replay_bytes": replay_rows * self.dims.row_width * 4,
            "preflight_estimate_bytes": getattr(self.ctx, "memory_estimate_bytes", None),
        }
        tr.enter("startup/cuda_preflight")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        if (
            self.collector_device.type == "cuda"
            and self.device.type == "cuda"
            and torch.cuda.get_device_properties(self.device).uuid
            != torch.cuda.get_device_properties(self.collector_device).uuid
        ):
            raise RuntimeError(
                f"learner device {self.device} and collector device {self.collector_device} are different GPUs; "
                "the runtime needs both on one physical GPU"
            )
        # The collector builds its env (the slowest startup step) while we build ours.
        self._launch_collector()
        tr.enter("startup/replay_resources")
        self.learner = self._learner_factory(self.ctx, self.device)
        tr.enter("startup/inference_resources")
        assert self.block is not None
        self.ring = InferenceRing(
            capacity=int(self.training.inference_slot_capacity),
            num_envs=self.num_envs,
            obs_dim=self.dims.obs_dim,
            critic_obs_dim=self.dims.critic_obs_dim,
            action_dim=self.dims.action_dim,
            device=self.collector_device,
        )
        self.ingress = ReplayIngress(
            depth=int(self.training.replay_ingress_depth),
            slot_rows=self.slot_rows,
            num_envs=self.num_envs,
            device=self.collector_device,
            row_width=self.dims.row_width,
        )
        self._shared = StorageWatch(shared_tensors(self.ring, self.ingress))
        self.block.set(Word.EPOCH, 1)
        tr.inference_epoch = 1
        tr.enter("startup/logger")
        self.writer = MetricsWriter(self.run_dir)
        tr.enter("startup/learner_prepare")
        resume_from = getattr(self.training, "resume_from", None)
        if resume_from is not None:
            self._resume(resolve_resume_path(resume_from, Path.cwd()))
        self.waiter = Waiter(
            self.block,
            side="learner",
            check_peer=self._check_collector,
            interrupt=self._interrupt,
            stale_after_s=self.stale_after_s,
        )
        tr.enter("startup/collector_start")
        self._hand_over_resources()
        # Compile and capture the learner's graphs while the collector finishes its env.
        capture = getattr(self.learner, "capture_graphs", None)
        if capture is not None:
            start = time.monotonic()
            capture()
            self._learner_capture_s = time.monotonic() - start
        self.waiter.wait(
            lambda: bool(self.block.ints[Word.COLLECTOR_READY]), "the collector to build its env"
        )
        self._read_collector_text()

    def _plan_threads(self) -> None:
        """Choose every process's thread counts and set the learner's own (docs/runtime.md,
        "CPU threads"); the collector gets its share through its spec."""
        self.threads = plan_training_threads(
            learner_device=str(self.device),
            collector_device=str(self.collector_device),
            sim_backend=str(self.ctx.sim_backend),
        )
        self._torch_threads_before = torch.get_num_threads()
        apply_torch_threads(self.threads.learner_torch)
        logger.info("threads: %s", self.threads)

    def checkpoint_meta(self) -> dict[str, Any]:
        """What a resume from this run's checkpoints must match (``MATCHED_META_KEYS``)."""
        cfg = self.algo_cfg
        return {
            "algo": self.ctx.algo,
            "task": self.ctx.task,
            "sim_backend": self.ctx.sim_backend,
            "num_envs": self.num_envs,
            "obs_dim": self.dims.obs_dim,
            "critic_obs_dim": self.dims.critic_obs_dim,
            "action_dim": self.dims.action_dim,
            "actor_hidden_dim": int(cfg.actor_hidden_dim),
            "critic_hidden_dim": int(cfg.critic_hidden_dim),
            "num_blocks": int(cfg.num_blocks),
            "num_atoms": int(cfg.num_atoms),
        }

    def _resume(self, path: Path) -> None:
        """Restore the learner from ``path`` before the first update, or fail closed.

        Raises:
            ResumeError: unreadable file, a config mismatch, or no iterations left.
        """
        payload = read_checkpoint(path)
        check_matches(payload, self.checkpoint_meta(), path)
        iteration = int(payload["iteration"])
        if self.max_iterations is not None and iteration >= self.max_iterations:
            raise ResumeError(
                f"training.resume_from={path} is at iteration {iteration} but "
                f"algo.max_iterations={self.max_iterations}; raise algo.max_iterations"
            )
        try:
            self.learner.load_state_dict(payload["learner"])
        except (KeyError, RuntimeError, ValueError, TypeError, IndexError) as err:
            detail = " ".join(str(err).split())[:400]
            raise ResumeError(
                f"training.resume_from={path} does not match the configuration "
                f"({type(err).__name__}: {detail}); resume with the checkpoint's network "
                "sizes and algo.num_envs, or start a fresh run (training.resume_from=null)"
            ) from err
        saved_steps = payload.get("total_env_steps")
        self.start_iteration = self.iteration = iteration
        self.tracker.iteration = iteration
        self.lineage_env_steps = saved_steps if type(saved_steps) is int else 0
        self.total_ticks = self._planned_ticks(iteration)
        carried, missing = carry_prior_checkpoints(
            path, self.run_dir, iteration=iteration, save_interval=int(self.algo_cfg.save_interval)
        )
        if missing:
            logger.warning(
                "resume: %s not found beside %s; this run directory lacks them",
                ", ".join(missing),
                path,
            )
        self.resumed_from = {
            "path": str(path),
            "iteration": iteration,
            "sha256": file_sha256(path),
            "total_env_steps": self.lineage_env_steps,
            "carried_checkpoints": carried,
            "missing_checkpoints": missing,
        }
        logger.info("resumed from %s at iteration %d", path, iteration)

    def _launch_collector(self) -> None:
        """Create the control block and spawn the collector; it starts building its env.

        The ring and the replay ingress do not exist yet: they follow through the spawn
        pipe at ``startup/collector_start`` (``_hand_over_resources``).
        """
        ctx = self.ctx
        env_factory = self._env_factory or _default_env_factory()
        env_kwargs = self._env_kwargs
        motion = None
        if env_kwargs is None:
            env_kwargs = {
                "task_cfg": ctx.task_cfg,
                "sim_backend": ctx.sim_backend,
                "num_envs": self.num_envs,
                "device": str(self.collector_device),
                "seed": int(ctx.seed.effective_seed),
            }
            motion = _preflight_motion(ctx)
            physics = self.threads.collector_physics if self.threads is not None else None
            if physics is not None:
                env_kwargs["backend_options"] = {"num_threads": physics}
        me = os.getpid()
        from contracts.procfs import start_time_ticks

        self.block = ControlBlock.create()
        spec = CollectorSpec(
            block=self.block,
            env_factory=env_factory,
            env_kwargs=env_kwargs,
            device=str(self.collector_device),
            learner_pid=me,
            learner_start_ticks=int(start_time_ticks(me) or 0),
            stale_after_s=self.stale_after_s,
            torch_threads=self.threads.collector_torch if self.threads is not None else None,
            motion=motion,
        )
        spawn = mp.get_context("spawn")
        receiver, self._conn = spawn.Pipe(duplex=False)
        self.process = spawn.Process(
            target=collector_main,
            args=(spec, receiver, time.time()),
            name="g1soak-collector",
            daemon=False,
        )
        self.process.start()
        receiver.close()  # the child holds its own copy
        logger.info("collector started: pid %d", self.process.pid)

    def _hand_over_resources(self) -> None:
        """Send the ring, the ingress and the tick count down the spawn pipe (never blocks:
        the collector reads it on a thread)."""
        assert self.ring is not None and self.ingress is not None and self.block is not None
        self.block.set(Word.TICK_LIMIT, self.total_ticks)
        resources = CollectorResources(
            ring=self.ring,
            ingress=self.ingress,
            pack_fn=self._pack_fn or _default_pack_fn(),
            num_envs=self.num_envs,
            total_ticks=self.total_ticks,
            metrics_interval=int(self.training.collector_metrics_interval),
            evaluation=self.evaluation.plan(self.num_envs),
        )
        try:
            self._conn.send(resources)
            self._handed_over = True
        except OSError as err:  # the collector is gone: say how it ended
            self._check_collector()
            raise CollectorFailure(f"could not hand the collector its resources: {err}") from err
        finally:
            self._conn.close()

    def _read_collector_text(self) -> None:
        assert self.block is not None
        try:
            doc = json.loads(self.block.read_text() or "{}")
        except ValueError as err:
            doc = {
                "backend_diagnostics": {
                    "available": False,
                    "backend_type": None,
                    "unavailable_reason": str(err),
                }
            }
        self.collector_info = doc
        self.reward_terms = list(doc.get("reward_terms") or self.reward_terms)

    # -- the tick loop ----------------------------------------------------------------------
    def _commit_one(self) -> bool:
        assert self.ingress is not None and self.block is not None
        start = time.perf_counter()
        done = self.ingress.commit_next(self.block, self._commit_rows)
        if done:
            self._window.commit_s += time.perf_counter() - start
        return done

    def _commit_rows(self, rows: torch.Tensor) -> None:
        if rows.device != self.device:
            rows = rows.to(self.device)
        self.learner.replay.commit(rows)

    def train(self) -> None:
        tr, block, ring, waiter = self.tracker, self.block, self.ring, self.waiter
        assert block is not None and ring is not None and self.ingress is not None
        ints = block.ints
        chunks_per_tick = self.ingress.chunks_per_tick
        cross_device = ring.device != self.device
        perf = time.perf_counter
        tr.enter("training/startup_complete")
        self.training_start = time.monotonic()
        self.budget.start()
        self.progress.start_training()
        self._window.reset(perf())
        log_interval = int(self.training.log_interval)
        signals = self.signals
        for tick in self._ticks():
            if signals.signum is not None:
                signals.check()
            tr.coordination_tick = tick
            tr.phase = "training/wait_for_inference_request"
            t0 = perf()
            waiter.wait(
                lambda t=tick: ints[Word.PUBLISHED_TICK] > t,
                f"the observation of tick {tick}",
                on_idle=self._commit_one,
            )
            tr.phase = "training/learner_inference"
            t1 = perf()
            obs, _critic_obs, done = ring.observe(block, tick)
            if cross_device:
                obs, done = obs.to(self.device), done.to(self.device)
            t2 = perf()
            actions = self.learner.act(obs, done)
            t3 = perf()
            if self.warmup <= tick < self.total_ticks - 1 and self.budget.spent():
                self._end_after(tick)  # before the action: the collector stops after it
            tr.phase = "training/inference_response"
            ring.publish_action(block, tick, actions)
            t4 = perf()
            tr.phase = "training/replay_prepare"
            while ints[Word.INGRESS_RELEASED] < tick * chunks_per_tick:
                if not self._commit_one():
                    waiter.wait(
                        lambda: ints[Word.INGRESS_PUBLISHED] > ints[Word.INGRESS_RELEASED],
                        f"the transitions of tick {tick - 1}",
                    )
            t5 = perf()
            w = self._window
            w.collector_wait_s += t1 - t0
            w.h2d_s += t2 - t1
            w.forward_s += t3 - t2
            w.d2h_s += (t4 - t3) if cross_device else 0.0
            w.release_s += t4 - t3
            w.inference_s += t4 - t1
            w.batch_wait_s += t5 - t4
            if tick < self.warmup:
                continue
            tr.phase = "training/learner_update"
            self._update(tick)
            last = tick == self.total_ticks - 1
            if self.iteration % log_interval == 0 or last:
                self._log(tick)
            if is_checkpoint_iteration(
                self.iteration, save_interval=int(self.algo_cfg.save_interval), final=last
            ):
                path = save_checkpoint(
                    self.run_dir,
                    iteration=self.iteration,
                    total_env_steps=self.lineage_env_steps + (tick + 1) * self.num_envs,
                    learner_state=self.learner.state_dict(),
                    meta=self.checkpoint_meta(),
                )
                self.last_checkpoint = str(path)
            self.progress.update(
                "training/learner_update",
                iteration=self.iteration,
                total_env_steps=self.total_env_steps,
            )
        self.budget.stop()
        if self.stopped_by is None:
            self.stopped_by = "iterations"
        tr.phase = "training/replay_prepare"
        expected = self.total_ticks * chunks_per_tick
        while ints[Word.INGRESS_RELEASED] < expected:
            if not self._commit_one():
                waiter.wait(
                    lambda: ints[Word.INGRESS_PUBLISHED] > ints[Word.INGRESS_RELEASED],
                    "the last tick's transitions",
                )

    def _ticks(self) -> Iterator[int]:
        """0, 1, ... while below ``total_ticks``, re-read every tick (a budget lowers it)."""
        tick = 0
        while tick < self.total_ticks:
            yield tick
            tick += 1

    def _end_after(self, tick: int) -> None:
        """The time budget is spent: tick ``tick`` is the run's last (its update, final log
        and checkpoint follow as usual). Written before that tick's action is published, so
        the collector reads the new limit before it steps the tick and stops after it."""
        assert self.block is not None
        self.total_ticks = tick + 1
        self.block.set(Word.TICK_LIMIT, self.total_ticks)
        self.stopped_by = "duration"
        logger.info(
            "time budget of %s s spent at iteration %d: finishing after this tick",
            f"{self.budget.duration_s:g}",
            self.iteration + 1,
        )

    def _update(self, tick: int) -> None:
        w = self._window
        start = time.perf_counter()
        if self._cycle_events is not None:
            self._cycle_events[0].record()
        self.learner.prepare_iteration()
        metrics = self.learner.update_cycle()
        if self._cycle_events is not None:
            self._cycle_events[1].record()
        end = time.perf_counter()
        w.learn_s += end - start
        w.iterations += 1
        self.iteration += 1
        self.tracker.iteration = self.iteration
        if self.first_iteration_end is None:
            self.first_iteration_end = time.monotonic()
        self._tail.append((end, (tick + 1) * self.num_envs))
        if metrics:
            if self.learner_metric_names is None:
                check_learner_tags(list(metrics))
                self.learner_metric_names = list(metrics)
            stacked = torch.stack(
                [metrics[k].detach().float().reshape(()) for k in self.learner_metric_names]
            )
            w.metric_sum = stacked if w.metric_sum is None else w.metric_sum + stacked

    def _log(self, tick: int) -> None:
        """One TensorBoard write (CONTRACTS §5); device metrics leave the GPU without a sync."""
        now = time.perf_counter()
        w = self._window
        iters = max(w.iterations, 1)
        iteration_time = (now - w.start) / iters
        fps = (
            self.num_envs * int(self.training.env_steps_per_sync) / iteration_time
            if iteration_time > 0
            else None
        )
        step = (tick + 1) * self.num_envs
        report = read_report(self.block, self.reward_terms)
        if report is not None and not self.reward_terms:
            self._read_collector_text()
            report = read_report(self.block, self.reward_terms)
        if report is not None:
            self._note_report(report)
        ingress = self.ingress.snapshot(self.block)
        scalars: dict[str, float | None] = {
            "Train/iteration": self.iteration,
            "Perf/total_fps": fps,
            "Perf/iteration_time": iteration_time,
            "Perf/learning_time": w.learn_s / iters,
            "Perf/learner_collector_wait_ms": 1000 * w.collector_wait_s / iters,
            "Perf/learner_inference_ms": 1000 * w.inference_s / iters,
            "Perf/learner_inference_h2d_ms": 1000 * w.h2d_s / iters,
            "Perf/learner_inference_forward_ms": 1000 * w.forward_s / iters,
            "Perf/learner_inference_d2h_ms": 1000 * w.d2h_s / iters,
            "Perf/learner_collector_release_ms": 1000 * w.release_s / iters,
            "Perf/learner_replay_batch_wait_ms": 1000 * w.batch_wait_s / iters,
            "Perf/replay_ingress_h2d_submit_ms": 1000 * w.commit_s / iters,
            "Train/replay_ingress_depth": ingress["ingress_depth"],
            "Train/replay_ingress_occupancy": ingress["occupancy"],
            "Train/replay_ingress_high_water": ingress["high_water_occupancy"],
            "Train/replay_ingress_backpressure_wait_ms": 1000 * ingress["backpressure_wait_s"],
            "Train/replay_ingress_dropped_batches": ingress["dropped_batches"],
        }
        if report is not None:
            for name, value in report.items():
                if "/" in name and math.isfinite(value):
                    scalars[name] = value
        self.final.update(
            env_steps_per_sec=fps,
            replay_rows_per_sec=self.num_envs / iteration_time if iteration_time > 0 else None,
            inference_ms=scalars["Perf/learner_inference_ms"],
            inference_h2d_ms=scalars["Perf/learner_inference_h2d_ms"],
            inference_forward_ms=scalars["Perf/learner_inference_forward_ms"],
            inference_d2h_ms=scalars["Perf/learner_inference_d2h_ms"],
            cycle_host_ms=1000 * w.learn_s / iters,
        )
        pending_values = None
        if w.metric_sum is not None:
            mean = w.metric_sum / iters
            if mean.device.type == "cuda":
                host = torch.empty(mean.shape, dtype=mean.dtype, pin_memory=True)
                host.copy_(mean, non_blocking=True)
                event = torch.cuda.Event()
                event.record()
                pending_values = (host, event)
            else:
                pending_values = (mean, None)
        self._pending_metrics.append((step, scalars, pending_values))
        self._flush_metrics(block=False)
        self._window.reset(now)

    def _flush_metrics(self, *, block: bool) -> None:
        """Write queued metric rows whose device values arrived (all of them when ``block``)."""
        while self._pending_metrics:
            step, scalars, values = self._pending_metrics[0]
            if values is not None:
                host, event = values
                if event is not None and not event.query():
                    if not block:
                        return
                    event.synchronize()
                for name, value in zip(self.learner_metric_names or [], host.tolist()):
                    scalars[name] = value
            self._pending_metrics.popleft()
            self.writer.write(step, scalars)

    def _note_report(self, report: dict[str, float]) -> None:
        self.last_report = report
        reward = report.get("Train/mean_reward")
        if reward is not None and math.isfinite(reward):
            self.best_mean_reward = (
                reward if self.best_mean_reward is None else max(self.best_mean_reward, reward)
            )

    # -- finalize ---------------------------------------------------------------------------
    def finalize(self) -> dict[str, Any]:
        tr, block = self.tracker, self.block
        assert block is not None and self.ring is not None and self.ingress is not None
        tr.enter("finalize/collector_quiesce")
        self.waiter.wait(
            lambda: bool(block.ints[Word.COLLECTOR_DONE]), "the collector's last report"
        )
        tr.enter("finalize/evaluation")
        self.evaluation.run(self)
        block.set(Word.STOP, 1)
        exitcode = self._join_collector()
        if exitcode not in BENIGN_COLLECTOR_EXITCODES:
            tr.cleanup_errors.append(
                error_entry(
                    type_name="CollectorExit",
                    message=f"collector exited with code {exitcode} after its last tick",
                )
            )
        tr.enter("finalize/collector_metrics_drain")
        self._read_collector_text()
        report = read_report(block, self.reward_terms)
        if report is not None:
            self._note_report(report)
        tr.enter("finalize/replay_pipeline_close")
        while self._commit_one():
            pass
        block.set(Word.CLOSED, 1)
        tr.enter("finalize/replay_ingress_snapshot")
        ingress = self.ingress.snapshot(block)
        ring_snapshot = self.ring.snapshot(block)
        flight = InferenceRing.flight(block)
        # The collector has exited (released its copies); now ours, then torch's IPC blocks.
        problems = tr.best_effort("release the shared tensors", self.release_shared_tensors)
        for problem in problems or []:
            tr.cleanup_errors.append(error_entry(type_name="SharedTensorsHeld", message=problem))
        tr.enter("finalize/logger_finish")
        self._flush_metrics(block=True)
        self.writer.close()
        return {"ingress": ingress, "ring": ring_snapshot, "flight": flight, "exitcode": exitcode}

    def _join_collector(self) -> int | None:
        proc = self.process
        if proc is None:
            return None
        proc.join(COLLECTOR_JOIN_S)
        if proc.is_alive():
            logger.warning("collector %d did not exit; sending SIGTERM", proc.pid)
            proc.terminate()
            proc.join(COLLECTOR_TERM_S)
        if proc.is_alive():
            logger.warning("collector %d ignored SIGTERM; sending SIGKILL", proc.pid)
            proc.kill()
            proc.join(COLLECTOR_TERM_S)
        return proc.exitcode

    # -- shared tensors (shared_tensors.py) ------------------------------------------------
    def release_shared_tensors(self) -> list[str]:
        """Free the learner's shared tensors once the collector has exited; return problems.

        The collector freed its copies before exiting and acknowledged it
        (``SHARED_RELEASED``); the learner frees its own and lets torch free the CUDA IPC
        blocks (``torch.cuda.ipc_collect``). Each problem names what stayed referenced, so
        torch's unnamed warning at exit never comes unexplained. Idempotent.
        """
        if self._shared is None:
            return []
        watch, self._shared = self._shared, None
        problems = self._collector_release_problems()
        ring, ingress = self.ring, self.ingress
        assert ring is not None and ingress is not None
        held = release(
            lambda: release_all(ring, ingress), watch, [self.device, self.collector_device]
        )
        if self.collector_device.type == "cuda":
            torch.cuda.ipc_collect()
        if held:
            problems.append(f"the learner still referenced {', '.join(held)} after freeing them")
        if problems and ring.is_device_ring:
            problems = [f"{p}; torch reports this at exit as '{TORCH_WARNING}'" for p in problems]
        return problems

    def _collector_release_problems(self) -> list[str]:
        """What the exited collector left referenced ([] when it never got the tensors)."""
        if not self._handed_over:
            return []
        assert self.block is not None
        if not self.block.get(Word.SHARED_RELEASED):
            exitcode = self.process.exitcode if self.process is not None else None
            what = "its copies of the shared ring and ingress tensors"
            return [f"the collector exited without freeing {what} (exit code {exitcode})"]
        try:
            held = json.loads(self.block.read_text() or "{}").get(HELD_KEY) or []
        except ValueError as err:
            return [f"the collector's release report is unreadable: {err}"]
        if held:
            return [f"the collector still referenced {', '.join(map(str, held))} when it exited"]
        return []

    def stop_collector_after_failure(self) -> dict[str, Any] | None:
        """Ask the collector to stop, then escalate; return ``shutdown.collector``."""
        proc = self.process
        if proc is None:
            return None
        if self.block is not None:
            self.block.set(Word.STOP, 1)
            self.block.set(Word.CLOSED, 1)
        if not self._handed_over:
            # Still building its env (it cannot see STOP inside a compile) and holding
            # nothing of ours but the control block: terminate it now.
            self._conn.close()
            proc.terminate()
        proc.join(COLLECTOR_TERM_S)
        if proc.is_alive():
            proc.terminate()
            proc.join(COLLECTOR_TERM_S)
        if proc.is_alive():
            proc.kill()
            proc.join(COLLECTOR_TERM_S)
        return collector_exit(proc.is_alive(), proc.exitcode)

    # -- manifest and summary -----------------------------------------------------------------
    def manifest(self, *, ingress: dict | None, flight: Any, shutdown: dict) -> dict[str, Any]:
        ctx = self.ctx
        ring = self.ring
        info = self.collector_info
        sharing = getattr(ctx, "cuda_process_sharing", None) or null_cuda_process_sharing(
            str(self.device), str(self.collector_device)
        )
        out: dict[str, Any] = {
            "inference_ring_capacity": int(self.training.inference_slot_capacity),
            "collector_metrics_interval": int(self.training.collector_metrics_interval),
            "collector_backend_device": str(self.collector_device),
            "cuda_process_sharing": sharing,
            "shutdown": shutdown,
            "runtime_limits": {
                "num_envs": self.num_envs,
                "warmup_ticks": self.warmup,
                "max_iterations": self.max_iterations,
                "start_iteration": self.start_iteration,
                "total_ticks": self.total_ticks,
                "env_steps_per_sync": int(self.training.env_steps_per_sync),
                "learner_device": str(self.device),
            },
            "tensor_memory_budget": getattr(self, "memory_budget", None),
        }
        if self.resumed_from is not None:
            out["resumed_from"] = dict(self.resumed_from)
        if ring is not None:
            out["inference_memory_budget"] = {
                "ipc_event_count": ring.ipc_event_count,
                "ring_bytes": ring.nbytes,
                "replay_ingress_bytes": self.ingress.nbytes if self.ingress is not None else None,
                "replay_ingress_ipc_event_count": self.ingress.ipc_event_count
                if self.ingress is not None
                else None,
            }
            out["inference_transport"] = "cuda_ipc" if ring.is_device_ring else "cpu_shared_memory"
        if flight is not None:
            report = self.last_report or {}
            out["inference_flight"] = {
                "queue_depth": flight.queue_depth,
                "publication_lag": flight.publication_lag,
                "in_flight": flight.publication_lag,
                "action_backlog": flight.action_backlog,
                "max_in_flight": int(report.get("Perf/collector_inference_max_in_flight", 0)),
                "max_publication_lag": int(
                    report.get("Perf/collector_inference_max_publication_lag", 0)
                ),
                "max_action_backlog": int(
                    report.get("Perf/collector_inference_max_action_backlog", 0)
                ),
                "wait_time_ms": 1000 * self.waiter.wait_s if hasattr(self, "waiter") else 0.0,
            }
        if ingress is not None:
            out["replay_ingress"] = ingress
        if "backend_diagnostics" in info:
            out["backend_diagnostics"] = info["backend_diagnostics"]
        if "motion" in info:
            out["motion"] = info["motion"]
        if self.threads is not None:
            out["cpu_threads"] = self._cpu_threads_record()
        graph: dict[str, Any] = {"env": info.get("cuda_graph")}
        fn = getattr(self.learner, "cuda_graph_diagnostics", None)
        if callable(fn):
            try:
                graph["learner"] = fn()
            except Exception as err:  # noqa: BLE001 - diagnostics only
                graph["learner"] = {"error": f"{type(err).__name__}: {err}"}
        out["cuda_graph"] = graph
        report = self.last_report or {}
        out["timings"] = {
            "collector_env_step_ms": report.get("Perf/collector_env_step_ms"),
            "collector_learner_action_wait_ms": report.get("Perf/collector_learner_action_wait_ms"),
            "collector_replay_write_ms": report.get("Perf/collector_replay_write_ms"),
            "learner_inference_ms": self.final.get("inference_ms"),
            "learner_cycle_host_ms": self.final.get("cycle_host_ms"),
            "learner_cycle_device_ms": self.final.get("cycle_device_ms"),
            "learner_wait_s_total": self.waiter.wait_s if hasattr(self, "waiter") else None,
            **self._startup_timings(),
        }
        return out

    def _cpu_threads_record(self) -> dict[str, Any]:
        """``runtime_manifest.cpu_threads``: the plan's basis and the counts in effect."""
        assert self.threads is not None
        collector = self.collector_info.get("cpu_threads") or {}
        return {
            "cpus": self.threads.cpus,
            "torch_source": self.threads.torch_source,
            "learner_torch": torch.get_num_threads(),
            "collector_torch": collector.get("torch"),
            "collector_physics": collector.get("physics"),
        }

    def _startup_timings(self) -> dict[str, Any]:
        """Launch → first iteration and where it went (``timings`` in the manifest).

        Measured from the ``train`` process's own start (``psutil`` create time), so the
        imports and the config/preflight step before the runtime count too.
        """
        launch_to_runtime = max(0.0, self.start_wall - psutil.Process().create_time())
        phases = {
            name: round(end - begin, 3)
            for (name, begin), (_, end) in itertools.pairwise(self._phase_starts)
            if name.startswith("startup/")
        }
        first = self.first_iteration_end
        return {
            "startup_to_first_iteration_s": (
                launch_to_runtime + first - self.start_mono if first is not None else None
            ),
            "startup": {
                "launch_to_runtime_s": round(launch_to_runtime, 3),
                "phases_s": phases,
                "first_iteration_after_startup_s": (
                    round(first - self.training_start, 3)
                    if first is not None and self.training_start is not None
                    else None
                ),
                "learner_capture_s": (
                    round(self._learner_capture_s, 3)
                    if self._learner_capture_s is not None
                    else None
                ),
                "collector": self.collector_info.get("startup"),
            },
        }

    def completed_summary(self, snap: dict[str, Any]) -> dict[str, Any]:
        ctx = self.ctx
        tr = self.tracker
        shutdown = tr.record(
            classification="normal_completion",
            owner="learner",
            collector=collector_exit(False, snap["exitcode"]),
            replay_ingress=snap["ingress"],
            inference_ring=snap["ring"],
            phase="finalize/logger_finish",
        )
        manifest = self.manifest(ingress=snap["ingress"], flight=snap["flight"], shutdown=shutdown)
        end = time.monotonic()
        tail = list(self._tail)
        tail_fps = None
        if len(tail) >= 2 and tail[-1][0] > tail[0][0]:
            tail_fps = (tail[-1][1] - tail[0][1]) / (tail[-1][0] - tail[0][0])
        report = self.last_report or {}

        def finite(key: str) -> float | None:
            value = report.get(key)
            return value if value is not None and math.isfinite(value) else None

        completed = {
            "training_wall_time_sec": max(0.0, end - (self.training_start or end)),
            "tail_iteration_count": min(TAIL_WINDOW, self.run_iterations),
            "final_mean_reward": finite("Train/mean_reward"),
            "best_mean_reward": self.best_mean_reward,
            "mean_episode_length": finite("Train/mean_episode_length"),
            "last_checkpoint": self.last_checkpoint,
            "time_budget": self.budget.record(
                max_iterations=self.max_iterations,
                stopped_by=self.stopped_by,
                final_iteration=self.iteration,
            ),
            "final_env_steps_per_sec": self.final.get("env_steps_per_sec"),
            "tail_env_steps_per_sec": tail_fps,
            "final_learner_replay_rows_per_sec": self.final.get("replay_rows_per_sec"),
            "final_cycle_wall_ms": self.final.get(
                "cycle_device_ms", self.final.get("cycle_host_ms")
            ),
            "final_inference_ms": self.final.get("inference_ms"),
            "final_inference_h2d_ms": self.final.get("inference_h2d_ms"),
            "final_inference_forward_ms": self.final.get("inference_forward_ms"),
            "final_inference_d2h_ms": self.final.get("inference_d2h_ms"),
        }
        if self.evaluation.section is not None:
            completed["evaluation"] = self.evaluation.section
        if self.device.type == "cuda":
            completed["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
        return build_summary(
            status="completed",
            algo=ctx.algo,
            task=ctx.task,
            sim_backend=ctx.sim_backend,
            log_dir=str(self.run_dir),
            start_time_utc=ctx.start_time_utc,
            wall_time_sec=time.time() - self.start_wall,
            completed_iterations=self.run_iterations,
            total_env_steps=self.total_env_steps,
            configured_seed=ctx.seed.configured_seed,
            configured_seed_source=ctx.seed.configured_seed_source,
            effective_seed=ctx.seed.effective_seed,
            runtime_manifest=manifest,
            completed_fields=completed,
        )

    def write_failure(self, err: BaseException) -> dict[str, Any]:
        """Stop everything, snapshot best-effort, write the failed summary."""
        tr = self.tracker
        phase = tr.phase
        classification = classify_exception(err)
        if isinstance(err, ExternalCancellation):
            owner = "external"
        else:
            owner = {"collector_failure": "collector", "backend_worker_failure": "collector"}.get(
                classification
            )
            owner = owner or ("learner" if classification == "learner_failure" else "unknown")
        collector = tr.best_effort("stop the collector", self.stop_collector_after_failure)
        if isinstance(err, CollectorFailure) and err.error_type == "CollectorDied":
            # The collector process ended without reporting an exception (crash, signal).
            status = "collector_died"
        else:
            status = "failed"
        ingress = (
            tr.best_effort("replay ingress snapshot", lambda: self.ingress.snapshot(self.block))
            if self.ingress
            else None
        )
        ring = (
            tr.best_effort("inference ring snapshot", lambda: self.ring.snapshot(self.block))
            if self.ring
            else None
        )
        flight = InferenceRing.flight(self.block) if self.block is not None else None
        if self.writer is not None:
            tr.best_effort(
                "metrics flush", lambda: (self._flush_metrics(block=True), self.writer.close())
            )
        exc = error_entry(err)
        manifest = (
            tr.best_effort(
                "runtime manifest",
                lambda: self.manifest(ingress=ingress, flight=flight, shutdown={}),
            )
            or {}
        )
        manifest.pop("shutdown", None)
        sharing = manifest.pop("cuda_process_sharing", None)
        shutdown_extra = {
            "iteration": tr.iteration,
            "coordination_tick": tr.coordination_tick,
            "inference_epoch": tr.inference_epoch,
            "collector": collector,
            "cleanup": {"errors": list(tr.cleanup_errors)},
            "replay_ingress": ingress,
            "inference_ring": ring,
        }
        return write_failed_summary(
            self.run_dir,
            algo=self.ctx.algo,
            task=self.ctx.task,
            sim_backend=self.ctx.sim_backend,
            log_dir=str(self.run_dir),
            start_time_utc=self.ctx.start_time_utc,
            configured_seed=self.ctx.seed.configured_seed,
            configured_seed_source=self.ctx.seed.configured_seed_source,
            effective_seed=self.ctx.seed.effective_seed,
            classification=classification,
            owner=owner,
            phase=phase,
            exception=exc,
            cuda_process_sharing=sharing,
            manifest_extra=manifest,
            status=status,
            wall_time_sec=time.time() - self.start_wall,
            completed_iterations=self.run_iterations,
            total_env_steps=self.total_env_steps,
            shutdown_extra=shutdown_extra,
            learner_device=str(self.device),
            evaluation=tr.best_effort(
                "evaluation section", lambda: self.evaluation.failed_run_section(phase)
            ),
        )

    def _release_after_failure(self) -> None:
        """A failed run frees the shared tensors too; what stayed referenced is logged."""
        try:
            problems = self.release_shared_tensors()
        except Exception as err:  # noqa: BLE001 - the failure itself is already recorded
            problems = [f"releasing the shared tensors raised {type(err).__name__}: {err}"]
        for problem in problems:
            logger.warning("%s", problem)

    # -- entry ----------------------------------------------------------------------------
    def run(self) -> int:
        with self.signals:
            self.progress = ProgressWriter(
                self.run_dir,
                echo=sys.stderr,
                max_iterations=self.max_iterations,
                duration_s=self.budget.duration_s,
            )
            self.progress.start_heartbeat(lambda: self.tracker.phase)
            try:
                self._cycle_events = (
                    (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                    if self.device.type == "cuda"
                    else None
                )
                self.startup()
                self.train()
                snap = self.finalize()
                if self._cycle_events is not None:
                    self._cycle_events[1].synchronize()
                    self.final["cycle_device_ms"] = self._cycle_events[0].elapsed_time(
                        self._cycle_events[1]
                    )
                doc = self.completed_summary(snap)
                write_summary(self.run_dir, doc)
                return 0
            except BaseException as err:
                if not isinstance(err, (Exception, KeyboardInterrupt, SystemExit)):
                    raise
                logger.exception("run failed in %s (%s)", self.tracker.phase, type(err).__name__)
                try:
                    self.write_failure(err)
                except Exception as write_err:  # noqa: BLE001 - last resort: say so on stderr
                    logger.error(
                        "could not write the failed run summary: %s: %s",
                        type(write_err).__name__,
                        write_err,
                    )
                # A logged record keeps the exception; its frames' locals (the tick loop's
                # views of the ring) must not outlive the release in the finally below.
                traceback.clear_frames(err.__traceback__)
                return 1
            finally:
                if self.process is not None and self.process.is_alive():
                    self.stop_collector_after_failure()
                self._release_after_failure()
                if self.writer is not None:
                    try:
                        self.writer.close()
                    except Exception as err:  # noqa: BLE001
                        logger.warning("metrics writer close failed: %s", err)
                self.progress.close()
                if self._torch_threads_before is not None:
                    torch.set_num_threads(self._torch_threads_before)  # in-process callers


class _Window:
    """Host timings accumulated between two metric writes."""

    def __init__(self) -> None:
        self.reset(time.perf_counter())

    def reset(self, now: float) -> None:
        self.start = now
        self.iterations = 0
        self.collector_wait_s = self.h2d_s = self.forward_s = self.d2h_s = 0.0
        self.release_s = self.inference_s = self.batch_wait_s = self.commit_s = self.learn_s = 0.0
        self.metric_sum: torch.Tensor | None = None


def run_training(ctx: Any, **hooks: Any) -> int:
    """Run one training in this process (the learner) plus one spawned collector.

    Args:
        ctx: the resolved ``RunContext`` (trainer.config.schema).
        **hooks: test seams, keyword-only and optional: ``learner_factory(ctx, device)``,
            ``env_factory`` (+ ``env_kwargs``), ``pack_fn``, ``dims``, ``stale_after_s``,
            ``budget_clock`` (the time budget's monotonic clock).

    Returns:
        0 iff ``run_summary.status == "completed"``, else 1. A summary is always written.
    """
    return LearnerRuntime(ctx, **hooks).run()
