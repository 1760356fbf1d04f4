"""Where failures ended in the report: the heat map over clip time (a single clip) and the
clips table's column (a clip set)."""

from __future__ import annotations

from pathlib import Path

from harness.report.clips import clips_table
from harness.report.failures import NAME, failure_counts, failures_figure
from harness.report.rundata import RunData
from tests.harness.schemas.evaluation_builders import make_clip_evaluation, make_evaluation

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _with_failures(frames_by_point: list[list[int]]) -> dict:
    """An evaluation of 50 fps x 500 frames (10 s) whose uniform failures are these frames."""
    curve = [(1000 * (i + 1), 1.0 - len(f) / 64, 20.0) for i, f in enumerate(frames_by_point)]
    doc = make_evaluation(curve)
    for point, frames in zip(doc["points"], frames_by_point, strict=True):
        point["modes"]["uniform"]["failure_frames"] = sorted(frames)
    return doc


def test_failures_are_counted_in_half_second_bins_of_clip_time():
    doc = _with_failures([[0, 24, 25, 499], [250, 251]])
    grid = failure_counts(doc["points"], doc["motion"]["num_frames"], doc["motion"]["fps"])
    assert [len(row) for row in grid] == [20, 20]  # 10 s in 0.5 s bins
    assert grid[0][0] == 2 and grid[0][1] == 1 and grid[0][19] == 1 and sum(grid[0]) == 4
    assert grid[1][10] == 2 and sum(grid[1]) == 2


def test_the_heat_map_is_drawn_with_failures_and_noted_without(tmp_path: Path):
    data = RunData(tmp_path, True, evaluation=_with_failures([[100, 101], [], [430]]))
    figure = failures_figure(data, tmp_path)
    assert figure is not None and figure.path == tmp_path / NAME
    assert figure.path.read_bytes().startswith(PNG_MAGIC)
    clean = RunData(tmp_path, True, evaluation=_with_failures([[], []]))
    figure = failures_figure(clean, tmp_path / "clean")
    assert figure is not None and figure.path is None
    assert figure.note == "no uniform-start episode failed at any of the 2 evaluation points"


def test_no_heat_map_without_failure_frames(tmp_path: Path):
    older = make_evaluation([(1000, 0.5, 20.0)])  # a document from before the field
    assert failures_figure(RunData(tmp_path, True, evaluation=older), tmp_path) is None
    assert failures_figure(RunData(tmp_path, True), tmp_path) is None


def test_the_clips_table_says_where_each_clips_failures_ended(tmp_path: Path):
    doc = make_clip_evaluation(
        {"spin": [(10, 1.0, 12.0), (20, 0.75, 14.0)], "kick": [(10, 1.0, 9.0), (20, 1.0, 9.5)]}
    )
    final = doc["points"][-1]["clips"]
    final[0]["modes"]["uniform"]["failure_frames"] = [400, 401, 405, 40]
    final[1]["modes"]["uniform"]["failure_frames"] = []
    table = clips_table(RunData(tmp_path, True, evaluation=doc), None)
    assert "<th>failures ended at (clip time)</th>" in table
    assert "<td>8.0–8.1 s ×3 · 0.8 s ×1</td></tr>" in table  # spin, 50 fps
    assert "<td>none</td></tr>" in table  # kick
    del final[0]["modes"]["uniform"]["failure_frames"]  # a document from before the field
    assert "<td>&ndash;</td></tr>" in clips_table(RunData(tmp_path, True, evaluation=doc), None)
    # no heat map of failure frames on a clip set: they belong to different clips
    assert failures_figure(RunData(tmp_path, True, evaluation=doc), tmp_path) is None
