"""scripts/learning_check.sh table: the verdict line and the rows it reads from a check's
directory (the GPU soaks themselves run on the device; docs/benchmarks.md "Learning check")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "learning_check.sh"


def _mode(r_mpkpe: float) -> dict:
    return {
        "success_rate": 1.0,
        "mpkpe_mm": r_mpkpe + 4.0,
        "r_mpkpe_mm": r_mpkpe,
        "joint_pos_error_rad": 0.02,
    }


def _passed(learning: dict) -> dict:
    return {"status": "passed", "failure_reason": None, "learning": learning}


def _clip(root: Path, name: str, soak: dict, r_mpkpe: float) -> None:
    run = root / name / "run"
    run.mkdir(parents=True)
    (root / name / "soak.json").write_text(json.dumps(soak))
    summary = {
        "total_env_steps": 66_660_352,
        "wall_time_sec": 755.5,
        "steady_env_steps_per_sec": 112_750.1,
        "tail_env_steps_per_sec": 107_717.2,
    }
    (run / "run_summary.json").write_text(json.dumps(summary))
    point = {
        "iteration": 65_000,
        "source": "final",
        "eval_wall_time_s": 0.89,
        "modes": {"uniform": _mode(r_mpkpe), "frame0": _mode(r_mpkpe + 1.0)},
    }
    (run / "evaluation.json").write_text(json.dumps({"points": [point]}))


def _table(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), "table", str(root)],
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_table_names_each_clips_learning_verdict_and_steady_rate(tmp_path: Path) -> None:
    _clip(tmp_path, "synthetic", _passed({"verdict": "passed", "reason": None}), 5.107)
    not_judged = {"verdict": "not_judged", "reason": "the run did not complete"}
    _clip(tmp_path, "march", _passed(not_judged), 11.1)

    result = _table(tmp_path)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(
        "march: soak passed; learning not_judged (the run did not complete);"
    )
    assert lines[1].startswith("synthetic: soak passed; learning passed;")
    assert "steady 112750.1 env steps/s (tail 107717.2)" in lines[1]
    rows = json.loads((tmp_path / "learning_check.json").read_text())
    assert [(r["clip"], r["r_mpkpe_mm"]) for r in rows] == [("march", 11.1), ("synthetic", 5.107)]


def test_a_soak_without_a_learning_section_reads_absent(tmp_path: Path) -> None:
    failed = {"status": "failed", "failure_reason": "the trainer exited 1"}
    _clip(tmp_path, "synthetic", failed, 5.0)

    result = _table(tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "synthetic: soak failed (the trainer exited 1); learning absent;"
    )


def test_an_unknown_verb_exits_2_with_the_usage(tmp_path: Path) -> None:
    result = subprocess.run(
        ["bash", str(SCRIPT), "collect", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert "usage: learning_check.sh start|wait|table DIR" in result.stderr
