"""The GPU smoke's parsing, judging, sequencing and table (harness/smoke), on fixture logs.

No GPU: the step commands are replaced by a runner that writes what each tool would have
written; the command runner itself is tested with real misbehaving processes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.smoke import cli, parse, steps
from harness.smoke.cli import Finished, Part, Smoke

IPC_LINE = (
    "[W1201 10:00:00.000000 1234 CudaIPCTypes.cpp:16] Producer process has been terminated "
    "before all shared CUDA tensors released. See Note [Sharing CUDA tensors]\n"
)


def console(*rates: tuple[int, float], tail: str = "") -> str:
    """A soak console: startup lines without a rate, then rated training lines."""
    lines = [
        "train: 00:00:01 startup/begin iteration 0/2000 env steps 0",
        "train: 00:00:20 training/startup_complete iteration 0/2000 env steps 0",
    ]
    lines += [
        f"train: 00:00:{30 + i:02d} training/learner_update iteration {it}/2000 "
        f"env steps {it * 1024:,} ({rate:,.0f} env steps/s)"
        for i, (it, rate) in enumerate(rates)
    ]
    return "\n".join(lines) + "\n" + tail


# -- parse ----------------------------------------------------------------------------------
def test_train_rates_reads_the_rated_training_lines_only() -> None:
    text = console((400, 80_500), (1200, 82_911))
    text += "train: 00:01:00 training/learner_update iteration 1300/2000 env steps 1 (1 env steps/s over the last 10 s)\n"
    assert parse.train_rates(text) == [
        parse.RateLine(400, 80_500.0),
        parse.RateLine(1200, 82_911.0),
        parse.RateLine(1300, 1.0),  # a rate with more words after it still parses
    ]


def test_steady_rates_that_agree_with_the_tail_are_sane() -> None:
    lines = parse.train_rates(console((100, 20_000), (800, 80_000), (1600, 84_000)))
    check = parse.check_rates(lines, tail=81_000.0)
    assert check.sane and check.reason == "steady"
    assert check.steady == (80_000.0, 84_000.0)  # the line before 25 % of the run is warm-up
    assert check.median == 82_000.0


def test_the_jumping_rate_line_of_issue_12_is_not_sane() -> None:
    lines = parse.train_rates(console((900, 6_770), (1400, 251_476), (2000, 1_164_979)))
    check = parse.check_rates(lines, tail=122_000.0)
    assert not check.sane
    assert check.reason == "steady train: rates span 6,770..1,164,979 env steps/s"


def test_a_rate_line_that_disagrees_with_the_tail_is_not_sane() -> None:
    check = parse.check_rates(parse.train_rates(console((1500, 30_000))), tail=120_000.0)
    assert not check.sane
    assert check.reason == "train: median 30,000 env steps/s disagrees with the tail 120,000"


def test_no_rated_line_is_not_sane() -> None:
    check = parse.check_rates(parse.train_rates(console()), tail=None)
    assert (check.sane, check.lines, check.median) == (False, 0, None)


def test_the_ipc_warning_is_found_in_torchs_line() -> None:
    assert parse.has_ipc_warning("ok\n" + IPC_LINE)
    assert not parse.has_ipc_warning(console((1000, 1.0)))


@pytest.mark.parametrize(
    ("output", "counts"),
    [
        (
            "....\n5 passed, 2 skipped, 310 deselected in 12.34s\n",
            {"passed": 5, "skipped": 2, "deselected": 310},
        ),
        (
            "=== 1 failed, 3 passed, 1 warning in 4.0s ===\n",
            {"failed": 1, "passed": 3, "warnings": 1},
        ),
        ("2 passed, 1 error in 1.00s\n", {"passed": 2, "errors": 1}),
        ("ImportError while loading conftest\n", {}),
    ],
)
def test_pytest_counts(output: str, counts: dict) -> None:
    assert parse.pytest_counts(output) == counts


def test_rate_text() -> None:
    assert [parse.rate_text(v) for v in (None, 950.0, 352_012.4)] == ["-", "950", "352.0k"]


# -- judging ----------------------------------------------------------------------------------
def probe_doc(mujoco_status: str = "passed") -> dict:
    return {
        "status": "passed" if mujoco_status == "passed" else "failed",
        "failure_reason": None if mujoco_status == "passed" else "mujoco: BackendCompilerFailed",
        "results": [
            {
                "backend": "mjwarp",
                "status": "passed",
                "throughput_env_control_steps_per_s": 352_012.0,
            },
            {
                "backend": "mujoco",
                "status": mujoco_status,
                "throughput_env_control_steps_per_s": 4_100.0,
            },
        ],
    }


def test_judge_probe_passes_with_both_backends(tmp_path: Path) -> None:
    doc = tmp_path / "probe.json"
    doc.write_text(json.dumps(probe_doc()))
    outcome = steps.judge_probe(0, "mjwarp: 352012 env control steps/s\n", doc)
    assert outcome.status == "passed" and outcome.ipc_warning is False
    assert outcome.key == "mjwarp 352.0k, mujoco 4.1k env steps/s"


def test_judge_probe_fails_naming_the_failed_backend(tmp_path: Path) -> None:
    doc = tmp_path / "probe.json"
    doc.write_text(json.dumps(probe_doc("failed")))
    outcome = steps.judge_probe(1, "", doc)
    assert outcome.status == "failed"
    assert outcome.problems == [
        "g1-backend-probe exited 1",
        "probe status 'failed': mujoco: BackendCompilerFailed",
        "mujoco: no passed result",
    ]
    assert outcome.key == "mjwarp 352.0k, mujoco - env steps/s"


def test_judge_probe_without_a_document(tmp_path: Path) -> None:
    outcome = steps.judge_probe(2, "", tmp_path / "missing.json")
    assert outcome.failed and outcome.problems[1].startswith("cannot read ")


def write_soak(
    folder: Path, *, status: str = "passed", text: str | None = None, tail: float = 81_000.0
) -> tuple[Path, Path]:
    run_dir = folder / "run"
    run_dir.mkdir(parents=True)
    artifact = folder / "soak.json"
    artifact.write_text(
        json.dumps({"status": status, "failure_reason": None if status == "passed" else "x"})
    )
    if text is None:
        text = console((800, 80_000), (1600, 84_000))
    (run_dir / "soak-console.log").write_text(text)
    summary = {"tail_env_steps_per_sec": tail, "steady_env_steps_per_sec": 82_300.0}
    (run_dir / "run_summary.json").write_text(json.dumps(summary))
    return run_dir, artifact


def test_judge_soak_passes_a_clean_run(tmp_path: Path) -> None:
    run_dir, artifact = write_soak(tmp_path)
    outcome = steps.judge_soak("soak null", 0, run_dir, artifact)
    assert outcome.status == "passed", outcome.problems
    assert outcome.ipc_warning is False
    assert (
        outcome.key
        == "soak passed; train: 82.0k env steps/s (2 steady of 2 lines, tail 81.0k, sane);"
        " device-timed 82.3k"
    )
    assert outcome.data["steady_env_steps_per_sec"] == 82_300.0
    assert outcome.data["rate_sane"] is True


def test_judge_soak_fails_on_the_ipc_warning_even_when_the_soak_passed(tmp_path: Path) -> None:
    run_dir, artifact = write_soak(
        tmp_path, text=console((800, 80_000), (1600, 84_000), tail=IPC_LINE)
    )
    outcome = steps.judge_soak("soak mps", 0, run_dir, artifact)
    assert outcome.failed and outcome.ipc_warning is True
    assert outcome.problems == [f"the soak console has torch's warning {parse.CUDA_IPC_WARNING!r}"]


def test_judge_soak_fails_on_an_insane_rate_line(tmp_path: Path) -> None:
    run_dir, artifact = write_soak(tmp_path, text=console((900, 6_770), (2000, 1_164_979)))
    outcome = steps.judge_soak("soak null", 0, run_dir, artifact)
    assert outcome.problems == ["rate line: steady train: rates span 6,770..1,164,979 env steps/s"]
    assert "NOT sane" in outcome.key


def test_judge_soak_reports_a_failed_verdict_and_a_missing_console(tmp_path: Path) -> None:
    outcome = steps.judge_soak("soak null", 1, tmp_path / "run", tmp_path / "soak.json")
    assert outcome.failed
    assert outcome.problems[0] == "g1-soak exited 1"
    assert outcome.problems[1].startswith("cannot read ") and "soak.json" in outcome.problems[1]
    assert outcome.problems[2].startswith("cannot read the soak console")


def test_judge_metrics() -> None:
    good = steps.judge_metrics(
        "metrics null", 0, json.dumps({"steps_per_sec": 82_911.0, "iter_ms": 12.3})
    )
    assert good.status == "passed" and good.key == "steps_per_sec 82.9k (mean of the last 20)"
    assert (
        steps.judge_metrics("m", 0, "not json")
        .problems[0]
        .startswith("extract-metrics printed no JSON")
    )
    assert steps.judge_metrics("m", 1, "").problems == ["extract-metrics exited 1"]
    failed = steps.judge_metrics(
        "m", 1, "", "error: no event file under /r; pass a run directory\n"
    )
    assert failed.problems == [
        "extract-metrics exited 1: no event file under /r; pass a run directory"
    ]


def test_judge_pytest() -> None:
    good = steps.judge_pytest(0, "14 passed, 1 skipped, 300 deselected in 200.1s\n")
    assert good.status == "passed" and good.key == "14 passed, 1 skipped"
    none_ran = steps.judge_pytest(0, "12 skipped, 300 deselected in 3.0s\n")
    assert none_ran.problems == ["no GPU test passed (is CUDA visible?)"]
    assert steps.judge_pytest(1, "1 failed, 13 passed in 200.0s\n").problems == ["pytest exited 1"]
    # A collection error stops pytest before any test: name the module, not CUDA.
    collection = steps.judge_pytest(
        2,
        "ERROR tests/docs/test_docs.py\nERROR tests/test_install.py\n"
        "!!!!!!!!!! Interrupted: 2 errors during collection !!!!!!!!!!\n"
        "1683 deselected, 2 errors in 17.55s\n",
    )
    assert collection.problems == [
        "pytest exited 2",
        "errors in tests/docs/test_docs.py, tests/test_install.py",
    ]


# pytest 9's own text for ``-q --durations=10`` (two rows shown, the rest hidden).
DURATIONS_OUTPUT = """..s.                                                                     [100%]
============================= slowest 10 durations =============================
283.41s call     tests/trainer/algo/test_fusion.py::test_on_cuda_all_five[x-1]
12.00s setup    tests/trainer/test_eval.py::test_eval[uniform starts]

