"""Failure frames grouped into spans of clip time for the human view."""

from __future__ import annotations

from trainer.evaluation.cli import failure_lines
from trainer.evaluation.failures import FailureSpan, describe_failures, failure_spans


def test_frames_within_half_a_second_share_a_span_largest_first():
    frames = [1351, 100, 1340, 101, 500, 1345, 102, 1350]  # any order; 50 fps
    assert failure_spans(frames, 50.0) == [
        FailureSpan(26.8, 27.02, 4),
        FailureSpan(2.0, 2.04, 3),
        FailureSpan(10.0, 10.0, 1),
    ]
    assert describe_failures(frames, 50.0) == "26.8–27.0 s ×4 · 2.0 s ×3 · 10.0 s ×1"


def test_a_gap_of_more_than_half_a_second_splits_and_ties_go_earliest_first():
    assert [s.count for s in failure_spans([0, 25, 51], 50.0)] == [2, 1]  # 0.5 s joins, 0.52 not
    assert [s.first_s for s in failure_spans([300, 0], 50.0)] == [0.0, 6.0]


def test_more_spans_than_shown_are_counted():
    frames = [0, 100, 101, 200, 300, 400, 500, 501]
    text = describe_failures(frames, 50.0)
    assert text.startswith("2.0 s ×2 · 10.0 s ×2 · 0.0 s ×1 · 4.0 s ×1")
    assert text.endswith(" · and 2 more spans (2)")
    assert describe_failures([0, 100, 200, 300, 400], 50.0).endswith(" · and 1 more span (1)")


def _mode(episodes: int, frames: list[int]) -> dict:
    return {"episodes": episodes, "failure_frames": frames}


def test_the_view_places_failures_by_mode_and_on_a_clip_set_by_clip():
    single = {"modes": {"frame0": _mode(2, []), "uniform": _mode(8, [130, 131, 400])}}
    assert failure_lines(single, 50.0) == [
        "where the failed episodes ended (clip time, most failures first):",
        "  uniform: 3 of 8 failed, ended at 2.6 s ×2 · 8.0 s ×1",
    ]
    clips = [
        {"clip": f"clip{i}", "modes": {"frame0": _mode(1, []), "uniform": _mode(4, [10] * i)}}
        for i in range(9)
    ]
    aggregate = {"frame0": {"episodes": 9}, "uniform": {"episodes": 36}}  # no frames on a set
    lines = failure_lines({"modes": aggregate, "clips": clips}, 50.0)
    assert lines[1] == "  clip8: 8 failed, ended at 0.2 s ×8"  # most failures first
    assert [line.split(":")[0].strip() for line in lines[1:7]] == [
        f"clip{i}" for i in range(8, 2, -1)
    ]
    assert lines[-1] == "  and 2 more clips with failures (--json)"
    assert failure_lines({"modes": aggregate, "clips": clips[:1]}, 50.0) == []
