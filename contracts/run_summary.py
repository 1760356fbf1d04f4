"""Validation of ``run_summary.json`` beyond what JSON Schema can say (docs/contracts.md §run-summary, §verdict, §soak-artifact).

``validate_run_summary`` applies ``schemas/run_summary.v1.json`` (which pulls in
``runtime_manifest.v1.json``) and then the cross-field rules a schema cannot express: equal
GPU UUIDs under MPS, a configured MPS mode that actually took effect in a completed run,
collector exit code vs. signal in the shutdown snapshot, tail counters and timestamp order.
``shutdown_problems`` is the shutdown contract of docs/contracts.md §verdict on its own, because a shutdown breach is
classified ``shutdown_contract_violation`` rather than ``schema_violation``.
``resource_summary_fields`` derives the summary-sourced keys of the soak artifact's
``resource_summary`` (docs/contracts.md §soak-artifact). Everything here is pure: no I/O, no torch. The trainer may import
this module to check a summary before it renames it into place.
"""

from __future__ import annotations

import json
import math
import re
import signal
from datetime import datetime
from typing import Any

from contracts.names import ShutdownClassification
from contracts.schemas import SchemaViolation, validate

RUN_SUMMARY_SCHEMA = "run_summary.v1.json"
MANIFEST_SCHEMA = "runtime_manifest.v1.json"
SHUTDOWN_PATH = "$.runtime_manifest.shutdown"
SHUTDOWN_CLASSIFICATIONS: tuple[str, ...] = tuple(c.value for c in ShutdownClassification)
NORMAL = ShutdownClassification.NORMAL_COMPLETION
FINALIZE_PREFIX = "finalize/"
BENIGN_COLLECTOR_EXITCODES = (0, -int(signal.SIGTERM), -int(signal.SIGINT))
UTC_SECOND_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# The schema's pattern as Python's re.search applies it: "$" also matches before a final
# newline, so a value it accepts is parsed again here, whole.
_SCHEMA_TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")
_SHUTDOWN_SCHEMA = {"$ref": f"{MANIFEST_SCHEMA}#/$defs/shutdown"}


