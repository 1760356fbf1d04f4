"""The two GPU timelines of one_context: busy time, overlap, idle time and the plot."""

from __future__ import annotations

import pytest

from trainer.bench import pair_timeline as pt

# three pipelined turns, in ms: each env step starts while the cycle before it still runs
ENV = [(0.0, 5.0), (6.0, 11.0), (12.0, 17.0)]
CYCLE = [(3.0, 7.0), (9.0, 13.0), (15.0, 19.0)]


def test_union_merges_spans_that_touch_or_overlap_in_time_order() -> None:
    assert pt.union([(4.0, 6.0), (0.0, 2.0), (2.0, 3.0), (5.0, 9.0)]) == [(0.0, 3.0), (4.0, 9.0)]
    assert pt.busy([(4.0, 6.0), (0.0, 2.0), (2.0, 3.0), (5.0, 9.0)]) == 8.0


def test_overlap_counts_only_the_time_both_sides_run() -> None:
    # 3-5, 6-7, 9-11, 12-13, 15-17
    assert pt.overlap(ENV, CYCLE) == 2.0 + 1.0 + 2.0 + 1.0 + 2.0
    assert pt.overlap(ENV, [(20.0, 30.0)]) == 0.0
    assert pt.overlap([(0.0, 10.0)], [(2.0, 3.0), (4.0, 5.0)]) == 2.0


def test_the_summary_is_per_turn_and_adds_up_to_the_iteration() -> None:
    doc = pt.summarize(ENV, CYCLE)
    assert doc == {
        "turns": 3, "iteration_ms": round(19.0 / 3, 4), "env_step_ms": 5.0, "cycle_ms": 4.0,
        "overlap_ms": round(8.0 / 3, 4), "idle_ms": 0.0,
    }  # fmt: skip
    assert isinstance(doc["turns"], int)


def test_time_when_neither_side_runs_is_idle() -> None:
    doc = pt.summarize([(0.0, 2.0), (6.0, 8.0)], [(2.0, 4.0), (8.0, 10.0)])
    # window 10 ms over 2 turns; busy 8 ms; idle 4-6 ms
    assert doc["iteration_ms"] == 5.0 and doc["overlap_ms"] == 0.0 and doc["idle_ms"] == 1.0


def test_unpaired_spans_are_refused() -> None:
    with pytest.raises(ValueError, match="got 3 and 2"):
        pt.summarize(ENV, CYCLE[:2])
    with pytest.raises(ValueError, match="got 0 and 0"):
        pt.summarize([], [])


def test_the_plot_is_a_png_written_whole(tmp_path) -> None:
    path = tmp_path / "plots" / "timeline.png"
    assert pt.plot(ENV * 5, CYCLE * 5, path, "three turns") == path
    assert path.read_bytes().startswith(b"\x89PNG")
    assert [p.name for p in path.parent.iterdir()] == ["timeline.png"]
