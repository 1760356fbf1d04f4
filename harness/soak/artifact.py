"""The soak artifact, schema 0.3.0 plus additions (docs/contracts.md §soak-artifact).

The artifact is assembled from the monitor's observations and the verdict on the run
directory, validated against ``schemas/soak_artifact.0.3.0.json`` and written atomically
**even when the soak failed**. If self-validation fails the artifact is still written,
with ``status: "failed"`` and ``monitor_failure``, and the violation in the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts import rundir
from contracts.jsonio import escape_non_utf8, write_json_atomic
from contracts.names import Classification
from contracts.schemas import validate
from harness.soak.claim import write_error_text
from harness.soak.console import read_tail
from harness.soak.eta import SoakPlan
from harness.soak.integrity import seal
from harness.soak.monitor_types import MonitorCfg, SoakResult
from harness.soak.trend import TrendReport
from harness.soak.verdict import Verdict, judge_run_dir, resource_summary_fields

SCHEMA_VERSION = "0.3.0"
SCHEMA_FILE = "soak_artifact.0.3.0.json"


@dataclass(frozen=True, kw_only=True)
class ArtifactInputs:
    """Everything the monitor observed, ready to be judged and written."""

    command: Sequence[str]
    context: dict[str, Any]
    started_at_utc: str
    ended_at_utc: str
    duration_s: float
    returncode: int | None
    cfg: MonitorCfg
    soak_id: str
    subreaper: bool
    termination: Sequence[str]
    samples: Sequence[dict[str, Any]]
    trends: TrendReport
    residual_processes: Sequence[dict[str, Any]]
    identities_checked: int
    log_dir: Path
    monitor_reasons: Sequence[str]
    monitor_classification: str | None
    monitor_findings: Sequence[dict[str, Any]] = ()
    """The monitor's reasons with their check and classification, in order."""
    plan: SoakPlan | None = None
    plan_warning: str | None = None


def _number(value: Any) -> int | float | None:
    """A finite JSON number (bools excluded), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _max(values: Sequence[Any]) -> int | float | None:
    nums = [v for v in (_number(x) for x in values) if v is not None]
    return max(nums) if nums else None


def resource_summary(
    samples: Sequence[Mapping[str, Any]], run_summary: Mapping[str, Any] | None, residual_count: int
) -> dict[str, Any]:
    """docs/contracts.md §soak-artifact ``resource_summary``: sample maxima plus the producer's final counters
    (null when the source is missing or not a number)."""
    gpu_values = [
        s["gpu"]["used_memory_mib_total"] for s in samples if s["gpu"].get("source") is not None
    ]
    return {
        "sample_count": len(samples),
        "max_process_count": _max([s["process"]["process_count"] for s in samples]),
        "max_process_rss_kib": _max([s["process"]["rss_kib_total"] for s in samples]),
        "max_gpu_used_memory_mib": _max(gpu_values),
        "max_eventfd_count": _max([s["process"]["fd_classes_total"]["eventfd"] for s in samples]),
        "max_shared_memory_fd_count": _max(
            [s["process"]["fd_classes_total"]["shared_memory"] for s in samples]
        ),
        "max_progress_bytes": _max([s["progress"]["bytes_total"] for s in samples]),
        "residual_process_count": residual_count,
        # ipc_event_count, max_in_flight, max_publication_lag, replay_ingress_*
        **resource_summary_fields(run_summary),
    }


def _exact_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def budget_record(
    plan: SoakPlan | None, warning: str | None, run_summary: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``budget``: what the soak was sized to and what the trainer reached (addition)."""
    summary = run_summary or {}
    time_budget = summary.get("time_budget")
    time_budget = time_budget if isinstance(time_budget, Mapping) else {}
    limits = (summary.get("runtime_manifest") or {}).get("runtime_limits")
    limits = limits if isinstance(limits, Mapping) else {}
    completed = _exact_int(summary.get("completed_iterations"))
    final = _exact_int(time_budget.get("final_iteration"))
    start = _exact_int(limits.get("start_iteration"))
    if final is None and completed is not None:
        final = completed + (start or 0)
    training_s = _number(time_budget.get("training_seconds"))
    if training_s is None:
        training_s = _number(summary.get("training_wall_time_sec"))
    stopped_by = time_budget.get("stopped_by")
    plan_doc = (plan or SoakPlan(None, None, 0.0)).to_json()
    if plan is None:
        plan_doc["kind"] = None
    return {
        **plan_doc,
        "reached": {
            "final_iteration": final,
            "completed_iterations": completed,
            "training_s": training_s,
            "total_env_steps": _exact_int(summary.get("total_env_steps")),
            "stopped_by": stopped_by if stopped_by in ("iterations", "duration") else None,
        },
        "early_warning": warning,
    }


