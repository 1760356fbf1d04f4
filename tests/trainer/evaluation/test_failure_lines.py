"""evaluate's human view places the failed episodes of the final point on the clip."""

from __future__ import annotations

from trainer.evaluation.cli import failure_rows


def _mode(episodes: int, frames: list[int]) -> dict:
    return {"episodes": episodes, "failure_frames": frames}


def test_the_view_places_failures_by_mode_and_on_a_clip_set_by_clip():
    single = {"modes": {"frame0": _mode(2, []), "uniform": _mode(8, [130, 131, 400])}}
    assert failure_rows(single, 50.0) == [("uniform", "3 of 8", "2.6 s ×2 · 8.0 s ×1")]
    clips = [
        {"clip": f"clip{i}", "modes": {"frame0": _mode(1, []), "uniform": _mode(4, [10] * i)}}
        for i in range(9)
    ]
    aggregate = {"frame0": {"episodes": 9}, "uniform": {"episodes": 36}}  # no frames on a set
    rows = failure_rows({"modes": aggregate, "clips": clips}, 50.0)
    assert rows[0] == ("clip8", "8 of 4", "0.2 s ×8")  # most failures first
    assert [row[0] for row in rows[:6]] == [f"clip{i}" for i in range(8, 2, -1)]
    assert rows[-1] == ("2 more clips", "", "see --json")
    assert failure_rows({"modes": aggregate, "clips": clips[:1]}, 50.0) == []
