"""The soak's learning verdict: did the run end with a policy as good as its best one?

Judged after the run-directory checks of ``harness.soak.verdict``, on a completed run only.
It reads three things the trainer wrote: ``run_summary.evaluation`` (the final and best
evaluation points, ``schemas/evaluation.v1.json#/$defs/summary_section``), the
``evaluation.json`` that section points at (every point), and the event file's ``Loss/*``
scalars. Each problem is a :class:`Finding` of one of two classes:

- ``learning_regression``: a loss or an evaluated metric is non-finite (a metric is null in
  evaluation.json); the final point trails the best point by more than ``margin``
  (relative) on the uniform-start success rate, or on R-MPKPE by more than ``margin`` and
  more than ``r_mpkpe_tolerance_mm``; the final uniform-start success rate is below
  ``min_success_rate``; on a clip set, a clip's final point trails that clip's best by the
  same rules, or a clip's final success is below ``min_clip_success_rate``
  (``harness.soak.learning_clips``).
- ``learning_unverified``: there is nothing trustworthy to judge: no evaluation section,
  evaluation skipped or failed, evaluation.json missing, invalid or stale, or no readable
  ``Loss/*`` scalar.

In ``enforce`` mode every finding fails the soak (regressions first, so their class wins);
in ``report`` mode they are recorded only, like the resource trends. docs/soak.md explains
the defaults. Pure apart from reading the run directory; no torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts import rundir
from contracts.errors import UsageError
from contracts.evaluation_text import FAILURE_FRAMES_FIELD, describe_failures
from contracts.jsonio import dumps_strict, show
from contracts.names import Classification
from contracts.schemas import SchemaViolation, validate
from harness.metrics.events import EventFileError, read_scalars
from harness.soak.learning_clips import (
    HEADLINE_METRICS,
    behind_message,
    clip_records,
    floor_message,
    pct,
    success_drop,
)

MODES: tuple[str, ...] = ("enforce", "report")
DEFAULT_MARGIN = 0.05
DEFAULT_TOLERANCE_MM = 2.0
"""R-MPKPE a converged policy's evaluations wander by without a trend: 4.7-6.4 mm over
iterations 30,000-65,000 of the H200 seed-form soak (docs/soak.md "Learning verdict"), where
5 % alone (0.24 mm) failed a healthy run."""
REGRESSION = Classification.LEARNING_REGRESSION
UNVERIFIED = Classification.LEARNING_UNVERIFIED
REASON_PREFIX = {REGRESSION: "learning regression: ", UNVERIFIED: "learning not verified: "}
EVALUATION_SCHEMA = rundir.SCHEMAS[rundir.EVALUATION]
_SECTION_SCHEMA = {"$ref": f"{EVALUATION_SCHEMA}#/$defs/summary_section"}
LOSS_PREFIX = "Loss/"
MAX_LISTED_POINTS = 4
REPORT_HINT = "or pass --learning-mode report to judge resources only"


@dataclass(frozen=True, kw_only=True)
class LearningCfg:
    """How the learning verdict judges (the ``--learning-*`` flags)."""

    mode: str = "report"
    """``enforce``: every finding fails the soak; ``report``: findings are recorded only."""
    margin: float = DEFAULT_MARGIN
    """Relative: the final point may trail the best by at most this fraction."""
    min_success_rate: float | None = None
    """Floor on the final uniform-start success rate; None: no floor."""
    r_mpkpe_tolerance_mm: float = DEFAULT_TOLERANCE_MM
    """Absolute: an R-MPKPE regression must also exceed the best point by this many mm."""
    min_clip_success_rate: float | None = None
    """Floor on every clip's final uniform-start success on a clip set; None: no floor."""

    def thresholds(self) -> dict[str, Any]:
        return {
            "margin": self.margin,
            "min_success_rate": self.min_success_rate,
            "r_mpkpe_tolerance_mm": self.r_mpkpe_tolerance_mm,
            "min_clip_success_rate": self.min_clip_success_rate,
        }


def _fraction(floor: float | None) -> bool:
    """None (no floor) or a finite fraction in [0, 1]."""
    return floor is None or (math.isfinite(floor) and 0 <= floor <= 1)


