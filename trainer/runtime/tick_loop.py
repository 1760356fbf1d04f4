"""The learner's tick loop (docs/flashsac.md §update-schedule; docs/runtime.md, "Tick protocol"):

    tick t:  wait for obs(t) -> act -> publish action(t)      (the collector steps env t)
             commit tick t-1's transitions (already pushed before obs(t))
             if t >= W: iteration = prepare_iteration() + update_cycle()

Serving the action first lets the update of tick t run while the collector steps the env
with that action; on CUDA the action is served on the learner's inference stream
(``learner.acting()``), so the update of tick t does not queue behind it either. The first
tick ``t >= W`` that finds the time budget spent lowers the shared tick limit to ``t + 1``
before its action goes out, so it is the last tick of both processes. After the last one
the loop commits the last tick, so ``total_env_steps = (W + completed_iterations) * N`` and
every pushed chunk is released. Nothing here syncs the host with the device; the host
timings go into the ``TickWindow`` the metrics pump writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import torch

from contracts.names import ShutdownPhase
from trainer.rundir.progress import ProgressWriter
from trainer.runtime.budget import TimeBudget
from trainer.runtime.collector_handle import CollectorHandle
from trainer.runtime.control import Word
from trainer.runtime.fault_hooks import hang_at_iteration, hang_forever
from trainer.runtime.metrics_pump import MetricsPump
from trainer.runtime.run_checkpoints import RunCheckpoints
from trainer.runtime.run_state import LearnerResources, RunPlan, RunState, released_env_steps
from trainer.runtime.shutdown import ShutdownTracker
from trainer.runtime.signals import SignalGuard
from trainer.runtime.steady_rate import SteadyRate
from trainer.runtime.tick_window import TickWindow

logger = logging.getLogger(__name__)


class TickLoop:
    """Runs the ticks of one run and commits the collector's transitions to the replay."""

    def __init__(
        self,
        *,
        plan: RunPlan,
        state: RunState,
        resources: LearnerResources,
        collector: CollectorHandle,
        pump: MetricsPump,
        checkpoints: RunCheckpoints,
        budget: TimeBudget,
        tracker: ShutdownTracker,
        signals: SignalGuard,
        log_interval: int,
    ) -> None:
        self.plan = plan
        self.state = state
        self.resources = resources
        self.collector = collector
        self.pump = pump
        self.checkpoints = checkpoints
        self.budget = budget
        self.tracker = tracker
        self.signals = signals
        self.log_interval = log_interval
        self.window = TickWindow()
        self._lr_resized_at_s = float("-inf")
        """Training seconds of the last whole-run cosine re-size (``_resize_lr_schedule``)."""
        self.cycle_events: tuple[torch.cuda.Event, torch.cuda.Event] | None = None
        """Around each update on CUDA: the last cycle's device time (``cycle_device_ms``)."""
        self._hang_at: int | None = None
        """A test-only fault hook's iteration (fault_hooks.py); None in every real run."""

    def create_cycle_events(self) -> None:
        self.cycle_events = (
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            if self.plan.device.type == "cuda"
            else None
        )

    def total_env_steps(self) -> int:
        return released_env_steps(self.collector.block, self.resources.ingress, self.plan.slot_rows)

    # -- replay commits ------------------------------------------------------------------------
    def commit_one(self) -> bool:
        """Commit the next pushed ingress chunk, if any; True when one was committed."""
        ingress, block = self.resources.ingress, self.collector.block
        assert ingress is not None and block is not None
        start = time.perf_counter()
        done = ingress.commit_next(block, self._commit_rows)
        if done:
            self.window.commit_s += time.perf_counter() - start
        return done

    def _commit_rows(self, rows: torch.Tensor) -> None:
        learner = self.resources.learner
        assert learner is not None
        if rows.device != self.plan.device:
            rows = rows.to(self.plan.device)
        learner.replay.commit(rows)

    # -- the loop ------------------------------------------------------------------------------
    def train(self, progress: ProgressWriter) -> None:
        tr, state, block, res = self.tracker, self.state, self.collector.block, self.resources
        ring, ingress, waiter, learner = res.ring, res.ingress, res.waiter, res.learner
        assert block is not None and ring is not None and ingress is not None
        assert waiter is not None and learner is not None
        ints = block.ints
        chunks_per_tick = ingress.chunks_per_tick
        device, warmup = self.plan.device, self.plan.warmup
        cross_device = ring.device != device
        perf = time.perf_counter
        acting = learner.acting
        self._begin(progress)
        signals = self.signals
        for tick in self._ticks():
            if signals.signum is not None:
                signals.check()
            tr.coordination_tick = tick
            tr.phase = ShutdownPhase.TRAINING_WAIT_FOR_INFERENCE_REQUEST
            t0 = perf()
            waiter.wait(
                lambda t=tick: ints[Word.PUBLISHED_TICK] > t,
                f"the observation of tick {tick}",
                on_idle=self.commit_one,
            )
            tr.phase = ShutdownPhase.TRAINING_LEARNER_INFERENCE
            t1 = perf()
            with acting():  # the inference stream: the action never waits for the update
                obs, _critic_obs, done = ring.observe(block, tick)
                if cross_device:
                    obs, done = obs.to(device), done.to(device)
                t2 = perf()
                actions = learner.act(obs, done)
                t3 = perf()
                if warmup <= tick < state.total_ticks - 1 and self.budget.spent():
                    self._end_after(tick)  # before the action: the collector stops after it
                tr.phase = ShutdownPhase.TRAINING_INFERENCE_RESPONSE
                ring.publish_action(block, tick, actions)
            t4 = perf()
            tr.phase = ShutdownPhase.TRAINING_REPLAY_PREPARE
            while ints[Word.INGRESS_RELEASED] < tick * chunks_per_tick:
                if not self.commit_one():
                    waiter.wait(
                        lambda: ints[Word.INGRESS_PUBLISHED] > ints[Word.INGRESS_RELEASED],
                        f"the transitions of tick {tick - 1}",
                    )
            t5 = perf()
            w = self.window
            w.collector_wait_s += t1 - t0
            w.h2d_s += t2 - t1
            w.forward_s += t3 - t2
            w.d2h_s += (t4 - t3) if cross_device else 0.0
            w.release_s += t4 - t3
            w.inference_s += t4 - t1
            w.batch_wait_s += t5 - t4
            if tick < warmup:
                continue
            tr.phase = ShutdownPhase.TRAINING_LEARNER_UPDATE
            self._update(tick)
            self._after_update(tick, progress)
        self._finish(chunks_per_tick)

    def _begin(self, progress: ProgressWriter) -> None:
        self._hang_at = hang_at_iteration()
        self.tracker.enter(ShutdownPhase.TRAINING_STARTUP_COMPLETE)
        self.state.training_start = time.monotonic()
        self.state.steady = SteadyRate(self.plan.device)
        self.budget.start()
        progress.start_training()
        self.window = TickWindow()

    def _ticks(self) -> Iterator[int]:
        """0, 1, ... while below ``total_ticks``, re-read every tick (a budget lowers it)."""
        tick = 0
        while tick < self.state.total_ticks:
            yield tick
            tick += 1

    def _end_after(self, tick: int) -> None:
        """The time budget is spent: tick ``tick`` is the run's last (its update, final log
        and checkpoint follow as usual). Written before that tick's action is published, so
        the collector reads the new limit before it steps the tick and stops after it."""
        assert self.collector.block is not None
        self.state.total_ticks = tick + 1
        self.collector.block.set(Word.TICK_LIMIT, self.state.total_ticks)
        self.state.stopped_by = "duration"
        logger.info(
            "time budget of %s s spent at iteration %d: finishing after this tick",
            f"{self.budget.duration_s:g}",
            self.state.iteration + 1,
        )

    def _update(self, tick: int) -> None:
        learner, state, events = self.resources.learner, self.state, self.cycle_events
        assert learner is not None
        w = self.window
        start = time.perf_counter()
        if events is not None:
            events[0].record()
        learner.prepare_iteration()
        metrics = learner.update_cycle()
        if events is not None:
            events[1].record()
        end = time.perf_counter()
        w.learn_s += end - start
        w.iterations += 1
        state.iteration += 1
        self.tracker.iteration = state.iteration
        env_steps = (tick + 1) * self.plan.num_envs
        assert state.steady is not None
        if state.first_iteration_end is None:
            state.first_iteration_end = time.monotonic()
            state.steady.first_update_done(env_steps, end)
        if tick == state.total_ticks - 1:
            state.steady.last_update_done(env_steps, end)
        state.tail.append((end, env_steps))
        state.final_span.add(end, env_steps)
        self.pump.accumulate(w, metrics)

    def _after_update(self, tick: int, progress: ProgressWriter) -> None:
        """The iteration's metric row (every ``log_interval``), checkpoint and progress line."""
        state = self.state
        assert self.resources.learner is not None
        last = tick == state.total_ticks - 1
        full = state.iteration % self.log_interval == 0
        if full or last:
            now = time.perf_counter()
            self.pump.log(tick, state.iteration, self.window, now, partial=not full)
            self.window = TickWindow(start=now)
            self._resize_lr_schedule()
        self.checkpoints.save_if_due(self.resources.learner, tick, last=last)
        progress.update(
            ShutdownPhase.TRAINING_LEARNER_UPDATE,
            iteration=state.iteration,
            total_env_steps=self.total_env_steps(),
        )
        if state.iteration == self._hang_at:
            hang_forever(state.iteration)

    def _resize_lr_schedule(self) -> None:
        """Under a time budget, a whole-run cosine (``lr_decay_steps: null``) runs over the
        iterations the budget is forecast to reach, capped by ``max_iterations``
        (docs/configuration.md); re-forecast from the rate so far, at most once a second."""
        checked = self.budget.checked_s
        if not self.plan.whole_run_cosine or checked is None:
            return
        if checked - self._lr_resized_at_s < 1.0:
            return
        self._lr_resized_at_s = checked
        state = self.state
        forecast = self.budget.forecast_iterations(
            state.iteration - state.start_iteration, base=state.start_iteration
        )
        if forecast is None:
            return
        cap = self.plan.max_iterations
        assert self.resources.learner is not None
        self.resources.learner.set_lr_horizon(forecast if cap is None else min(cap, forecast))

    def _finish(self, chunks_per_tick: int) -> None:
        """After the last tick: stop the budget's clock and commit the last tick's rows."""
        waiter, block = self.resources.waiter, self.collector.block
        assert waiter is not None and block is not None
        ints = block.ints
        self.budget.stop()
        if self.state.stopped_by is None:
            self.state.stopped_by = "iterations"
        self.tracker.phase = ShutdownPhase.TRAINING_REPLAY_PREPARE
        expected = self.state.total_ticks * chunks_per_tick
        while ints[Word.INGRESS_RELEASED] < expected:
            if not self.commit_one():
                waiter.wait(
                    lambda: ints[Word.INGRESS_PUBLISHED] > ints[Word.INGRESS_RELEASED],
                    "the last tick's transitions",
                )
