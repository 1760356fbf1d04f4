"""Detector power on recorded traces: ``python -m harness.soak.power [TRACE ...]``.

TRACE is a soak artifact (its ``samples[]``) or a recorded-trace fixture (``{columns,
rows}``); the default is the recorded real CPU trainer,
tests/harness/soak/data/recorded_cpu_soak.json. Its training plateau (the samples after the
scaled warm-up and before the process count drops at shutdown) supplies each series' real
noise: the residuals around the plateau's median, resampled in blocks (a moving-block
bootstrap keeps their short-range correlation) to fill a trend window of any length at any
multiple of the trace's own sample interval. For each planned soak length and interval it
adds leaks from a grid to 100 such replicates and reports the smallest slope that
:func:`harness.soak.trend.judge_series` calls ``growing`` in at least 95 of them, plus how
many replicates of the plateau alone, and with a one-time +200 MiB step at 10-90 % of the
window, were called ``growing`` (false leaks). Count series (FDs) are plateaus without
noise in these traces, so their power is that of a staircase on the same windows.
docs/soak.md records the tables.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from contracts.jsonio import load_strict
from harness.soak.trend import (
    DEFAULT_THRESHOLDS,
    judge_series,
    scaled_windows,
    series_values,
    trend_anchor,
)

DEFAULT_TRACE = (
    Path(__file__).resolve().parents[2]
    / "tests"
    / "harness"
    / "soak"
    / "data"
    / "recorded_cpu_soak.json"
)
KIB_PER_MIB = 1024
BLOCK = 10
"""Samples per bootstrap block (10 s at the fixture's 1 s interval)."""
DETECTED = 0.95
RSS_GRID_MIB_H = (16, 32, 48, 64, 80, 96, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560,
                  3840, 5120, 7680, 10240, 15360, 20480)  # fmt: skip
FD_GRID_H = (3, 6, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240)
STEP_FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.9)


@dataclass(frozen=True)
class Plateau:
    """One series' recorded plateau: values at a fixed interval."""

    series: str
    interval_s: float
    values: np.ndarray

    @property
    def residuals(self) -> np.ndarray:
        return self.values - np.median(self.values)

    @property
    def robust_sigma(self) -> float:
        """1.4826 x the median absolute deviation (σ for Gaussian noise)."""
        return float(1.4826 * np.median(np.abs(self.residuals)))


def load_samples(path: Path) -> list[dict[str, Any]]:
    """Artifact samples, or fixture rows turned into artifact-shaped samples."""
    doc = load_strict(path)
    if isinstance(doc, dict) and isinstance(doc.get("samples"), list):
        return list(doc["samples"])
    if not (isinstance(doc, dict) and "columns" in doc and "rows" in doc):
        raise ValueError(
            f"{path}: neither a soak artifact (samples[]) nor a {{columns, rows}} trace"
        )
    columns = list(doc["columns"])
    out = []
    for row in doc["rows"]:
        values = dict(zip(columns, row, strict=True))
        classes = dict.fromkeys(("pipe", "socket", "memfd", "eventfd", "eventpoll", "nvidia",
                                 "shared_memory", "other"), 0)  # fmt: skip
        classes.update(eventfd=values["eventfd_fds"], shared_memory=values["shared_memory_fds"])
        out.append({
            "elapsed_s": values["elapsed_s"],
            "process": {"process_count": values["process_count"],
                        "rss_kib_total": values["rss_kib"],
                        "fd_count_total": values["fd_count"], "fd_classes_total": classes},
            "gpu": {"source": None, "used_memory_mib_total": 0},
            "progress": {"bytes_total": values["bytes_total"]},
        })  # fmt: skip
    return out


def plateaus(samples: Sequence[Mapping[str, Any]]) -> list[Plateau]:
    """The observed series over the training plateau of ``samples``."""
    _, anchor_s = trend_anchor(samples)
    if anchor_s is None or len(samples) < 3:
        raise ValueError("the trace has no progress: no plateau to measure")
    end_s = float(samples[-1]["elapsed_s"])
    warmup, _ = scaled_windows(end_s - anchor_s)
    window = [s for s in samples if float(s["elapsed_s"]) >= anchor_s + warmup]
    procs = [s["process"]["process_count"] for s in window]
    peak = max(procs)
    last = max(i for i, p in enumerate(procs) if p == peak)  # the collector exits after this
    window = window[: last + 1]
    times = np.array([float(s["elapsed_s"]) for s in window])
    interval = round(float(np.median(np.diff(times))), 2)
    out = []
    for name in ("rss_kib", "gpu_memory_mib"):
        values = [series_values(s)[name] for s in window]
        if all(v is not None for v in values):
            out.append(Plateau(name, interval, np.asarray(values, dtype=np.float64)))
    return out


