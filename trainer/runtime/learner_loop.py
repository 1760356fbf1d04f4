"""The learner process's runtime: ``run_training(ctx) -> exit code``.

The ``train`` process owns the learner (networks, device replay), the logger and the run
directory writers. Right after its CUDA preflight it spawns ONE collector, which builds the
env while the learner builds its networks, replay, inference ring and replay ingress; the
ring, the ingress and the tick count reach the collector at ``startup/collector_start``
(docs/runtime.md, "Startup overlap"). Then it runs the tick schedule of docs/flashsac.md §update-schedule
(``tick_loop.py``). An update at tick t samples every row of ticks < t (a one-tick
prefetch, docs/flashsac.md §replay), so tick t is an iteration iff ``t * N >= max(B,
learning_starts * N)``, i.e. ``t >= W``. The run has ``W + max_iterations`` ticks, or
fewer under a time budget (``training.duration_seconds``, trainer/runtime/budget.py).

Resume (``training.resume_from``): ``startup/learner_prepare`` loads the checkpoint, checks
it against the config and restores the learner before the collector gets its resources
(a failure here terminates the still-building collector); the run then
covers iterations ``k+1 .. max_iterations`` of the global count with its own warm-up
(docs/runtime.md, "Resuming").

Shutdown (docs/contracts.md §shutdown) is tracked in ``ShutdownTracker``; on success the collector is
quiesced *before* the final flight snapshot, so the manifest shows a drained flight
(queue_depth = publication_lag = 0). Any failure stops the collector, records who failed
in which phase and writes a failed summary; the exit code is 0 iff the run completed.

The parts: ``collector_handle`` (spawn, hand-over, health, stop), ``tick_loop`` (ticks,
commits, updates), ``metrics_pump`` (TensorBoard rows), ``run_checkpoints`` (save, resume),
``run_report`` (manifest, summaries); this module builds them and runs the phases.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainer.config.schema import RunContext
from trainer.rundir.metrics import MetricsWriter
from trainer.rundir.progress import ProgressWriter
from trainer.rundir.summary import write_summary
from trainer.runtime.budget import TimeBudget
from trainer.runtime.collector_handle import make_collector_handle
from trainer.runtime.control import ControlBlock
from trainer.runtime.evaluation_stage import LearnerEvaluation
from trainer.runtime.learner_shutdown import LearnerShutdown
from trainer.runtime.learner_startup import LearnerStartup, RunParts, StartupHooks
from trainer.runtime.liveness import Waiter
from trainer.runtime.metrics_pump import MetricsPump
from trainer.runtime.protocols import Learner
from trainer.runtime.run_checkpoints import RunCheckpoints
from trainer.runtime.run_report import RunReport
from trainer.runtime.run_state import LearnerResources, RunPlan, RunState, warmup_ticks
from trainer.runtime.shutdown import ExternalCancellation, ShutdownTracker
from trainer.runtime.signals import SignalGuard, cancelled_exit_code
from trainer.runtime.tick_loop import TickLoop

__all__ = ["LearnerRuntime", "run_training", "warmup_ticks"]

logger = logging.getLogger(__name__)


class LearnerRuntime:
    """One training run in the learner process (see the module docstring)."""

    def __init__(
        self,
        ctx: RunContext,
        hooks: StartupHooks | None = None,
        *,
        budget_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ctx = ctx
        self.run_dir = Path(ctx.run_dir)
        self.hooks = hooks or StartupHooks()
        self.plan = plan = RunPlan.from_context(ctx)
        self.budget = TimeBudget(ctx.training.duration_seconds, clock=budget_clock)
        self.state = state = RunState(total_ticks=plan.planned_ticks(0))
        self.signals = SignalGuard()
        self.progress: ProgressWriter | None = None
        self.tracker = ShutdownTracker(on_phase=self._on_phase, check_cancel=self.signals.check)
        self.resources = res = LearnerResources()
        self.collector = make_collector_handle(
            ctx.training.collector_placement, self.signals, self.hooks.stale_after_s
        )
        self.pump = MetricsPump(
            self.run_dir, plan, int(ctx.training.env_steps_per_sync), self.collector, res
        )
        self.checkpoints = RunCheckpoints(ctx, plan, self.hooks.env_spec, state)
        self.loop = TickLoop(
            plan=plan,
            state=state,
            resources=res,
            collector=self.collector,
            pump=self.pump,
            checkpoints=self.checkpoints,
            budget=self.budget,
            tracker=self.tracker,
            signals=self.signals,
            log_interval=int(ctx.training.log_interval),
        )
        self.evaluation = LearnerEvaluation(ctx)
        self.parts = RunParts(
            ctx=ctx,
            plan=plan,
            state=state,
            resources=res,
            collector=self.collector,
            pump=self.pump,
            checkpoints=self.checkpoints,
            evaluation=self.evaluation,
            tracker=self.tracker,
            signals=self.signals,
        )
        self.report = RunReport(self.parts, self.budget)
        self.shutdown = LearnerShutdown(self.parts, self.loop, self.report)

    # -- what the evaluation stage reads (``trainer.runtime.evaluation_stage.EvaluationHost``) ----
    @property
    def block(self) -> ControlBlock | None:
        return self.collector.block

    @property
    def waiter(self) -> Waiter | None:
        return self.resources.waiter

    @property
    def learner(self) -> Learner | None:
        return self.resources.learner

    @property
    def writer(self) -> MetricsWriter | None:
        return self.pump.writer

    @property
    def num_envs(self) -> int:
        return self.plan.num_envs

    @property
    def warmup(self) -> int:
        return self.plan.warmup

    @property
    def iteration(self) -> int:
        return self.state.iteration

    @property
    def start_iteration(self) -> int:
        return self.state.start_iteration

    @property
    def run_iterations(self) -> int:
        return self.state.run_iterations

    @property
    def lineage_env_steps(self) -> int:
        return self.state.lineage_env_steps

    @property
    def last_checkpoint(self) -> str | None:
        return self.state.last_checkpoint

    @last_checkpoint.setter
    def last_checkpoint(self, path: str | None) -> None:
        self.state.last_checkpoint = path

    def checkpoint_meta(self) -> dict[str, Any]:
        return self.checkpoints.meta()

    # -- phases --------------------------------------------------------------------------------
    def _on_phase(self, phase: str) -> None:
        self.state.phase_starts.append((phase, time.monotonic()))
        if self.progress is not None:
            # Current counters, so the finalize lines show what the summary will say.
            self.progress.set_counters(
                iteration=self.state.iteration, total_env_steps=self.loop.total_env_steps()
            )
            self.progress.write(phase)

    def startup(self) -> None:
        LearnerStartup(self.parts, self.hooks).run()

    def finalize(self) -> dict[str, Any]:
        return self.shutdown.finalize(self)

    def release_shared_tensors(self) -> list[str]:
        return self.shutdown.release_shared_tensors()

    # -- entry ----------------------------------------------------------------------------
    def run(self) -> int:
        with self.signals:
            self.progress = progress = ProgressWriter(
                self.run_dir,
                echo=sys.stderr,
                max_iterations=self.plan.max_iterations,
                duration_s=self.budget.duration_s,
                loop_tick=lambda: self.tracker.coordination_tick,
            )
            progress.start_heartbeat(lambda: self.tracker.phase)
            try:
                return self._complete(progress)
            except BaseException as err:
                if not isinstance(err, (Exception, KeyboardInterrupt, SystemExit)):
                    raise
                return self._fail(err)
            finally:
                self._close(progress)

    def _complete(self, progress: ProgressWriter) -> int:
        self.loop.create_cycle_events()
        self.startup()
        self.loop.train(progress)
        snap = self.finalize()
        events = self.loop.cycle_events
        if events is not None:
            events[1].synchronize()
            self.pump.final["cycle_device_ms"] = events[0].elapsed_time(events[1])
        doc = self.shutdown.completed_summary(snap)
        write_summary(self.run_dir, doc)
        return 0

    def _fail(self, err: BaseException) -> int:
        if isinstance(err, ExternalCancellation):
            return self._cancel(err)
        logger.exception("run failed in %s (%s)", self.tracker.phase, type(err).__name__)
        self._write_failure(err)
        # A logged record keeps the exception; its frames' locals (the tick loop's
        # views of the ring) must not outlive the release in the finally below.
        traceback.clear_frames(err.__traceback__)
        return 1

    def _cancel(self, err: ExternalCancellation) -> int:
        """A signal stopped the run: keep the iteration reached as a checkpoint, write a
        ``cancelled`` summary, say so in one line (no traceback); exit 128 + the signal."""
        self.tracker.best_effort(
            "checkpoint of the iteration reached",
            lambda: self.checkpoints.save_reached(self.resources.learner),
        )
        self._write_failure(err)
        traceback.clear_frames(err.__traceback__)
        logger.warning(
            "run cancelled by %s in %s at iteration %d; last checkpoint: %s",
            signal.Signals(err.signum).name,
            self.tracker.phase,
            self.state.iteration,
            self.state.last_checkpoint or "none",
        )
        return cancelled_exit_code(err.signum)

    def _write_failure(self, err: BaseException) -> None:
        try:
            self.shutdown.write_failure(err)
        except Exception as write_err:  # noqa: BLE001 - last resort: say so on stderr
            logger.error(
                "could not write the failed run summary: %s: %s",
                type(write_err).__name__,
                write_err,
            )

    def _close(self, progress: ProgressWriter) -> None:
        if self.collector.is_alive():
            self.collector.stop_after_failure()
        self.shutdown.release_after_failure()
        if self.pump.writer is not None:
            try:
                self.pump.close()
            except Exception as err:  # noqa: BLE001
                logger.warning("metrics writer close failed: %s", err)
        progress.close()
        before = self.resources.torch_threads_before
        if before is not None:
            torch.set_num_threads(before)  # in-process callers
        if self.resources.stream_before is not None:
            torch.cuda.set_stream(self.resources.stream_before)


def run_training(
    ctx: RunContext, *, budget_clock: Callable[[], float] = time.monotonic, **hooks: Any
) -> int:
    """Run one training in this process (the learner) plus one spawned collector.

    Args:
        ctx: the resolved ``RunContext`` (trainer.config.schema).
        **hooks: test seams, keyword-only and optional: ``learner_factory(ctx, device)``,
            ``env_factory`` (+ ``env_kwargs``), ``pack_fn``, ``env_spec`` (the env's sizes;
            default the task's ``G1_TRACKING_SPEC``), ``stale_after_s``,
            ``budget_clock`` (the time budget's monotonic clock).

    Returns:
        0 iff ``run_summary.status == "completed"``; 128 + the signal for a run a signal
        cancelled (``status`` ``cancelled``); else 1. A summary is always written.
    """
    return LearnerRuntime(ctx, StartupHooks(**hooks), budget_clock=budget_clock).run()
