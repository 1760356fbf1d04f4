"""Failure frames grouped into spans of clip time for the human views (contracts.evaluation_text)."""

from __future__ import annotations

from contracts.evaluation_text import FailureSpan, describe_failures, failure_spans


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
