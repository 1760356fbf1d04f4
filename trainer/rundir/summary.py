"""run_summary.json: build, validate against schemas/run_summary.v1.json, write atomically.

docs/contracts.md §run-summary. ``build_summary`` assembles the document from the run's identity
(``contracts.identity.RunIdentity``), its progress, the runtime manifest and its outcome (the
completed-only fields, or a :class:`RunFailure`); ``write_summary`` validates it before the
rename, so a reader never sees an invalid or half-written summary. When a failed run's
full document does not validate (a broken snapshot, say), ``write_summary`` falls back to
the contract's minimal failed form with the shutdown record, naming the violation in
``cleanup.errors``. ``write_failed_summary`` is the one call the CLI uses for preflight
failures and the runtime uses for every failed run.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import rundir
from contracts.identity import RunIdentity
from contracts.names import Owner, ShutdownClassification, ShutdownPhase
from contracts.schemas import validate

logger = logging.getLogger(__name__)

SUMMARY_SCHEMA = rundir.SCHEMAS[rundir.RUN_SUMMARY]
METRIC_SCHEMA_VERSION = 1
MANIFEST_SCHEMA_VERSION = 1
TAIL_WINDOW_ITERATIONS = 100
ERROR_LIMIT = 16000


class SummaryInvalid(ValueError):
    """A completed run's summary does not validate against run_summary.v1.json."""


