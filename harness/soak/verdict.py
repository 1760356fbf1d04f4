"""The soak's pass/fail judgement of a finished run directory (docs/contracts.md §verdict).

``judge_run_dir`` takes the monitor's own reasons and classification (docs/contracts.md §soak-monitor) and checks
``<log-dir>/run_summary.json`` in exactly the docs/contracts.md §verdict order: load, stamps, the failed-run path
(shutdown contract; the producer's classification replaces the monitor's), or the
completed-run path (drained flight, replay-ingress invariants, full schema, run-dir
artifacts, acceleration fallbacks, shutdown). Given a ``LearningCfg``, the learning verdict (harness.soak.learning)
follows; its enforced findings come last. The soak passes only if no reason was recorded.
Every rejection names the JSON path (or the file) it is about. Pure apart from reading the run directory: no
process handling, no writes, no torch.

What a valid summary is, is not decided here: ``contracts.run_summary.check`` finds every
broken rule of the document, by group, and this module is the soak's policy over them: the
order, the classification each group sets, that broken stamps stop the checks, and what the
soak requires beyond the document (a shutdown record, the run directory's artifacts, no
acceleration fallback).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from contracts import rundir
from contracts.errors import StrictJsonError
from contracts.jsonio import is_exact_int, show
from contracts.names import Classification
from contracts.run_summary import (
    SHUTDOWN_PATH,
    SummaryCheck,
    check,
    pinpoint,
    resource_summary_fields,
)
from contracts.schemas import SchemaViolation
from harness.soak.completion_check import completion_problems
from harness.soak.headline import failure_reason, unclassified
from harness.soak.learning import LearningCfg, judge_learning, not_judged

__all__ = ["Verdict", "judge_run_dir", "resource_summary_fields"]

FALLBACKS_PATH = "$.runtime_manifest.cuda_graph.learner.fallbacks"
DIAGNOSTICS_PATH = "$.runtime_manifest.backend_diagnostics.diagnostics"
SV = Classification.SCHEMA_VIOLATION
SCHEMA_REASON = "run_summary schema violation at {path}: {message}"
SHUTDOWN_REASON = "shutdown contract violated at {path}: {message}"
MAX_SCHEMA_REASONS = 12
MAX_MESSAGE = 240  # jsonschema quotes the whole offending value; a 16000-char error stays readable  # a fuzzed summary can break hundreds of rules; the first few say enough


@dataclass(frozen=True)
class Verdict:
    """Outcome of the docs/contracts.md §verdict checks on top of the monitor's findings.

    Attributes:
        status: ``"passed"`` iff no reason was recorded.
        failure_reason: the reasons that are causes joined with ``"; "`` (harness.soak.headline),
            or None when passed.
        failure_classification: the final classification (None iff passed).
        monitor_failure_classification: the classification the producer's shutdown
            classification replaced (failed runs only), else None.
        run_summary: the summary object when it loaded as a JSON object, else None.
        run_summary_error: why the summary could not be used (missing or invalid), else None.
        shutdown: ``runtime_manifest.shutdown`` verbatim when it is an object, else None.
        reasons: every reason in order (monitor reasons first).
        learning: the artifact's ``learning`` section, or None when not asked for.
        run_dir_findings: the reasons these checks added, in order, each with the
            classification it carried (what ``g1-soak rejudge`` replays).
        trainer_classification: the producer's shutdown classification when it replaced
            the classification at the end (failed runs), else None.
    """

    status: Literal["passed", "failed"]
    failure_reason: str | None
    failure_classification: str | None
    monitor_failure_classification: str | None
    run_summary: dict[str, Any] | None
    run_summary_error: str | None
    shutdown: dict[str, Any] | None
    reasons: list[str] = field(default_factory=list)
    learning: dict[str, Any] | None = None
    run_dir_findings: list[tuple[str, str | None]] = field(default_factory=list)
    trainer_classification: str | None = None


class _Findings:
    """Reasons plus first-set-wins classification ("set X" in docs/contracts.md §verdict)."""

    def __init__(self, reasons: Sequence[str], classification: str | None) -> None:
        self.reasons = list(reasons)
        self.classification = classification
        self.replaced: str | None = None
        self.replaced_with: str | None = None
        self.added: list[tuple[str, str | None]] = []

    def add(self, reason: str, classification: str | None = None) -> None:
        self.reasons.append(reason)
        self.added.append((reason, classification))
        if classification is not None and self.classification is None:
            self.classification = classification

    def add_violations(
        self, violations: Sequence[SchemaViolation], template: str, classification: str
    ) -> None:
        for violation in violations[:MAX_SCHEMA_REASONS]:
            path, message = _pinpoint(violation)
            self.add(template.format(path=path, message=message), classification)
        if len(violations) > MAX_SCHEMA_REASONS:
            self.add(
                f"... and {len(violations) - MAX_SCHEMA_REASONS} more schema violations",
                classification,
            )


def _pinpoint(violation: SchemaViolation) -> tuple[str, str]:
    """The path naming a missing key (``contracts.run_summary.pinpoint``), the message cut
    to :data:`MAX_MESSAGE`."""
    violation = pinpoint(violation)
    message = violation.message
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return violation.path, message


def _load_summary(path: Path) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Return (summary, reason, classification) per docs/contracts.md §verdict step 1: the
    contract's lenient read (strict JSON; the later steps weigh the rules), an object."""
    try:
        doc = rundir.read(path, rundir.RUN_SUMMARY, lenient=True)
    except rundir.DocumentError as err:
        if err.problem == "missing":
            return (
                None,
                "trainer did not write run_summary.json",
                Classification.MISSING_RUN_SUMMARY,
            )
        return None, _invalid(_unreadable(err)), Classification.INVALID_RUN_SUMMARY
    if not isinstance(doc, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(doc), "a number"
        )
        return (
            None,
            _invalid(f"top-level value at $ is {kind}, expected an object"),
            Classification.INVALID_RUN_SUMMARY,
        )
    return doc, None, None


