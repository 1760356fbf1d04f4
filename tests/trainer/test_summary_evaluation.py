"""The `train` summary table ends with the run's evaluation (final and best points)."""

from __future__ import annotations

from pathlib import Path

from contracts.evaluation_text import evaluation_rows
from contracts.jsonio import write_json_atomic
from tests.harness.schemas.builders import make_completed_summary
from tests.harness.schemas.evaluation_builders import (
    DECLINING_CURVE,
    make_evaluation,
    summary_section,
    unevaluated_section,
)
from trainer.cli import print_summary_table


def test_summary_table_ends_with_the_final_and_best_evaluation(tmp_path: Path, capsys) -> None:
    summary = make_completed_summary(str(tmp_path))
    summary["evaluation"] = summary_section(make_evaluation(DECLINING_CURVE))
    write_json_atomic(tmp_path / "run_summary.json", summary)
    print_summary_table(tmp_path)
    *_, final, best, rule = capsys.readouterr().out.splitlines()
    assert set(rule) == {"-", " "}
    assert final.startswith("evaluation, final (iteration 30)")
    assert final.endswith("success 99.1 % (frame 0: 99.1 %), MPKPE 109.3 mm, R-MPKPE 78.1 mm")
    assert best.startswith("evaluation, best (iteration 10)")
    assert best.endswith("success 100.0 % (frame 0: 100.0 %), MPKPE 16.9 mm, R-MPKPE 12.1 mm")


def test_evaluation_rows_say_why_there_is_no_evaluation() -> None:
    assert evaluation_rows(None) == [("evaluation", "-")]
    skipped = unevaluated_section("skipped", "training.evaluate=false")
    assert evaluation_rows(skipped) == [("evaluation", "skipped: training.evaluate=false")]
    doc = make_evaluation([(10, 1.0, None)])
    assert evaluation_rows(summary_section(doc))[0][1] == (
        "success 100.0 % (frame 0: 100.0 %), MPKPE null, R-MPKPE null"
    )
