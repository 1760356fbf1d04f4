"""What a valid ``run_summary.json`` is, beyond what JSON Schema can say (docs/contracts.md §run-summary, §invariants, §verdict, §soak-artifact).

:func:`check` is the whole definition, the schema and every cross-field rule of the document,
grouped (:class:`SummaryCheck`) so a reader can weigh each group: ``contracts.rundir.read``
refuses a summary that breaks any, and the soak's verdict gives each group its classification
and its place in the order (that weighing is soak policy, and stays in the harness). The
parts:

- ``validate_run_summary`` applies ``schemas/run_summary.v1.json`` (which pulls in
  ``runtime_manifest.v1.json``) and then the cross-field rules a schema cannot express: equal
  GPU UUIDs under MPS, a configured MPS mode that actually took effect in a completed run,
  collector exit code vs. signal in the shutdown snapshot, tail counters and timestamp order.
- ``stamp_problems``: the two version stamps and the manifest object, which every other rule
  reads.
- ``shutdown_problems`` is the shutdown contract of docs/contracts.md §shutdown on its own.
- A completed run's invariants (docs/contracts.md §invariants): the final inference flight
  (well-formed counters, drained, never more than one tick in flight), the replay ingress
  (``contracts.replay_ingress``) and the env-step identity ``total_env_steps = (warm-up +
  completed_iterations) x num_envs``.

``resource_summary_fields`` derives the summary-sourced keys of the soak artifact's
``resource_summary`` (docs/contracts.md §soak-artifact). Everything here is pure: no I/O, no
torch. The trainer's writer checks only the schema (``contracts.rundir.write``): a completed
run that broke an invariant is recorded as it ran, for the verdict to judge.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contracts.jsonio import is_exact_int, is_finite_number, show
from contracts.names import ShutdownClassification
from contracts.replay_ingress import RI_PATH, replay_ingress_problems
from contracts.schemas import SchemaViolation, validate

RUN_SUMMARY_SCHEMA = "run_summary.v1.json"
"""The summary's schema, named here once (``contracts.rundir.SCHEMAS`` takes it from here)."""
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
FLIGHT_PATH = "$.runtime_manifest.inference_flight"
FLIGHT_COUNTERS = ("queue_depth", "publication_lag")
LIMITS_PATH = "$.runtime_manifest.runtime_limits"
MAX_IN_FLIGHT = 1
"""docs/contracts.md §invariants: at most one tick is ever in flight."""
_REQUIRED = re.compile(r"'([^']+)' is a required property")


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


def pinpoint(violation: SchemaViolation) -> SchemaViolation:
    """Name the missing key in the path: ``$.x: 'y' is a required property`` becomes
    ``$.x.y: is required but missing``; any other violation is returned as it is."""
    match = _REQUIRED.fullmatch(violation.message)
    if match is None:
        return violation
    return SchemaViolation(f"{violation.path}.{match.group(1)}", "is required but missing")


def _outside(violations: list[SchemaViolation], *prefixes: str) -> list[SchemaViolation]:
    """``violations`` but those at or under one of ``prefixes`` (another group reports them)."""

    def under(path: str, prefix: str) -> bool:
        return path == prefix or path.startswith((prefix + ".", prefix + "["))

    # The pinpointed path, so "'x' is a required property" at the parent counts as under x.
    return [v for v in violations if not any(under(pinpoint(v).path, p) for p in prefixes)]


