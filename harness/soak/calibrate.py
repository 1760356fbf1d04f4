"""Trend calibration on synthetic traces: ``python -m harness.soak.calibrate``.

For a soak that trains ``--soak-seconds`` at a ``--interval-seconds`` sample interval, the
trend window is the scaled one (``trend.scaled_windows``: the canonical 30-minute soak keeps
its 300 s warm-up, so its window is 25 minutes = 301 samples at 5 s; a 10-minute soak judges
480 s after a 120 s warm-up). For each trace it counts how often
:func:`harness.soak.trend.judge_series` calls it ``growing`` with the default thresholds:
RSS traces (base 2 GiB plus Gaussian noise of σ) and FD-count traces (integer, no noise).
A one-time step (allocate once, then flat) at any position and a warm-up ramp must never be
``growing``; a 120 MiB/h leak and one new FD per minute must be. The tables it prints are
the evidence recorded in docs/soak.md; ``python -m harness.soak.power`` measures the same
detector on recorded traces.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from harness.soak.trend import DEFAULT_THRESHOLDS, judge_series, scaled_windows

KIB_PER_MIB = 1024
BASE_KIB = 2 * 1024 * KIB_PER_MIB
SOAK_S = 1800.0
INTERVAL_S = 5.0
BASE_FDS = 40

Trace = Callable[[np.ndarray], np.ndarray]


def window_times(soak_s: float = SOAK_S, interval_s: float = INTERVAL_S) -> np.ndarray:
    """Sample times of the scaled trend window of a soak training ``soak_s`` seconds."""
    warmup, _ = scaled_windows(soak_s)
    return np.arange(warmup, soak_s + 1e-9, interval_s)


def leak(mib_per_hour: float) -> Trace:
    return lambda t: BASE_KIB + mib_per_hour * KIB_PER_MIB * (t - t[0]) / 3600.0


def step(fraction: float, mib: float = 200.0) -> Trace:
    def trace(t: np.ndarray) -> np.ndarray:
        at = t[0] + fraction * (t[-1] - t[0])
        return BASE_KIB + np.where(t >= at, mib * KIB_PER_MIB, 0.0)

    return trace


def ramp_then_flat(fraction: float = 0.4, mib: float = 200.0) -> Trace:
    """A ramp over the first ``fraction`` of the window, then flat (10 minutes of 25)."""

    def trace(t: np.ndarray) -> np.ndarray:
        length = fraction * (t[-1] - t[0])
        return BASE_KIB + np.minimum(t - t[0], length) / length * mib * KIB_PER_MIB

    return trace


CASES: dict[str, Trace] = {
    "leak 120 MiB/h": leak(120.0),
    "leak 90 MiB/h": leak(90.0),
    "leak 64 MiB/h (= limit)": leak(64.0),
    "flat": leak(0.0),
    **{f"step +200 MiB at {int(f * 100)}%": step(f) for f in (0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9)},
    "step +1 GiB at 50%": step(0.5, 1024.0),
    "ramp +200 MiB over 40% of the window, then flat": ramp_then_flat(),
}
"""RSS traces; noise of σ is added per seed."""


def fd_staircase(per_hour: float, offset_s: float = 0.0) -> Trace:
    return lambda t: BASE_FDS + np.floor((t - t[0] + offset_s) * per_hour / 3600.0)


def fd_steps(*fractions: float) -> Trace:
    return lambda t: (
        BASE_FDS + sum((t >= t[0] + f * (t[-1] - t[0])).astype(float) for f in fractions)
    )


FD_CASES: dict[str, Callable[[float], Trace]] = {
    "one FD per minute": lambda offset: fd_staircase(60.0, offset * 60.0),
    "one FD per 3 minutes": lambda offset: fd_staircase(20.0, offset * 180.0),
    "one FD step at a random position": lambda offset: fd_steps(0.05 + 0.9 * offset),
    "two FD steps 5% apart": lambda offset: fd_steps(0.05 + 0.85 * offset, 0.1 + 0.85 * offset),
}
"""FD-count traces, parameterised by a per-seed offset in [0, 1)."""


def _count_growing(
    series: Callable[[int, np.ndarray], np.ndarray],
    name: str,
    trials: int,
    soak_s: float,
    interval_s: float,
) -> int:
    """How many of ``trials`` seeded series ``series(seed, t)`` the ``name`` detector calls growing."""
    t = window_times(soak_s, interval_s)
    _, min_window = scaled_windows(soak_s)
    threshold = DEFAULT_THRESHOLDS[name]
    count = name != "rss_kib"
    hits = 0
    for seed in range(trials):
        y = series(seed, t)
        result = judge_series(list(t), list(y), threshold, min_window_s=min_window, count=count)
        hits += result.verdict == "growing"
    return hits


def growing_count(
    trace: Trace,
    sigma_mib: float,
    trials: int,
    *,
    soak_s: float = SOAK_S,
    interval_s: float = INTERVAL_S,
) -> int:
    """How many of ``trials`` noisy copies of an RSS ``trace`` are judged ``growing``."""

    def noisy(seed: int, t: np.ndarray) -> np.ndarray:
        noise = np.random.default_rng(seed).normal(0.0, sigma_mib * KIB_PER_MIB, t.size)
        return trace(t) + noise

    return _count_growing(noisy, "rss_kib", trials, soak_s, interval_s)


def fd_growing_count(
    case: Callable[[float], Trace],
    trials: int,
    *,
    soak_s: float = SOAK_S,
    interval_s: float = INTERVAL_S,
) -> int:
    """How many of ``trials`` FD traces (random phase per seed) are judged ``growing``."""

    def shifted(seed: int, t: np.ndarray) -> np.ndarray:
        return case(float(np.random.default_rng(seed).uniform()))(t)

    return _count_growing(shifted, "fd_count", trials, soak_s, interval_s)


def _table(soak_s: float, interval_s: float, sigmas: list[float], trials: int) -> list[str]:
    warmup, min_window = scaled_windows(soak_s)
    t = window_times(soak_s, interval_s)
    lines = [
        (
            f"soak {soak_s:g} s at {interval_s:g} s: warm-up {warmup:g} s, window "
            f"{t[-1] - t[0]:g} s ({t.size} samples), minimum window {min_window:g} s"
        ),
        "",
        "| trace | " + " | ".join(f"σ {s:g} MiB" for s in sigmas) + " |",
        "|---|" + "---|" * len(sigmas),
    ]
    for name, trace in CASES.items():
        cells = [
            f"{growing_count(trace, s, trials, soak_s=soak_s, interval_s=interval_s)}/{trials}"
            for s in sigmas
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for name, case in FD_CASES.items():
        hits = fd_growing_count(case, trials, soak_s=soak_s, interval_s=interval_s)
        lines.append(f"| {name} | {hits}/{trials} (integer, no noise) |" + " |" * (len(sigmas) - 1))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--sigma-mib", type=float, nargs="+", default=[1.0, 4.0, 16.0, 40.0])
    parser.add_argument("--soak-seconds", type=float, nargs="+", default=[SOAK_S, 600.0])
    parser.add_argument("--interval-seconds", type=float, default=INTERVAL_S)
    args = parser.parse_args()
    for soak_s in args.soak_seconds:
        print("\n".join(_table(soak_s, args.interval_seconds, args.sigma_mib, args.trials)))
        print()


if __name__ == "__main__":
    main()
