"""The learner's metrics pump: one TensorBoard row per log interval, without a host sync.

Each update adds its device metrics to the tick window's sum; every ``training.log_interval``
iterations ``log`` turns the window's host timings, the collector's latest report and the
replay-ingress snapshot into one row (docs/metrics.md). The device means leave the GPU by a
non-blocking copy into pinned memory behind an event; a row is written once its event has
completed (``flush``), so the tick loop never waits for the GPU. The pump also keeps what the
summary reports of the metrics: the last report, the best mean reward, the final timings.
"""

from __future__ import annotations

import collections
import math
from pathlib import Path

import torch

from trainer.rundir.metrics import MetricsWriter, check_learner_tags
from trainer.runtime.collector_handle import CollectorHandle
from trainer.runtime.run_state import LearnerResources, RunPlan
from trainer.runtime.tick_window import TickWindow

PendingValues = tuple[torch.Tensor, torch.cuda.Event | None]


class MetricsPump:
    """Queues and writes the learner's metric rows (see the module docstring)."""

    def __init__(
        self,
        run_dir: Path,
        plan: RunPlan,
        env_steps_per_sync: int,
        collector: CollectorHandle,
        resources: LearnerResources,
    ) -> None:
        self.run_dir = run_dir
        self.num_envs = plan.num_envs
        self.env_steps_per_sync = env_steps_per_sync
        self.collector = collector
        self.resources = resources
        self.writer: MetricsWriter | None = None
        self.learner_metric_names: list[str] | None = None
        self._pending: collections.deque[
            tuple[int, dict[str, float | None], PendingValues | None]
        ] = collections.deque()
        self.last_report: dict[str, float] | None = None
        self.best_mean_reward: float | None = None
        self.final: dict[str, float | None] = {}
        """The last full row's timings (``final_*_ms`` of the summary, ``timings`` of the manifest)."""

    def open(self) -> None:
        self.writer = MetricsWriter(self.run_dir)

    def accumulate(self, window: TickWindow, metrics: dict[str, torch.Tensor]) -> None:
        """Add one update's device metrics to the window's sum (the tags checked once)."""
        if not metrics:
            return
        if self.learner_metric_names is None:
            check_learner_tags(list(metrics))
            self.learner_metric_names = list(metrics)
        stacked = torch.stack(
            [metrics[k].detach().float().reshape(()) for k in self.learner_metric_names]
        )
        window.metric_sum = stacked if window.metric_sum is None else window.metric_sum + stacked

    def note_report(self, report: dict[str, float]) -> None:
        self.last_report = report
        reward = report.get("Train/mean_reward")
        if reward is not None and math.isfinite(reward):
            self.best_mean_reward = (
                reward if self.best_mean_reward is None else max(self.best_mean_reward, reward)
            )

    def log(
        self, tick: int, iteration: int, window: TickWindow, now: float, *, partial: bool = False
    ) -> None:
        """Queue one row for ``tick`` (docs/contracts.md §metric-schema) from ``window`` ending at ``now``.

        ``partial``: the run's last window, shorter than ``training.log_interval`` (a time
        budget ends between two rows). Its row is written, but the final timings stay those of
        the last full window: a few iterations that include the run's last tick are not
        typical of the run. A run with no full window reports its only one.
        """
        ingress, block = self.resources.ingress, self.collector.block
        assert ingress is not None and block is not None
        iters = max(window.iterations, 1)
        iteration_time = (now - window.start) / iters
        fps = (
            self.num_envs * self.env_steps_per_sync / iteration_time if iteration_time > 0 else None
        )
        step = (tick + 1) * self.num_envs
        report = self.collector.latest_report()
        if report is not None:
            self.note_report(report)
        scalars = _host_scalars(window, iters, iteration, iteration_time, fps)
        scalars.update(_ingress_scalars(ingress.snapshot(block)))
        if report is not None:
            for name, value in report.items():
                if "/" in name and math.isfinite(value):
                    scalars[name] = value
        if not (partial and self.final):
            self._note_final(window, iters, scalars)
        self._pending.append((step, scalars, _to_host(window.metric_sum, iters)))
        self.flush(block=False)

    def _note_final(self, window: TickWindow, iters: int, scalars: dict[str, float | None]) -> None:
        self.final.update(
            inference_ms=scalars["Perf/learner_inference_ms"],
            inference_h2d_ms=scalars["Perf/learner_inference_h2d_ms"],
            inference_forward_ms=scalars["Perf/learner_inference_forward_ms"],
            inference_d2h_ms=scalars["Perf/learner_inference_d2h_ms"],
            cycle_host_ms=1000 * window.learn_s / iters,
        )

    def flush(self, *, block: bool) -> None:
        """Write queued metric rows whose device values arrived (all of them when ``block``)."""
        assert self.writer is not None
        while self._pending:
            step, scalars, values = self._pending[0]
            if values is not None:
                host, event = values
                if event is not None and not event.query():
                    if not block:
                        return
                    event.synchronize()
                for name, value in zip(self.learner_metric_names or [], host.tolist()):
                    scalars[name] = value
            self._pending.popleft()
            self.writer.write(step, scalars)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def finish(self) -> None:
        """Write every queued row (waiting for its device values), then close the writer."""
        self.flush(block=True)
        self.close()


def _host_scalars(
    w: TickWindow, iters: int, iteration: int, iteration_time: float, fps: float | None
) -> dict[str, float | None]:
    return {
        "Train/iteration": iteration,
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
    }


def _ingress_scalars(ingress: dict) -> dict[str, float | None]:
    return {
        "Train/replay_ingress_depth": ingress["ingress_depth"],
        "Train/replay_ingress_occupancy": ingress["occupancy"],
        "Train/replay_ingress_high_water": ingress["high_water_occupancy"],
        "Train/replay_ingress_backpressure_wait_ms": 1000 * ingress["backpressure_wait_s"],
        "Train/replay_ingress_dropped_batches": ingress["dropped_batches"],
    }


def _to_host(metric_sum: torch.Tensor | None, iters: int) -> PendingValues | None:
    """The window's mean device metrics, copied to pinned memory behind an event (no sync)."""
    if metric_sum is None:
        return None
    mean = metric_sum / iters
    if mean.device.type == "cuda":
        host = torch.empty(mean.shape, dtype=mean.dtype, pin_memory=True)
        host.copy_(mean, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return host, event
    return mean, None
