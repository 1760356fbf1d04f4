"""The ``--learning-*`` flags of g1-soak and soak-run, and the learning rows of the table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.soak import cli, monitor, preflight
from harness.soak.cli import g1_soak_main, soak_run_main
from harness.soak.learning import LearningCfg
from harness.soak.verdict_table import judged_network, learning_rows, render_summary
from tests.harness.soak.artifact_builders import resource_summary


@pytest.fixture
def cfgs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record each MonitorCfg the CLI built instead of running a soak."""
    seen: list[Any] = []

    def fake_run_soak(command, *, log_dir, output, cfg, motion_id=None, status_stream=None):
        seen.append(cfg)
        return monitor.SoakResult({**_artifact(), "status": "passed"}, output, True, None)

    monkeypatch.setattr(monitor, "run_soak", fake_run_soak)
    monkeypatch.setattr(preflight, "check_trainer_command", lambda command: {"status": "ok"})
    return seen


def _paths(tmp_path: Path) -> list[str]:
    return ["--log-dir", str(tmp_path / "run"), "--output", str(tmp_path / "out.json")]


def test_g1_soak_enforces_and_soak_run_reports_by_default(tmp_path: Path, cfgs) -> None:
    g1_soak_main(_paths(tmp_path / "a"))
    soak_run_main([*_paths(tmp_path / "b"), "--", "true"])
    assert cfgs[0].learning == LearningCfg(mode="enforce", margin=0.05, min_success_rate=None)
    assert cfgs[1].learning == LearningCfg(mode="report", margin=0.05, min_success_rate=None)


def test_learning_flags_reach_the_monitor(tmp_path: Path, cfgs) -> None:
    flags = [
        "--learning-mode", "report", "--learning-margin", "0.1", "--min-success-rate", "0.9",
        "--learning-tolerance-mm", "0.5",
    ]  # fmt: skip
    g1_soak_main([*_paths(tmp_path / "a"), *flags])
    soak_run_main([*_paths(tmp_path / "b"), "--learning-mode", "enforce", "--", "true"])
    assert cfgs[0].learning == LearningCfg(
        mode="report", margin=0.1, min_success_rate=0.9, r_mpkpe_tolerance_mm=0.5
    )
    assert cfgs[1].learning.mode == "enforce"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--learning-margin", "1"], "error: --learning-margin=1 must be a fraction in [0, 1)"),
        (["--min-success-rate", "2"], "error: --min-success-rate=2 must be a fraction in [0, 1]"),
        (["--learning-mode", "off"], "'off' is not one of"),
    ],
)
def test_bad_learning_flags_exit_2_before_launch(
    tmp_path: Path, cfgs, capsys, argv: list[str], message: str
) -> None:
    assert g1_soak_main([*_paths(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err
    assert cfgs == [] and not (tmp_path / "run").exists()


def test_learning_flags_are_checked_before_paths(tmp_path: Path, cfgs, capsys) -> None:
    argv = ["--log-dir", "relative", "--output", str(tmp_path / "o.json")]
    assert g1_soak_main([*argv, "--learning-margin", "-1"]) == 2
    assert capsys.readouterr().err.startswith("error: --learning-margin=-1")


def _point(iteration: int, success: float | None, r_mpkpe: float | None) -> dict[str, Any]:
    metrics = {"success_rate": success, "mpkpe_mm": None, "r_mpkpe_mm": r_mpkpe}
    return {
        "iteration": iteration,
        "env_steps": iteration * 64,
        "source": "checkpoint",
        "uniform": metrics,
        "frame0": metrics,
    }


def test_summary_rows_show_verdict_final_and_best() -> None:
    learning = {
        "mode": "enforce",
        "verdict": "regression",
        "reason": None,
        "evaluation": {
            "points": [_point(10, 1.0, 12.1), _point(30, 0.991, None)],
            "final_iteration": 30,
            "best_iteration": 10,
        },
    }
    assert learning_rows(learning) == [
        ("learning verdict", "regression (enforce)"),
        ("  final", "iter 30: success 99.1 % (frame 0: 99.1 %), MPKPE null, R-MPKPE null"),
        ("  best", "iter 10: success 100.0 % (frame 0: 100.0 %), MPKPE null, R-MPKPE 12.1 mm"),
    ]
    not_judged = {"mode": "report", "verdict": "not_judged", "reason": "the run did not complete"}
    assert learning_rows({**not_judged, "evaluation": None}) == [
        ("learning verdict", "not_judged (report)"),
        ("  not judged", "the run did not complete"),
    ]
    assert learning_rows(None) == []


def test_the_rows_name_an_averaged_policy_and_leave_the_actor_unsaid() -> None:
    def learning(network: str | None) -> dict[str, Any]:
        final = _point(30, 1.0, 12.1)
        if network is not None:
            final["network"] = network
        evaluation = {"points": [final], "final_iteration": 30, "best_iteration": 30}
        return {"mode": "enforce", "verdict": "passed", "reason": None, "evaluation": evaluation}

    averaged = learning_rows(learning("policy_average"))
    assert averaged[-1] == ("  policy judged", "the averaged policy (algo.policy_average_rate)")
    assert judged_network(learning("actor")) == "actor"
    assert learning_rows(learning("actor")) == learning_rows(learning(None)) == averaged[:-1]
    assert judged_network(learning(None)) is None and judged_network(None) is None


def _artifact() -> dict[str, Any]:
    return {
        "status": "failed",
        "failure_classification": "learning_regression",
        "failure_reason": "learning regression: ...",
        "duration_s": 1.0,
        "returncode": 0,
        "resource_summary": resource_summary(),
        "resource_trends": {"verdict": "bounded", "mode": "enforce", "series": {}},
        "learning": {
            "mode": "enforce",
            "verdict": "unverified",
            "reason": None,
            "evaluation": None,
        },
    }


def test_summary_table_ends_the_verdicts_with_learning(tmp_path: Path) -> None:
    table = render_summary(_artifact(), tmp_path / "a.json")
    rows = [_cells(line) for line in table.splitlines() if len(_cells(line)) == 2]
    trend = next(i for i, row in enumerate(rows) if row[0] == "trend verdict")
    assert rows[trend + 1] == ["learning verdict", "unverified (enforce)"]


def _cells(line: str) -> list[str]:
    """The cells of one row of the verdict table (rich draws its borders with | or │)."""
    return [c.strip() for c in line.replace("│", "|").strip().strip("|").split("|")]


def test_help_lists_the_learning_flags() -> None:
    from typer.testing import CliRunner

    for app in (cli.g1_soak_app, cli.soak_run_app):
        result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0
        for flag in ("--learning-mode", "--learning-margin", "--min-success-rate"):
            assert flag in result.output
