"""The learner's shutdown: the ``finalize/*`` phases of a completed run, the release of the
shared tensors, and the stop-snapshot-report sequence of a failed one (docs/runtime.md, "Shutdown").

On success the collector is quiesced *before* the final flight snapshot, so the manifest
shows a drained flight (queue_depth = publication_lag = 0). On failure the collector is
stopped first, then every snapshot is taken best-effort (a part that raises becomes null
and a cleanup error), so the failed summary is always written.
"""

from __future__ import annotations

import logging
from typing import Any

from contracts.names import Owner, ShutdownClassification, ShutdownPhase
from trainer.runtime.control import Word
from trainer.runtime.evaluation_stage import EvaluationHost
from trainer.runtime.inference_ring import InferenceRing
from trainer.runtime.learner_startup import RunParts
from trainer.runtime.run_report import RunReport
from trainer.runtime.shared_tensors import release_learner_side
from trainer.runtime.shutdown import (
    classify_exception,
    error_entry,
)
from trainer.runtime.tick_loop import TickLoop

logger = logging.getLogger(__name__)


class LearnerShutdown:
    """Ends a run (see the module docstring)."""

    def __init__(self, parts: RunParts, loop: TickLoop, report: RunReport) -> None:
        self.parts = parts
        self.loop = loop
        self.report = report

    def finalize(self, host: EvaluationHost) -> dict[str, Any]:
        """``finalize/*`` of a completed run; the snapshots its summary records.

        ``host`` is what the evaluation stage reads (the ``LearnerRuntime``).
        """
        p = self.parts
        tr, block, res = p.tracker, p.collector.block, p.resources
        assert block is not None and res.ring is not None and res.ingress is not None
        assert res.waiter is not None
        tr.enter(ShutdownPhase.FINALIZE_COLLECTOR_QUIESCE)
        res.waiter.wait(
            lambda: bool(block.ints[Word.COLLECTOR_DONE]), "the collector's last report"
        )
        tr.enter(ShutdownPhase.FINALIZE_EVALUATION)
        p.evaluation.run(host)
        block.set(Word.STOP, 1)
        problem = self.parts.collector.join()
        if problem is not None:
            tr.cleanup_errors.append(error_entry(type_name="CollectorExit", message=problem))
        tr.enter(ShutdownPhase.FINALIZE_COLLECTOR_METRICS_DRAIN)
        self.parts.collector.read_info()
        report = self.parts.collector.read_report()
        if report is not None:
            self.parts.pump.note_report(report)
        tr.enter(ShutdownPhase.FINALIZE_REPLAY_PIPELINE_CLOSE)
        while self.loop.commit_one():
            pass
        block.set(Word.CLOSED, 1)
        tr.enter(ShutdownPhase.FINALIZE_REPLAY_INGRESS_SNAPSHOT)
        ingress = res.ingress.snapshot(block)
        ring_snapshot = res.ring.snapshot(block)
        flight = InferenceRing.flight(block)
        # The collector has exited (released its copies); now ours, then torch's IPC blocks.
        problems = tr.best_effort("release the shared tensors", self.release_shared_tensors)
        for problem in problems or []:
            tr.cleanup_errors.append(error_entry(type_name="SharedTensorsHeld", message=problem))
        tr.enter(ShutdownPhase.FINALIZE_LOGGER_FINISH)
        self.parts.pump.finish()
        return {
            "ingress": ingress,
            "ring": ring_snapshot,
            "flight": flight,
            "collector": self.parts.collector.exit_record(),
        }

    # -- shared tensors (shared_tensors.py) ------------------------------------------------
    def release_shared_tensors(self) -> list[str]:
        """Free the learner's shared tensors once the collector has exited; return problems.

        The collector freed its copies before exiting and acknowledged it
        (``SHARED_RELEASED``); the learner frees its own and lets torch free the CUDA IPC
        blocks (shared_tensors.py). Idempotent.
        """
        res, plan = self.parts.resources, self.parts.plan
        if res.shared is None:
            return []
        watch, res.shared = res.shared, None
        problems = self.parts.collector.release_problems()
        assert res.ring is not None and res.ingress is not None
        devices = (plan.device, plan.collector_device)
        return release_learner_side(watch, res.ring, res.ingress, devices, problems)

    def release_after_failure(self) -> None:
        """A failed run frees the shared tensors too; what stayed referenced is logged."""
        try:
            problems = self.release_shared_tensors()
        except Exception as err:  # noqa: BLE001 - the failure itself is already recorded
            problems = [f"releasing the shared tensors raised {type(err).__name__}: {err}"]
        for problem in problems:
            logger.warning("%s", problem)

    # -- summaries -------------------------------------------------------------------------------
    def completed_summary(self, snap: dict[str, Any]) -> dict[str, Any]:
        shutdown = self.parts.tracker.record(
            classification=ShutdownClassification.NORMAL_COMPLETION,
            owner=Owner.LEARNER,
            collector=snap["collector"],
            replay_ingress=snap["ingress"],
            inference_ring=snap["ring"],
            phase=ShutdownPhase.FINALIZE_LOGGER_FINISH,
        )
        manifest = self.report.manifest.build(
            ingress=snap["ingress"], flight=snap["flight"], shutdown=shutdown
        )
        return self.report.completed_summary(manifest)

    def write_failure(self, err: BaseException) -> dict[str, Any]:
        """Stop everything, snapshot best-effort, write the failed summary."""
        tr, res, block = self.parts.tracker, self.parts.resources, self.parts.collector.block
        phase = tr.phase
        classification = classify_exception(err)
        collector = tr.best_effort("stop the collector", self.parts.collector.stop_after_failure)
        ingress = (
            tr.best_effort("replay ingress snapshot", lambda: res.ingress.snapshot(block))
            if res.ingress
            else None
        )
        ring = (
            tr.best_effort("inference ring snapshot", lambda: res.ring.snapshot(block))
            if res.ring
            else None
        )
        flight = InferenceRing.flight(block) if block is not None else None
        if self.parts.pump.writer is not None:
            tr.best_effort("metrics flush", self.parts.pump.finish)
        exc = error_entry(err)
        manifest = (
            tr.best_effort(
                "runtime manifest",
                lambda: self.report.manifest.build(ingress=ingress, flight=flight, shutdown={}),
            )
            or {}
        )
        manifest.pop("shutdown", None)
        shutdown_extra = {
            "iteration": tr.iteration,
            "coordination_tick": tr.coordination_tick,
            "inference_epoch": tr.inference_epoch,
            "collector": collector,
            "cleanup": {"errors": list(tr.cleanup_errors)},
            "replay_ingress": ingress,
            "inference_ring": ring,
        }
        return self.report.write_failed(
            err,
            classification=classification,
            phase=phase,
            exception=exc,
            manifest=manifest,
            shutdown_extra=shutdown_extra,
            evaluation=tr.best_effort(
                "evaluation section", lambda: self.parts.evaluation.failed_run_section(phase)
            ),
        )
