"""Resource-trend verdicts and their calibration (docs/contracts.md §resource-trends)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from contracts.jsonio import load_strict
from harness.soak import power
from harness.soak.calibrate import (
    CASES,
    FD_CASES,
    fd_growing_count,
    growing_count,
    leak,
    step,
    window_times,
)
from harness.soak.trend import (
    DEFAULT_THRESHOLDS,
    HALF_CONFIDENCE_Z,
    Threshold,
    TrendThresholdError,
    analyse_trends,
    applied_min_growth,
    half_lower_bound,
    judge_series,
    parse_threshold_overrides,
    scaled_windows,
    theil_sen,
)

TRIALS = 10


def test_theil_sen_recovers_a_noisy_slope_inside_its_interval() -> None:
    t = np.arange(0.0, 100.0)
    y = 3.0 * t + np.random.default_rng(1).normal(0, 2.0, t.size)
    est = theil_sen(t, y)
    assert est.lower <= 3.0 <= est.upper
    assert est.lower < est.slope < est.upper
    assert abs(est.slope - 3.0) < 0.1


def test_theil_sen_ignores_one_outlier() -> None:
    t = np.arange(0.0, 50.0)
    y = np.zeros_like(t)
    y[25] = 1e9
    assert theil_sen(t, y).slope == 0.0


def test_a_120_mib_per_hour_leak_is_caught_within_a_30_minute_soak() -> None:
    # 5 s interval, 300 s warm-up: a 25-minute window of 301 samples (docs/soak.md).
    assert growing_count(leak(120.0), sigma_mib=4.0, trials=TRIALS) == TRIALS
    assert growing_count(leak(120.0), sigma_mib=1.0, trials=TRIALS) == TRIALS


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9])
def test_a_one_time_plateau_is_never_a_leak(fraction: float) -> None:
    for sigma in (1.0, 16.0):
        assert growing_count(step(fraction), sigma_mib=sigma, trials=TRIALS) == 0


def test_a_warmup_ramp_then_flat_is_bounded() -> None:
    assert (
        growing_count(
            CASES["ramp +200 MiB over 40% of the window, then flat"], sigma_mib=4.0, trials=TRIALS
        )
        == 0
    )


def test_a_leak_at_the_limit_is_bounded() -> None:
    assert growing_count(leak(64.0), sigma_mib=1.0, trials=TRIALS) == 0


def test_step_records_growth_but_bounded_halves() -> None:
    t = window_times()
    result = judge_series(
        list(t), list(step(0.5)(t)), DEFAULT_THRESHOLDS["rss_kib"], min_window_s=600
    )
    assert result.verdict == "bounded"
    assert result.growth == 200 * 1024
    assert result.half_slope_lower_bounds_per_hour == (0.0, 0.0)


def test_integer_fd_staircase_leak_is_growing_and_single_fd_step_is_not() -> None:
    t = list(np.arange(0.0, 1500.0, 5.0))
    staircase = [40 + int(x // 180) for x in t]  # one FD every 3 minutes
    single = [40 + (x >= 750) for x in t]
    limit = DEFAULT_THRESHOLDS["fd_count"]
    assert judge_series(t, staircase, limit, min_window_s=600).verdict == "growing"
    assert judge_series(t, single, limit, min_window_s=600).verdict == "bounded"


def test_short_or_sparse_windows_are_insufficient_data() -> None:
    limit = Threshold(0, 1)
    assert judge_series([0.0, 5.0], [1, 2], limit, min_window_s=0).verdict == "insufficient_data"
    t = [float(i) for i in range(20)]
    assert judge_series(t, list(range(20)), limit, min_window_s=600).verdict == "insufficient_data"
    assert judge_series(t, list(range(20)), limit, min_window_s=10).verdict == "growing"


def _sample(elapsed: float, *, bytes_total: int, fds: int = 3, gpu: int | None = None) -> dict:
    classes = dict.fromkeys(
        ("pipe", "socket", "memfd", "eventfd", "eventpoll", "nvidia", "shared_memory", "other"), 0
    )
    return {
        "elapsed_s": elapsed,
        "process": {
            "process_count": 1,
            "rss_kib_total": 1000,
            "fd_count_total": fds,
            "fd_classes_total": classes,
            "processes": [],
        },
        "gpu": {
            "process_count": 0,
            "used_memory_mib_total": gpu or 0,
            "processes": [],
            "source": None if gpu is None else "nvml",
            "errors": [],
        },
        "progress": {"file_count": 1, "bytes_total": bytes_total, "max_mtime": None},
    }


def test_window_starts_after_first_progress_plus_warmup_and_gpu_is_unavailable() -> None:
    samples = [
        _sample(float(i), bytes_total=0 if i < 10 else 100, fds=3 + max(0, i - 10))
        for i in range(60)
    ]
    report = analyse_trends(
        samples, thresholds=DEFAULT_THRESHOLDS, mode="enforce", warmup_s=5, min_window_s=10
    )
    assert report.window_start_s == 15.0
    assert report.window_sample_count == 45
    assert report.series["gpu_memory_mib"].verdict == "unavailable"
    assert report.series["fd_count"].verdict == "growing"
    assert report.verdict == "growing"
    assert report.growing_reasons() == [report.growing_reasons()[0]]
    assert report.growing_reasons()[0].startswith("fd_count ") and report.growing_reasons()[
        0
    ].endswith("> 0/h")
    doc = report.to_json()
    assert doc["thresholds"]["rss_kib"] == {"max_slope_per_hour": 65536, "min_growth": 32768}


def test_no_progress_means_insufficient_data_not_bounded() -> None:
    samples = [_sample(float(i), bytes_total=0) for i in range(30)]
    report = analyse_trends(
        samples, thresholds=DEFAULT_THRESHOLDS, mode="enforce", warmup_s=0, min_window_s=0
    )
    assert report.verdict == "insufficient_data"
    assert report.window_start_s is None


def test_threshold_overrides_parse_and_keep_defaults() -> None:
    parsed = parse_threshold_overrides(["rss_kib=1000", "fd_count=0.5:3"])
    assert parsed["rss_kib"] == Threshold(1000, 32768)
    assert parsed["fd_count"] == Threshold(0.5, 3)
    assert parsed["eventfd_fds"] == DEFAULT_THRESHOLDS["eventfd_fds"]


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("rss_kib", "SERIES=MAX_PER_HOUR"),
        ("vram=1", "unknown series 'vram'"),
        ("rss_kib=abc", "is not a number"),
        ("rss_kib=-1", ">= 0"),
        ("rss_kib=1:nan", ">= 0"),
    ],
)
def test_bad_threshold_specs_are_rejected(spec: str, fragment: str) -> None:
    with pytest.raises(TrendThresholdError, match=fragment.replace("(", r"\(")):
        parse_threshold_overrides([spec])


def _recorded_samples(extra_rss_kib_per_hour: float = 0.0) -> list[dict]:
    doc = load_strict(Path(__file__).parent / "data" / "recorded_cpu_soak.json")
    samples = []
    for elapsed, rss, fds, eventfd, shm, procs, progress in doc["rows"]:
        sample = _sample(elapsed, bytes_total=progress, fds=fds)
        sample["process"]["rss_kib_total"] = rss + int(extra_rss_kib_per_hour * elapsed / 3600.0)
        sample["process"]["process_count"] = procs
        sample["process"]["fd_classes_total"].update(eventfd=eventfd, shared_memory=shm)
        samples.append(sample)
    return samples


@pytest.mark.parametrize("warmup_s", [0, 30, 60])
def test_recorded_real_soak_with_startup_ramp_is_bounded(warmup_s: float) -> None:
    # A real CPU trainer: RSS ramps 0 -> 1.8 GiB in ~40 s, then plateaus (docs/soak.md).
    report = analyse_trends(
        _recorded_samples(),
        thresholds=DEFAULT_THRESHOLDS,
        mode="enforce",
        warmup_s=warmup_s,
        min_window_s=60,
    )
    assert report.verdict == "bounded"
    assert all(t.verdict in ("bounded", "unavailable") for t in report.series.values())
    # "bounded" overall is also what a trace with every series unavailable gets: the ramped
    # series itself must have been judged, over a real window.
    assert report.series["rss_kib"].verdict == "bounded"
    assert report.window_sample_count > 100


def test_a_leak_added_to_the_recorded_trace_is_caught() -> None:
    # 8 GiB/h: ~230 MiB over the 3-minute window. The trace's RSS jitters by ~40 MiB, so a
    # half-window this short is tested at z ~3.9 (HALF_FALSE_LEAK_Z); ~6 GiB/h is the
    # smallest slope caught here (docs/soak.md, power).
    leaky = _recorded_samples(extra_rss_kib_per_hour=8 * 1024 * 1024)
    report = analyse_trends(
        leaky, thresholds=DEFAULT_THRESHOLDS, mode="enforce", warmup_s=60, min_window_s=60
    )
    assert report.series["rss_kib"].verdict == "growing"


# -- windows scaled to the soak ----------------------------------------------


@pytest.mark.parametrize(
    ("planned_s", "expected"),
    [(1800, (300, 600)), (3600, (300, 600)), (600, (120, 300)), (480, (96, 240)), (100, (60, 120))],
)
def test_scaled_windows_keep_the_30_minute_calibration_and_shrink_with_the_soak(
    planned_s: float, expected: tuple[float, float]
) -> None:
    assert scaled_windows(planned_s) == expected


def _flat_soak(length_s: float, *, startup_s: float, interval_s: float = 5.0) -> list[dict]:
    """A healthy run: startup without training lines, then a flat plateau, 5 s samples."""
    samples = []
    for k in range(int((startup_s + length_s) / interval_s) + 1):
        elapsed = k * interval_s
        sample = _sample(elapsed, bytes_total=100 + k, fds=40)
        if elapsed >= startup_s:
            sample["progress"]["last"] = {"phase": "training/learner_update", "iteration": k}
        samples.append(sample)
    return samples


@pytest.mark.parametrize("soak_s", [480, 540, 600, 900, 1200, 1800, 3600])
@pytest.mark.parametrize("startup_s", [25, 165])  # warm and cold H200 startups
@pytest.mark.parametrize("planned", [True, False])
def test_every_soak_of_8_minutes_or_more_gets_a_real_verdict(
    soak_s: float, startup_s: float, planned: bool
) -> None:
    length_s = soak_s - startup_s  # what is left for training
    report = analyse_trends(
        _flat_soak(length_s, startup_s=startup_s),
        thresholds=DEFAULT_THRESHOLDS,
        mode="enforce",
        planned_length_s=length_s if planned else None,
    )
    judged = {k: v.verdict for k, v in report.series.items() if k != "gpu_memory_mib"}
    assert set(judged.values()) == {"bounded"}, judged
    assert report.verdict == "bounded"
    assert report.windows.anchor == "training_progress"
    assert report.windows.anchor_s == startup_s
    assert startup_s + report.warmup_s <= report.window_start_s < startup_s + report.warmup_s + 5


def test_explicit_warmup_and_window_flags_win_over_the_scaled_ones() -> None:
    report = analyse_trends(
        _flat_soak(600, startup_s=25),
        thresholds=DEFAULT_THRESHOLDS,
        mode="enforce",
        warmup_s=300,
        min_window_s=600,
        planned_length_s=600,
    )
    assert report.windows.rule == "flags"
    assert report.verdict == "insufficient_data"  # what every short soak got before
    doc = report.to_json()
    assert (doc["warmup_s"], doc["min_window_s"], doc["window_rule"]) == (300, 600, "flags")


def test_a_10_minute_soak_catches_120_mib_per_hour_and_one_fd_per_minute() -> None:
    for sigma in (1.0, 2.0):
        assert growing_count(leak(120.0), sigma, TRIALS, soak_s=600) == TRIALS
    assert growing_count(leak(120.0), 4.0, TRIALS, soak_s=600, interval_s=1.0) == TRIALS
    assert fd_growing_count(FD_CASES["one FD per minute"], TRIALS, soak_s=600) == TRIALS


@pytest.mark.parametrize("soak_s", [480, 600, 1800])
def test_plateaus_are_never_a_leak_in_short_or_long_soaks(soak_s: float) -> None:
    plateaus = [name for name in CASES if name.startswith(("step", "ramp", "flat"))] + [
        "leak 64 MiB/h (= limit)"
    ]
    for name in plateaus:
        for sigma in (1.0, 16.0, 40.0):
            assert growing_count(CASES[name], sigma, TRIALS, soak_s=soak_s) == 0, (name, sigma)
    for name in ("one FD step at a random position", "two FD steps 5% apart"):
        assert fd_growing_count(FD_CASES[name], TRIALS, soak_s=soak_s) == 0, name


def test_min_growth_applies_in_proportion_to_the_window() -> None:
    rss, fds = DEFAULT_THRESHOLDS["rss_kib"], DEFAULT_THRESHOLDS["fd_count"]
    assert applied_min_growth(rss, 1500) == rss.min_growth
    assert applied_min_growth(rss, 3000) == rss.min_growth  # never above the configured one
    assert applied_min_growth(rss, 480) == pytest.approx(rss.min_growth * 480 / 1500)
    assert applied_min_growth(fds, 480, count=True) == 1.0  # one whole FD at least


def test_the_half_window_test_tightens_with_noise() -> None:
    t = [k * 5.0 / 3600 for k in range(48)]
    rng = np.random.default_rng(3)
    quiet = [float(v) for v in rng.normal(0, 1024, 48)]  # 1 MiB
    noisy = [float(v) for v in rng.normal(0, 40 * 1024, 48)]  # 40 MiB, the CPU trainer's
    limit = DEFAULT_THRESHOLDS["rss_kib"].max_slope_per_hour
    assert half_lower_bound(t, quiet, limit)[1] == HALF_CONFIDENCE_Z
    assert half_lower_bound(t, noisy, limit)[1] > 3.5


def test_the_recorded_real_trainer_trace_never_leaks_over_100_bootstrap_seeds() -> None:
    samples = power.load_samples(Path(__file__).parent / "data" / "recorded_cpu_soak.json")
    (rss,) = power.plateaus(samples)
    assert rss.series == "rss_kib" and 30 * 1024 < rss.robust_sigma < 50 * 1024
    for soak_s in (600, 1200):
        cell = power.measure(rss, soak_s, stride=5, trials=100)
        assert (cell.false_leaks_flat, cell.false_leaks_step) == (0, 0)
        assert cell.min_detectable_per_hour is not None


def test_the_recorded_trace_with_scaled_windows_is_judged_and_bounded() -> None:
    report = analyse_trends(_recorded_samples(), thresholds=DEFAULT_THRESHOLDS, mode="enforce")
    assert report.windows.rule == "scaled" and report.windows.anchor == "progress_bytes"
    assert report.series["rss_kib"].verdict == "bounded"
    assert report.verdict == "bounded"


def _longsoak_samples() -> list[dict]:
    return power.load_samples(Path(__file__).parent / "data" / "recorded_cpu_longsoak.json")


def test_the_recorded_20_minute_cpu_long_soak_is_bounded_with_scaled_windows() -> None:
    samples = _longsoak_samples()
    report = analyse_trends(
        samples, thresholds=DEFAULT_THRESHOLDS, mode="enforce", planned_length_s=1200
    )
    assert (report.warmup_s, report.min_window_s) == (240, 600)
    assert report.window_sample_count > 150
    assert {k: v.verdict for k, v in report.series.items()} == {
        "rss_kib": "bounded",
        "fd_count": "bounded",
        "eventfd_fds": "bounded",
        "shared_memory_fds": "bounded",
        "gpu_memory_mib": "unavailable",
        "process_count": "bounded",
    }


def test_on_the_long_soaks_own_noise_120_mib_per_hour_is_caught_within_20_minutes() -> None:
    (rss,) = power.plateaus(_longsoak_samples())
    cell = power.measure(rss, 1200, stride=1, trials=100)
    assert (cell.false_leaks_flat, cell.false_leaks_step) == (0, 0)
    assert cell.min_detectable_per_hour is not None and cell.min_detectable_per_hour <= 120


def _gpu_leak_then_exit() -> list[dict]:
    """The H200 trace of tests/faults' GPU leak (2026-12-02): 3.4 s of startup, 3.1 s of
    training that holds 128 MiB more every 0.1 s, then 0.7 s of a flat exit while the last
    progress line stays the same, then the process gone (0 MiB)."""
    samples = []
    for k in range(74):
        elapsed = round(0.1 * k, 1)
        gpu = 14 + 128 * (min(k, 65) - 34) if k >= 34 and k < 73 else 0
        sample = _sample(elapsed, bytes_total=100 + min(k, 65), gpu=gpu)
        if k >= 34:
            sample["progress"]["last"] = {
                "phase": "training/learner_update",
                "iteration": min(k, 65) - 33,
            }
        samples.append(sample)
    return samples


def test_a_gpu_leak_through_training_is_growing_though_the_exit_is_flat() -> None:
    report = analyse_trends(
        _gpu_leak_then_exit(),
        thresholds=DEFAULT_THRESHOLDS,
        mode="enforce",
        warmup_s=0,
        min_window_s=1,
    )
    assert report.windows.end == "last_training_progress"
    assert (report.window_start_s, report.window_end_s) == (3.4, 6.5)
    assert report.series["gpu_memory_mib"].verdict == "growing"
    assert report.verdict == "growing"
    assert report.to_json()["window_end"] == "last_training_progress"


def test_the_window_ends_at_the_last_new_training_line_not_at_finalize() -> None:
    samples = _flat_soak(600, startup_s=25)
    for sample in samples[-5:]:
        sample["progress"]["last"] = {"phase": "finalize/checkpoint", "iteration": 1}
    report = analyse_trends(samples, thresholds=DEFAULT_THRESHOLDS, mode="enforce")
    assert report.window_end_s == samples[-6]["elapsed_s"]
    assert report.windows.planned_length_s == samples[-6]["elapsed_s"] - 25


def test_a_trainer_without_training_lines_is_judged_to_its_last_sample() -> None:
    samples = [_sample(float(i), bytes_total=0 if i < 10 else 100) for i in range(60)]
    report = analyse_trends(
        samples, thresholds=DEFAULT_THRESHOLDS, mode="enforce", warmup_s=5, min_window_s=10
    )
    assert report.windows.end == "last_sample"
    assert report.window_end_s == 59.0
