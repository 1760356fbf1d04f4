"""The scaling sweep (harness/scaling): its input checks, its order of steps, its judging of
what each tool wrote, its document and table. The steps are replaced by a scripted runner
that writes what each tool would have written; one test runs the real tools on the CPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from contracts.jsonio import load_strict, loads_strict
from contracts.schemas import validate
from harness.scaling import cli, plan, read, run, table
from harness.scaling.plan import Part, Sharing, Sweep
from harness.scaling.run import DOC_NAME, LOG_NAME, SCHEMA, SweepRun
from harness.step_runner import Finished

TINY_ALGO = [
    f"algo.{kv}"
    for kv in ("batch_size=16", "actor_hidden_dim=16", "critic_hidden_dim=16", "num_atoms=11",
               "learning_starts=2")
]  # fmt: skip


def sweep(**change: Any) -> Sweep:
    fields = {
        "sizes": (1024, 2048), "sharing": (Sharing.null, Sharing.mps), "iterations": 1500,
        "replay_rows": plan.OWNER_REPLAY_ROWS, "sim": "mjwarp", "overrides": (), "cycles": 200,
        "device": "",
    }  # fmt: skip
    return Sweep(**{**fields, **change})


# -- what each tool writes ----------------------------------------------------------------
def _arg(argv: list[str], flag: str) -> Path:
    return Path(argv[argv.index(flag) + 1])


def env_doc(sizes: list[int]) -> dict:
    results = [
        {"num_envs": n, "full_task_step_ms": 4.0 + n / 1024, "full_task_steps_per_s": 1000.0 * n / (4.0 + n / 1024)}
        for n in sizes
    ]  # fmt: skip
    versions = {"torch": "2.11.0+cu130", "warp-lang": "1.19.0"}
    return {
        "benchmark": "env_throughput",
        "gpu": "NVIDIA H200",
        "versions": versions,
        "results": results,
    }


def writes_env(argv: list[str]) -> None:
    sizes = [int(n) for n in argv[argv.index("--num-envs") + 1].split(",")]
    _arg(argv, "--output").write_text(json.dumps(env_doc(sizes)))


def writes_profile(argv: list[str]) -> None:
    n = int(argv[argv.index("--num-envs") + 1])
    run = {
        "variant": "owner",
        "cycle_ms": 6.0 + n / 2048,
        "beside_env_steps_per_s": 130_000.0 * n / 1024,
    }
    _arg(argv, "--output").write_text(json.dumps({"device": "NVIDIA H200", "runs": [run]}))


def writes_soak(verdict: str = "passed"):
    def write(argv: list[str]) -> None:
        run_dir, n = _arg(argv, "--log-dir"), int(argv[argv.index("--num-envs") + 1])
        run_dir.mkdir(parents=True)
        reason = None if verdict == "passed" else "trend growing: rss_kib"
        _arg(argv, "--output").write_text(json.dumps({"status": verdict, "failure_reason": reason}))
        summary = {
            "final_env_steps_per_sec": 120.0 * n, "tail_env_steps_per_sec": 118.0 * n,
            "steady_env_steps_per_sec": 119.0 * n, "final_cycle_wall_ms": 6.5,
        }  # fmt: skip
        (run_dir / "run_summary.json").write_text(json.dumps(summary))

    return write


class ScriptedRunner:
    """Stands in for the tools: each step title maps to (rc, output, what it writes); the
    document as it stood when each step began is kept."""

    def __init__(self, out: Path, **override: tuple) -> None:
        self.out = out
        self.override = override
        self.calls: list[str] = []
        self.argv: dict[str, list[str]] = {}
        self.doc_before: dict[str, dict] = {}
        self.notes: list[str] = []

    def note(self, line: str) -> None:
        self.notes.append(line)

    def _default(self, title: str) -> tuple:
        if title == "env alone":
            return 0, "", writes_env
        if title.endswith("beside"):
            return 0, "", writes_profile
        if title.endswith("soak"):
            return 0, "", writes_soak()
        return 0, "", None  # cumps start / stop

    def stream(self, title: str, argv: list[str], timeout_s: float) -> Finished:
        self.calls.append(title)
        self.argv[title] = argv
        self.doc_before[title] = load_strict(self.out / DOC_NAME)
        rc, stderr, write = self.override.get(title, self._default(title))
        if write is not None:
            write(argv)
        return Finished(rc, stderr, 2.0)


def run_sweep(
    tmp_path: Path, skip: set[Part] | None = None, **override: tuple
) -> tuple[dict, ScriptedRunner]:
    runner = ScriptedRunner(tmp_path, **override)
    doc = SweepRun(sweep(), tmp_path, runner, sys.executable, skip or set()).run()
    assert validate(doc, SCHEMA) == []
    assert load_strict(tmp_path / DOC_NAME) == doc
    return doc, runner


# -- order and judging ---------------------------------------------------------------------
def test_a_clean_sweep_runs_null_before_mps_inside_one_daemon(tmp_path: Path) -> None:
    doc, runner = run_sweep(tmp_path)
    assert runner.calls == [
        "env alone",
        "1024 null beside", "1024 null soak", "2048 null beside", "2048 null soak",
        "cumps start",
        "1024 mps beside", "1024 mps soak", "2048 mps beside", "2048 mps soak",
        "cumps stop",
    ]  # fmt: skip
    assert doc["status"] == "passed" and doc["failures"] == []
    assert doc["finished_utc"] is not None
    # every document written while it ran was valid and said so
    assert {d["status"] for d in runner.doc_before.values()} == {"running"}
    assert [c["replay_buffer_n"] for c in doc["cells"]] == [8192, 4096, 8192, 4096]
    cell = doc["cells"][3]
    assert (cell["num_envs"], cell["sharing"]) == (2048, "mps")
    assert cell["beside"]["cycle_ms"] == 7.0
    assert cell["beside"]["env_step_ms"] == pytest.approx(1000 * 2048 / 260_000.0)
    assert cell["soak"]["final_env_steps_per_s"] == 120.0 * 2048
    assert cell["soak"]["cycle_ms"] == 6.5
    assert [row["num_envs"] for row in doc["env_alone"]["sizes"]] == [1024, 2048]


def test_the_steps_get_the_sizes_the_sharing_and_the_held_replay(tmp_path: Path) -> None:
    _, runner = run_sweep(tmp_path)
    profile = runner.argv["2048 mps beside"]
    assert profile[profile.index("--variants") + 1] == "owner"
    assert profile[profile.index("--beside-env") + 1] == "2048"
    assert "--mps" in profile and "algo.replay_buffer_n=4096" in profile
    assert "--mps" not in runner.argv["2048 null beside"]
    soak = runner.argv["2048 mps soak"]
    assert soak[soak.index("--num-envs") + 1] == "2048"
    assert plan.MPS_OVERRIDE in soak and "algo.replay_buffer_n=4096" in soak
    assert plan.MPS_OVERRIDE not in runner.argv["2048 null soak"]


def test_a_failed_step_is_named_and_the_sweep_goes_on(tmp_path: Path) -> None:
    doc, runner = run_sweep(
        tmp_path,
        **{
            "1024 null beside": (
                1,
                "error: the env beside exited 1 during the measurement\n",
                None,
            ),
            "2048 mps soak": (1, "", writes_soak("failed")),
        },
    )
    assert runner.calls[-1] == "cumps stop" and len(runner.calls) == 11
    assert doc["status"] == "failed"
    assert doc["failures"] == [
        "1024 null beside: learner_profile exited 1: the env beside exited 1 during the measurement",
        "2048 mps soak: g1-soak exited 1; soak failed: trend growing: rss_kib",
    ]
    assert doc["cells"][0]["beside"]["cycle_ms"] is None
    text = table.render(doc, "simple")
    assert text.splitlines()[0] == (
        "scaling sweep: failed (NVIDIA H200; torch 2.11.0+cu130; warp-lang 1.19.0)"
    )
    assert "  failed: 2048 mps soak: g1-soak exited 1; soak failed" in text


def test_without_a_daemon_the_mps_cells_fail_without_running(tmp_path: Path) -> None:
    doc, runner = run_sweep(tmp_path, **{"cumps start": (1, "error: no GPU answers\n", None)})
    assert runner.calls == [
        "env alone", "1024 null beside", "1024 null soak", "2048 null beside", "2048 null soak",
        "cumps start",
    ]  # fmt: skip
    assert doc["mps_daemon"]["stop"]["status"] == "skipped"
    assert doc["failures"][0] == "cumps start: cumps start exited 1: no GPU answers"
    assert doc["failures"][1:] == [
        f"{n} mps {part}: no MPS daemon: cumps start failed"
        for n in (1024, 2048) for part in ("beside", "soak")
    ]  # fmt: skip


def test_skipped_parts_run_nothing_and_still_pass(tmp_path: Path) -> None:
    doc, runner = run_sweep(tmp_path, skip={Part.soak, Part.env_alone})
    assert not [c for c in runner.calls if c.endswith("soak") or c == "env alone"]
    assert doc["status"] == "passed"
    assert {c["soak"]["status"] for c in doc["cells"]} == {"skipped"}
    row = table.table_rows(doc)[0]
    assert row[2] == "- / -" and row[6] == "-" and row[7] == "passed/skipped"


def test_the_github_table_holds_every_column_of_the_scaling_table(tmp_path: Path) -> None:
    doc, _ = run_sweep(tmp_path)
    lines = table.render(doc, "github").splitlines()
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in lines[1:4]]
    assert cells[0] == table.HEADERS
    assert cells[2] == [
        "1024", "null", "122.9k / 120.8k", "6.50", "6.50", "7.88 (130.0k)", "5.00", "passed",
    ]  # fmt: skip


def test_a_sweep_stopped_from_outside_says_so_in_its_document(tmp_path: Path) -> None:
    def interrupted(argv: list[str]) -> None:
        raise KeyboardInterrupt

    runner = ScriptedRunner(tmp_path, **{"1024 null soak": (0, "", interrupted)})
    with pytest.raises(KeyboardInterrupt):
        SweepRun(sweep(), tmp_path, runner, sys.executable, set()).run()
    doc = load_strict(tmp_path / DOC_NAME)
    assert validate(doc, SCHEMA) == []
    assert doc["status"] == "failed" and doc["finished_utc"] is not None
    assert doc["failures"] == ["the sweep was stopped by SIGINT"]
    assert table.cell_status(doc["cells"][0]) == "running"  # its soak never ended


def test_a_sweep_stopped_inside_the_daemon_stops_the_daemon(tmp_path: Path) -> None:
    def terminated(argv: list[str]) -> None:
        raise SystemExit(143)  # what the run command's SIGTERM handler raises

    runner = ScriptedRunner(tmp_path, **{"2048 mps beside": (0, "", terminated)})
    with pytest.raises(SystemExit):
        SweepRun(sweep(), tmp_path, runner, sys.executable, set()).run()
    assert runner.calls[-2:] == ["2048 mps beside", "cumps stop"]
    doc = load_strict(tmp_path / DOC_NAME)
    assert doc["mps_daemon"]["stop"]["status"] == "passed"
    assert doc["failures"] == ["the sweep was stopped by SIGTERM"]


@pytest.mark.parametrize(
    ("stop", "name"),
    [
        (KeyboardInterrupt(), "SIGINT"),
        (SystemExit(143), "SIGTERM"),
        (SystemExit(3), "SystemExit(3)"),
    ],
)
def test_the_stop_names_its_signal(stop: BaseException, name: str) -> None:
    assert run.signal_of(stop) == name


# -- readers ------------------------------------------------------------------------------
def test_a_profile_without_the_env_beside_fails_its_step(tmp_path: Path) -> None:
    path = tmp_path / "lp.json"
    path.write_text(
        json.dumps({"device": "cpu", "runs": [{"cycle_ms": 4.0, "beside_env_steps_per_s": None}]})
    )
    figures, problems = read.beside_figures(path, 8)
    assert figures["cycle_ms"] == 4.0 and figures["env_step_ms"] is None
    assert problems == [f"the learner profile {path} has no rate of the env beside"]


def test_non_finite_and_boolean_figures_are_not_figures(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "soak.json").write_text(json.dumps({"status": "passed"}))
    (run_dir / "run_summary.json").write_text(
        '{"final_env_steps_per_sec": true, "tail_env_steps_per_sec": 5}'
    )
    figures, problems = read.soak_figures(tmp_path / "soak.json", run_dir)
    assert problems == [] and figures["final_env_steps_per_s"] is None
    assert figures["tail_env_steps_per_s"] == 5.0 and isinstance(
        figures["tail_env_steps_per_s"], float
    )


def test_an_env_benchmark_without_results_fails_its_step(tmp_path: Path) -> None:
    path = tmp_path / "env.json"
    path.write_text(json.dumps({"gpu": None, "results": []}))
    assert read.env_alone_figures(path)[1] == [f"the env benchmark {path} holds no result"]


# -- the command line ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--num-envs", "1024,x"], "--num-envs '1024,x' must be a comma list of distinct positive env counts"),
        (["--num-envs", "8,8"], "must be a comma list of distinct positive env counts"),
        (["--sharing", "null,thread"], "--sharing 'null,thread' must be a comma list of ['null', 'mps']"),
        (["--sim", "mujoco", "--sharing", "mps"], "--sharing mps needs --sim mjwarp, not 'mujoco'"),
        (["--override", "training.log_interval=5"], "is not an algo.* key"),
        (["--override", "algo.replay_buffer_n=5"], "'algo.replay_buffer_n' is set by the sweep"),
        (["--override", "batch_size"], "must look like KEY=VALUE"),
        (["--replay-rows", "4"], "--replay-rows 4 is smaller than --num-envs 8"),
        (["--format", "html"], "--format 'html' must be simple or github"),
        (["--sim", "isaac"], "--sim 'isaac' must be mjwarp or mujoco"),
        (["--override", "algo.batch_size=4096"], "at --num-envs 8: algo.batch_size=4096 exceeds the replay capacity"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    tmp_path: Path, capsys, args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    base = [
        "run",
        "--sim",
        "mujoco",
        "--sharing",
        "null",
        "--num-envs",
        "8",
        "--replay-rows",
        "128",
    ]
    assert cli.main([*base, *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not out.exists()


def test_an_out_directory_used_before_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / DOC_NAME).write_text("{}")
    args = ["run", "--sim", "mujoco", "--sharing", "null", "--num-envs", "8"]
    assert cli.main([*args, "--out", str(tmp_path)]) == 2
    assert f"already holds {DOC_NAME}" in capsys.readouterr().err
    assert (tmp_path / DOC_NAME).read_text() == "{}"


def test_table_shows_a_sweep_still_running(tmp_path: Path, capsys) -> None:
    _, runner = run_sweep(tmp_path / "done")
    mid = tmp_path / "mid" / DOC_NAME
    mid.parent.mkdir()
    mid.write_text(json.dumps(runner.doc_before["2048 null soak"]))  # as a reader finds it
    assert cli.main(["table", str(mid.parent)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("scaling sweep: running (NVIDIA H200;")
    assert lines[-1].split()[0] == "2048" and lines[-1].split()[-1] == "running"


def test_table_refuses_a_file_that_is_not_a_sweep(tmp_path: Path, capsys) -> None:
    (tmp_path / DOC_NAME).write_text(json.dumps({"tool": "smoke"}))
    assert cli.main(["table", str(tmp_path)]) == 2
    assert f"is not a {SCHEMA} document" in capsys.readouterr().err


QUICK_PROFILE = ("--warmup", "0", "--profile-cycles", "1")
"""The profile's untimed and profiled cycles (5 and 10 by default, about 1 s each on 2 cores)."""
QUICK_SOAK = ("--sample-interval-seconds", "0.5", "--post-shutdown-grace-seconds", "0.5")
"""The soak's sample interval and its wait before the residual check (5 s and 10 s by default)."""