def _invalid(detail: str) -> str:
    return f"run_summary.json is invalid: {detail}"  # as docs/troubleshooting.md quotes it


def _unreadable(err: rundir.DocumentError) -> str:
    """Why an unreadable summary could not be read, from the error the read raised from."""
    cause = err.__cause__
    if isinstance(cause, StrictJsonError) and isinstance(cause.__cause__, UnicodeDecodeError):
        bad = cause.__cause__
        return f"not UTF-8 ({bad.reason} at byte {bad.start})"
    if isinstance(cause, OSError):
        return f"cannot read {err.path}: {cause.strerror or cause}"
    if isinstance(cause, RecursionError):
        return "nesting too deep to parse"
    return err.detail


def _check_failed_run(summary: dict[str, Any], found: SummaryCheck, findings: _Findings) -> None:
    """docs/contracts.md §verdict step 3: the run did not complete."""
    status = summary.get("status")
    if "status" not in summary:
        findings.add("run_summary status is missing ($.status), expected 'completed'")
    else:
        findings.add(
            f"run_summary status is '{status if isinstance(status, str) else show(status)}', expected 'completed' ($.status)"
        )
    findings.add_violations(found.schema, SCHEMA_REASON, Classification.SCHEMA_VIOLATION)
    if found.shutdown is None:
        findings.add(
            f"shutdown diagnostics are unavailable ({SHUTDOWN_PATH} is missing or null)",
            Classification.UNKNOWN_FAILURE,
        )
        return
    if found.shutdown:
        findings.add_violations(
            found.shutdown, SHUTDOWN_REASON, Classification.SHUTDOWN_CONTRACT_VIOLATION
        )
        return
    shutdown = summary["runtime_manifest"]["shutdown"]
    text = f"shutdown classification={shutdown['classification']}, owner={shutdown['owner']}, phase={shutdown['phase']}"
    exception = shutdown.get("exception")
    if isinstance(exception, dict):
        text += f", exception={exception['type']}: {exception['message']}"
    errors = shutdown["cleanup"]["errors"]
    if errors:
        text += f", cleanup_errors={len(errors)}"
    findings.add(text)
    # The producer knows why it stopped: its classification replaces the monitor's (docs/contracts.md §verdict).
    findings.replaced = findings.classification
    findings.classification = findings.replaced_with = shutdown["classification"]


def _reached_iteration(summary: dict[str, Any]) -> Any:
    """The global iteration a time-budgeted run ended at (its last checkpoint's)."""
    budget = summary.get("time_budget")
    if isinstance(budget, dict) and "final_iteration" in budget:
        return budget["final_iteration"]
    limits = (summary.get("runtime_manifest") or {}).get("runtime_limits") or {}
    start, done = limits.get("start_iteration", 0), summary.get("completed_iterations")
    return start + done if is_exact_int(start) and is_exact_int(done) else None