def stamp_problems(summary: Mapping[str, Any]) -> list[str]:
    """The stamps every other rule relies on (docs/contracts.md §verdict step 2), whatever the
    status: ``metric_schema_version`` the exact int 1, ``runtime_manifest`` an object whose
    ``schema_version`` is the exact int 1. Whole sentences; empty when they hold."""
    out: list[str] = []
    if "metric_schema_version" not in summary:
        out.append("run_summary stamp $.metric_schema_version is missing; expected the exact int 1")
    elif not (
        is_exact_int(summary["metric_schema_version"]) and summary["metric_schema_version"] == 1
    ):
        out.append(
            f"run_summary stamp $.metric_schema_version={show(summary['metric_schema_version'])} must be the exact int 1"
        )
    manifest = summary.get("runtime_manifest")
    if not isinstance(manifest, dict):
        what = "missing" if "runtime_manifest" not in summary else show(manifest)
        out.append(f"run_summary $.runtime_manifest must be an object, got {what}")
    elif "schema_version" not in manifest:
        out.append(
            "run_summary stamp $.runtime_manifest.schema_version is missing; expected the exact int 1"
        )
    elif not (is_exact_int(manifest["schema_version"]) and manifest["schema_version"] == 1):
        out.append(
            f"run_summary stamp $.runtime_manifest.schema_version={show(manifest['schema_version'])} must be the exact int 1"
        )
    return out


def _flight_problems(flight: Any) -> tuple[list[SchemaViolation], list[SchemaViolation]]:
    """A completed run's final inference flight: its counters that are not exact ints >= 0,
    else whether it drained. A flight that is not an object is a schema finding."""
    if not isinstance(flight, dict):
        return [], []
    malformed: list[SchemaViolation] = []
    for name in FLIGHT_COUNTERS:
        value = flight.get(name)
        if not is_exact_int(value) or value < 0:
            got = "missing" if name not in flight else f"got {show(value)}"
            malformed.append(
                SchemaViolation(f"{FLIGHT_PATH}.{name}", f"must be an exact int >= 0, {got}")
            )
    depth, lag = flight.get("queue_depth"), flight.get("publication_lag")
    if malformed or (depth == 0 and lag == 0):
        return malformed, []
    return [], [
        SchemaViolation(
            FLIGHT_PATH,
            f"final inference flight is not drained (queue_depth={depth}, publication_lag={lag})",
        )
    ]


def _in_flight_problems(flight: Any) -> list[SchemaViolation]:
    """At most one tick in flight while running, none at the end (the message is the whole
    sentence)."""
    if not isinstance(flight, Mapping):
        return []
    out: list[SchemaViolation] = []
    most = flight.get("max_in_flight")
    if is_exact_int(most) and most > MAX_IN_FLIGHT:
        path = f"{FLIGHT_PATH}.max_in_flight"
        out.append(
            SchemaViolation(
                path,
                f"inference flight exceeded one tick: {path}={most}, expected at most {MAX_IN_FLIGHT}",
            )
        )
    left = flight.get("in_flight")
    if is_exact_int(left) and left != 0:
        path = f"{FLIGHT_PATH}.in_flight"
        out.append(
            SchemaViolation(
                path, f"a tick was still in flight at the end: {path}={left}, expected 0"
            )
        )
    return out


def _env_step_problems(
    summary: Mapping[str, Any], manifest: Mapping[str, Any]
) -> list[SchemaViolation]:
    """``total_env_steps = (warmup_ticks + completed_iterations) x num_envs`` when the manifest
    records its ``runtime_limits`` (the message is the whole sentence)."""
    limits = manifest.get("runtime_limits")
    limits = limits if isinstance(limits, Mapping) else {}
    total, done = summary.get("total_env_steps"), summary.get("completed_iterations")
    warmup, envs = limits.get("warmup_ticks"), limits.get("num_envs")
    if not all(is_exact_int(v) for v in (total, done, warmup, envs)):
        return []  # an older producer without runtime_limits, or a schema finding
    expected = (warmup + done) * envs
    if total == expected:
        return []
    return [
        SchemaViolation(
            "$.total_env_steps",
            f"run_summary $.total_env_steps={total} breaks (warmup_ticks + completed_iterations) x "
            f"num_envs = ({warmup} + {done}) x {envs} = {expected} ({LIMITS_PATH})",
        )
    ]


