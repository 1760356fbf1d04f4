"""The run's report: ``runtime_manifest`` and ``run_summary.json`` of a completed or a failed
run (docs/runtime.md, "Shutdown"; docs/schemas.md), and who a failure is charged to; the manifest
itself is run_manifest.py's.

It only reads: the plan and state of the run, what startup built, what the collector
published, what the metrics pump kept. The snapshots a summary records (ring, ingress,
flight) are taken by the caller, at the point of the shutdown sequence where they belong.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from contracts.names import Owner, ShutdownClassification, ShutdownPhase
from trainer.rundir.summary import (
    RunFailure,
    RunProgress,
    RuntimeRecord,
    build_summary,
    write_failed_summary,
)
from trainer.runtime.budget import TimeBudget
from trainer.runtime.learner_startup import RunParts
from trainer.runtime.run_manifest import RunManifest
from trainer.runtime.run_state import (
    TAIL_WINDOW,
    released_env_steps,
)
from trainer.runtime.shutdown import CLASSIFICATION_OWNER, CollectorFailure, ExternalCancellation


def failure_owner(err: BaseException, classification: ShutdownClassification) -> Owner:
    """``shutdown.owner`` of a failed run."""
    if isinstance(err, ExternalCancellation):
        return Owner.EXTERNAL
    if classification == ShutdownClassification.EXTERNAL_CANCELLATION:
        return Owner.UNKNOWN  # a KeyboardInterrupt or SystemExit: no signal of ours seen
    return CLASSIFICATION_OWNER[classification]


def failure_status(err: BaseException) -> str:
    """``cancelled`` when a signal stopped the run, ``collector_died`` when the collector
    ended without reporting an exception (crash, signal), else ``failed``."""
    if isinstance(err, ExternalCancellation):
        return "cancelled"
    if isinstance(err, CollectorFailure) and err.error_type == "CollectorDied":
        return "collector_died"
    return "failed"


class RunReport:
    """Builds the manifest and the summaries from the run's parts (see the module docstring)."""

    def __init__(self, parts: RunParts, budget: TimeBudget) -> None:
        self.ctx = parts.ctx
        self.plan = parts.plan
        self.state = parts.state
        self.resources = parts.resources
        self.collector = parts.collector
        self.pump = parts.pump
        self.budget = budget
        self.evaluation = parts.evaluation
        self.manifest = RunManifest(parts)

    def total_env_steps(self) -> int:
        return released_env_steps(self.collector.block, self.resources.ingress, self.plan.slot_rows)

    # -- the summaries -------------------------------------------------------------------------
    def completed_summary(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return build_summary(
            self.ctx.identity, self._progress(), manifest, self._completed_fields()
        )

    def _progress(self) -> RunProgress:
        return RunProgress(
            wall_time_sec=time.time() - self.state.start_wall,
            completed_iterations=self.state.run_iterations,
            total_env_steps=self.total_env_steps(),
        )

    def _completed_fields(self) -> dict[str, Any]:
        state, pump, final = self.state, self.pump, self.pump.final
        end = time.monotonic()
        tail = list(state.tail)
        tail_fps = None
        if len(tail) >= 2 and tail[-1][0] > tail[0][0]:
            tail_fps = (tail[-1][1] - tail[0][1]) / (tail[-1][0] - tail[0][0])
        report = pump.last_report or {}
        final_rate = state.final_span.env_steps_per_sec()
        training_s = self.budget.elapsed_s()  # training/startup_complete to the last tick

        def finite(key: str) -> float | None:
            value = report.get(key)
            return value if value is not None and math.isfinite(value) else None

        completed = {
            "training_wall_time_sec": max(0.0, end - (state.training_start or end)),
            "tail_iteration_count": min(TAIL_WINDOW, state.run_iterations),
            "final_mean_reward": finite("Train/mean_reward"),
            "best_mean_reward": pump.best_mean_reward,
            "mean_episode_length": finite("Train/mean_episode_length"),
            "last_checkpoint": state.last_checkpoint,
            "time_budget": self.budget.record(
                max_iterations=self.plan.max_iterations,
                stopped_by=state.stopped_by,
                final_iteration=state.iteration,
            ),
            "final_env_steps_per_sec": final_rate,
            "tail_env_steps_per_sec": tail_fps,
            "steady_env_steps_per_sec": (
                state.steady.env_steps_per_sec() if state.steady is not None else None
            ),
            "training_env_steps_per_sec": (
                self.total_env_steps() / training_s if training_s else None
            ),
            "final_learner_replay_rows_per_sec": final_rate,  # one replay row per env step
            "final_cycle_wall_ms": final.get("cycle_device_ms", final.get("cycle_host_ms")),
            "final_inference_ms": final.get("inference_ms"),
            "final_inference_h2d_ms": final.get("inference_h2d_ms"),
            "final_inference_forward_ms": final.get("inference_forward_ms"),
            "final_inference_d2h_ms": final.get("inference_d2h_ms"),
        }
        if self.evaluation.section is not None:
            completed["evaluation"] = self.evaluation.section
        if self.plan.device.type == "cuda":
            completed["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
        return completed

    def write_failed(
        self,
        err: BaseException,
        *,
        classification: ShutdownClassification,
        phase: ShutdownPhase,
        exception: dict[str, str],
        manifest: dict[str, Any],
        shutdown_extra: dict[str, Any],
        evaluation: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """Write the failed summary; ``manifest`` without its ``shutdown`` and sharing keys."""
        sharing = manifest.pop("cuda_process_sharing", None)
        failure = RunFailure(
            classification=classification,
            owner=failure_owner(err, classification),
            phase=phase,
            exception=exception,
            status=failure_status(err),
        )
        runtime = RuntimeRecord(
            manifest=manifest,
            cuda_process_sharing=sharing,
            shutdown=shutdown_extra,
            learner_device=str(self.plan.device),
        )
        return write_failed_summary(
            self.ctx.identity,
            failure,
            progress=self._progress(),
            runtime=runtime,
            evaluation=evaluation,
            last_checkpoint=self.state.last_checkpoint,
        )
