"""What `train` shows a person: progress lines on stderr and a summary table on stdout."""

from __future__ import annotations

import io
from pathlib import Path

from harness.jsonio import write_json_atomic
from tests.harness.schemas.builders import make_completed_summary, make_failed_summary
from trainer.cli import print_summary_table
from trainer.rundir.progress import ProgressWriter


def test_progress_lines_are_echoed_for_a_person(tmp_path: Path) -> None:
    echo = io.StringIO()
    writer = ProgressWriter(tmp_path, echo=echo, max_iterations=500)
    writer.update("training/learner_update", iteration=0, total_env_steps=0, env_steps_per_sec=None)
    writer.iteration, writer.total_env_steps, writer.env_steps_per_sec = 120, 123904, 82911.2
    writer.write("training/learner_update")
    writer.close()
    lines = echo.getvalue().splitlines()
    assert lines[-1].endswith(
        "training/learner_update iteration 120/500 env steps 123,904 (82,911 env steps/s)"
    )
    assert lines[-1].startswith("train: 00:00:0")
    assert len((tmp_path / "progress.jsonl").read_text().splitlines()) == len(lines)


def test_summary_table_of_a_completed_run(tmp_path: Path, capsys) -> None:
    summary = make_completed_summary(str(tmp_path))
    write_json_atomic(tmp_path / "run_summary.json", summary)
    print_summary_table(tmp_path)
    out = capsys.readouterr().out
    assert "completed" in out and "normal_completion (finalize/logger_finish)" in out
    assert f"{summary['total_env_steps']:,}" in out and str(tmp_path) in out


def test_summary_table_of_a_failed_run_shows_the_error(tmp_path: Path, capsys) -> None:
    write_json_atomic(tmp_path / "run_summary.json", make_failed_summary())
    print_summary_table(tmp_path)
    out = capsys.readouterr().out
    assert "failed" in out and "RuntimeError: CUDA error: an illegal memory access" in out


def test_no_summary_prints_nothing(tmp_path: Path, capsys) -> None:
    print_summary_table(tmp_path)
    assert capsys.readouterr().out == ""


def test_the_error_row_names_the_type_once(tmp_path: Path, capsys) -> None:
    summary = make_failed_summary()
    summary["error_type"] = "MotionError"
    summary["error"] = "collector raised MotionError: motion file 'x.npz': missing key 'fps'\nmore"
    write_json_atomic(tmp_path / "run_summary.json", summary)
    print_summary_table(tmp_path)
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("error"))
    assert (
        row.split(None, 1)[1]
        == "collector raised MotionError: motion file 'x.npz': missing key 'fps'"
    )
