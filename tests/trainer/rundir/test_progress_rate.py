"""The live rate of progress.jsonl: env steps and iterations over the last 10 s of updates
(a steady run printed 6,770, 251,476 and 1,164,979 env steps/s)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.rundir.progress import ProgressWriter, WindowedRate


def test_no_rate_until_the_samples_span_a_full_window() -> None:
    rate = WindowedRate(10.0)
    assert rate.rates() is None
    rate.add(0.0, 0, 0)
    rate.add(9.99, 1000, 10)
    assert rate.rates() is None
    rate.add(10.0, 1024, 11)
    got = rate.rates()
    assert got is not None
    assert got.env_steps_per_sec == pytest.approx(102.4)
    assert got.iterations_per_sec == pytest.approx(1.1)


def test_a_steady_run_with_bursty_iterations_reads_steady() -> None:
    # 1024 envs at 122k env steps/s on average, but iteration times alternate between a
    # checkpoint-sized stall (0.15 s) and async GPU bursts (~0.9 ms): the instantaneous rate
    # of one iteration swings from ~6.8k to ~1.1M env steps/s, the windowed one does not.
    rate = WindowedRate(10.0)
    t = 0.0
    seen: list[float] = []
    pattern = [0.15] + [0.0009] * 17  # 18 iterations in 0.1653 s
    steady = 18 * 1024 / sum(pattern)
    for iteration in range(1, 20001):
        t += pattern[iteration % len(pattern)]
        rate.add(t, iteration * 1024, iteration)
        got = rate.rates()
        if got is not None:
            seen.append(got.env_steps_per_sec)
    assert seen, "a 20000-iteration run spans many windows"
    assert min(seen) > 0.98 * steady and max(seen) < 1.02 * steady


def test_a_stall_longer_than_the_window_averages_over_the_real_span() -> None:
    rate = WindowedRate(10.0)
    rate.add(0.0, 0, 0)
    rate.add(1.0, 1000, 1)
    rate.add(31.0, 2000, 2)  # 30 s without an update (e.g. a slow checkpoint write)
    got = rate.rates()
    assert got is not None and got.env_steps_per_sec == pytest.approx(1000 / 30)


def test_time_going_backwards_is_refused() -> None:
    rate = WindowedRate(10.0)
    rate.add(5.0, 0, 0)
    with pytest.raises(ValueError, match="backwards"):
        rate.add(4.0, 10, 1)
    with pytest.raises(ValueError, match="window_s"):
        WindowedRate(0.0)


def test_the_window_keeps_memory_bounded() -> None:
    rate = WindowedRate(10.0)
    for k in range(100000):
        rate.add(k * 0.01, k, k)
    assert len(rate._samples) <= 1002


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_lines_carry_the_windowed_rates_and_training_time(tmp_path: Path) -> None:
    clock = Clock()
    writer = ProgressWriter(tmp_path, clock=clock)  # a line every 10 s at most
    writer.write("startup/begin")
    clock.now = 20.0
    writer.start_training()
    steps = 0
    for k in range(1, 301):  # 300 iterations of 8 envs, one every 0.1 s
        clock.now = 20.0 + 0.1 * k
        steps += 8
        writer.update("training/learner_update", iteration=k, total_env_steps=steps)
    writer.set_counters(iteration=300, total_env_steps=steps + 8)  # the last tick committed
    writer.write("finalize/collector_quiesce")
    writer.close()
    lines = [json.loads(x) for x in (tmp_path / "progress.jsonl").read_text().splitlines()]
    training = [x for x in lines if x["phase"] == "training/learner_update"]
    assert len(training) >= 2
    assert training[0]["env_steps_per_sec"] is None  # first line: under a full window
    for line in training[1:]:
        assert line["env_steps_per_sec"] == pytest.approx(80.0)
        assert line["iterations_per_sec"] == pytest.approx(10.0)
        assert line["rate_window_s"] == 10.0
    last = lines[-1]
    assert last["phase"] == "finalize/collector_quiesce"
    # The finalize line shows the final counters (what run_summary.json will say) and the
    # last training window's rate, not a rate decaying through shutdown.
    assert (last["iteration"], last["total_env_steps"]) == (300, 2408)
    assert last["env_steps_per_sec"] == pytest.approx(80.0)
    assert last["training_elapsed_s"] == pytest.approx(30.0)