def learning_cfg(
    mode: str,
    margin: float,
    min_success_rate: float | None,
    r_mpkpe_tolerance_mm: float = DEFAULT_TOLERANCE_MM,
    min_clip_success_rate: float | None = None,
) -> LearningCfg:
    """The flags, bounds-checked.

    Raises:
        UsageError: a margin outside [0, 1), a floor outside [0, 1] or a negative tolerance.
    """
    if mode not in MODES:
        raise UsageError(f"--learning-mode={mode!r} must be one of {', '.join(MODES)}")
    if not math.isfinite(margin) or not 0 <= margin < 1:
        raise UsageError(
            f"--learning-margin={margin:g} must be a fraction in [0, 1), e.g. 0.05 for 5 %"
        )
    if not _fraction(min_success_rate):
        raise UsageError(
            f"--min-success-rate={min_success_rate:g} must be a fraction in [0, 1], e.g. 0.95"
        )
    if not _fraction(min_clip_success_rate):
        raise UsageError(
            f"--min-clip-success-rate={min_clip_success_rate:g} must be a fraction in [0, 1], "
            "e.g. 0.9"
        )
    if not math.isfinite(r_mpkpe_tolerance_mm) or r_mpkpe_tolerance_mm < 0:
        raise UsageError(
            f"--learning-tolerance-mm={r_mpkpe_tolerance_mm:g} "
            f"must be a finite number of mm >= 0, e.g. {DEFAULT_TOLERANCE_MM:g}"
        )
    return LearningCfg(
        mode=mode,
        margin=margin,
        min_success_rate=min_success_rate,
        r_mpkpe_tolerance_mm=float(r_mpkpe_tolerance_mm),
        min_clip_success_rate=min_clip_success_rate,
    )


@dataclass(frozen=True)
class Finding:
    """One problem the learning verdict found."""

    check: str
    classification: str
    message: str

    @property
    def reason(self) -> str:
        """The message as a soak ``failure_reason`` part."""
        return REASON_PREFIX[self.classification] + self.message

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "classification": self.classification, "message": self.message}


@dataclass(frozen=True)
class LearningReport:
    """The artifact's ``learning`` section."""

    cfg: LearningCfg
    verdict: str
    reason: str | None
    evaluation: dict[str, Any] | None
    losses: dict[str, Any] | None
    findings: tuple[Finding, ...]

    def enforced(self) -> tuple[Finding, ...]:
        """The findings that fail the soak (none in report mode)."""
        return self.findings if self.cfg.mode == "enforce" else ()

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.cfg.mode,
            "verdict": self.verdict,
            "reason": self.reason,
            "thresholds": self.cfg.thresholds(),
            "evaluation": self.evaluation,
            "losses": self.losses,
            "findings": [f.to_json() for f in self.findings],
        }


def not_judged(cfg: LearningCfg, reason: str) -> LearningReport:
    """A report that judged nothing, and says why."""
    return LearningReport(cfg, "not_judged", reason, None, None, ())


def judge_learning(
    log_dir: Path, summary: Mapping[str, Any] | None, cfg: LearningCfg
) -> LearningReport:
    """Judge the run's learning from its run directory (nothing is written).

    Args:
        log_dir: the run directory.
        summary: the loaded ``run_summary.json`` object, or None when it was unusable.
        cfg: mode and thresholds.
    """
    if summary is None:
        return not_judged(cfg, "no usable run_summary.json")
    if summary.get("status") != "completed":
        return not_judged(
            cfg, f"the run did not complete (run_summary status {show(summary.get('status'))})"
        )
    findings: list[Finding] = []
    losses = _check_losses(Path(log_dir), findings)
    evaluation = _check_evaluation(Path(log_dir), summary, cfg, findings)
    ordered = tuple(sorted(findings, key=lambda f: f.classification != REGRESSION))
    classes = {f.classification for f in ordered}
    verdict = (
        "regression"
        if REGRESSION in classes
        else "unverified"
        if UNVERIFIED in classes
        else "passed"
    )
    return LearningReport(cfg, verdict, None, evaluation, losses, ordered)


# -- losses ---------------------------------------------------------------------------
def _check_losses(log_dir: Path, findings: list[Finding]) -> dict[str, Any] | None:
    events = rundir.event_files(log_dir)
    if len(events) != 1:
        findings.append(
            Finding(
                "losses_unreadable",
                UNVERIFIED,
                f"losses were not checked: {log_dir} holds {len(events)} {rundir.EVENT_GLOB} files, expected one",
            )
        )
        return None
    try:
        scalars = read_scalars(events[0])
    except (EventFileError, OSError) as err:
        findings.append(Finding("losses_unreadable", UNVERIFIED, f"losses were not checked: {err}"))
        return None
    tags = {tag: values for tag, values in scalars.items() if tag.startswith(LOSS_PREFIX)}
    if not tags:
        findings.append(
            Finding(
                "losses_unreadable",
                UNVERIFIED,
                f"losses were not checked: {events[0].name} holds no {LOSS_PREFIX}* scalar",
            )
        )
    out: dict[str, Any] = {}
    for tag, values in tags.items():
        bad = [v for v in values if not math.isfinite(v.value)]
        finite = [v.value for v in values if math.isfinite(v.value)]
        out[tag] = {
            "count": len(values),
            "non_finite": len(bad),
            "first_non_finite_env_step": bad[0].step if bad else None,
            "last": finite[-1] if finite else None,
        }
        if bad:
            findings.append(
                Finding(
                    "non_finite_loss",
                    REGRESSION,
                    f"{tag} is non-finite ({bad[0].value}) from env step {bad[0].step} "
                    f"({len(bad)} of {len(values)} values)",
                )
            )
    return {"event_file": str(events[0].absolute()), "tags": out}


