"""``run_summary.steady_env_steps_per_sec``: the rate between the first and the last update."""

from __future__ import annotations

import pytest
import torch

from trainer.runtime import steady_rate
from trainer.runtime.steady_rate import SteadyRate


class Clock:
    def __init__(self, *readings: float) -> None:
        self.readings = list(readings)

    def __call__(self) -> float:
        return self.readings.pop(0)


def test_the_rate_spans_the_first_and_the_last_update(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steady_rate.time, "perf_counter", Clock(10.0, 12.0))
    rate = SteadyRate(torch.device("cpu"))
    rate.first_update_done(env_steps=100)
    rate.last_update_done(env_steps=500)
    assert rate.env_steps_per_sec() == pytest.approx(200.0)


def test_no_rate_without_two_distinct_updates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steady_rate.time, "perf_counter", Clock(1.0, 1.0, 2.0))
    rate = SteadyRate(torch.device("cpu"))
    assert rate.env_steps_per_sec() is None  # no update yet
    rate.first_update_done(env_steps=64)
    assert rate.env_steps_per_sec() is None  # a run of one update has no span
    rate.last_update_done(env_steps=64)  # the first update was also the last
    assert rate.env_steps_per_sec() is None
    rate.last_update_done(env_steps=128)
    assert rate.env_steps_per_sec() == pytest.approx(64.0)


@pytest.mark.gpu
def test_on_cuda_the_span_is_the_device_time_between_the_two_events() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    rate = SteadyRate(torch.device("cuda"))
    rate.first_update_done(env_steps=0)
    torch.cuda._sleep(1_000_000)  # device work queued between the marks
    rate.last_update_done(env_steps=1_000)
    value = rate.env_steps_per_sec()  # waits for the last event, then reads the device's span
    assert value is not None and value > 0
    assert rate.last is not None and isinstance(rate.last.at, torch.cuda.Event)
    assert rate.last.at.query()