def _expected_checkpoints(run_config: dict[str, Any], summary: dict[str, Any]) -> list[str]:
    config = run_config.get("config")
    algo = config.get("algo") if isinstance(config, dict) else None
    if not isinstance(algo, dict):
        return []
    interval, max_iterations = algo.get("save_interval"), algo.get("max_iterations")
    training = config.get("training") if isinstance(config, dict) else None
    if isinstance(training, dict) and training.get("duration_seconds") is not None:
        # A time budget ends the run where it was spent: the last checkpoint is there.
        max_iterations = _reached_iteration(summary)
    # Only applies when run_config carries both as positive ints (docs/contracts.md §other-commands soak-run).
    if not (
        is_exact_int(interval)
        and is_exact_int(max_iterations)
        and interval > 0
        and max_iterations > 0
    ):
        return []
    iterations = sorted({*range(interval, max_iterations + 1, interval), max_iterations})
    return [rundir.checkpoint_name(k) for k in iterations]


def _missing_artifacts(log_dir: Path, summary: dict[str, Any]) -> list[str]:
    """docs/contracts.md §verdict step 4.4: run_config.json, exactly one event file, every implied checkpoint."""
    missing: list[str] = []
    config_path = log_dir / rundir.RUN_CONFIG
    run_config: Any = None
    if not config_path.is_file():
        missing.append(rundir.RUN_CONFIG)
    else:
        try:  # lenient: the run config of any trainer, read for its checkpoint plan
            run_config = rundir.read(config_path, lenient=True)
        except rundir.DocumentError as err:
            missing.append(f"a readable run_config.json ({err.detail})")
        else:
            if not isinstance(run_config, dict):
                missing.append(f"{rundir.RUN_CONFIG} as a JSON object")
    events = [p.name for p in rundir.event_files(log_dir)]
    if not events:
        missing.append(f"exactly one {rundir.EVENT_GLOB} (found none)")
    elif len(events) > 1:
        missing.append(
            f"exactly one {rundir.EVENT_GLOB} (found {len(events)}: {', '.join(events)})"
        )
    if isinstance(run_config, dict):
        missing += [
            name
            for name in _expected_checkpoints(run_config, summary)
            if not (log_dir / name).is_file()
        ]
    return missing


def _check_completed_run(
    summary: dict[str, Any], found: SummaryCheck, log_dir: Path, findings: _Findings
) -> None:
    """docs/contracts.md §verdict step 4, most actionable first."""
    # 4.1: a malformed flight counter fails closed here, not only in the schema step
    for v in found.flight_counters:
        findings.add(f"final inference flight counter {v.path} {v.message}", SV)
    for v in found.undrained:
        findings.add(f"{v.message} at {v.path}", Classification.UNKNOWN_FAILURE)
    for v in found.replay_ingress:  # 4.2
        findings.add(f"replay_ingress invariant violated at {v.path}: {v.message}", SV)
    findings.add_violations(found.schema, SCHEMA_REASON, SV)  # 4.3
    missing = _missing_artifacts(log_dir, summary)  # 4.4
    if missing:
        findings.add(
            f"run directory is missing required artifacts: {', '.join(missing)} (in {log_dir})",
            SV,
        )
    for v in found.in_flight:
        findings.add(v.message, Classification.UNKNOWN_FAILURE)
    for v in found.env_steps:
        findings.add(v.message, SV)
    for reason, classification in completion_problems(summary, log_dir):
        findings.add(reason, classification)
    _check_fallbacks(summary["runtime_manifest"], findings)  # 4.5
    if found.shutdown is None:  # 4.6
        findings.add(
            f"completed runtime_manifest is missing shutdown diagnostics ({SHUTDOWN_PATH})",
            Classification.SHUTDOWN_CONTRACT_VIOLATION,
        )
        return
    findings.add_violations(
        found.shutdown, SHUTDOWN_REASON, Classification.SHUTDOWN_CONTRACT_VIOLATION
    )


def _check_fallbacks(manifest: dict[str, Any], findings: _Findings) -> None:
    """docs/contracts.md §verdict step 4.5: no acceleration was dropped at run time (the
    learner's ``fallbacks``, the env's entries marked ``fell_back``), so the figures are
    those of the configuration the run claims. Shape problems are schema findings (4.3)."""
    for where, what, reason in _fallbacks(manifest):
        findings.add(
            f"{what} fell back at run time: {show(reason, 200)} ({where}); the run's figures "
            "are not those of its configuration",
            Classification.ACCELERATION_FALLBACK,
        )


