"""extract-metrics (docs/metrics.md): v1 and legacy modes, every error, strict output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.jsonio import dumps_strict, loads_strict
from harness.metrics.cli import ROWS, main, rows_for
from harness.metrics.events import iter_records
from tests.harness.metrics.event_files import write_scalars

LEGACY_ROW_NAMES = [
    "iter_ms",
    "steps_per_sec",
    "collector_active_steps_per_sec",
    "collector_cycle_ms",
    "collector_learner_action_wait_ms",
    "collector_replay_write_ms",
    "learner_collector_wait_ms",
    "learner_inference_ms",
    "learner_replay_batch_wait_ms",
    "learner_replay_sample_ms",
    "replay_ingress_h2d_submit_ms",
    "learner_collector_release_ms",
    "learner_train_ms",
]
ROW_NAMES = [
    "iter_ms",
    "steps_per_sec",
    "collector_learner_action_wait_ms",
    "collector_replay_write_ms",
    "learner_collector_wait_ms",
    "learner_inference_ms",
    "learner_replay_batch_wait_ms",
    "learner_replay_sample_ms",
    "replay_ingress_h2d_submit_ms",
    "learner_collector_release_ms",
    "learner_train_ms",
    "mean_reward",
    "mean_episode_length",
]
STAMPED = {"status": "completed", "metric_schema_version": 1}


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error: ")]


def _v1_run(tmp_path, series: dict[str, list[float]], summary: object = STAMPED):
    tmp_path.mkdir(parents=True, exist_ok=True)
    if summary is not None:
        (tmp_path / "run_summary.json").write_text(
            summary if isinstance(summary, str) else dumps_strict(summary)
        )
    write_scalars(tmp_path, series)
    return tmp_path


def test_each_mode_has_its_rows_in_order() -> None:
    assert [row.name for row in rows_for(legacy=False)] == ROW_NAMES
    assert [row.name for row in rows_for(legacy=True)] == LEGACY_ROW_NAMES
    assert {row.name for row in ROWS} == set(ROW_NAMES) | set(LEGACY_ROW_NAMES)


def test_v1_json_reports_means_of_last_n_with_scales(tmp_path, capsys) -> None:
    run = _v1_run(
        tmp_path,
        {
            "Perf/iteration_time": [9.0, 0.010, 0.020],  # seconds -> ms
            "Perf/learning_time": [0.004],
            "Perf/total_fps": [1.0, 100.0, 200.0],
            "Perf/learner_inference_ms": [5.0, 1.0, 2.0],
            "Loss/critic": [0.1, 0.2, 0.3],
            "reward/track": [1.0, 1.0, 1.0],
            "Train/mean_reward": [0.5, 1.5, 2.5],
            "Train/mean_episode_length": [100.0, 150.0, 250.0],
        },
    )
    code, out, err = _run(capsys, str(run), "--last", "2", "--json")
    assert (code, err) == (0, "")  # an absent tag is null, without a warning
    rows = loads_strict(out)
    assert list(rows) == ROW_NAMES
    assert rows["iter_ms"] == pytest.approx(15.0)
    assert rows["learner_train_ms"] == pytest.approx(4.0)
    assert rows["steps_per_sec"] == pytest.approx(150.0)
    assert rows["learner_inference_ms"] == pytest.approx(1.5)
    assert rows["mean_reward"] == pytest.approx(2.0)
    assert rows["mean_episode_length"] == pytest.approx(200.0)
    assert rows["learner_collector_wait_ms"] is None


def test_last_defaults_to_20(tmp_path, capsys) -> None:
    run = _v1_run(tmp_path, {"Perf/total_fps": [1000.0] * 5 + [float(i) for i in range(20)]})
    code, out, _ = _run(capsys, str(run), "--json")
    assert code == 0 and loads_strict(out)["steps_per_sec"] == pytest.approx(9.5)


def test_non_finite_value_in_window_is_null_with_warning(tmp_path, capsys) -> None:
    run = _v1_run(
        tmp_path,
        {
            "Perf/total_fps": [float("nan"), 5.0, float("inf")],
            "Perf/iteration_time": [float("nan"), 0.5],
        },
    )
    code, out, err = _run(capsys, str(run), "--json", "--last", "1")
    rows = loads_strict(out)  # strict: never NaN
    assert code == 0 and rows["steps_per_sec"] is None and rows["iter_ms"] == pytest.approx(500.0)
    assert "non-finite value among the last 1 of Perf/total_fps" in err
    assert "NaN" not in out and "Infinity" not in out


def test_text_mode_prints_the_logged_rows_and_names_the_others_once(tmp_path, capsys) -> None:
    run = _v1_run(
        tmp_path,
        {
            "Perf/total_fps": [1234.56789],
            "Perf/iteration_time": [float("nan")],
            "Train/mean_reward": [0.25],
        },
    )
    code, out, err = _run(capsys, str(run))
    *rows, footer = out.splitlines()
    assert code == 0
    assert [line.split() for line in rows] == [
        ["iter_ms", "null"],  # logged, but not finite: null, with a warning
        ["steps_per_sec", "1234.568"],
        ["mean_reward", "0.250"],
    ]
    absent = [n for n in ROW_NAMES if n not in ("iter_ms", "steps_per_sec", "mean_reward")]
    assert footer == f"(not logged by this run: {', '.join(absent)})"
    assert err.splitlines() == [
        (
            "warning: iter_ms: non-finite value among the last 1 of Perf/iteration_time; "
            "reporting null"
        )
    ]


@pytest.mark.parametrize(
    ("summary", "message"),
    [
        (None, "run summary lacks metric_schema_version"),
        ({"status": "completed"}, "run summary lacks metric_schema_version"),
        ({"metric_schema_version": 1.0}, "unsupported metric_schema_version 1.0"),
        ({"metric_schema_version": True}, "unsupported metric_schema_version true"),
        ({"metric_schema_version": "1"}, 'unsupported metric_schema_version "1"'),
        ({"metric_schema_version": 2}, "unsupported metric_schema_version 2"),
        ({"metric_schema_version": None}, "unsupported metric_schema_version null"),
        ([1], "is not a JSON object"),
        ('{"metric_schema_version": NaN}', "is unreadable"),
        ('{"metric_schema_version": 1, "metric_schema_version": 1}', "is unreadable"),
    ],
    ids=[
        "no-summary",
        "no-stamp",
        "float",
        "bool",
        "str",
        "two",
        "null",
        "array",
        "nan-token",
        "dup-key",
    ],
)
def test_v1_mode_rejects_bad_stamps(tmp_path, capsys, summary, message: str) -> None:
    run = _v1_run(tmp_path, {"Perf/total_fps": [1.0]}, summary=summary)
    code, out, err = _run(capsys, str(run), "--json")
    assert code == 1 and out == ""
    [line] = _error_lines(err)
    assert message in line


@pytest.mark.parametrize(
    ("series", "message"),
    [
        (
            {"Perf/total_fps": [1.0], "perf/iter_ms": [1.0]},
            "must not contain legacy tags: perf/iter_ms",
        ),
        ({"Perf/total_fps": [1.0], "train/mean_reward": [1.0]}, "must not contain legacy tags"),
        ({"Perf/total_fps": [1.0], "Perf/made_up": [1.0]}, "unregistered metric tags Perf/made_up"),
        ({"Perf/total_fps": [1.0], "reward/mean": [1.0]}, "unregistered metric tags reward/mean"),
        ({"Loss/critic": [1.0], "reward/track": [1.0]}, "no canonical metric tag"),
    ],
    ids=["legacy-perf", "legacy-train", "unregistered", "reward-mean", "no-candidate"],
)
def test_v1_mode_rejects_bad_tag_sets(tmp_path, capsys, series, message: str) -> None:
    code, _, err = _run(capsys, str(_v1_run(tmp_path, series)), "--json")
    assert code == 1 and message in _error_lines(err)[0]


def test_legacy_mode_reads_legacy_tags_without_scaling(tmp_path, capsys) -> None:
    write_scalars(
        tmp_path,
        {
            "perf/iter_ms": [10.0, 20.0],
            "timing/collector_cycle_ms": [3.0],
            "perf/collector_active_steps_per_sec": [7.0],
            "timing/learner_train_ms": [4.0],
            "something/else": [1.0],
        },
    )
    code, out, err = _run(capsys, str(tmp_path), "--legacy-unversioned", "--json")
    rows = loads_strict(out)
    assert code == 0, err
    assert (rows["iter_ms"], rows["collector_cycle_ms"], rows["learner_train_ms"]) == (
        15.0,
        3.0,
        4.0,
    )
    assert rows["collector_active_steps_per_sec"] == 7.0 and rows["steps_per_sec"] is None


@pytest.mark.parametrize(
    ("summary", "series", "message"),
    [
        (
            {"metric_schema_version": 1},
            {"perf/iter_ms": [1.0]},
            "cannot read a schema-stamped run summary",
        ),
        (
            {"metric_schema_version": None},
            {"perf/iter_ms": [1.0]},
            "cannot read a schema-stamped run summary",
        ),
        (
            None,
            {"perf/iter_ms": [1.0], "Perf/total_fps": [1.0]},
            "canonical tags require metric_schema_version",
        ),
        (None, {"perf/other": [1.0]}, "no recognised legacy tag"),
        (
            {"status": "failed"},
            {"Loss/aux_x": [1.0], "perf/iter_ms": [1.0]},
            "canonical tags require metric_schema_version",
        ),
    ],
    ids=["stamped", "stamped-null", "canonical-tag", "no-legacy-tag", "pattern-tag"],
)
def test_legacy_mode_errors(tmp_path, capsys, summary, series, message: str) -> None:
    run = _v1_run(tmp_path, series, summary=summary)
    code, _, err = _run(capsys, str(run), "--legacy-unversioned")
    assert code == 1 and message in _error_lines(err)[0]


def test_legacy_mode_is_never_implicit(tmp_path, capsys) -> None:
    write_scalars(tmp_path, {"perf/iter_ms": [1.0]})
    code, _, err = _run(capsys, str(tmp_path), "--json")
    assert code == 1 and "run summary lacks metric_schema_version" in err


def test_an_empty_dir_and_a_missing_dir_are_both_usage_errors(tmp_path, capsys) -> None:
    code, _, err = _run(capsys, str(tmp_path))
    assert code == 2 and _error_lines(err) == [
        f"error: no event file found under {tmp_path}; pass a run directory"
    ]
    code, _, err = _run(capsys, str(tmp_path / "missing"))
    assert code == 2 and _error_lines(err) == [
        f"error: LOG_DIR {tmp_path / 'missing'} is not a directory; pass a run directory"
    ]


def test_a_relative_log_dir_is_taken_from_the_cwd(tmp_path, capsys, monkeypatch) -> None:
    _v1_run(tmp_path / "run", {"Perf/total_fps": [3.0]})
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(capsys, "run", "--json")
    assert code == 0 and loads_strict(out)["steps_per_sec"] == 3.0
    code, _, err = _run(capsys, "nope")
    assert code == 2 and f"LOG_DIR {tmp_path / 'nope'} is not a directory" in err


def test_several_event_files_are_a_usage_error(tmp_path, capsys) -> None:
    write_scalars(tmp_path, {"Perf/total_fps": [1.0]})
    write_scalars(tmp_path / "nested", {"Perf/total_fps": [1.0]}, name="events.out.tfevents.2.h")
    code, _, err = _run(capsys, str(tmp_path))
    assert code == 2
    assert (
        f"expected exactly one event file under {tmp_path}; pass one run directory"
        in _error_lines(err)[0]
    )


def test_summary_is_read_beside_the_nested_event_file(tmp_path, capsys) -> None:
    _v1_run(tmp_path / "run", {"Perf/total_fps": [3.0]})
    code, out, _ = _run(capsys, str(tmp_path), "--json")
    assert code == 0 and loads_strict(out)["steps_per_sec"] == 3.0


def test_corrupt_event_file_is_exit_1_naming_the_offset(tmp_path, capsys) -> None:
    run = _v1_run(tmp_path, {"Perf/total_fps": [1.0, 2.0]})
    [path] = run.glob("events.out.tfevents.*")
    last_offset = [offset for offset, _ in iter_records(path)][-1]
    path.write_bytes(path.read_bytes()[:-1])
    code, out, err = _run(capsys, str(run), "--json")
    assert code == 1 and out == ""
    assert f"truncated record at byte offset {last_offset} " in _error_lines(err)[0]


@pytest.mark.parametrize(
    "argv",
    [["--last", "0"], ["--last", "x"], ["--bogus"], []],
    ids=["zero", "not-int", "flag", "no-dir"],
)
def test_usage_errors_exit_2_with_one_error_line(tmp_path, capsys, argv: list[str]) -> None:
    args = [str(tmp_path), *argv] if argv else []
    code, _, err = _run(capsys, *args)
    assert code == 2 and len(_error_lines(err)) == 1


@pytest.mark.slow
def test_subprocess_prints_one_error_line_and_never_imports_torch(tmp_path) -> None:
    run = _v1_run(tmp_path / "ok", {"Perf/total_fps": [1.0]})
    probe = (
        "import sys\n"
        "from harness.metrics.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "assert 'torch' not in sys.modules and 'tensorflow' not in sys.modules, 'torch imported'\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    ok = subprocess.run(
        [sys.executable, "-c", probe, str(run), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["steps_per_sec"] == 1.0
    bad = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert len([line for line in bad.stderr.splitlines() if line.startswith("error:")]) == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    none = subprocess.run(
        [str(Path(sys.executable).parent / "extract-metrics"), str(empty)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert none.returncode == 2 and none.stderr.splitlines() == [
        f"error: no event file found under {empty}; pass a run directory"
    ]
