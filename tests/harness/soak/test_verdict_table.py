"""The end-of-soak tables: long reasons fold inside the terminal width; a pass shows the
trainer's own summary rows; the paths come whole, after the tables."""

from __future__ import annotations

from pathlib import Path

from harness.soak.verdict_table import render_summary
from tests.harness.schemas.builders import make_completed_summary
from tests.harness.soak.artifact_builders import resource_summary

REASON = (
    "trainer exited with returncode 2: error: motion file 'motions/g1/dnace' not found "
    "(searched: " + ", ".join(f"/very/long/asset/root/number/{i}/dnace" for i in range(12)) + "); "
    "it is no path and no asset id (those end in .npz or .csv), so the hub was not asked; "
    "trainer did not write run_summary.json"
)


def _artifact(status: str, reason: str | None, summary: dict | None) -> dict:
    return {
        "status": status,
        "failure_classification": None if status == "passed" else "missing_run_summary",
        "failure_reason": reason,
        "duration_s": 12.0,
        "returncode": 0 if status == "passed" else 2,
        "resource_summary": resource_summary(1),
        "resource_trends": {"verdict": "insufficient_data", "mode": "enforce", "series": {}},
        "run_summary": summary,
    }


def test_a_long_reason_wraps_and_never_widens_the_table(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    path = Path("/tmp/soaks/a-rather-long-directory-name/with-more/levels/g1-soak-artifact.json")
    text = render_summary(_artifact("failed", REASON, None), path)
    lines = text.splitlines()
    table = lines[: lines.index(f"artifact: {path}")]
    assert max(len(line) for line in table) == 80
    folded = "".join(line.strip("│| ").split("│")[-1].strip() for line in table)
    assert "".join(REASON.split()) in "".join(folded.split())
    assert lines[-2:] == [f"artifact: {path}", f"report:   soak-report {path}"]
    assert "trainer (run_summary.json)" not in text


def test_a_pass_shows_the_trainers_summary_table(tmp_path: Path) -> None:
    summary = make_completed_summary(str(tmp_path))
    text = render_summary(_artifact("passed", None, summary), tmp_path / "a.json")
    trainer = text.split("trainer (run_summary.json)", 1)[1]
    for label in ("status", "iterations", "env steps", "mean reward (final / best)", "error"):
        assert f" {label} " in trainer
    assert f"{summary['total_env_steps']:,}" in trainer and "completed" in trainer
    rates = {"steady_env_steps_per_sec": 123456.7, "training_env_steps_per_sec": 98765.4}
    steady = render_summary(_artifact("passed", None, {**summary, **rates}), tmp_path / "a.json")
    assert " env steps/s (steady) " in steady and "123,457" in steady
    assert " env steps/s (whole training) " in steady and "98,765" in steady
    assert max(len(line) for line in text.splitlines()[:-2]) <= 100  # COLUMNS=100 in tests
