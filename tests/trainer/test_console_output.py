"""What `train` shows a person: progress lines on stderr and a summary table on stdout."""

from __future__ import annotations

import io
from pathlib import Path

from contracts.jsonio import write_json_atomic
from tests.harness.schemas.builders import make_completed_summary, make_failed_summary
from trainer.cli import print_summary_table
from trainer.rundir.progress import ProgressWriter


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_progress_lines_are_echoed_for_a_person(tmp_path: Path) -> None:
    echo, clock = io.StringIO(), FakeClock()
    writer = ProgressWriter(tmp_path, echo=echo, max_iterations=500, clock=clock)
    writer.update("training/learner_update", iteration=0, total_env_steps=0)
    clock.now += 12.5
    writer.update("training/learner_update", iteration=120, total_env_steps=123904)
    writer.close()
    lines = echo.getvalue().splitlines()
    assert lines[-1] == (
        "train: 00:00:12 training/learner_update iteration 120/500 env steps 123,904 "
        "(9,912 env steps/s (10 s))"
    )
    assert len((tmp_path / "progress.jsonl").read_text().splitlines()) == len(lines)


def test_a_time_budgeted_run_shows_its_training_time_of_the_budget(tmp_path: Path) -> None:
    echo, clock = io.StringIO(), FakeClock()
    writer = ProgressWriter(tmp_path, echo=echo, duration_s=600.0, clock=clock)
    clock.now += 30.0
    writer.start_training()
    clock.now += 75.0
    writer.set_counters(iteration=42, total_env_steps=4096)
    writer.write("training/learner_update")
    writer.close()
    assert echo.getvalue().splitlines()[-1] == (
        "train: 00:01:45 training/learner_update iteration 42 (trained 00:01:15 of 00:10:00) "
        "env steps 4,096"
    )


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


def test_summary_table_ends_with_the_final_evaluation(tmp_path: Path, capsys) -> None:
    summary = make_completed_summary(str(tmp_path))
    point = {
        "iteration": 10000,
        "modes": {
            "frame0": {"success_rate": 0.75, "r_mpkpe_mm": 14.25, "mpkpe_mm": 20.0},
            "uniform": {"success_rate": 1.0, "r_mpkpe_mm": 12.125, "mpkpe_mm": 17.875},
        },
    }
    summary["evaluation"] = {
        "status": "evaluated",
        "path": "evaluation.json",
        "points": 7,
        "final": point,
        "best": point,
        "wall_time_s": 3.5,
    }
    write_json_atomic(tmp_path / "run_summary.json", summary)
    print_summary_table(tmp_path)
    lines = capsys.readouterr().out.splitlines()
    final = next(line for line in lines if line.startswith("evaluation, final (iteration 10,000)"))
    assert final.endswith("success 100.0 % (frame 0: 75.0 %), MPKPE 17.9 mm, R-MPKPE 12.1 mm")
    assert any(line.startswith("evaluation, best (iteration 10,000)") for line in lines)


def test_summary_table_says_why_a_run_was_not_evaluated(tmp_path: Path, capsys) -> None:
    summary = make_failed_summary()
    summary["evaluation"] = {
        "status": "skipped",
        "reason": "the run failed before its evaluation (learner_failure in training/learner_update)",
        "path": None,
        "points": 0,
        "final": None,
        "best": None,
    }
    write_json_atomic(tmp_path / "run_summary.json", summary)
    print_summary_table(tmp_path)
    out = capsys.readouterr().out.splitlines()
    assert "skipped: the run failed before its evaluation" in out[-2]


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
