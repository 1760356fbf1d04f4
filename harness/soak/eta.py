"""The soak's plan and its forecast: iterations/s, ETA, and whether the run will clear
``--min-duration-seconds`` (docs/soak.md, "Time-budgeted soaks").

The plan is what the soak was asked for: an iteration target (or, with a time budget, an
optional cap), a training time budget, and the minimum duration. The forecast reads the
trainer's last ``progress.jsonl`` line, whose rates are windowed (trainer/rundir/progress.py,
the last 10 s of updates), so the status line shows the trainer's own numbers. A soak that
will end before its minimum is warned about once, as soon as a tenth of it has run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contracts.names import PhaseGroup
from harness.soak.headline import MIN_DURATION_HEAD

EARLY_WARNING_FRACTION = 0.10
ITERATION_ROUNDING = 1000


def fmt_clock(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class SoakPlan:
    """What the soak was sized to."""

    iterations: int | None
    """Iteration target (sized in iterations) or cap (time-budgeted); None: none known."""
    duration_s: float | None
    """Training time budget in seconds (``training.duration_seconds``); None: none."""
    min_duration_s: float

    @property
    def kind(self) -> str:
        return "duration" if self.duration_s is not None else "iterations"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "duration_s": self.duration_s,
            "iterations": self.iterations,
            "min_duration_s": self.min_duration_s,
        }


@dataclass(frozen=True)
class Forecast:
    iteration: int | None
    iterations_per_sec: float | None
    env_steps_per_sec: float | None
    rate_window_s: float | None
    eta_s: float | None
    """Seconds until training ends (by the iteration target or the time budget)."""
    fraction: float | None
    """How much of the run is done, 0..1."""
    projected_end_s: float | None
    """Soak elapsed time at which training is expected to end."""
    clears_min_duration: bool | None


def _number(line: Mapping[str, Any], key: str) -> float | None:
    value = line.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def forecast(plan: SoakPlan | None, elapsed_s: float, last: Mapping[str, Any] | None) -> Forecast:
    """The forecast at soak time ``elapsed_s`` from the last progress line (None: none yet)."""
    last = last or {}
    iteration = last.get("iteration") if isinstance(last.get("iteration"), int) else None
    ips = _number(last, "iterations_per_sec")
    trained = _number(last, "training_elapsed_s")
    etas: list[float] = []
    fractions: list[float] = []
    if plan is not None and plan.iterations and iteration is not None:
        fractions.append(iteration / plan.iterations)
        if ips:
            etas.append(max(0.0, plan.iterations - iteration) / ips)
    if plan is not None and plan.duration_s and trained is not None:
        fractions.append(trained / plan.duration_s)
        etas.append(max(0.0, plan.duration_s - trained))
    eta = min(etas) if etas else None
    end = None if eta is None else elapsed_s + eta
    return Forecast(
        iteration=iteration,
        iterations_per_sec=ips,
        env_steps_per_sec=_number(last, "env_steps_per_sec"),
        rate_window_s=_number(last, "rate_window_s"),
        eta_s=eta,
        fraction=min(1.0, max(fractions)) if fractions else None,
        projected_end_s=end,
        clears_min_duration=None if end is None or plan is None else end >= plan.min_duration_s,
    )


def status_fields(plan: SoakPlan | None, fc: Forecast) -> list[str]:
    """The status line's rate / ETA parts (empty when nothing is known yet)."""
    parts: list[str] = []
    if fc.env_steps_per_sec is not None:
        window = "" if fc.rate_window_s is None else f" ({_num(fc.rate_window_s)} s)"
        parts.append(f"{fc.env_steps_per_sec:,.0f} env steps/s{window}")
    if fc.iterations_per_sec is not None:
        parts.append(f"{fc.iterations_per_sec:,.1f} it/s")
    if fc.eta_s is not None and plan is not None:
        text = f"ETA {fmt_clock(fc.eta_s)}"
        if plan.min_duration_s > 0 and fc.projected_end_s is not None:
            verdict = "clears" if fc.clears_min_duration else "SHORT OF"
            text += f", ends ~{fmt_clock(fc.projected_end_s)} {verdict} min {fmt_clock(plan.min_duration_s)}"
        parts.append(text)
    return parts


