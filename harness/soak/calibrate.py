"""Trend calibration on synthetic traces: ``python -m harness.soak.calibrate``.

Builds the canonical 30-minute soak at a 5 s interval (warm-up 300 s, so the trend window
is 25 minutes = 301 samples) for RSS traces with Gaussian noise, and counts how often
:func:`harness.soak.trend.judge_series` calls each one ``growing`` with the default
``rss_kib`` threshold. A one-time step (allocate once, then flat) at any position and a
warm-up ramp must never be ``growing``; a 120 MiB/h leak must be. The table it prints is
the evidence recorded in docs/soak.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from harness.soak.trend import DEFAULT_THRESHOLDS, judge_series

KIB_PER_MIB = 1024
BASE_KIB = 2 * 1024 * KIB_PER_MIB
WARMUP_S = 300.0
SOAK_S = 1800.0
INTERVAL_S = 5.0


def window_times() -> np.ndarray:
    return np.arange(WARMUP_S, SOAK_S + 1e-9, INTERVAL_S)


def leak(mib_per_hour: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda t: BASE_KIB + mib_per_hour * KIB_PER_MIB * (t - t[0]) / 3600.0


def step(fraction: float, mib: float = 200.0) -> Callable[[np.ndarray], np.ndarray]:
    def trace(t: np.ndarray) -> np.ndarray:
        at = t[0] + fraction * (t[-1] - t[0])
        return BASE_KIB + np.where(t >= at, mib * KIB_PER_MIB, 0.0)

    return trace


def ramp_then_flat(minutes: float = 10.0, mib: float = 200.0) -> Callable[[np.ndarray], np.ndarray]:
    return lambda t: (
        BASE_KIB + np.minimum(t - t[0], minutes * 60.0) / (minutes * 60.0) * mib * KIB_PER_MIB
    )


CASES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "leak 120 MiB/h": leak(120.0),
    "leak 90 MiB/h": leak(90.0),
    "leak 64 MiB/h (= limit)": leak(64.0),
    "flat": leak(0.0),
    **{f"step +200 MiB at {int(f * 100)}%": step(f) for f in (0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9)},
    "step +1 GiB at 50%": step(0.5, 1024.0),
    "ramp +200 MiB over 10 min, then flat": ramp_then_flat(),
}


def growing_count(trace: Callable[[np.ndarray], np.ndarray], sigma_mib: float, trials: int) -> int:
    t = window_times()
    threshold = DEFAULT_THRESHOLDS["rss_kib"]
    hits = 0
    for seed in range(trials):
        noise = np.random.default_rng(seed).normal(0.0, sigma_mib * KIB_PER_MIB, t.size)
        result = judge_series(list(t), list(trace(t) + noise), threshold, min_window_s=600.0)
        hits += result.verdict == "growing"
    return hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--sigma-mib", type=float, nargs="+", default=[1.0, 4.0, 16.0])
    args = parser.parse_args()
    header = ["trace"] + [f"sigma {s:g} MiB" for s in args.sigma_mib]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, trace in CASES.items():
        cells = [f"{growing_count(trace, s, args.trials)}/{args.trials}" for s in args.sigma_mib]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
