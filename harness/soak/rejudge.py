"""``g1-soak rejudge ARTIFACT --output NEW``: judge an artifact's samples again with other
trend settings, write a new artifact and never touch the old one (docs/soak.md).

The artifact's ``judgement`` holds every finding in the order the soak made it, each with
its classification: the monitor's (with the check that made it), the run directory's, and
the trainer's shutdown classification when it replaced the others. Re-judging swaps the one
``trends`` finding for the new trend verdict's and replays the same first-set-wins rule, so
a re-judge with the original settings reproduces the original verdict exactly. Everything
else (samples, run summary, context, residuals) is carried over unchanged.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contracts.errors import StrictJsonError, UsageError
from contracts.jsonio import loads_strict, write_json_atomic
from contracts.schemas import validate
from harness.soak.artifact import SCHEMA_FILE
from harness.soak.headline import failure_reason, unclassified
from harness.soak.integrity import examine, seal
from harness.soak.trend import (
    TREND_CHECK,
    TREND_CLASSIFICATION,
    Threshold,
    analyse_trends,
    parse_threshold_overrides,
    trend_failure,
)

# Where the trend finding sits among the monitor's checks (monitor.py `_judge_exit`).
_AFTER_TRENDS = ("residuals",)


@dataclass(frozen=True)
class Judgement:
    status: str
    failure_reason: str | None
    failure_classification: str | None
    monitor_failure_classification: str | None


def replay(
    monitor_findings: Sequence[Mapping[str, Any]],
    run_dir_findings: Sequence[Mapping[str, Any]],
    trainer_classification: str | None,
) -> Judgement:
    """The verdict of these findings: reasons in order, the first classification set wins,
    the trainer's shutdown classification replaces it (failed runs), a reason without any
    classification is ``too_short`` or ``unknown_failure`` (harness.soak.headline)."""
    reasons: list[str] = []
    classification: str | None = None
    for finding in [*monitor_findings, *run_dir_findings]:
        reasons.append(str(finding["reason"]))
        classification = classification or finding["classification"]
    replaced = None
    if trainer_classification is not None:
        replaced, classification = classification, trainer_classification
    if not reasons:
        return Judgement("passed", None, None, None)
    return Judgement(
        "failed", failure_reason(reasons), classification or unclassified(reasons), replaced
    )


def swap_trend_finding(
    findings: Sequence[Mapping[str, Any]], reason: str | None
) -> list[dict[str, Any]]:
    """``findings`` with the trend finding replaced by ``reason`` (removed when None)."""
    out = [dict(f) for f in findings]
    slot = next((i for i, f in enumerate(out) if f["check"] == TREND_CHECK), None)
    if slot is None:
        slot = next((i for i, f in enumerate(out) if f["check"] in _AFTER_TRENDS), len(out))
    else:
        del out[slot]
    if reason is not None:
        out.insert(
            slot, {"check": TREND_CHECK, "reason": reason, "classification": TREND_CLASSIFICATION}
        )
    return out


def load_artifact(path: Path) -> tuple[dict[str, Any], bytes]:
    """The artifact at ``path`` and its bytes; UsageError when it is not a usable one."""
    if not path.is_absolute():
        raise UsageError(f"ARTIFACT {str(path)!r} must be an absolute path; use e.g. $PWD/{path}")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise UsageError(f"ARTIFACT {path}: cannot read it ({err.strerror or err})") from err
    try:
        doc = loads_strict(raw.decode("utf-8"))
    except (UnicodeDecodeError, StrictJsonError) as err:
        raise UsageError(f"ARTIFACT {path} is not strict JSON: {err}") from err
    violations = validate(doc, SCHEMA_FILE) if isinstance(doc, dict) else ["not an object"]
    if violations:
        raise UsageError(f"ARTIFACT {path} is not a valid soak artifact: {violations[0]}")
    if "judgement" not in doc:
        raise UsageError(
            f"ARTIFACT {path} has no judgement record (written before g1-soak rejudge existed); "
            "only its trends could be recomputed, not its verdict: re-run the soak"
        )
    return doc, raw


def check_output(output: Path, source: Path) -> None:
    if not output.is_absolute():
        raise UsageError(
            f"--output {str(output)!r} must be an absolute path; use e.g. $PWD/{output}"
        )
    if output.resolve() == source.resolve():
        raise UsageError(f"--output {output} is ARTIFACT itself; rejudge never touches the old one")
    if output.exists():
        raise UsageError(f"--output {output} already exists; pass a new artifact path")


def thresholds_of(artifact: Mapping[str, Any], specs: Sequence[str]) -> dict[str, Threshold]:
    """The artifact's thresholds with ``SERIES=MAX[:MIN]`` overrides applied."""
    recorded = artifact["resource_trends"]["thresholds"]
    base = {
        name: Threshold(t["max_slope_per_hour"], t["min_growth"]) for name, t in recorded.items()
    }
    parsed = parse_threshold_overrides(specs)  # validates every spec against the defaults
    for spec in specs:
        name = spec.partition("=")[0].strip()
        base[name] = parsed[name]
    return base


def rejudge(
    artifact: dict[str, Any],
    *,
    source: Path,
    source_bytes: bytes,
    mode: str | None,
    threshold_specs: Sequence[str],
    warmup_s: float | None,
    min_window_s: float | None,
) -> dict[str, Any]:
    """The new artifact: trends judged again, verdict replayed, provenance recorded."""
    trends_before = artifact["resource_trends"]
    mode = mode or trends_before["mode"]
    if trends_before.get("window_rule") == "flags":
        warmup_s = trends_before["warmup_s"] if warmup_s is None else warmup_s
        min_window_s = trends_before["min_window_s"] if min_window_s is None else min_window_s
    budget = artifact.get("budget") or {}
    report = analyse_trends(
        artifact["samples"],
        thresholds=thresholds_of(artifact, threshold_specs),
        mode=mode,
        warmup_s=warmup_s,
        min_window_s=min_window_s,
        planned_length_s=budget.get("duration_s"),
    )
    evidence = examine(artifact)  # never the artifact's word alone: its seal, its run dir
    judgement = copy.deepcopy(artifact["judgement"])
    judgement["monitor_findings"] = swap_trend_finding(
        judgement["monitor_findings"], trend_failure(report)
    )
    judgement["run_dir_findings"] = [
        *evidence.run_dir_findings,
        *({"reason": problem, "classification": None} for problem in evidence.problems),
    ]
    judgement["trainer_classification"] = evidence.trainer_classification
    verdict = replay(
        judgement["monitor_findings"],
        judgement["run_dir_findings"],
        judgement["trainer_classification"],
    )
    out = copy.deepcopy(artifact)
    out.update(
        status=verdict.status,
        failure_reason=verdict.failure_reason,
        failure_classification=verdict.failure_classification,
        monitor_failure_classification=verdict.monitor_failure_classification,
        resource_trends=report.to_json(),
        judgement=judgement,
        rejudged_from={
            "artifact": str(source),
            "sha256": hashlib.sha256(source_bytes).hexdigest(),
            "at_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "trend_mode": mode,
            "trend_thresholds": list(threshold_specs),
            "trend_warmup_s": warmup_s,
            "trend_min_window_s": min_window_s,
        },
    )
    return out


def write_rejudged(doc: dict[str, Any], output: Path) -> None:
    """Seal, validate and write atomically (nothing is written when it does not validate)."""
    violations = validate(seal(doc), SCHEMA_FILE)
    if violations:
        raise RuntimeError(f"the re-judged artifact does not validate: {violations[0]}")
    output.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(output, doc)