def iterations_to_fill(reached: int, ips: float, missing_s: float) -> int:
    """Iterations that would have filled ``missing_s`` more seconds, rounded up to 1,000."""
    needed = reached + math.ceil(max(0.0, missing_s) * ips)
    return -(-needed // ITERATION_ROUNDING) * ITERATION_ROUNDING


def early_warning(plan: SoakPlan | None, fc: Forecast) -> str | None:
    """One warning line once a tenth of the run is done and it will end too soon."""
    if plan is None or plan.min_duration_s <= 0 or fc.fraction is None:
        return None
    if fc.fraction < EARLY_WARNING_FRACTION or fc.clears_min_duration is not False:
        return None
    assert fc.projected_end_s is not None
    advice = f"rerun sized in time: --duration-seconds {_num(plan.min_duration_s)}"
    if plan.kind == "iterations" and fc.iterations_per_sec and fc.iteration is not None:
        missing = plan.min_duration_s - fc.projected_end_s
        cap = iterations_to_fill(plan.iterations or fc.iteration, fc.iterations_per_sec, missing)
        advice += f", or --iterations {cap}"
    done = f"{fc.fraction:.0%} of the run"
    if fc.iterations_per_sec is not None:
        done += f", {fc.iterations_per_sec:,.1f} it/s"
    end = fmt_clock(fc.projected_end_s)
    minimum = _num(plan.min_duration_s)
    return (
        f"warning: at {done} this soak will end near {end}, before --min-duration-seconds="
        f"{minimum}, and fail; stop it (Ctrl-C) and {advice}"
    )


def _training_points(samples: Sequence[Mapping[str, Any]]) -> list[tuple[float, int]]:
    points: list[tuple[float, int]] = []
    for sample in samples:
        last = sample["progress"].get("last")
        if not isinstance(last, Mapping) or not isinstance(last.get("iteration"), int):
            continue
        if PhaseGroup.TRAINING.holds(last.get("phase")):
            points.append((float(sample["elapsed_s"]), int(last["iteration"])))
    return points


def measured_iteration_rate(samples: Sequence[Mapping[str, Any]]) -> float | None:
    """Mean iterations/s over the samples that show a training progress line."""
    points = _training_points(samples)
    if len(points) >= 2 and points[-1][0] > points[0][0] and points[-1][1] > points[0][1]:
        return (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])
    return None


def last_iteration(samples: Sequence[Mapping[str, Any]]) -> int | None:
    for sample in reversed(samples):
        last = sample["progress"].get("last")
        if isinstance(last, Mapping) and isinstance(last.get("iteration"), int):
            return int(last["iteration"])
    return None


def min_duration_reason(
    plan: SoakPlan, duration_s: float, samples: Sequence[Mapping[str, Any]]
) -> str:
    """The reason for a soak that ended before its minimum: what it reached, then one fix.

    A soak sized in iterations is told to size itself in time; one already sized in time
    ended before its budget, so its iteration cap (if any) is the fix, never the flag it had.
    """
    head = f"{MIN_DURATION_HEAD}{_num(plan.min_duration_s)} (ran {duration_s:.1f} s"
    ips = measured_iteration_rate(samples)
    reached = last_iteration(samples)
    if ips is not None and reached is not None:
        head += f", {reached} iterations at {ips:,.1f} it/s"
    if plan.duration_s is None:
        return f"{head}); size it in time with --duration-seconds {_num(plan.min_duration_s)}"
    budget = f"training ended before its --duration-seconds {_num(plan.duration_s)} budget"
    if plan.iterations is not None:
        return f"{head}); {budget}: its --iterations {plan.iterations} cap came first; raise it"
    return f"{head}); {budget}"
