"""The final rate spans the run's last ten seconds of updates, whatever the metric window."""

from __future__ import annotations

import pytest

from trainer.runtime.span_rate import SpanRate


def test_no_rate_before_two_marks_or_without_elapsed_time() -> None:
    rate = SpanRate(span_s=10.0)
    assert rate.env_steps_per_sec() is None
    rate.add(5.0, 1024)
    assert rate.env_steps_per_sec() is None
    rate.add(5.0, 2048)
    assert rate.env_steps_per_sec() is None


def test_a_run_shorter_than_the_span_reports_its_whole_span() -> None:
    rate = SpanRate(span_s=10.0)
    for i in range(5):
        rate.add(1.0 + 0.5 * i, 1024 * (i + 1))
    assert rate.env_steps_per_sec() == pytest.approx(4 * 1024 / 2.0)


def test_the_rate_covers_at_least_the_span_and_forgets_what_lies_before_it() -> None:
    rate = SpanRate(span_s=10.0)
    for i in range(40):  # one update a second at 1,000 steps, then 20 at 4,000
        rate.add(float(i), 1000 * i if i < 20 else 19_000 + 4000 * (i - 19))
    # Newest mark at t=39; the newest mark at least 10 s older is t=29, so the span is 29..39.
    assert rate.env_steps_per_sec() == pytest.approx(4000.0)
    assert len(rate._marks) == 11


def test_a_last_window_of_one_fast_tick_no_longer_sets_the_final_rate() -> None:
    # The tick loop's host runs ahead of the device: the last updates return at once. A
    # one-iteration window would read 1024 / 0.001 s; the span reads the run's pace.
    rate = SpanRate(span_s=10.0)
    at = 0.0
    for i in range(1, 1200):
        at += 0.0085
        rate.add(at, 1024 * i)
    rate.add(at + 0.001, 1024 * 1200)
    assert rate.env_steps_per_sec() == pytest.approx(1024 / 0.0085, rel=0.01)