def judgement_record(inputs: ArtifactInputs, verdict: Verdict) -> dict[str, Any]:
    """``judgement``: every finding in order with its classification (addition), so
    ``g1-soak rejudge`` can swap the trend finding and replay the verdict exactly."""
    return {
        "monitor_findings": [dict(f) for f in inputs.monitor_findings],
        "run_dir_findings": [
            {"reason": reason, "classification": classification}
            for reason, classification in verdict.run_dir_findings
        ],
        "trainer_classification": verdict.trainer_classification,
    }


def assemble_artifact(inputs: ArtifactInputs) -> dict[str, Any]:
    """Judge the run directory (docs/contracts.md §verdict) and build the artifact document."""
    verdict = judge_run_dir(
        inputs.log_dir,
        monitor_reasons=list(inputs.monitor_reasons),
        monitor_classification=inputs.monitor_classification,
        learning=inputs.cfg.learning,
    )
    cfg = inputs.cfg
    return {
        "schema_version": SCHEMA_VERSION,
        "status": verdict.status,
        "failure_reason": verdict.failure_reason,
        "failure_classification": verdict.failure_classification,
        "monitor_failure_classification": verdict.monitor_failure_classification,
        "command": list(inputs.command),
        "context": inputs.context,
        "started_at_utc": inputs.started_at_utc,
        "ended_at_utc": inputs.ended_at_utc,
        "duration_s": round(float(inputs.duration_s), 6),
        "returncode": inputs.returncode,
        "monitor": {
            "sample_interval_s": cfg.sample_interval_s,
            "startup_timeout_s": cfg.startup_timeout_s,
            "stale_progress_s": cfg.stale_progress_s,
            "post_shutdown_grace_s": cfg.post_shutdown_grace_s,
            "stop_grace_s": cfg.stop_grace_s,
            "min_duration_s": cfg.min_duration_s,
            "sample_count": len(inputs.samples),
            "soak_id": inputs.soak_id,
            "subreaper": inputs.subreaper,
            "termination": list(inputs.termination),
        },
        "samples": list(inputs.samples),
        "resource_summary": resource_summary(
            inputs.samples, verdict.run_summary, len(inputs.residual_processes)
        ),
        "resource_trends": inputs.trends.to_json(),
        "learning": verdict.learning,
        "budget": budget_record(inputs.plan, inputs.plan_warning, verdict.run_summary),
        "judgement": judgement_record(inputs, verdict),
        "shutdown": verdict.shutdown,
        "post_shutdown": {
            "residual_processes": list(inputs.residual_processes),
            "identities_checked": inputs.identities_checked,
        },
        "run_summary": verdict.run_summary,
        "run_summary_error": verdict.run_summary_error,
        "console_log": str((inputs.log_dir / rundir.SOAK_CONSOLE_LOG).absolute()),
        "console_tail": read_tail(inputs.log_dir / rundir.SOAK_CONSOLE_LOG),
    }


def self_validate(artifact: dict[str, Any]) -> None:
    """Validate in place; on violations turn the artifact into a ``monitor_failure``."""
    violations = validate(artifact, SCHEMA_FILE)
    if not violations:
        return
    more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
    reason = f"soak monitor failed: artifact self-validation failed: {violations[0]}{more}"
    previous = artifact.get("failure_reason")
    artifact["status"] = "failed"
    artifact["failure_reason"] = reason if not previous else f"{previous}; {reason}"
    if artifact.get("failure_classification") is None:
        artifact["failure_classification"] = Classification.MONITOR_FAILURE


def with_text_escaped(artifact: dict[str, Any]) -> dict[str, Any]:
    """The artifact with every string UTF-8 can hold (a path or a summary string may carry
    a byte that is not UTF-8); the escaped strings' paths are listed in ``non_utf8_escaped``."""
    escaped, paths = escape_non_utf8(artifact)
    if paths:
        escaped["non_utf8_escaped"] = paths
    return escaped


def build_and_write_artifact(inputs: ArtifactInputs, output: Path) -> SoakResult:
    """Assemble, validate and atomically write the artifact; never raises on write errors."""
    artifact = with_text_escaped(assemble_artifact(inputs))
    self_validate(artifact)
    seal(artifact)
    try:
        write_json_atomic(output, artifact)
    except OSError as err:
        return SoakResult(artifact, output, False, write_error_text(err, output))
    except (ValueError, TypeError) as err:
        return SoakResult(artifact, output, False, f"{type(err).__name__}: {err}")
    return SoakResult(artifact, output, True, None)