@dataclass(frozen=True, kw_only=True)
class SummaryCheck:
    """Every rule of a valid ``run_summary.json`` that one document breaks, by group.

    Each group is a tuple of violations (JSON path, message); a group another group's
    paths would repeat leaves them to it, so one fault is one violation.

    Attributes:
        completed: the status is ``completed``: the completed-run rules apply.
        stamps: broken stamps (:func:`stamp_problems`, whole sentences). When there are
            any, ``schema`` holds the whole schema's findings and no other rule is checked.
        schema: the schema and :func:`validate_run_summary`'s cross-field rules, but for
            the paths the groups below report.
        flight_counters: a completed run's final inference-flight counters that are not
            exact ints >= 0.
        undrained: a completed run's final inference flight, not drained.
        replay_ingress: a completed run's replay-ingress invariants (contracts.replay_ingress).
        in_flight: a completed run's flight beyond one tick, or a tick left in flight (the
            message is the whole sentence).
        env_steps: a completed run's env-step identity (the message is the whole sentence).
        shutdown: the shutdown contract (:func:`shutdown_problems`); None when the summary
            has no shutdown record (the soak requires one, the document does not).
    """

    completed: bool
    stamps: tuple[str, ...] = ()
    schema: tuple[SchemaViolation, ...] = ()
    flight_counters: tuple[SchemaViolation, ...] = ()
    undrained: tuple[SchemaViolation, ...] = ()
    replay_ingress: tuple[SchemaViolation, ...] = ()
    in_flight: tuple[SchemaViolation, ...] = ()
    env_steps: tuple[SchemaViolation, ...] = ()
    shutdown: tuple[SchemaViolation, ...] | None = None

    @property
    def violations(self) -> list[SchemaViolation]:
        """All of them, the schema's first; the summary is valid iff this is empty."""
        if self.stamps:
            return list(self.schema) or [SchemaViolation("$", stamp) for stamp in self.stamps]
        return [
            *self.schema,
            *self.flight_counters,
            *self.undrained,
            *self.replay_ingress,
            *self.in_flight,
            *self.env_steps,
            *(self.shutdown or ()),
        ]


def check(doc: Any) -> SummaryCheck:
    """Check a parsed ``run_summary.json`` against the schema and every cross-field rule,
    as a completed run when its status is ``completed``, else as a run that did not complete.
    Never raises for any JSON value."""
    if not isinstance(doc, dict):
        return SummaryCheck(completed=False, schema=tuple(validate(doc, RUN_SUMMARY_SCHEMA)))
    completed = doc.get("status") == "completed"
    stamps = stamp_problems(doc)
    if stamps:
        schema = validate(doc, RUN_SUMMARY_SCHEMA)
        return SummaryCheck(completed=completed, stamps=tuple(stamps), schema=tuple(schema))
    manifest = doc["runtime_manifest"]
    record = manifest.get("shutdown")
    shutdown = None if record is None else tuple(shutdown_problems(record, completed=completed))
    if not completed:
        schema = _outside(validate_run_summary(doc, completed=False), SHUTDOWN_PATH)
        return SummaryCheck(completed=False, schema=tuple(schema), shutdown=shutdown)
    flight = manifest.get("inference_flight")
    counters, undrained = _flight_problems(flight)
    ingress = replay_ingress_problems(doc, manifest.get("replay_ingress"))
    schema = _outside(
        validate_run_summary(doc, completed=True),
        SHUTDOWN_PATH,
        RI_PATH,
        *(f"{FLIGHT_PATH}.{name}" for name in FLIGHT_COUNTERS),
    )
    return SummaryCheck(
        completed=True,
        schema=tuple(schema),
        flight_counters=tuple(counters),
        undrained=tuple(undrained),
        replay_ingress=tuple(SchemaViolation(path, message) for path, message in ingress),
        in_flight=tuple(_in_flight_problems(flight)),
        env_steps=tuple(_env_step_problems(doc, manifest)),
        shutdown=shutdown,
    )


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