def is_exact_int(value: Any) -> bool:
    """True for a Python int that is not a bool (docs/contracts.md §conventions exact int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """True for an int or float (not bool) with a finite value."""
    return (is_exact_int(value) or isinstance(value, float)) and math.isfinite(value)


def show(value: Any, limit: int = 80) -> str:
    """Render a JSON value for a one-line message (JSON spelling: true, null, 1.0)."""
    try:
        text = json.dumps(value, allow_nan=True, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _prefixed(violations: list[SchemaViolation], prefix: str) -> list[SchemaViolation]:
    return [SchemaViolation(prefix + v.path[1:], v.message) for v in violations]


def _collector_exit_problems(collector: Any) -> list[SchemaViolation]:
    """exitcode -N means signal N (and its name); docs/contracts.md §shutdown."""
    if not isinstance(collector, dict):
        return []
    exitcode = collector.get("exitcode")
    if not is_exact_int(exitcode) or exitcode >= 0:
        return []
    path = f"{SHUTDOWN_PATH}.collector"
    expected = -exitcode
    out: list[SchemaViolation] = []
    if collector.get("signal") != expected or not is_exact_int(collector.get("signal")):
        out.append(
            SchemaViolation(
                f"{path}.signal",
                f"exitcode {exitcode} implies signal {expected}, got {show(collector.get('signal'))}",
            )
        )
    try:
        name = signal.Signals(expected).name
    except ValueError:
        return out
    if collector.get("signal_name") != name:
        out.append(
            SchemaViolation(
                f"{path}.signal_name",
                f"exitcode {exitcode} implies signal_name {name!r}, got {show(collector.get('signal_name'))}",
            )
        )
    return out


def shutdown_problems(shutdown: Any, *, completed: bool) -> list[SchemaViolation]:
    """The shutdown contract of docs/contracts.md §shutdown/§verdict for a present ``runtime_manifest.shutdown``.

    Args:
        shutdown: the value of ``runtime_manifest.shutdown`` (must not be absent; the caller
            reports absence with its own message).
        completed: True for a completed run (``normal_completion`` with no cleanup errors
            required), False for a failed run (``normal_completion`` forbidden).

    Returns:
        Violations with JSON paths under ``$.runtime_manifest.shutdown``; empty when valid.
    """
    if not isinstance(shutdown, dict):
        return [SchemaViolation(SHUTDOWN_PATH, f"must be an object, got {show(shutdown)}")]
    out = _prefixed(validate(shutdown, MANIFEST_SCHEMA, schema=_SHUTDOWN_SCHEMA), SHUTDOWN_PATH)
    out += _collector_exit_problems(shutdown.get("collector"))
    classification = shutdown.get("classification")
    if completed:
        out += _normal_end_problems(shutdown)
        if classification in SHUTDOWN_CLASSIFICATIONS and classification != NORMAL:
            out.append(
                SchemaViolation(
                    f"{SHUTDOWN_PATH}.classification",
                    f"completed run has classification {classification!r}, expected 'normal_completion'",
                )
            )
        cleanup = shutdown.get("cleanup")
        errors = cleanup.get("errors") if isinstance(cleanup, dict) else None
        if isinstance(errors, list) and errors:
            first = errors[0] if isinstance(errors[0], dict) else {}
            out.append(
                SchemaViolation(
                    f"{SHUTDOWN_PATH}.cleanup.errors",
                    f"completed run has {len(errors)} cleanup error(s), expected none "
                    f"(first: {show(first.get('type'))}: {show(first.get('message'))})",
                )
            )
    elif classification == NORMAL:
        out.append(
            SchemaViolation(
                f"{SHUTDOWN_PATH}.classification",
                "a run that did not complete cannot claim 'normal_completion'",
            )
        )
    return out


def _normal_end_problems(shutdown: dict[str, Any]) -> list[SchemaViolation]:
    """A completed run ends in a finalize phase with its collector exited benignly."""
    out: list[SchemaViolation] = []
    phase = shutdown.get("phase")
    if isinstance(phase, str) and phase.strip() and not phase.startswith(FINALIZE_PREFIX):
        out.append(
            SchemaViolation(
                f"{SHUTDOWN_PATH}.phase",
                f"completed run ended in phase {phase!r}, expected a {FINALIZE_PREFIX}* phase "
                "(a normal run ends in finalize/logger_finish)",
            )
        )
    collector = shutdown.get("collector")
    if not isinstance(collector, dict):
        return out
    if collector.get("alive") is True:
        out.append(
            SchemaViolation(
                f"{SHUTDOWN_PATH}.collector.alive",
                "completed run left its collector alive, expected it to have exited",
            )
        )
    exitcode = collector.get("exitcode")
    if is_exact_int(exitcode) and exitcode not in BENIGN_COLLECTOR_EXITCODES:
        out.append(
            SchemaViolation(
                f"{SHUTDOWN_PATH}.collector.exitcode",
                f"completed run's collector exited with code {exitcode}, expected 0 "
                "(or the benign -15/-2)",
            )
        )
    return out


def _timestamp_problems(doc: dict[str, Any]) -> list[SchemaViolation]:
    """Every top-level ``*_time_utc`` the schema pattern lets through is a real UTC second."""
    out: list[SchemaViolation] = []
    for key, value in doc.items():
        if not (key.endswith("_time_utc") and isinstance(value, str)):
            continue
        if not _SCHEMA_TIMESTAMP.search(value):
            continue  # the schema reports it
        try:
            datetime.strptime(value, UTC_SECOND_FORMAT)
        except ValueError:
            out.append(
                SchemaViolation(
                    f"$.{key}",
                    f"{show(value)} is not a UTC time YYYY-MM-DDTHH:MM:SSZ (a real date and "
                    "time, nothing after the Z)",
                )
            )
    return out


def _semantic_problems(doc: dict[str, Any], *, completed: bool) -> list[SchemaViolation]:
    out: list[SchemaViolation] = []
    manifest = doc.get("runtime_manifest")
    manifest = manifest if isinstance(manifest, dict) else {}
    sharing = manifest.get("cuda_process_sharing")
    if isinstance(sharing, dict):
        path = "$.runtime_manifest.cuda_process_sharing"
        if sharing.get("effective") == "mps":
            learner, collector = sharing.get("learner_gpu_uuid"), sharing.get("collector_gpu_uuid")
            if isinstance(learner, str) and isinstance(collector, str) and learner != collector:
                out.append(
                    SchemaViolation(
                        f"{path}.collector_gpu_uuid",
                        f"under mps learner and collector must share one GPU: {learner!r} != {collector!r}",
                    )
                )
        if completed and sharing.get("configured") == "mps" and sharing.get("effective") != "mps":
            out.append(
                SchemaViolation(
                    f"{path}.effective",
                    f"configured 'mps' but effective is {show(sharing.get('effective'))} in a completed run",
                )
            )
    if "shutdown" in manifest:
        out += _collector_exit_problems(
            manifest["shutdown"].get("collector")
            if isinstance(manifest["shutdown"], dict)
            else None
        )
    out += _timestamp_problems(doc)
    start, end = doc.get("start_time_utc"), doc.get("end_time_utc")
    if (
        isinstance(start, str)
        and isinstance(end, str)
        and len(start) == len(end) == 20
        and end < start
    ):
        out.append(
            SchemaViolation(
                "$.end_time_utc", f"end_time_utc {end} is before start_time_utc {start}"
            )
        )
    tail, window, done = (
        doc.get("tail_iteration_count"),
        doc.get("tail_window_iterations"),
        doc.get("completed_iterations"),
    )
    if is_exact_int(tail) and is_exact_int(window) and tail > window:
        out.append(
            SchemaViolation(
                "$.tail_iteration_count",
                f"tail_iteration_count={tail} exceeds tail_window_iterations={window}",
            )
        )
    if is_exact_int(tail) and is_exact_int(done) and tail > done:
        out.append(
            SchemaViolation(
                "$.tail_iteration_count",
                f"tail_iteration_count={tail} exceeds completed_iterations={done}",
            )
        )
    return out


def validate_run_summary(doc: Any, *, completed: bool) -> list[SchemaViolation]:
    """Validate a run summary against the v1 schema plus the semantic rules.

    Args:
        doc: the parsed summary (any JSON value).
        completed: validate as a completed run (the status must then be ``"completed"``) or
            as a run that did not complete (the status must not be ``"completed"``).

    Returns:
        Violations (JSON path + message), schema ones first; empty when valid.
    """
    out = validate(doc, RUN_SUMMARY_SCHEMA)
    if not isinstance(doc, dict):
        return out
    status = doc.get("status")
    if completed and status != "completed":
        out.append(SchemaViolation("$.status", f"expected 'completed', got {show(status)}"))
    if not completed and status == "completed":
        out.append(
            SchemaViolation(
                "$.status", "validated as a run that did not complete, but status is 'completed'"
            )
        )
    return out + _semantic_problems(doc, completed=completed)


_RESOURCE_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("ipc_event_count", "inference_memory_budget", "ipc_event_count"),
    ("max_in_flight", "inference_flight", "max_in_flight"),
    ("max_publication_lag", "inference_flight", "max_publication_lag"),
    ("replay_ingress_depth", "replay_ingress", "ingress_depth"),
    ("replay_ingress_slot_rows", "replay_ingress", "ingress_slot_rows"),
    ("replay_ingress_high_water_occupancy", "replay_ingress", "high_water_occupancy"),
    ("replay_ingress_final_occupancy", "replay_ingress", "occupancy"),
    ("replay_ingress_backpressure_waits", "replay_ingress", "backpressure_waits"),
    ("replay_ingress_backpressure_wait_s", "replay_ingress", "backpressure_wait_s"),
    ("replay_ingress_early_returns", "replay_ingress", "early_returns"),
    ("replay_ingress_dropped_batches", "replay_ingress", "dropped_batches"),
)
RESOURCE_SUMMARY_KEYS: tuple[str, ...] = tuple(key for key, _, _ in _RESOURCE_SOURCES)


def resource_summary_fields(run_summary: Any) -> dict[str, int | float | None]:
    """The summary-derived keys of the artifact's ``resource_summary`` (docs/contracts.md §soak-artifact).

    Each value is the manifest number, or None when the summary, the section or the field
    is missing or not a finite number (bools count as missing).
    """
    manifest = run_summary.get("runtime_manifest") if isinstance(run_summary, dict) else None
    out: dict[str, int | float | None] = {}
    for key, section_name, field in _RESOURCE_SOURCES:
        section = manifest.get(section_name) if isinstance(manifest, dict) else None
        value = section.get(field) if isinstance(section, dict) else None
        out[key] = value if is_finite_number(value) else None
    return out