def replicate(plateau: Plateau, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` noise values at the plateau's interval (moving-block bootstrap)."""
    res = plateau.residuals
    block = min(BLOCK, res.size)
    starts = rng.integers(0, res.size - block + 1, size=math.ceil(count / block))
    return np.concatenate([res[s : s + block] for s in starts])[:count]


@dataclass(frozen=True)
class Cell:
    soak_s: float
    interval_s: float
    window_s: float
    samples: int
    min_detectable_per_hour: float | None
    false_leaks_flat: int
    false_leaks_step: int
    trials: int


def _times(soak_s: float, interval_s: float) -> tuple[np.ndarray, float]:
    warmup, min_window = scaled_windows(soak_s)
    return np.arange(warmup, soak_s + 1e-9, interval_s), min_window


def _rate(
    plateau: Plateau, soak_s: float, stride: int, extra: Any, trials: int, seed: int = 0
) -> int:
    t, min_window = _times(soak_s, plateau.interval_s * stride)
    threshold = DEFAULT_THRESHOLDS[plateau.series]
    hits = 0
    for k in range(trials):
        rng = np.random.default_rng(seed + k)
        noise = replicate(plateau, t.size * stride, rng)[::stride]
        y = float(np.median(plateau.values)) + noise + extra(t, k)
        hits += (
            judge_series(list(t), list(y), threshold, min_window_s=min_window).verdict == "growing"
        )
    return hits


def _smallest(grid: Sequence[float], detected: Any) -> float | None:
    """The smallest grid value ``detected`` holds for (binary search; monotone in slope)."""
    lo, hi = 0, len(grid) - 1
    if not detected(grid[hi]):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if detected(grid[mid]):
            hi = mid
        else:
            lo = mid + 1
    return float(grid[lo])


def measure(plateau: Plateau, soak_s: float, stride: int, trials: int) -> Cell:
    """Power and false leaks of the ``plateau`` series for one soak length and interval."""
    unit = KIB_PER_MIB if plateau.series == "rss_kib" else 1.0
    need = math.ceil(DETECTED * trials)

    def detected(mib_per_hour: float) -> bool:
        slope = mib_per_hour * unit / 3600.0
        return _rate(plateau, soak_s, stride, lambda t, k: slope * (t - t[0]), trials) >= need

    def stepped(t: np.ndarray, k: int) -> np.ndarray:
        f = STEP_FRACTIONS[k % len(STEP_FRACTIONS)]
        return np.where(t >= t[0] + f * (t[-1] - t[0]), 200.0 * unit, 0.0)

    t, _ = _times(soak_s, plateau.interval_s * stride)
    return Cell(
        soak_s=soak_s,
        interval_s=plateau.interval_s * stride,
        window_s=float(t[-1] - t[0]),
        samples=int(t.size),
        min_detectable_per_hour=_smallest(RSS_GRID_MIB_H, detected),
        false_leaks_flat=_rate(plateau, soak_s, stride, lambda t, k: 0.0 * t, trials),
        false_leaks_step=_rate(plateau, soak_s, stride, stepped, trials),
        trials=trials,
    )


def fd_power(soak_s: float, interval_s: float, trials: int) -> float | None:
    """Smallest FD staircase (new FDs per hour) judged growing in >= 95 % of random phases."""
    t, min_window = _times(soak_s, interval_s)
    need = math.ceil(DETECTED * trials)

    def detected(per_hour: float) -> bool:
        hits = 0
        for k in range(trials):
            offset = np.random.default_rng(k).uniform(0, 3600.0 / per_hour)
            y = 40 + np.floor((t - t[0] + offset) * per_hour / 3600.0)
            verdict = judge_series(
                list(t), list(y), DEFAULT_THRESHOLDS["fd_count"], min_window_s=min_window,
                count=True,
            ).verdict  # fmt: skip
            hits += verdict == "growing"
        return hits >= need

    return _smallest(FD_GRID_H, detected)


def _fmt(value: float | None) -> str:
    return "not within the grid" if value is None else f"{value:g}"


def report(path: Path, soaks: Sequence[float], strides: Sequence[int], trials: int) -> list[str]:
    samples = load_samples(path)
    lines = [f"trace: {path} ({len(samples)} samples)", ""]
    for plateau in plateaus(samples):
        unit = "MiB" if plateau.series == "rss_kib" else "MiB (GPU)"
        sigma = plateau.robust_sigma / (KIB_PER_MIB if plateau.series == "rss_kib" else 1.0)
        lines += [
            (
                f"{plateau.series}: plateau of {plateau.values.size} samples at "
                f"{plateau.interval_s:g} s, robust σ {sigma:.1f} {unit}"
            ),
            "",
            (
                "| soak | interval | window | samples | smallest slope caught (95 %) | false leaks: "
                "plateau / +200 MiB step |"
            ),
            "|---|---|---|---|---|---|",
        ]
        for soak_s in soaks:
            for stride in strides:
                cell = measure(plateau, soak_s, stride, trials)
                lines.append(
                    f"| {soak_s / 60:g} min | {cell.interval_s:g} s | {cell.window_s:g} s | "
                    f"{cell.samples} | {_fmt(cell.min_detectable_per_hour)} {unit}/h | "
                    f"{cell.false_leaks_flat}/{trials} / {cell.false_leaks_step}/{trials} |"
                )
        lines.append("")
    interval = plateaus(samples)[0].interval_s
    lines += ["fd_count (a staircase on a noiseless plateau):", "",
              "| soak | interval | smallest FD leak caught (95 %) |", "|---|---|---|"]  # fmt: skip
    for soak_s in soaks:
        for stride in strides:
            per_hour = fd_power(soak_s, interval * stride, trials)
            lines.append(
                f"| {soak_s / 60:g} min | {interval * stride:g} s | {_fmt(per_hour)} FDs/h |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path, default=[DEFAULT_TRACE])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument(
        "--soak-seconds", type=float, nargs="+", default=[480.0, 600.0, 1200.0, 1800.0, 3600.0]
    )
    parser.add_argument(
        "--strides", type=int, nargs="+", default=[1, 5],
        help="sample intervals as multiples of the trace's own",
    )  # fmt: skip
    args = parser.parse_args()
    for path in args.traces:
        print("\n".join(report(path, args.soak_seconds, args.strides, args.trials)))


if __name__ == "__main__":
    main()