def utc_stamp(epoch_s: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


def null_cuda_process_sharing(
    learner_device: str, collector_device: str | None = None
) -> dict[str, Any]:
    """A docs/contracts.md §cuda-process-sharing record for ``training.cuda_process_sharing = null`` when the caller has none."""
    return {
        "configured": None,
        "effective": None,
        "validated": False,
        "rank": 0,
        "world_size": 1,
        "learner_device": learner_device,
        "collector_device": collector_device,
        "learner_gpu_uuid": None,
        "collector_gpu_uuid": None,
        "pipe_directory_env": None,
        "pipe_directory": None,
        "control_pipe": None,
        "control_pipe_kind": None,
        "server_pid": None,
        "ambient_server": False,
        "selected_record": None,
    }


@dataclass(frozen=True, kw_only=True)
class RunProgress:
    """How far the run got: the summary's ``wall_time_sec``, ``completed_iterations``,
    ``total_env_steps`` and ``end_time_utc`` (default: now)."""

    wall_time_sec: float
    completed_iterations: int = 0
    total_env_steps: int = 0
    end_time_utc: str | None = None


@dataclass(frozen=True, kw_only=True)
class RunFailure:
    """Why a run did not complete: the summary's ``status`` (``failed``, ``cancelled`` or
    ``collector_died``) and ``runtime_manifest.shutdown``'s classification, owner, phase and
    exception (docs/contracts.md §shutdown); the exception is the failure itself or an
    already built ``{type, message}``."""

    classification: ShutdownClassification
    owner: Owner
    phase: ShutdownPhase
    exception: BaseException | dict[str, str] | None
    status: str = "failed"

    def exception_entry(self) -> dict[str, str] | None:
        """``shutdown.exception``: ``{type, message}`` or None."""
        if isinstance(self.exception, BaseException):
            return {
                "type": type(self.exception).__name__,
                "message": str(self.exception)[:ERROR_LIMIT],
            }
        return self.exception


@dataclass(frozen=True, kw_only=True)
class RuntimeRecord:
    """What the runtime recorded of a failed run, beyond its :class:`RunFailure`.

    Attributes:
        manifest: more runtime-manifest keys (snapshots, diagnostics).
        cuda_process_sharing: the docs/contracts.md §cuda-process-sharing record; a null-mode
            record for ``learner_device`` is attached when None.
        shutdown: more shutdown keys (iteration, collector, snapshots, cleanup).
        learner_device: the learner's torch device.
    """

    manifest: dict[str, Any] = field(default_factory=dict)
    cuda_process_sharing: dict[str, Any] | None = None
    shutdown: dict[str, Any] = field(default_factory=dict)
    learner_device: str = "cpu"


def build_summary(
    identity: RunIdentity,
    progress: RunProgress,
    runtime_manifest: dict[str, Any],
    outcome: dict[str, Any] | RunFailure,
) -> dict[str, Any]:
    """Assemble a run summary (not validated; see ``write_summary``).

    Args:
        identity: the run (its eight document fields: ``RunIdentity.document_fields``).
        progress: how far it got.
        runtime_manifest: the manifest's keys (its ``schema_version`` is added).
        outcome: a completed run's completed-only fields, or why the run failed.
    """
    doc: dict[str, Any] = {
        "status": outcome.status if isinstance(outcome, RunFailure) else "completed",
        "metric_schema_version": METRIC_SCHEMA_VERSION,
        "runtime_manifest": {"schema_version": MANIFEST_SCHEMA_VERSION, **runtime_manifest},
        **identity.document_fields(),
        "end_time_utc": progress.end_time_utc or utc_stamp(),
        "wall_time_sec": max(0.0, float(progress.wall_time_sec)),
        "completed_iterations": int(progress.completed_iterations),
        "total_env_steps": int(progress.total_env_steps),
    }
    if isinstance(outcome, RunFailure):
        exc = outcome.exception_entry() or {}
        doc["error_type"] = exc.get("type") or "RunFailure"
        doc["error"] = (exc.get("message") or f"{outcome.classification} in {outcome.phase}")[
            :ERROR_LIMIT
        ]
    else:
        doc.update(outcome)
        doc["tail_window_iterations"] = TAIL_WINDOW_ITERATIONS
    return doc


def minimal_failed_summary(
    shutdown: dict[str, Any], *, error_type: str, error: str
) -> dict[str, Any]:
    """The contract's minimal failed form (docs/contracts.md §run-summary)."""
    return {
        "status": "failed",
        "metric_schema_version": METRIC_SCHEMA_VERSION,
        "runtime_manifest": {"schema_version": MANIFEST_SCHEMA_VERSION, "shutdown": shutdown},
        "error_type": error_type or "Exception",
        "error": (error or "")[:ERROR_LIMIT],
    }


def write_summary(run_dir: str | Path, doc: dict[str, Any]) -> dict[str, Any]:
    """Validate ``doc`` and write ``<run_dir>/run_summary.json`` atomically; return what was written.

    Raises:
        SummaryInvalid: a completed summary violates the schema (nothing is written).
    """
    violations = validate(doc, SUMMARY_SCHEMA)
    if violations:
        detail = "; ".join(str(v) for v in violations[:5])
        if doc.get("status") == "completed":
            raise SummaryInvalid(f"run summary violates {SUMMARY_SCHEMA}: {detail}")
        logger.error(
            "failed run summary violates %s (%s); writing the minimal form", SUMMARY_SCHEMA, detail
        )
        manifest = (
            doc.get("runtime_manifest") if isinstance(doc.get("runtime_manifest"), dict) else {}
        )
        shutdown = dict(manifest.get("shutdown") or {})
        shutdown.setdefault("classification", ShutdownClassification.UNKNOWN_FAILURE)
        shutdown.setdefault("owner", Owner.UNKNOWN)
        shutdown.setdefault("phase", ShutdownPhase.FINALIZE_LOGGER_FINISH)
        shutdown.setdefault("exception", None)
        errors = list((shutdown.get("cleanup") or {}).get("errors") or [])
        errors.append({"type": "SummaryInvalid", "message": detail[:ERROR_LIMIT]})
        shutdown["cleanup"] = {"errors": errors}
        doc = minimal_failed_summary(
            shutdown,
            error_type=str(doc.get("error_type") or "Exception"),
            error=str(doc.get("error") or detail),
        )
        if validate(doc, SUMMARY_SCHEMA):
            doc = minimal_failed_summary(
                {
                    "classification": ShutdownClassification.UNKNOWN_FAILURE,
                    "owner": Owner.UNKNOWN,
                    "phase": ShutdownPhase.FINALIZE_LOGGER_FINISH,
                    "exception": None,
                    "cleanup": {
                        "errors": [{"type": "SummaryInvalid", "message": detail[:ERROR_LIMIT]}]
                    },
                },
                error_type="SummaryInvalid",
                error=detail,
            )
    rundir.write(Path(run_dir) / rundir.RUN_SUMMARY, doc)
    return doc


def write_failed_summary(
    identity: RunIdentity,
    failure: RunFailure,
    *,
    progress: RunProgress | None = None,
    runtime: RuntimeRecord | None = None,
    evaluation: dict[str, Any] | None = None,
    last_checkpoint: str | None = None,
) -> dict[str, Any]:
    """Write the summary of a failed run (preflight or runtime) into ``identity.run_dir``
    and return it.

    Args:
        identity: the run.
        failure: why it did not complete.
        progress: how far it got; default: no iteration, the wall time since its start.
        runtime: what the runtime recorded; default: nothing but a null-mode sharing record.
        evaluation: ``run_summary.evaluation``; default: skipped, the run failed before it.
        last_checkpoint: the newest checkpoint this run wrote (a cancelled run saves the
            iteration it reached); omitted when None.
    """
    if identity.run_dir is None:
        raise ValueError("a run summary is written into the run's directory; the identity has none")
    runtime = runtime or RuntimeRecord()
    shutdown = _failed_shutdown(failure)
    shutdown.update(runtime.shutdown)
    manifest: dict[str, Any] = dict(runtime.manifest)
    manifest["cuda_process_sharing"] = runtime.cuda_process_sharing or null_cuda_process_sharing(
        runtime.learner_device
    )
    manifest["shutdown"] = shutdown
    if progress is None:
        progress = RunProgress(wall_time_sec=_wall_time_since(identity.start_time_utc or ""))
    doc = build_summary(identity, progress, manifest, failure)
    doc["evaluation"] = evaluation or _skipped_evaluation(failure.classification, failure.phase)
    if last_checkpoint is not None:
        doc["last_checkpoint"] = last_checkpoint
    return write_summary(identity.run_dir, doc)


def _failed_shutdown(failure: RunFailure) -> dict[str, Any]:
    """``runtime_manifest.shutdown`` of a failed run before the runtime's extra keys."""
    return {
        "classification": failure.classification,
        "owner": failure.owner,
        "phase": failure.phase,
        "iteration": None,
        "coordination_tick": None,
        "inference_epoch": None,
        "exception": failure.exception_entry(),
        "collector": None,
        "cleanup": {"errors": []},
        "replay_ingress": None,
        "inference_ring": None,
    }


def _wall_time_since(start_time_utc: str) -> float:
    """Seconds since ``start_time_utc`` (0.0 when it does not parse)."""
    try:
        start = time.mktime(time.strptime(start_time_utc, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        return max(0.0, time.time() - start)
    except (ValueError, OverflowError):
        return 0.0


def _skipped_evaluation(
    classification: ShutdownClassification, phase: ShutdownPhase
) -> dict[str, Any]:
    return {
        "status": "skipped",
        "reason": f"the run failed before its evaluation ({classification} in {phase})",
        "path": None,
        "points": 0,
        "final": None,
        "best": None,
    }