def _fallbacks(manifest: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """``(JSON path, what, reason)`` of every recorded fallback, env entries first."""
    out: list[tuple[str, str, Any]] = []
    backend = manifest.get("backend_diagnostics")
    entries = backend.get("diagnostics") if isinstance(backend, dict) else None
    for name, entry in entries.items() if isinstance(entries, dict) else ():
        if isinstance(entry, dict) and entry.get("fell_back") is True:
            out.append((f"{DIAGNOSTICS_PATH}.{name}", f"env {name}", entry.get("disable_reason")))
    graph = manifest.get("cuda_graph")
    learner = graph.get("learner") if isinstance(graph, dict) else None
    fallbacks = learner.get("fallbacks") if isinstance(learner, dict) else None
    for i, entry in enumerate(fallbacks if isinstance(fallbacks, list) else ()):
        if isinstance(entry, dict):
            what = f"learner {entry.get('feature')}"
            out.append((f"{FALLBACKS_PATH}[{i}]", what, entry.get("reason")))
    return out


def _finish(
    findings: _Findings,
    summary: dict[str, Any] | None,
    summary_error: str | None,
    learning: dict[str, Any] | None,
) -> Verdict:
    if findings.reasons and findings.classification is None:
        # docs/contracts.md §verdict step 5
        findings.classification = unclassified(findings.reasons)
    manifest = summary.get("runtime_manifest") if summary is not None else None
    shutdown = manifest.get("shutdown") if isinstance(manifest, dict) else None
    passed = not findings.reasons
    return Verdict(
        status="passed" if passed else "failed",
        failure_reason=failure_reason(findings.reasons),
        failure_classification=None if passed else findings.classification,
        monitor_failure_classification=findings.replaced,
        run_summary=summary,
        run_summary_error=summary_error,
        shutdown=shutdown if isinstance(shutdown, dict) else None,
        reasons=findings.reasons,
        learning=learning,
        run_dir_findings=list(findings.added),
        trainer_classification=findings.replaced_with,
    )


def judge_run_dir(
    log_dir: Path,
    *,
    monitor_reasons: list[str],
    monitor_classification: str | None,
    learning: LearningCfg | None = None,
) -> Verdict:
    """Judge a finished run directory after the monitor's checks (docs/contracts.md §verdict).

    Args:
        log_dir: the run directory (``run_summary.json``, ``run_config.json``, event file and
            checkpoints are read from it; nothing is written).
        monitor_reasons: reasons the monitor already recorded (docs/contracts.md §soak-monitor), kept first and in order.
        monitor_classification: the monitor's classification, or None.
        learning: judge learning too (its enforced findings become reasons), or None.

    Returns:
        The verdict; it never raises for any summary content.
    """
    log_dir = Path(log_dir)
    findings = _Findings(monitor_reasons, monitor_classification)
    summary, summary_error = _judge_summary(log_dir, findings)
    report = None if learning is None else _judge_learning(log_dir, summary, learning, findings)
    return _finish(findings, summary, summary_error, report)


def _judge_summary(log_dir: Path, findings: _Findings) -> tuple[dict[str, Any] | None, str | None]:
    """docs/contracts.md §verdict steps 1-4; returns (summary or None, why it was unusable or None)."""
    summary, reason, classification = _load_summary(log_dir / rundir.RUN_SUMMARY)
    if summary is None:
        assert reason is not None and classification is not None
        findings.add(reason, classification)
        return None, reason
    found = check(summary)
    if found.stamps:  # step 2: every later rule reads the stamps
        for problem in found.stamps:
            findings.add(problem, SV)
        return summary, None
    if found.completed:
        _check_completed_run(summary, found, log_dir, findings)
    else:
        _check_failed_run(summary, found, findings)
    return summary, None


def _judge_learning(
    log_dir: Path, summary: dict[str, Any] | None, cfg: LearningCfg, findings: _Findings
) -> dict[str, Any]:
    """The learning verdict; a bug in it fails the soak instead of losing the artifact."""
    try:
        report = judge_learning(log_dir, summary, cfg)
    except Exception as err:  # noqa: BLE001 - the artifact must still be written
        findings.add(
            f"soak monitor failed: learning verdict raised {type(err).__name__}: {err}",
            Classification.MONITOR_FAILURE,
        )
        report = not_judged(cfg, f"the learning verdict raised {type(err).__name__}: {err}")
    for finding in report.enforced():
        findings.add(finding.reason, finding.classification)
    return report.to_json()