(9 durations < 0.005s hidden.  Use -vv to show these durations.)
3 passed, 1 skipped in 301.20s
"""


def test_the_pytest_step_lists_the_slowest_gpu_tests() -> None:
    assert "--durations=10" in steps.pytest_argv("python")
    rows = parse.pytest_durations(DURATIONS_OUTPUT)
    assert rows == [
        parse.PytestDuration(
            283.41, "call", "tests/trainer/algo/test_fusion.py::test_on_cuda_all_five[x-1]"
        ),
        parse.PytestDuration(
            12.0, "setup", "tests/trainer/test_eval.py::test_eval[uniform starts]"
        ),
    ]
    outcome = steps.judge_pytest(0, DURATIONS_OUTPUT)
    assert outcome.key == "3 passed, 1 skipped, slowest test 283 s"
    assert outcome.data["slowest"][0] == {
        "seconds": 283.41, "phase": "call",
        "test": "tests/trainer/algo/test_fusion.py::test_on_cuda_all_five[x-1]",
    }  # fmt: skip
    assert parse.pytest_durations("14 passed in 2.0s\n") == []


# -- sequencing and the table -------------------------------------------------------------------
class ScriptedRunner:
    """Stands in for the tools: each step title maps to (rc, output, files it writes)."""

    def __init__(self, script: dict) -> None:
        self.script = script
        self.calls: list[str] = []
        self.argv: dict[str, list[str]] = {}
        self.notes: list[str] = []

    def note(self, line: str) -> None:
        self.notes.append(line)

    def stream(self, title: str, argv: list[str], timeout_s: float) -> Finished:
        self.calls.append(title)
        self.argv[title] = argv
        rc, output, write = self.script[title]
        if write is not None:
            write(argv)
        return Finished(rc, output, 1.0)

    capture = stream


def _arg(argv: list[str], flag: str) -> Path:
    return Path(argv[argv.index(flag) + 1])


def _probe_writes(argv: list[str]) -> None:
    _arg(argv, "--output").write_text(json.dumps(probe_doc()))


def _soak_writes(text: str):
    def write(argv: list[str]) -> None:
        write_soak_into(_arg(argv, "--log-dir"), _arg(argv, "--output"), text)

    return write


def write_soak_into(run_dir: Path, artifact: Path, text: str) -> None:
    run_dir.mkdir(parents=True)
    artifact.write_text(json.dumps({"status": "passed", "failure_reason": None}))
    (run_dir / "soak-console.log").write_text(text)
    (run_dir / "run_summary.json").write_text(json.dumps({"tail_env_steps_per_sec": 81_000.0}))


def full_script(**override) -> dict:
    clean = console((800, 80_000), (1600, 84_000))
    script = {
        "probe": (0, "", _probe_writes),
        "soak null": (0, "", _soak_writes(clean)),
        "metrics null": (0, json.dumps({"steps_per_sec": 82_000.0}), None),
        "soak thread": (0, "", _soak_writes(clean)),
        "metrics thread": (0, json.dumps({"steps_per_sec": 130_000.0}), None),
        "cumps start": (0, "started", None),
        "soak mps": (0, "", _soak_writes(clean)),
        "cumps stop": (0, "stopped", None),
        "metrics mps": (0, json.dumps({"steps_per_sec": 118_000.0}), None),
        "pytest -m gpu": (0, "20 passed in 300.0s\n", None),
    }
    script.update(override)
    return script


def test_a_clean_smoke_runs_every_step_in_order(tmp_path: Path) -> None:
    runner = ScriptedRunner(full_script())
    outcomes = Smoke(tmp_path, runner, sys.executable).run(set())
    assert runner.calls == list(full_script())
    assert [(o.step, o.status) for o in outcomes] == [(name, "passed") for name in full_script()]
    table = cli.render_table(outcomes)
    assert table.splitlines()[0].split() == [
        "step",
        "status",
        "key",
        "figures",
        "IPC",
        "warning",
        "s",
    ]
    assert "mjwarp 352.0k, mujoco 4.1k env steps/s" in table
    assert "steps_per_sec 118.0k (mean of the last 20)" in table
    assert cli.verdict_line(outcomes, tmp_path / "smoke.log").startswith("GPU smoke: passed")


def test_a_failing_step_does_not_stop_the_smoke_and_cumps_stop_still_runs(tmp_path: Path) -> None:
    ipc = console((800, 80_000), (1600, 84_000), tail=IPC_LINE)
    runner = ScriptedRunner(
        full_script(**{"probe": (1, "", None), "soak mps": (1, "", _soak_writes(ipc))})
    )
    outcomes = Smoke(tmp_path, runner, sys.executable).run(set())
    assert runner.calls == list(full_script())  # every step still ran, cumps stop included
    failed = [o.step for o in outcomes if o.failed]
    assert failed == ["probe", "soak mps"]
    mps = next(o for o in outcomes if o.step == "soak mps")
    assert mps.ipc_warning is True
    assert (
        cli.verdict_line(outcomes, Path("/x/smoke.log"))
        == "GPU smoke: FAILED (probe, soak mps); log: /x/smoke.log"
    )
    assert "smoke: soak mps: failed (1 s)" in runner.notes


def test_without_an_mps_daemon_the_mps_soak_fails_without_running(tmp_path: Path) -> None:
    runner = ScriptedRunner(full_script(**{"cumps start": (1, "error: no GPU", None)}))
    outcomes = Smoke(tmp_path, runner, sys.executable).run(set())
    assert "soak mps" not in runner.calls and "cumps stop" not in runner.calls
    status = {o.step: o.status for o in outcomes}
    assert (status["cumps start"], status["soak mps"], status["metrics mps"]) == (
        "failed",
        "failed",
        "skipped",
    )


def test_skipped_parts_are_rows_and_run_nothing(tmp_path: Path) -> None:
    runner = ScriptedRunner(full_script())
    outcomes = Smoke(tmp_path, runner, sys.executable).run(
        {Part.probe, Part.thread, Part.mps, Part.pytest}
    )
    assert runner.calls == ["soak null", "metrics null"]
    assert [o.status for o in outcomes] == [
        "skipped",
        "passed",
        "passed",
        "skipped",
        "skipped",
        "skipped",
        "skipped",
        "skipped",
    ]


def test_the_thread_soak_runs_the_collector_as_a_thread(tmp_path: Path) -> None:
    runner = ScriptedRunner(full_script())
    Smoke(tmp_path, runner, sys.executable).run({Part.probe, Part.null, Part.mps, Part.pytest})
    assert runner.calls == ["soak thread", "metrics thread"]
    argv = runner.argv["soak thread"]
    assert argv[argv.index("--extra-override") + 1] == "training.collector_placement=thread"


# -- the command line ------------------------------------------------------------------------------
def test_the_cli_refuses_an_out_directory_used_before(tmp_path: Path, capsys) -> None:
    (tmp_path / "smoke.log").write_text("old")
    assert cli.main(["--out", str(tmp_path), "--skip", "probe"]) == 2
    assert "already holds smoke.log" in capsys.readouterr().err


def test_the_cli_prints_the_table_last_and_writes_the_log(tmp_path: Path, capsys) -> None:
    skip = [
        arg for part in ("probe", "null", "thread", "mps", "pytest") for arg in ("--skip", part)
    ]
    assert cli.main(["--out", str(tmp_path / "smoke"), *skip]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"GPU smoke: passed; log: {tmp_path / 'smoke' / 'smoke.log'}"
    assert out[1].split()[:2] == ["step", "status"] and out[-1].split()[:2] == ["pytest", "-m"]
    assert "GPU smoke: passed" in (tmp_path / "smoke" / "smoke.log").read_text()


def test_the_cli_json_output(tmp_path: Path, capsys) -> None:
    skip = [
        arg for part in ("probe", "null", "thread", "mps", "pytest") for arg in ("--skip", part)
    ]
    assert cli.main(["--out", str(tmp_path / "smoke"), "--json", *skip]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "passed" and [s["status"] for s in doc["steps"]] == ["skipped"] * 8


def test_a_run_shorter_than_one_window_is_judged_by_its_finalize_lines() -> None:
    text = (
        "train: 00:00:40 startup/collector_start iteration 0/2000 env steps 0\n"
        "train: 00:00:58 finalize/collector_metrics_drain iteration 2000/2000 env steps "
        "2,148,352 (118,243 env steps/s (10 s))\n"
        "train: 00:00:58 finalize/logger_finish iteration 2000/2000 env steps 2,148,352 "
        "(118,243 env steps/s (10 s))\n"
    )
    check = parse.check_rates(parse.train_rates(text), 124_000.0)
    assert (check.lines, check.sane, check.median) == (2, True, 118_243.0)
