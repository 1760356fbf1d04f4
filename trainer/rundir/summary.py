"""run_summary.json: build, validate against schemas/run_summary.v1.json, write atomically.

docs/contracts.md §run-summary. ``build_summary`` assembles the document from the always-fields, the
completed-only fields and the runtime manifest; ``write_summary`` validates it before the
rename, so a reader never sees an invalid or half-written summary. When a failed run's
full document does not validate (a broken snapshot, say), ``write_summary`` falls back to
the contract's minimal failed form with the shutdown record, naming the violation in
``cleanup.errors``. ``write_failed_summary`` is the one call the CLI uses for preflight
failures and the runtime uses for every failed run.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from contracts import rundir
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


def build_summary(
    *,
    status: str,
    algo: str,
    task: str,
    sim_backend: str,
    log_dir: str,
    start_time_utc: str,
    wall_time_sec: float,
    completed_iterations: int,
    total_env_steps: int,
    configured_seed: int | None,
    configured_seed_source: str,
    effective_seed: int,
    runtime_manifest: dict[str, Any],
    completed_fields: dict[str, Any] | None = None,
    error_type: str | None = None,
    error: str | None = None,
    end_time_utc: str | None = None,
) -> dict[str, Any]:
    """Assemble a run summary (not validated; see ``write_summary``)."""
    doc: dict[str, Any] = {
        "status": status,
        "metric_schema_version": METRIC_SCHEMA_VERSION,
        "runtime_manifest": {"schema_version": MANIFEST_SCHEMA_VERSION, **runtime_manifest},
        "algo": algo,
        "task": task,
        "sim_backend": sim_backend,
        "log_dir": log_dir,
        "start_time_utc": start_time_utc,
        "end_time_utc": end_time_utc or utc_stamp(),
        "wall_time_sec": max(0.0, float(wall_time_sec)),
        "completed_iterations": int(completed_iterations),
        "total_env_steps": int(total_env_steps),
        "configured_seed": configured_seed,
        "configured_seed_source": configured_seed_source,
        "effective_seed": int(effective_seed),
    }
    if status == "completed":
        doc.update(completed_fields or {})
        doc["tail_window_iterations"] = TAIL_WINDOW_ITERATIONS
    else:
        doc["error_type"] = error_type or "Exception"
        doc["error"] = (error or "")[:ERROR_LIMIT]
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
    run_dir: str | Path,
    *,
    algo: str,
    task: str,
    sim_backend: str,
    log_dir: str,
    start_time_utc: str,
    configured_seed: int | None,
    configured_seed_source: str,
    effective_seed: int,
    classification: ShutdownClassification,
    owner: Owner,
    phase: ShutdownPhase,
    exception: BaseException | dict[str, str] | None,
    cuda_process_sharing: dict[str, Any] | None = None,
    manifest_extra: dict[str, Any] | None = None,
    status: str = "failed",
    wall_time_sec: float | None = None,
    completed_iterations: int = 0,
    total_env_steps: int = 0,
    shutdown_extra: dict[str, Any] | None = None,
    learner_device: str = "cpu",
    evaluation: dict[str, Any] | None = None,
    last_checkpoint: str | None = None,
) -> dict[str, Any]:
    """Write the summary of a failed run (preflight or runtime) and return it.

    Args:
        classification, owner, phase: ``runtime_manifest.shutdown`` (docs/contracts.md §shutdown).
        exception: the failure, or an already built ``{type, message}``.
        cuda_process_sharing: the docs/contracts.md §cuda-process-sharing record; a null-mode record is attached when None.
        manifest_extra: more runtime-manifest keys (snapshots, diagnostics).
        shutdown_extra: more shutdown keys (iteration, collector, snapshots, cleanup).
        evaluation: ``run_summary.evaluation``; default: skipped, the run failed before it.
        last_checkpoint: the newest checkpoint this run wrote (a cancelled run saves the
            iteration it reached); omitted when None.
    """
    exc = _exception_entry(exception)
    shutdown = _failed_shutdown(classification, owner, phase, exc)
    shutdown.update(shutdown_extra or {})
    manifest: dict[str, Any] = dict(manifest_extra or {})
    manifest["cuda_process_sharing"] = cuda_process_sharing or null_cuda_process_sharing(
        learner_device
    )
    manifest["shutdown"] = shutdown
    if wall_time_sec is None:
        wall_time_sec = _wall_time_since(start_time_utc)
    doc = build_summary(
        status=status,
        algo=algo,
        task=task,
        sim_backend=sim_backend,
        log_dir=log_dir,
        start_time_utc=start_time_utc,
        wall_time_sec=wall_time_sec,
        completed_iterations=completed_iterations,
        total_env_steps=total_env_steps,
        configured_seed=configured_seed,
        configured_seed_source=configured_seed_source,
        effective_seed=effective_seed,
        runtime_manifest=manifest,
        error_type=(exc or {}).get("type") or "RunFailure",
        error=(exc or {}).get("message") or f"{classification} in {phase}",
    )
    doc["evaluation"] = evaluation or _skipped_evaluation(classification, phase)
    if last_checkpoint is not None:
        doc["last_checkpoint"] = last_checkpoint
    return write_summary(run_dir, doc)


def _exception_entry(exception: BaseException | dict[str, str] | None) -> dict[str, str] | None:
    if isinstance(exception, BaseException):
        return {"type": type(exception).__name__, "message": str(exception)[:ERROR_LIMIT]}
    return exception


def _failed_shutdown(
    classification: ShutdownClassification,
    owner: Owner,
    phase: ShutdownPhase,
    exc: dict[str, str] | None,
) -> dict[str, Any]:
    """``runtime_manifest.shutdown`` of a failed run before the caller's extra keys."""
    return {
        "classification": classification,
        "owner": owner,
        "phase": phase,
        "iteration": None,
        "coordination_tick": None,
        "inference_epoch": None,
        "exception": exc,
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