# -- evaluation -----------------------------------------------------------------------
def _first(violations: Sequence[SchemaViolation]) -> str:
    more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
    return f"{violations[0]}{more}"


def _check_evaluation(
    log_dir: Path, summary: Mapping[str, Any], cfg: LearningCfg, findings: list[Finding]
) -> dict[str, Any] | None:
    if "evaluation" not in summary:
        findings.append(
            Finding(
                "no_evaluation",
                UNVERIFIED,
                "run_summary has no evaluation section, so the trainer did not evaluate its "
                f"policy; run a trainer that writes evaluation.json, {REPORT_HINT}",
            )
        )
        return None
    section = summary["evaluation"]
    violations = validate(section, EVALUATION_SCHEMA, schema=_SECTION_SCHEMA)
    if violations:
        findings.append(
            Finding(
                "evaluation_unreadable",
                UNVERIFIED,
                f"run_summary $.evaluation is invalid: {_first(violations)}",
            )
        )
        return None
    record: dict[str, Any] = {
        "status": section["status"],
        "path": None,
        "points": [],
        "final_iteration": None,
        "best_iteration": None,
    }
    if section["status"] != "evaluated":
        record["reason"] = section["reason"]
        reason = section["reason"]
        message = (
            f"the evaluation was skipped ({reason})"
            if section["status"] == "skipped"
            else f"the evaluation failed ({reason})"
        )
        findings.append(
            Finding("no_evaluation", UNVERIFIED, f"{message}; evaluate the run, {REPORT_HINT}")
        )
        return record
    final, best = section["final"], section["best"]
    record["final_iteration"], record["best_iteration"] = final["iteration"], best["iteration"]
    doc = _load_evaluation(log_dir, section["path"], findings)
    if doc is not None:
        record["path"] = str((log_dir / section["path"]).absolute())
        record["points"] = [_headline(p) for p in doc["points"]]
        if doc["final_iteration"] != final["iteration"]:
            findings.append(
                Finding(
                    "evaluation_unreadable",
                    UNVERIFIED,
                    f"evaluation.json final_iteration={show(doc['final_iteration'])} disagrees with "
                    f"run_summary $.evaluation.final.iteration={final['iteration']}; the file is "
                    "stale or from another run",
                )
            )
    _check_non_finite([*(doc["points"] if doc else []), final, best], findings)
    _check_final(final, best, cfg, findings, where=_final_failures(doc, final["iteration"]))
    if doc is not None:
        clips = clip_records(
            doc["points"], final["iteration"], cfg.margin, cfg.r_mpkpe_tolerance_mm
        )
        if clips is not None:
            record["clips"] = clips
            _check_clips(clips, final["iteration"], cfg, findings)
    return record


def _check_clips(
    clips: list[dict[str, Any]], final_iteration: int, cfg: LearningCfg, findings: list[Finding]
) -> None:
    """Every clip of a clip set against its own best point and the clip floor."""
    behind = behind_message(clips, final_iteration)
    if behind is not None:
        findings.append(Finding("clip_behind_best", REGRESSION, behind))
    below = floor_message(clips, cfg.min_clip_success_rate)
    if below is not None:
        findings.append(Finding("clip_success_below_floor", REGRESSION, below))


def _load_evaluation(
    log_dir: Path, relative: str | None, findings: list[Finding]
) -> dict[str, Any] | None:
    def unreadable(message: str) -> None:
        findings.append(Finding("evaluation_unreadable", UNVERIFIED, message))

    if relative is None:
        unreadable("run_summary $.evaluation.path is null although the status is evaluated")
        return None
    path = log_dir / relative
    try:
        return rundir.read(path, rundir.EVALUATION)
    except rundir.DocumentError as err:
        if err.problem == "missing":
            unreadable(f"run_summary $.evaluation.path names {path}, which does not exist")
        elif err.problem == "unreadable":
            unreadable(f"{path} is unreadable: {err.detail}")
        else:
            schema = rundir.SCHEMAS[rundir.EVALUATION]
            unreadable(f"{path} is not a valid {schema} document: {_first(err.violations)}")
        return None


