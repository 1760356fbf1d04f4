"""Shutdown diagnostics: phase tracking, failure classification and best-effort snapshots.

docs/contracts.md §shutdown. The learner process keeps one ``ShutdownTracker``. Every phase change is
recorded (and, outside the per-tick training phases, appended to progress.jsonl so slow
phases such as compile or graph capture are visible from outside). On any exit the tracker
builds ``runtime_manifest.shutdown``: who failed, in which phase, at which iteration and
tick, the exception, the collector's exit status, cleanup errors and the ring/ingress
snapshots. Each snapshot is taken best-effort: a part that raises becomes ``null`` and the
error goes to ``cleanup.errors`` instead of masking the original failure.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contracts.names import Owner, PhaseGroup, ShutdownClassification, ShutdownPhase

logger = logging.getLogger(__name__)


def _phases(group: PhaseGroup) -> tuple[ShutdownPhase, ...]:
    return tuple(phase for phase in ShutdownPhase if phase.group is group)


STARTUP_PHASES = _phases(PhaseGroup.STARTUP)
TRAINING_PHASES = _phases(PhaseGroup.TRAINING)
ALL_PHASES = tuple(ShutdownPhase)
# Entered once per tick: tracked in memory only, never appended to progress.jsonl.
PER_TICK_PHASES = frozenset(TRAINING_PHASES[1:])

CLASSIFICATION_OWNER: dict[ShutdownClassification, Owner] = {
    ShutdownClassification.NORMAL_COMPLETION: Owner.LEARNER,
    ShutdownClassification.LEARNER_FAILURE: Owner.LEARNER,
    ShutdownClassification.COLLECTOR_FAILURE: Owner.COLLECTOR,
    ShutdownClassification.BACKEND_WORKER_FAILURE: Owner.COLLECTOR,
    ShutdownClassification.TIMEOUT_STALE_TICK: Owner.UNKNOWN,
    ShutdownClassification.EXTERNAL_CANCELLATION: Owner.EXTERNAL,
    ShutdownClassification.UNKNOWN_FAILURE: Owner.UNKNOWN,
}
"""Who a shutdown classification is attributed to unless the record names an owner."""
BENIGN_COLLECTOR_EXITCODES = frozenset({0, -signal.SIGTERM, -signal.SIGINT})
ERROR_MESSAGE_LIMIT = 16000


class ExternalCancellation(Exception):
    """SIGINT/SIGTERM reached the learner (raised by our handler's flag, not KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"received {signal.Signals(signum).name}")


class CollectorFailure(RuntimeError):
    """The collector died or raised.

    Attributes:
        classification: ``collector_failure`` or ``backend_worker_failure``.
        error_type: the collector exception's type name (or ``CollectorDied``).
    """

    def __init__(
        self,
        message: str,
        *,
        classification: ShutdownClassification = ShutdownClassification.COLLECTOR_FAILURE,
        error_type: str = "CollectorDied",
    ):
        super().__init__(message)
        self.classification = classification
        self.error_type = error_type


class StaleTickFailure(RuntimeError):
    """The coordination watchdog fired (``timeout/stale_tick``)."""


def error_entry(
    err: BaseException | None = None, *, type_name: str | None = None, message: str | None = None
) -> dict:
    """``{type, message}`` with the message cut to the contract limit."""
    if err is not None:
        reported = err.error_type if isinstance(err, CollectorFailure) else None
        type_name = type_name or reported or type(err).__name__
        message = message if message is not None else str(err)
    return {"type": type_name or "Exception", "message": (message or "")[:ERROR_MESSAGE_LIMIT]}


def signal_name(signum: int | None) -> str | None:
    if signum is None:
        return None
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


def collector_exit(alive: bool, exitcode: int | None) -> dict[str, Any]:
    """``shutdown.collector``: exitcode −N means killed by signal N (−9 → SIGKILL)."""
    signum = -exitcode if exitcode is not None and exitcode < 0 else None
    return {
        "alive": alive,
        "exitcode": exitcode,
        "signal": signum,
        "signal_name": signal_name(signum),
    }


def classify_exception(err: BaseException) -> ShutdownClassification:
    """Map an exception that ended the learner's run to a docs/contracts.md §shutdown classification."""
    from trainer.runtime.liveness import StaleTick

    if isinstance(err, (ExternalCancellation, KeyboardInterrupt, SystemExit)):
        return ShutdownClassification.EXTERNAL_CANCELLATION
    if isinstance(err, CollectorFailure):
        return err.classification
    if isinstance(err, (StaleTick, StaleTickFailure)):
        return ShutdownClassification.TIMEOUT_STALE_TICK
    if isinstance(err, Exception):
        return ShutdownClassification.LEARNER_FAILURE
    return ShutdownClassification.UNKNOWN_FAILURE


@dataclass
class ShutdownTracker:
    """Current phase and counters of the learner process, and the shutdown record.

    Args:
        on_phase: called with the phase name whenever a phase outside PER_TICK_PHASES is
            entered (the progress.jsonl appender).
        check_cancel: called on every phase change (raises ExternalCancellation).
    """

    on_phase: Callable[[str], None] | None = None
    check_cancel: Callable[[], None] | None = None
    phase: ShutdownPhase = ShutdownPhase.STARTUP_BEGIN
    iteration: int | None = None
    coordination_tick: int | None = None
    inference_epoch: int | None = None
    cleanup_errors: list[dict] = field(default_factory=list)
    phase_history: list[ShutdownPhase] = field(default_factory=list)

    def enter(self, phase: ShutdownPhase) -> None:
        """Enter ``phase`` (one of ALL_PHASES)."""
        if phase not in ALL_PHASES:
            raise ValueError(f"unknown shutdown phase {phase!r}")
        self.phase = phase = ShutdownPhase(phase)
        if phase in PER_TICK_PHASES:
            return
        self.phase_history.append(phase)
        if self.check_cancel is not None:
            self.check_cancel()
        if self.on_phase is not None:
            self.best_effort(f"progress line for {phase}", lambda: self.on_phase(phase))

    def best_effort(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn``; on error record a cleanup error naming ``what`` and return None."""
        try:
            return fn()
        except Exception as err:  # noqa: BLE001 - a snapshot must never mask the original error
            logger.warning("%s failed: %s: %s", what, type(err).__name__, err)
            self.cleanup_errors.append(error_entry(err, message=f"{what}: {err}"))
            return None

    def record(
        self,
        *,
        classification: ShutdownClassification,
        owner: Owner | None = None,
        exception: dict | None = None,
        collector: dict | None = None,
        replay_ingress: dict | None = None,
        inference_ring: dict | None = None,
        phase: ShutdownPhase | None = None,
    ) -> dict[str, Any]:
        """Build ``runtime_manifest.shutdown``."""
        if classification not in CLASSIFICATION_OWNER:
            raise ValueError(f"unknown shutdown classification {classification!r}")
        return {
            "classification": classification,
            "owner": owner or CLASSIFICATION_OWNER[classification],
            "phase": phase or self.phase,
            "iteration": self.iteration,
            "coordination_tick": self.coordination_tick,
            "inference_epoch": self.inference_epoch,
            "exception": exception,
            "collector": collector,
            "cleanup": {"errors": list(self.cleanup_errors)},
            "replay_ingress": replay_ingress,
            "inference_ring": inference_ring,
        }
