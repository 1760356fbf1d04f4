"""``run_summary.steady_env_steps_per_sec``: the rate between the first and the last update."""

from __future__ import annotations

import pytest
import torch

from trainer.runtime.steady_rate import SteadyRate


def test_the_rate_spans_the_first_and_the_last_update() -> None:
    rate = SteadyRate(torch.device("cpu"))
    rate.first_update_done(env_steps=100, host_s=10.0)
    rate.last_update_done(env_steps=500, host_s=12.0)
    assert rate.env_steps_per_sec() == pytest.approx(200.0)


def test_no_rate_without_two_distinct_updates() -> None:
    rate = SteadyRate(torch.device("cpu"))
    assert rate.env_steps_per_sec() is None  # no update yet
    rate.first_update_done(env_steps=64, host_s=1.0)
    assert rate.env_steps_per_sec() is None  # a run of one update has no span
    rate.last_update_done(env_steps=64, host_s=1.0)  # the first update was also the last
    assert rate.env_steps_per_sec() is None
    rate.last_update_done(env_steps=128, host_s=2.0)
    assert rate.env_steps_per_sec() == pytest.approx(64.0)


@pytest.mark.gpu
def test_on_cuda_the_span_is_the_device_time_between_the_two_events() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    rate = SteadyRate(torch.device("cuda"))
    rate.first_update_done(env_steps=0, host_s=0.0)
    torch.cuda._sleep(1_000_000)  # device work queued between the marks
    rate.last_update_done(env_steps=1_000, host_s=0.0)  # the host times are not read on CUDA
    value = rate.env_steps_per_sec()  # waits for the last event, then reads the device's span
    assert value is not None and value > 0
    assert rate.last is not None and isinstance(rate.last.at, torch.cuda.Event)
    assert rate.last.at.query()