def _headline(point: Mapping[str, Any]) -> dict[str, Any]:
    modes = point["modes"]
    return {
        "iteration": point["iteration"],
        "env_steps": point["env_steps"],
        "source": point["source"],
        **{mode: {k: modes[mode][k] for k in HEADLINE_METRICS} for mode in ("uniform", "frame0")},
        **({"network": point["network"]} if "network" in point else {}),
    }


def _null_metrics(point: Mapping[str, Any]) -> list[str]:
    return [
        f"{mode}.{name}"
        for mode in ("uniform", "frame0")
        for name, value in point["modes"][mode].items()
        if value is None
    ]


def _check_non_finite(points: Sequence[Mapping[str, Any]], findings: list[Finding]) -> None:
    """One finding per point with a null metric (the copies in run_summary count once)."""
    seen: set[str] = set()
    bad: list[tuple[Mapping[str, Any], list[str]]] = []
    for point in points:
        key = dumps_strict(point, indent=None)
        if key in seen:
            continue
        seen.add(key)
        nulls = _null_metrics(point)
        if nulls:
            bad.append((point, nulls))
    for point, nulls in bad[:MAX_LISTED_POINTS]:
        findings.append(
            Finding(
                "non_finite_metric",
                REGRESSION,
                f"evaluated metrics are non-finite (null) at iteration {point['iteration']} "
                f"({point['source']}): {', '.join(nulls)}",
            )
        )
    if len(bad) > MAX_LISTED_POINTS:
        findings.append(
            Finding(
                "non_finite_metric",
                REGRESSION,
                f"... and {len(bad) - MAX_LISTED_POINTS} more evaluation points with non-finite metrics",
            )
        )


def _final_failures(doc: Mapping[str, Any] | None, iteration: int) -> str | None:
    """Where the final point's failed uniform-start episodes ended, as spans of clip time
    (``10.2–11.4 s ×68 · 6.1 s ×2``); None without failure frames (a clip set keeps them per
    clip, an older evaluation has none)."""
    if doc is None:
        return None
    point = next((p for p in doc["points"] if p["iteration"] == iteration), None)
    frames = point["modes"]["uniform"].get(FAILURE_FRAMES_FIELD) if point else None
    return describe_failures(frames, float(doc["motion"]["fps"])) if frames else None


def _check_final(
    final: Mapping[str, Any],
    best: Mapping[str, Any],
    cfg: LearningCfg,
    findings: list[Finding],
    *,
    where: str | None = None,
) -> None:
    """The final point against the best one (relative margin, R-MPKPE also by the absolute
    tolerance) and the success floor; ``where``: the final point's failure spans, which a
    success finding names so that a reader sees which part of the clip was lost."""
    fu, bu = final["modes"]["uniform"], best["modes"]["uniform"]
    at_final, at_best = f"iteration {final['iteration']}", f"iteration {best['iteration']}"
    margin = pct(cfg.margin)
    fs, bs = fu["success_rate"], bu["success_rate"]
    if fs is not None and bs is not None and fs < bs * (1 - cfg.margin):
        findings.append(
            Finding(
                "final_behind_best",
                REGRESSION,
                f"final uniform-start success rate {pct(fs)} ({at_final}) is more than "
                f"{margin} below the best point's {pct(bs)} ({at_best}): "
                + success_drop(fs, fu["episodes"], bs, bu["episodes"])
                + ("" if where is None else f"; its failures ended at {where} of the clip"),
            )
        )
    fr, br = fu["r_mpkpe_mm"], bu["r_mpkpe_mm"]
    tol = cfg.r_mpkpe_tolerance_mm
    if fr is not None and br is not None and fr > br * (1 + cfg.margin) and fr - br > tol:
        findings.append(
            Finding(
                "final_behind_best",
                REGRESSION,
                f"final uniform-start R-MPKPE {fr:.1f} mm ({at_final}) is more than {margin} "
                f"and more than {tol:g} mm above the best point's {br:.1f} mm ({at_best})",
            )
        )
    floor = cfg.min_success_rate
    if floor is not None and fs is not None and fs < floor:
        findings.append(
            Finding(
                "success_below_floor",
                REGRESSION,
                f"final uniform-start success rate {pct(fs)} ({at_final}) "
                f"is below --min-success-rate {pct(floor)}",
            )
        )
