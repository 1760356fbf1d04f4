"""Resource trends over the post-startup window (docs/contracts.md §resource-trends, an improvement).

Peaks alone are normal; sustained growth is the leak signal. For each series we take
the samples with ``elapsed_s >= anchor + warmup_s`` (the anchor is the first sample whose
``progress.jsonl`` line is in a ``training/`` phase, else the first with run-dir bytes),
pick at most 512 evenly
spaced ones and estimate the Theil-Sen slope (median of pairwise slopes), per hour,
with Sen's distribution-free confidence interval. The verdict compares the interval's
**lower bound** to ``max_slope_per_hour``: a one-time step (allocate once, then flat)
yields about half zero slopes, so its lower bound sits at zero even when the point
estimate is pushed up by the step, while a steady leak moves every pairwise slope and
its lower bound stays near the true rate. ``growth`` (median of the last quarter minus
the median of the first) must also reach ``min_growth``, so a tiny drift never fails.

The windows scale with the soak (``scaled_windows``): warm-up and minimum window are
fractions of its planned length with floors and caps, so every soak of 8 minutes or more
gets a real verdict and a 30-minute soak keeps the 300 s / 600 s it was calibrated with.
``min_growth`` is stated for that 25-minute reference window and applies in proportion to
the window actually judged (never below one unit for counts), so the growth a leak of a
given slope must show is the same whatever the soak's length. Calibration and power:
docs/soak.md.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from contracts.names import Classification, PhaseGroup

SERIES: tuple[str, ...] = (
    "rss_kib",
    "fd_count",
    "eventfd_fds",
    "shared_memory_fds",
    "gpu_memory_mib",
    "process_count",
)
COUNT_SERIES = frozenset({"fd_count", "eventfd_fds", "shared_memory_fds", "process_count"})
"""Integer series: their applied ``min_growth`` is never below 1."""
MAX_TREND_SAMPLES = 512
MIN_TREND_SAMPLES = 12
REFERENCE_WINDOW_S = 1500.0
"""The window ``min_growth`` is stated for: the canonical 30-minute soak minus its 300 s
warm-up, where the default thresholds were calibrated (docs/soak.md)."""
WARMUP_FRACTION, WARMUP_FLOOR_S, WARMUP_CAP_S = 0.2, 60.0, 300.0
"""Scaled warm-up: 20 % of the planned length, at least 60 s (the recorded real CPU
trainer's RSS ramps for ~40 s after training starts), at most 300 s (the old fixed value)."""
MIN_WINDOW_FRACTION, MIN_WINDOW_FLOOR_S, MIN_WINDOW_CAP_S = 0.5, 120.0, 600.0
"""Scaled minimum window: half the planned length, at least 120 s (each half of the window
then holds MIN_TREND_SAMPLES samples at the default 5 s interval), at most 600 s."""
# Two-sided 95 % normal quantile for Sen's interval: a one-sided 97.5 % lower bound.
CONFIDENCE_Z = 1.96
# The halves only check that growth is sustained; the whole window supplies confidence.
# 1.0 (a one-sided ~84 % bound) catches a 120 MiB/h leak under 16 MiB noise far more often
# than 1.96 while every one-time step stays bounded (docs/soak.md, calibration).
HALF_CONFIDENCE_Z = 1.0
# ...but never a weaker test than "a flat half passes with probability <= P(Z > 5)" under
# independent noise: in a noisy series (the CPU trainer's RSS jitters by ~40 MiB) a flat
# half next to a one-time step otherwise read as growth a few times in a hundred short
# soaks, and real noise is mildly correlated, so Sen's interval understates the spread
# (4 still let 1 of 100 bootstraps of the recorded CPU trace through; docs/soak.md).
HALF_FALSE_LEAK_Z = 5.0

Verdict = Literal["bounded", "growing", "insufficient_data", "unavailable"]


@dataclass(frozen=True)
class Threshold:
    max_slope_per_hour: float
    min_growth: float

    def to_json(self) -> dict[str, float]:
        return {"max_slope_per_hour": self.max_slope_per_hour, "min_growth": self.min_growth}


DEFAULT_THRESHOLDS: dict[str, Threshold] = {
    "rss_kib": Threshold(65536, 32768),
    "fd_count": Threshold(0, 2),
    "eventfd_fds": Threshold(0, 1),
    "shared_memory_fds": Threshold(0, 1),
    "gpu_memory_mib": Threshold(64, 32),
    "process_count": Threshold(0, 1),
}


class TrendThresholdError(ValueError):
    """A ``--trend-threshold`` value is malformed (a usage error, exit 2)."""


def parse_threshold_overrides(specs: Sequence[str]) -> dict[str, Threshold]:
    """Apply ``SERIES=MAX_PER_HOUR[:MIN_GROWTH]`` specs to the defaults.

    Raises:
        TrendThresholdError: unknown series, non-numeric, negative or non-finite value.
    """
    thresholds = dict(DEFAULT_THRESHOLDS)
    for spec in specs:
        name, sep, value = spec.partition("=")
        name = name.strip()
        if not sep or not value.strip():
            raise TrendThresholdError(
                f"--trend-threshold {spec!r} must look like SERIES=MAX_PER_HOUR[:MIN_GROWTH], "
                "e.g. rss_kib=65536:32768"
            )
        if name not in DEFAULT_THRESHOLDS:
            raise TrendThresholdError(
                f"--trend-threshold {spec!r}: unknown series {name!r}; valid series: {', '.join(SERIES)}"
            )
        slope_text, _, growth_text = value.partition(":")
        slope = _non_negative(spec, "MAX_PER_HOUR", slope_text)
        growth = (
            thresholds[name].min_growth
            if growth_text == ""
            else _non_negative(spec, "MIN_GROWTH", growth_text)
        )
        thresholds[name] = Threshold(slope, growth)
    return thresholds


def _non_negative(spec: str, what: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TrendThresholdError(
            f"--trend-threshold {spec!r}: {what} {text!r} is not a number"
        ) from None
    if not math.isfinite(value) or value < 0:
        raise TrendThresholdError(
            f"--trend-threshold {spec!r}: {what} must be a finite number >= 0"
        )
    return int(value) if value.is_integer() else value


@dataclass(frozen=True)
class SlopeEstimate:
    slope: float
    lower: float
    upper: float


def _pairwise_slopes(t: Sequence[float], y: Sequence[float]) -> Any:
    import numpy as np  # lazily: keeps the CLI's start fast

    tt = np.asarray(t, dtype=np.float64)
    yy = np.asarray(y, dtype=np.float64)
    i, j = np.triu_indices(tt.size, k=1)
    dt = tt[j] - tt[i]
    keep = dt > 0
    slopes = np.sort((yy[j] - yy[i])[keep] / dt[keep])
    if slopes.size == 0:
        raise ValueError("theil_sen needs at least two distinct times")
    return slopes


def _sen_bounds(slopes: Any, n: int, z: float) -> tuple[float, float]:
    n_slopes = slopes.size
    # Var(S) of Kendall's S without tie correction (larger, so the bound is conservative).
    var_s = n * (n - 1) * (2 * n + 5) / 18.0
    c = z * math.sqrt(var_s)
    lo_rank = math.floor((n_slopes - c) / 2.0)
    hi_rank = math.ceil((n_slopes + c) / 2.0)
    lower = float(slopes[max(0, min(n_slopes - 1, lo_rank))])
    upper = float(slopes[max(0, min(n_slopes - 1, hi_rank))])
    return lower, upper


def theil_sen(t: Sequence[float], y: Sequence[float], *, z: float = CONFIDENCE_Z) -> SlopeEstimate:
    """Theil-Sen slope of ``y`` over ``t`` with Sen's rank-based confidence interval.

    Pairs with equal ``t`` are skipped. Requires at least two distinct times.
    """
    import numpy as np

    slopes = _pairwise_slopes(t, y)
    lower, upper = _sen_bounds(slopes, len(t), z)
    return SlopeEstimate(float(np.median(slopes)), lower, upper)


def half_lower_bound(
    t: Sequence[float], y: Sequence[float], limit: float, *, count: bool = False
) -> tuple[float, float]:
    """``(lower bound, z used)`` of one half-window's slope for the test against ``limit``.

    For a continuous series z is HALF_CONFIDENCE_Z while the half's slope is precise next to
    the limit, and rises towards HALF_FALSE_LEAK_Z as its spread grows: a flat half then
    passes with probability at most P(N(0,1) > HALF_FALSE_LEAK_Z), however noisy the series
    (docs/soak.md). Count series (FDs, processes) are not noisy that way: a flat half of
    them has no spread at all, and they keep HALF_CONFIDENCE_Z.
    """
    slopes = _pairwise_slopes(t, y)
    lower, upper = _sen_bounds(slopes, len(t), HALF_CONFIDENCE_Z)
    spread = (upper - lower) / (2 * HALF_CONFIDENCE_Z)
    z = HALF_CONFIDENCE_Z
    if spread > 0 and not count:
        z = max(HALF_CONFIDENCE_Z, HALF_FALSE_LEAK_Z - limit / spread)
    if z > HALF_CONFIDENCE_Z:
        lower = _sen_bounds(slopes, len(t), z)[0]
    return lower, round(z, 6)


def _even_indices(count: int, limit: int) -> list[int]:
    if count <= limit:
        return list(range(count))
    step = (count - 1) / (limit - 1)
    return sorted({round(k * step) for k in range(limit)})


@dataclass(frozen=True)
class SeriesTrend:
    verdict: Verdict
    slope_per_hour: float | None
    slope_lower_bound_per_hour: float | None
    first_quarter_median: float | None
    last_quarter_median: float | None
    growth: float | None
    samples: int
    half_slope_lower_bounds_per_hour: tuple[float, float] | None = None
    min_growth_applied: float | None = None
    half_confidence_z_applied: tuple[float, float] | None = None

    def to_json(self) -> dict[str, Any]:
        halves = self.half_slope_lower_bounds_per_hour
        zs = self.half_confidence_z_applied
        return {
            "min_growth_applied": self.min_growth_applied,
            "half_confidence_z_applied": None if zs is None else list(zs),
            "verdict": self.verdict,
            "slope_per_hour": self.slope_per_hour,
            "first_quarter_median": self.first_quarter_median,
            "last_quarter_median": self.last_quarter_median,
            "growth": self.growth,
            "samples": self.samples,
            "slope_lower_bound_per_hour": self.slope_lower_bound_per_hour,
            "half_slope_lower_bounds_per_hour": None if halves is None else list(halves),
        }


def applied_min_growth(threshold: Threshold, window_s: float, *, count: bool = False) -> float:
    """``min_growth`` in proportion to the judged window (REFERENCE_WINDOW_S = 1.0), never
    more than configured, and at least 1 for a count series."""
    scaled = threshold.min_growth * min(1.0, max(0.0, window_s) / REFERENCE_WINDOW_S)
    if count:
        scaled = max(scaled, min(1.0, threshold.min_growth))
    return round(scaled, 6)


def judge_series(
    t_s: Sequence[float],
    values: Sequence[float],
    threshold: Threshold,
    *,
    min_window_s: float,
    count: bool = False,
) -> SeriesTrend:
    """Verdict for one series whose points are all inside the trend window.

    ``growing`` needs all of: the whole window's slope lower bound above the limit, the
    same in **each half** of the window (a leak grows all the time; a one-time step sits
    in at most one half, the other half is flat), and ``growth`` at least the applied
    ``min_growth`` (``applied_min_growth``; ``count`` marks an integer series).
    """
    n = len(values)
    if n == 0:
        return SeriesTrend("unavailable", None, None, None, None, None, 0)
    if n < MIN_TREND_SAMPLES or (t_s[-1] - t_s[0]) < min_window_s:
        return SeriesTrend("insufficient_data", None, None, None, None, None, n)
    min_growth = applied_min_growth(threshold, t_s[-1] - t_s[0], count=count)
    idx = _even_indices(n, MAX_TREND_SAMPLES)
    t_h = [t_s[k] / 3600.0 for k in idx]
    y = [float(values[k]) for k in idx]
    est = theil_sen(t_h, y)
    mid = len(y) // 2
    limit = threshold.max_slope_per_hour
    first_half, first_z = half_lower_bound(t_h[: mid + 1], y[: mid + 1], limit, count=count)
    second_half, second_z = half_lower_bound(t_h[mid:], y[mid:], limit, count=count)
    quarter = max(1, len(y) // 4)
    first = float(statistics.median(y[:quarter]))
    last = float(statistics.median(y[-quarter:]))
    growth = last - first
    growing = min(est.lower, first_half, second_half) > limit and growth >= min_growth
    return SeriesTrend(
        "growing" if growing else "bounded",
        round(est.slope, 6),
        round(est.lower, 6),
        round(first, 6),
        round(last, 6),
        round(growth, 6),
        n,
        (round(first_half, 6), round(second_half, 6)),
        min_growth,
        (first_z, second_z),
    )


def series_values(sample: Mapping[str, Any]) -> dict[str, float | None]:
    """The six trend series of one artifact sample (None = not observed)."""
    process = sample["process"]
    classes = process["fd_classes_total"]
    gpu = sample["gpu"]
    return {
        "rss_kib": process["rss_kib_total"],
        "fd_count": process["fd_count_total"],
        "eventfd_fds": classes["eventfd"],
        "shared_memory_fds": classes["shared_memory"],
        "gpu_memory_mib": gpu["used_memory_mib_total"] if gpu.get("source") is not None else None,
        "process_count": process["process_count"],
    }


@dataclass(frozen=True)
class TrendWindows:
    """Warm-up and minimum window of one judgement, and where they came from."""

    warmup_s: float
    min_window_s: float
    rule: Literal["scaled", "flags"]
    """``scaled``: from ``planned_length_s`` (``scaled_windows``); ``flags``: as given."""
    planned_length_s: float | None
    """The soak's planned training length the scaled windows derive from (None: flags)."""
    anchor: Literal["training_progress", "progress_bytes"] | None
    """What the warm-up counts from: the first ``training/`` progress line, else the first
    run-dir bytes; None when neither was seen."""
    anchor_s: float | None
    end: Literal["last_training_progress", "last_sample"]
    """Where the window ends: at the last sample that showed a new ``training/`` progress
    line (training-anchored), else at the last sample."""
    end_s: float | None


def scaled_windows(planned_length_s: float) -> tuple[float, float]:
    """``(warmup_s, min_window_s)`` for a soak that trains ``planned_length_s`` seconds.

    Both are fractions of the planned length, floored and capped (WARMUP_*, MIN_WINDOW_*):
    a 30-minute soak keeps 300 s / 600 s; a 10-minute one judges 480 s after a 120 s
    warm-up; anything training 180 s or more leaves a window of at least the minimum.
    """
    length = max(0.0, planned_length_s)
    warmup = min(WARMUP_CAP_S, max(WARMUP_FLOOR_S, WARMUP_FRACTION * length))
    window = min(MIN_WINDOW_CAP_S, max(MIN_WINDOW_FLOOR_S, MIN_WINDOW_FRACTION * length))
    return round(warmup, 3), round(window, 3)


def _is_training_line(sample: Mapping[str, Any]) -> bool:
    last = sample["progress"].get("last")
    return isinstance(last, Mapping) and PhaseGroup.TRAINING.holds(last.get("phase"))


def trend_anchor(
    samples: Sequence[Mapping[str, Any]],
) -> tuple[Literal["training_progress", "progress_bytes"] | None, float | None]:
    """Where the warm-up starts: the first sample showing a ``training/`` progress line,
    else (a trainer without progress.jsonl) the first sample with run-dir bytes."""
    for sample in samples:
        if _is_training_line(sample):
            return "training_progress", float(sample["elapsed_s"])
    for sample in samples:
        if sample["progress"]["bytes_total"] > 0:
            return "progress_bytes", float(sample["elapsed_s"])
    return None, None


def training_end(samples: Sequence[Mapping[str, Any]]) -> float | None:
    """Elapsed seconds of the last sample that showed a new ``training/`` progress line
    (None when none did). What follows is the trainer's finalize and exit: its memory is
    flat or being released, and judging it would hide a leak that grew all through training."""
    end: float | None = None
    previous: Any = None
    for sample in samples:
        last = sample["progress"].get("last")
        if _is_training_line(sample) and last != previous:
            end = float(sample["elapsed_s"])
        previous = last
    return end


def resolve_windows(
    samples: Sequence[Mapping[str, Any]],
    *,
    planned_length_s: float | None,
    warmup_s: float | None,
    min_window_s: float | None,
) -> TrendWindows:
    """The judgement's windows: explicit flags win; otherwise scaled from the planned
    length, or from the observed length (anchor to the window's end) when none was planned.
    A training-anchored window ends at :func:`training_end`, any other at the last sample.
    """
    anchor, anchor_s = trend_anchor(samples)
    last_s = float(samples[-1]["elapsed_s"]) if samples else None
    if anchor == "training_progress":
        end, end_s = "last_training_progress", training_end(samples)
    else:
        end, end_s = "last_sample", last_s
    if warmup_s is not None and min_window_s is not None:
        return TrendWindows(warmup_s, min_window_s, "flags", None, anchor, anchor_s, end, end_s)
    length = planned_length_s
    if length is None:
        length = max(0.0, end_s - anchor_s) if anchor_s is not None and end_s is not None else 0.0
    scaled_warmup, scaled_window = scaled_windows(length)
    return TrendWindows(
        scaled_warmup if warmup_s is None else warmup_s,
        scaled_window if min_window_s is None else min_window_s,
        "scaled",
        round(length, 3),
        anchor,
        anchor_s,
        end,
        end_s,
    )


@dataclass(frozen=True)
class TrendReport:
    mode: str
    windows: TrendWindows
    window_start_s: float | None
    window_end_s: float | None
    window_sample_count: int
    thresholds: dict[str, Threshold]
    series: dict[str, SeriesTrend]
    verdict: Verdict

    @property
    def warmup_s(self) -> float:
        return self.windows.warmup_s

    @property
    def min_window_s(self) -> float:
        return self.windows.min_window_s

    def growing_reasons(self) -> list[str]:
        out = []
        for name in SERIES:
            trend = self.series[name]
            if trend.verdict == "growing":
                out.append(
                    f"{name} {_fmt(trend.slope_lower_bound_per_hour)}/h > "
                    f"{_fmt(self.thresholds[name].max_slope_per_hour)}/h"
                )
        return out

    def to_json(self) -> dict[str, Any]:
        w = self.windows
        return {
            "mode": self.mode,
            "warmup_s": w.warmup_s,
            "window": {
                "start_elapsed_s": self.window_start_s,
                "end_elapsed_s": self.window_end_s,
                "sample_count": self.window_sample_count,
            },
            "thresholds": {k: v.to_json() for k, v in self.thresholds.items()},
            "series": {k: v.to_json() for k, v in self.series.items()},
            "verdict": self.verdict,
            "min_window_s": w.min_window_s,
            "window_rule": w.rule,
            "planned_length_s": w.planned_length_s,
            "anchor": w.anchor,
            "anchor_elapsed_s": w.anchor_s,
            "window_end": w.end,
            "reference_window_s": REFERENCE_WINDOW_S,
            "method": "theil_sen_lower_confidence_bound_whole_and_halves",
            "confidence_z": CONFIDENCE_Z,
            "half_confidence_z": HALF_CONFIDENCE_Z,
            "half_false_leak_z": HALF_FALSE_LEAK_Z,
        }


def _fmt(value: float | None) -> str:
    if value is None:
        return "null"
    return f"{value:.1f}" if not float(value).is_integer() else str(int(value))


TREND_CHECK = "trends"
TREND_CLASSIFICATION = Classification.RESOURCE_LEAK
TREND_REASON_PREFIX = "sustained resource growth: "


def trend_failure(report: TrendReport) -> str | None:
    """The soak's failure reason for ``report`` (growing, enforced), else None."""
    if report.verdict == "growing" and report.mode == "enforce":
        return TREND_REASON_PREFIX + ", ".join(report.growing_reasons())
    return None


def planned_length(plan: Any) -> float | None:
    """The planned training length of a soak plan (its time budget), if it has one."""
    return None if plan is None else plan.duration_s


def analyse_trends(
    samples: Sequence[Mapping[str, Any]],
    *,
    thresholds: Mapping[str, Threshold],
    mode: str,
    warmup_s: float | None = None,
    min_window_s: float | None = None,
    planned_length_s: float | None = None,
) -> TrendReport:
    """Judge every series over the window that starts ``warmup_s`` after the anchor.

    ``warmup_s`` / ``min_window_s`` left None are scaled (``resolve_windows``) from
    ``planned_length_s`` (the soak's training budget), else from the observed length.
    """
    windows = resolve_windows(
        samples, planned_length_s=planned_length_s, warmup_s=warmup_s, min_window_s=min_window_s
    )
    window: list[Mapping[str, Any]] = []
    if windows.anchor_s is not None:
        start, stop = windows.anchor_s + windows.warmup_s, windows.end_s
        window = [
            s
            for s in samples
            if float(s["elapsed_s"]) >= start and (stop is None or float(s["elapsed_s"]) <= stop)
        ]
    per_series: dict[str, SeriesTrend] = {}
    for name in SERIES:
        t_s: list[float] = []
        ys: list[float] = []
        for sample in window:
            value = series_values(sample)[name]
            if value is not None:
                t_s.append(float(sample["elapsed_s"]))
                ys.append(float(value))
        if not any(series_values(s)[name] is not None for s in samples):
            per_series[name] = SeriesTrend("unavailable", None, None, None, None, None, 0)
        elif not ys:
            per_series[name] = SeriesTrend("insufficient_data", None, None, None, None, None, 0)
        else:
            per_series[name] = judge_series(
                t_s,
                ys,
                thresholds[name],
                min_window_s=windows.min_window_s,
                count=name in COUNT_SERIES,
            )
    verdicts = [t.verdict for t in per_series.values()]
    overall: Verdict
    if "growing" in verdicts:
        overall = "growing"
    elif "insufficient_data" in verdicts or "bounded" not in verdicts:
        # Nothing observed at all (a trainer that never started) is no evidence of bounds.
        overall = "insufficient_data"
    else:
        overall = "bounded"
    return TrendReport(
        mode=mode,
        windows=windows,
        window_start_s=float(window[0]["elapsed_s"]) if window else None,
        window_end_s=float(window[-1]["elapsed_s"]) if window else None,
        window_sample_count=len(window),
        thresholds=dict(thresholds),
        series=per_series,
        verdict=overall,
    )
