"""Resource trends over the post-startup window (CONTRACTS §7.3, an improvement).

Peaks alone are normal; sustained growth is the leak signal. For each series we take
the samples with ``elapsed_s >= t_first_progress + warmup_s``, pick at most 512 evenly
spaced ones and estimate the Theil-Sen slope (median of pairwise slopes), per hour,
with Sen's distribution-free confidence interval. The verdict compares the interval's
**lower bound** to ``max_slope_per_hour``: a one-time step (allocate once, then flat)
yields about half zero slopes, so its lower bound sits at zero even when the point
estimate is pushed up by the step, while a steady leak moves every pairwise slope and
its lower bound stays near the true rate. ``growth`` (median of the last quarter minus
the median of the first) must also reach ``min_growth``, so a tiny drift never fails.
Calibration evidence: docs/soak.md.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

SERIES: tuple[str, ...] = (
    "rss_kib",
    "fd_count",
    "eventfd_fds",
    "shared_memory_fds",
    "gpu_memory_mib",
    "process_count",
)
MAX_TREND_SAMPLES = 512
MIN_TREND_SAMPLES = 12
# Two-sided 95 % normal quantile for Sen's interval: a one-sided 97.5 % lower bound.
CONFIDENCE_Z = 1.96
# The halves only check that growth is sustained; the whole window supplies confidence.
# 1.0 (a one-sided ~84 % bound) catches a 120 MiB/h leak under 16 MiB noise far more often
# than 1.96 while every one-time step stays bounded (docs/soak.md, calibration).
HALF_CONFIDENCE_Z = 1.0

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


def theil_sen(t: Sequence[float], y: Sequence[float], *, z: float = CONFIDENCE_Z) -> SlopeEstimate:
    """Theil-Sen slope of ``y`` over ``t`` with Sen's rank-based confidence interval.

    Pairs with equal ``t`` are skipped. Requires at least two distinct times.
    """
    import numpy as np  # lazily: keeps the CLI's start fast

    tt = np.asarray(t, dtype=np.float64)
    yy = np.asarray(y, dtype=np.float64)
    i, j = np.triu_indices(tt.size, k=1)
    dt = tt[j] - tt[i]
    keep = dt > 0
    slopes = np.sort((yy[j] - yy[i])[keep] / dt[keep])
    n_slopes = slopes.size
    if n_slopes == 0:
        raise ValueError("theil_sen needs at least two distinct times")
    median = float(np.median(slopes))
    n = tt.size
    # Var(S) of Kendall's S without tie correction (larger, so the bound is conservative).
    var_s = n * (n - 1) * (2 * n + 5) / 18.0
    c = z * math.sqrt(var_s)
    lo_rank = math.floor((n_slopes - c) / 2.0)
    hi_rank = math.ceil((n_slopes + c) / 2.0)
    lower = float(slopes[max(0, min(n_slopes - 1, lo_rank))])
    upper = float(slopes[max(0, min(n_slopes - 1, hi_rank))])
    return SlopeEstimate(median, lower, upper)


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

    def to_json(self) -> dict[str, Any]:
        halves = self.half_slope_lower_bounds_per_hour
        return {
            "verdict": self.verdict,
            "slope_per_hour": self.slope_per_hour,
            "first_quarter_median": self.first_quarter_median,
            "last_quarter_median": self.last_quarter_median,
            "growth": self.growth,
            "samples": self.samples,
            "slope_lower_bound_per_hour": self.slope_lower_bound_per_hour,
            "half_slope_lower_bounds_per_hour": None if halves is None else list(halves),
        }


def judge_series(
    t_s: Sequence[float], values: Sequence[float], threshold: Threshold, *, min_window_s: float
) -> SeriesTrend:
    """Verdict for one series whose points are all inside the trend window.

    ``growing`` needs all of: the whole window's slope lower bound above the limit, the
    same in **each half** of the window (a leak grows all the time; a one-time step sits
    in at most one half, the other half is flat), and ``growth >= min_growth``.
    """
    n = len(values)
    if n == 0:
        return SeriesTrend("unavailable", None, None, None, None, None, 0)
    if n < MIN_TREND_SAMPLES or (t_s[-1] - t_s[0]) < min_window_s:
        return SeriesTrend("insufficient_data", None, None, None, None, None, n)
    idx = _even_indices(n, MAX_TREND_SAMPLES)
    t_h = [t_s[k] / 3600.0 for k in idx]
    y = [float(values[k]) for k in idx]
    est = theil_sen(t_h, y)
    mid = len(y) // 2
    first_half = theil_sen(t_h[: mid + 1], y[: mid + 1], z=HALF_CONFIDENCE_Z).lower
    second_half = theil_sen(t_h[mid:], y[mid:], z=HALF_CONFIDENCE_Z).lower
    quarter = max(1, len(y) // 4)
    first = float(statistics.median(y[:quarter]))
    last = float(statistics.median(y[-quarter:]))
    growth = last - first
    limit = threshold.max_slope_per_hour
    growing = min(est.lower, first_half, second_half) > limit and growth >= threshold.min_growth
    return SeriesTrend(
        "growing" if growing else "bounded",
        round(est.slope, 6),
        round(est.lower, 6),
        round(first, 6),
        round(last, 6),
        round(growth, 6),
        n,
        (round(first_half, 6), round(second_half, 6)),
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
class TrendReport:
    mode: str
    warmup_s: float
    min_window_s: float
    window_start_s: float | None
    window_end_s: float | None
    window_sample_count: int
    thresholds: dict[str, Threshold]
    series: dict[str, SeriesTrend]
    verdict: Verdict

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
        return {
            "mode": self.mode,
            "warmup_s": self.warmup_s,
            "window": {
                "start_elapsed_s": self.window_start_s,
                "end_elapsed_s": self.window_end_s,
                "sample_count": self.window_sample_count,
            },
            "thresholds": {k: v.to_json() for k, v in self.thresholds.items()},
            "series": {k: v.to_json() for k, v in self.series.items()},
            "verdict": self.verdict,
            "min_window_s": self.min_window_s,
            "method": "theil_sen_lower_confidence_bound_whole_and_halves",
            "confidence_z": CONFIDENCE_Z,
            "half_confidence_z": HALF_CONFIDENCE_Z,
        }


def _fmt(value: float | None) -> str:
    if value is None:
        return "null"
    return f"{value:.1f}" if not float(value).is_integer() else str(int(value))


def analyse_trends(
    samples: Sequence[Mapping[str, Any]],
    *,
    thresholds: Mapping[str, Threshold],
    mode: str,
    warmup_s: float,
    min_window_s: float,
) -> TrendReport:
    """Judge every series over the window that starts ``warmup_s`` after first progress."""
    first_progress = next(
        (float(s["elapsed_s"]) for s in samples if s["progress"]["bytes_total"] > 0), None
    )
    window: list[Mapping[str, Any]] = []
    if first_progress is not None:
        start = first_progress + warmup_s
        window = [s for s in samples if float(s["elapsed_s"]) >= start]
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
            per_series[name] = judge_series(t_s, ys, thresholds[name], min_window_s=min_window_s)
    verdicts = [t.verdict for t in per_series.values()]
    overall: Verdict
    if "growing" in verdicts:
        overall = "growing"
    elif "insufficient_data" in verdicts:
        overall = "insufficient_data"
    else:
        overall = "bounded"
    return TrendReport(
        mode=mode,
        warmup_s=warmup_s,
        min_window_s=min_window_s,
        window_start_s=float(window[0]["elapsed_s"]) if window else None,
        window_end_s=float(window[-1]["elapsed_s"]) if window else None,
        window_sample_count=len(window),
        thresholds=dict(thresholds),
        series=per_series,
        verdict=overall,
    )