@pytest.mark.slow  # runs the real tools: compiles, trains, soaks
@pytest.mark.timeout(1200)  # 398 s in CI with cold compile caches
def test_a_tiny_cpu_sweep_runs_the_real_tools(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One size, time-sliced, the mujoco env: every tool runs for real and its figures land.
    The profile and the soak get the test-only limits the sweep leaves at their defaults
    (``QUICK_PROFILE``, ``QUICK_SOAK``): the steps' own argv, those flags added."""
    beside_argv, soak_argv = plan.beside_argv, plan.soak_argv
    monkeypatch.setattr(plan, "beside_argv", lambda *a: [*beside_argv(*a), *QUICK_PROFILE])
    monkeypatch.setattr(plan, "soak_argv", lambda *a: [*soak_argv(*a), *QUICK_SOAK])
    out = tmp_path / "sweep"
    overrides = [f"--override={kv}" for kv in TINY_ALGO]
    args = [
        "run", "--sim", "mujoco", "--device", "cpu", "--sharing", "null", "--num-envs", "8",
        "--iterations", "6", "--replay-rows", "128", "--cycles", "2", *overrides,
        "--out", str(out), "--json",
    ]  # fmt: skip
    assert cli.main(args) == 0, (out / LOG_NAME).read_text()[-3000:]
    doc = loads_strict(capsys.readouterr().out)
    assert doc == load_strict(out / DOC_NAME) and validate(doc, SCHEMA) == []
    (cell,) = doc["cells"]
    assert cell["beside"]["device"] == "cpu" and cell["beside"]["env_step_ms"] > 0
    assert cell["soak"]["verdict"] == "passed" and cell["soak"]["final_env_steps_per_s"] > 0
    assert doc["env_alone"]["sizes"][0]["num_envs"] == 8
    assert doc["env_alone"]["versions"]["torch"]  # the versions the figures ran with
    assert cli.main(["table", str(out)]) == 0
    assert capsys.readouterr().out == table.render(doc, "simple")
