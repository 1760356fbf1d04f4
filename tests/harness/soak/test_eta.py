"""The soak's forecast: iterations/s, ETA, clearing --min-duration-seconds."""

from __future__ import annotations

import pytest

from harness.soak.eta import (
    SoakPlan,
    early_warning,
    forecast,
    iterations_to_fill,
    measured_iteration_rate,
    min_duration_reason,
    status_fields,
)

SEED = SoakPlan(iterations=65000, duration_s=None, min_duration_s=1800)
TIMED = SoakPlan(iterations=None, duration_s=600.0, min_duration_s=600)


def _line(iteration: int, ips: float | None = 119.0, trained: float | None = None) -> dict:
    return {
        "phase": "training/learner_update",
        "iteration": iteration,
        "env_steps_per_sec": None if ips is None else ips * 1024,
        "iterations_per_sec": ips,
        "rate_window_s": 10.0,
        "training_elapsed_s": trained,
    }


def test_the_seed_form_on_a_fast_trainer_is_forecast_to_fail_and_warned_at_10_percent() -> None:
    # The H200 with MPS: 65,000 iterations in ~546 s; 30 s of startup.
    early = forecast(SEED, 80.0, _line(5900))
    assert early.fraction == pytest.approx(5900 / 65000)
    assert early_warning(SEED, early) is None  # under 10 % of the run: not yet
    fc = forecast(SEED, 85.0, _line(6500))
    assert fc.eta_s == pytest.approx((65000 - 6500) / 119.0)
    assert fc.clears_min_duration is False
    warning = early_warning(SEED, fc)
    assert warning is not None
    assert warning.startswith("warning: at 10% of the run, 119.0 it/s this soak will end near")
    assert "before --min-duration-seconds=1800, and fail" in warning
    assert warning.endswith("rerun sized in time: --duration-seconds 1800, or --iterations 211000")


def test_a_time_budgeted_soak_forecasts_its_budget_and_clears_its_minimum() -> None:
    fc = forecast(TIMED, 130.0, _line(12000, trained=100.0))
    assert fc.eta_s == pytest.approx(500.0) and fc.fraction == pytest.approx(1 / 6)
    assert fc.clears_min_duration is True and early_warning(TIMED, fc) is None
    assert status_fields(TIMED, fc) == [
        "121,856 env steps/s (10 s)",
        "119.0 it/s",
        "ETA 00:08:20, ends ~00:10:30 clears min 00:10:00",
    ]


def test_a_cap_that_comes_before_the_budget_sets_the_eta() -> None:
    plan = SoakPlan(iterations=20000, duration_s=1800.0, min_duration_s=0)
    fc = forecast(plan, 60.0, _line(8100, trained=30.0))
    assert fc.eta_s == pytest.approx(100.0)  # 11,900 iterations at 119/s, not 1,770 s
    assert early_warning(plan, fc) is None  # no minimum to miss


def test_nothing_is_forecast_before_the_first_rate() -> None:
    fc = forecast(SEED, 20.0, {"phase": "startup/logger", "iteration": 0})
    assert fc.eta_s is None and fc.clears_min_duration is None
    assert status_fields(SEED, fc) == []
    assert early_warning(SEED, fc) is None
    assert forecast(None, 20.0, None).eta_s is None


def _sample(elapsed: float, line: dict | None) -> dict:
    return {"elapsed_s": elapsed, "progress": {"bytes_total": 1, "last": line}}


def test_the_min_duration_reason_names_what_ran_and_the_time_budget_to_use() -> None:
    samples = [_sample(10.0, {"phase": "startup/logger", "iteration": 0})]
    samples += [_sample(30.0 + k * 10.0, _line(k * 1190)) for k in range(52)]
    samples.append(_sample(546.0, {"phase": "finalize/logger_finish", "iteration": 65000}))
    assert measured_iteration_rate(samples) == pytest.approx(119.0)
    reason = min_duration_reason(SEED, 546.2, samples)
    assert reason == (
        "soak completed before min_duration_seconds=1800 (ran 546.2 s, 65000 iterations at "
        "119.0 it/s); size it in time with --duration-seconds 1800"
    )
    assert iterations_to_fill(65000, 119.0, 1800 - 546.2) == 215000


def test_the_min_duration_reason_without_a_rate_still_names_duration_seconds() -> None:
    reason = min_duration_reason(SEED, 3.0, [_sample(1.0, None)])
    assert reason == (
        "soak completed before min_duration_seconds=1800 (ran 3.0 s); size it in time "
        "with --duration-seconds 1800"
    )
