"""``g1-soak`` and ``soak-run`` flags, pre-launch validation and launch argv (docs/contracts.md §g1-soak, §other-commands)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.soak import cli, monitor, preflight
from harness.soak.cli import g1_soak_main, soak_run_main
from harness.soak.eta import SoakPlan
from harness.soak.trend import DEFAULT_THRESHOLDS, Threshold
from tests.harness.soak.artifact_builders import resource_summary

CHILDREN = Path(__file__).resolve().parents[2] / "faults" / "children"


class Captured:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.checked: list[list[str]] = []


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Captured:
    """Replace the monitor with a recorder that returns a passing artifact."""
    cap = Captured()

    def fake_run_soak(command, *, log_dir, output, cfg, motion_id=None, status_stream=None):
        cap.calls.append(
            {
                "command": command,
                "log_dir": log_dir,
                "output": output,
                "cfg": cfg,
                "motion_id": motion_id,
            }
        )
        artifact = {
            "status": "passed",
            "failure_classification": None,
            "failure_reason": None,
            "duration_s": 1.0,
            "returncode": 0,
            "monitor": {"sample_interval_s": cfg.sample_interval_s},
            "resource_summary": resource_summary(),
            "resource_trends": {
                "verdict": "bounded",
                "mode": cfg.trend_mode,
                "series": {"rss_kib": {"verdict": "bounded", "slope_per_hour": 1.5}},
            },
        }
        return monitor.SoakResult(artifact, output, True, None)

    def fake_check(command):
        cap.checked.append(list(command))
        return {"status": "ok"}

    monkeypatch.setattr(monitor, "run_soak", fake_run_soak)
    monkeypatch.setattr(preflight, "check_trainer_command", fake_check)
    return cap


def _paths(tmp_path: Path) -> list[str]:
    return ["--log-dir", str(tmp_path / "run"), "--output", str(tmp_path / "out.json")]


def test_g1_soak_builds_the_interpreter_pinned_argv_with_defaults(
    tmp_path: Path, captured: Captured, capsys
) -> None:
    assert g1_soak_main(_paths(tmp_path)) == 0
    call = captured.calls[0]
    assert call["command"] == [
        sys.executable,
        "-m",
        "trainer",
        "train",
        "--algo",
        "flashsac",
        "--task",
        "g1_motion_tracking",
        "--sim",
        "mjwarp",
        "algo.num_envs=1024",
        "algo.max_iterations=65000",
        "training.no_play=true",
        f"training.log_dir={tmp_path / 'run'}",
        "algo.save_interval=10000",
    ]
    cfg = call["cfg"]
    assert (cfg.sample_interval_s, cfg.startup_timeout_s, cfg.stale_progress_s) == (5, 900, 300)
    assert (cfg.post_shutdown_grace_s, cfg.min_duration_s) == (10, 1800)
    # Trend windows scale to the soak unless given (a 30-minute soak keeps 300 s / 600 s).
    assert (cfg.trend_mode, cfg.trend_warmup_s, cfg.trend_min_window_s) == ("enforce", None, None)
    assert cfg.plan == SoakPlan(iterations=65000, duration_s=None, min_duration_s=1800)
    assert cfg.trend_thresholds == DEFAULT_THRESHOLDS
    assert call["motion_id"] == "motions/g1/dance1_subject2_part.npz"
    out = capsys.readouterr().out
    assert "passed" in out and f"soak-report {tmp_path / 'out.json'}" in out
    assert captured.checked == [call["command"]]  # the trainer checked it before the launch


def test_g1_soak_maps_flags_motion_and_keeps_user_save_interval(
    tmp_path: Path, captured: Captured
) -> None:
    argv = [
        *_paths(tmp_path),
        "--sim",
        "mujoco",
        "--num-envs",
        "8",
        "--iterations",
        "20",
        "--motion",
        "synthetic",
        "--extra-override",
        "algo.save_interval=5",
        "--extra-override",
        "training.seed=3",
        "--trend-threshold",
        "rss_kib=1000:10",
        "--trend-mode",
        "report",
    ]
    assert g1_soak_main(argv) == 0
    call = captured.calls[0]
    assert call["command"][8:] == [
        "--sim",
        "mujoco",
        "algo.num_envs=8",
        "algo.max_iterations=20",
        "training.no_play=true",
        f"training.log_dir={tmp_path / 'run'}",
        "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz",
        "algo.save_interval=5",
        "training.seed=3",
    ]
    assert call["motion_id"] == "motions/g1/synthetic_dance.npz"
    assert call["cfg"].trend_thresholds["rss_kib"] == Threshold(1000, 10)
    assert call["cfg"].trend_mode == "report"


def test_motion_dance_asset_id_and_path(
    tmp_path: Path, captured: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert g1_soak_main([*_paths(tmp_path), "--motion", "dance"]) == 0
    assert (
        "env.commands.motion.motion_file=motions/g1/dance1_subject2_part.npz"
        in captured.calls[0]["command"]
    )
    clip = tmp_path / "clips" / "mine.npz"
    clip.parent.mkdir()
    clip.write_bytes(b"checked by the trainer")
    monkeypatch.chdir(tmp_path)
    assert g1_soak_main([*_paths(tmp_path / "b"), "--motion", "clips/mine.npz"]) == 0
    assert f"env.commands.motion.motion_file={clip}" in captured.calls[1]["command"]
    assert captured.calls[1]["motion_id"] == str(clip)
    assert g1_soak_main([*_paths(tmp_path / "c"), "--motion", "motions/g1/other.npz"]) == 0
    assert "env.commands.motion.motion_file=motions/g1/other.npz" in captured.calls[2]["command"]
    # A comma list is a clip set: aliases expand and paths become absolute in each item.
    assert g1_soak_main([*_paths(tmp_path / "d"), "--motion", "synthetic, clips , x/w.csv"]) == 0
    expected = f"motions/g1/synthetic_dance.npz,{clip.parent},x/w.csv"
    assert f"env.commands.motion.motion_file={expected}" in captured.calls[3]["command"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "dnace",
            (
                "error: --motion 'dnace' is no clip: pass one of synthetic, march, dance, an asset "
                "id ending in .npz or .csv, or an existing file; did you mean 'dance'?"
            ),
        ),
        (
            "/data/clip.npz",
            (
                "error: --motion '/data/clip.npz': no such file (/data/clip.npz); pass one of "
                "synthetic, march, dance, an asset id ending in .npz or .csv, or an existing file"
            ),
        ),
        (
            "synthetic,,march",
            (
                "error: --motion 'synthetic,,march' has an empty item; pass one of synthetic, "
                "march, dance, an asset id ending in .npz or .csv, or an existing file (a comma "
                "list is a clip set)"
            ),
        ),
        (
            "xyz",
            (
                "error: --motion 'xyz' is no clip: pass one of synthetic, march, dance, "
                "an asset id ending in .npz or .csv, or an existing file"
            ),
        ),
    ],
)
def test_a_motion_that_names_no_clip_is_exit_2_before_the_check(
    tmp_path: Path, captured: Captured, capsys, value: str, message: str
) -> None:
    assert g1_soak_main([*_paths(tmp_path), "--motion", value]) == 2
    assert capsys.readouterr().err.splitlines() == [message]
    assert captured.checked == [] and captured.calls == []


def test_json_output_is_one_strict_object(tmp_path: Path, captured: Captured, capsys) -> None:
    assert g1_soak_main([*_paths(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"status", "failure_classification", "failure_reason", "artifact", "monitor"}
    assert doc["status"] == "passed" and doc["artifact"] == str(tmp_path / "out.json")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--num-envs", "x"], "Invalid value for '--num-envs'"),
        (["--num-envs", "0"], "--num-envs=0 must be an integer > 0"),
        (["--iterations", "-1"], "--iterations=-1 must be an integer > 0"),
        (["--min-duration-seconds", "-1"], "--min-duration-seconds=-1 must be a number >= 0"),
        (["--sample-interval-seconds", "0"], "--sample-interval-seconds=0 must be a number > 0"),
        (["--startup-timeout-seconds", "0"], "--startup-timeout-seconds=0 must be a number > 0"),
        (["--stale-progress-seconds", "nan"], "--stale-progress-seconds=nan must be a number > 0"),
        (
            ["--post-shutdown-grace-seconds", "-2"],
            "--post-shutdown-grace-seconds=-2 must be a number >= 0",
        ),
        (["--sim", "isaac"], "'isaac' is not one of"),
        (["--extra-override", "novalue"], "must look like KEY=VALUE"),
        (
            ["--extra-override", "algo.num_envs=8"],
            "'algo.num_envs' is a soak-owned override; use --num-envs/--iterations/--log-dir instead",
        ),
        (
            ["--extra-override", " +training.log_dir =/x"],
            "'training.log_dir' is a soak-owned override",
        ),
        (
            ["--extra-override", "~training.no_play=false"],
            "'training.no_play' is a soak-owned override",
        ),
        (
            ["--extra-override", "training.sim_backend=mjwarp"],
            "'training.sim_backend' is a soak-owned override",
        ),
        (["--extra-override", "algo=sac"], "'algo' is a soak-owned override"),
        (
            ["--extra-override", "env.tensor_runtime=torch"],
            "env.tensor_runtime was removed (no alias)",
        ),
        (
            ["--extra-override", "env.tensor_runtime_device=cuda"],
            "env.tensor_runtime_device was removed (no alias)",
        ),
        (["--trend-threshold", "vram=1"], "unknown series 'vram'"),
        (["--duration-seconds", "0"], "--duration-seconds=0 must be a number of seconds > 0"),
        (["--duration-seconds", "nan"], "--duration-seconds=nan must be a number of seconds > 0"),
        (
            ["--duration-seconds", "600", "--min-duration-seconds", "1800"],
            (
                "--min-duration-seconds=1800 exceeds --duration-seconds=600: the trainer stops "
                "training when its budget is spent, so the soak would fail"
            ),
        ),
        (["--duration-seconds", "600", "--iterations", "0"], "--iterations=0 must be"),
        (
            ["--extra-override", "training.duration_seconds=60"],
            "'training.duration_seconds' is a soak-owned override; use --duration-seconds instead",
        ),
        (
            ["--motion", "synthetic", "--extra-override", "env.commands.motion.motion_file=x.npz"],
            "pass only --motion",
        ),
    ],
)
def test_g1_soak_rejects_bad_flags_with_exit_2_before_launch(
    tmp_path: Path, captured: Captured, capsys, argv: list[str], message: str
) -> None:
    assert g1_soak_main([*_paths(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert message in err
    assert captured.calls == []
    assert not (tmp_path / "run").exists() and not (tmp_path / "out.json").exists()


def test_pre_launch_order_bounds_before_paths_before_overrides_before_thresholds(
    tmp_path: Path, captured, capsys
) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    bad_all = [
        "--log-dir",
        str(full),
        "--output",
        str(tmp_path / "o.json"),
        "--num-envs",
        "0",
        "--extra-override",
        "algo.num_envs=1",
        "--trend-threshold",
        "x=1",
    ]
    assert g1_soak_main(bad_all) == 2
    assert "--num-envs=0" in capsys.readouterr().err
    assert g1_soak_main(bad_all[:4] + bad_all[6:]) == 2
    assert f"--log-dir {full} is not empty" in capsys.readouterr().err
    assert g1_soak_main(_paths(tmp_path) + bad_all[6:]) == 2
    assert "soak-owned override" in capsys.readouterr().err
    assert (
        g1_soak_main(
            _paths(tmp_path)
            + ["--extra-override", "env.tensor_runtime=x", "--trend-threshold", "x=1"]
        )
        == 2
    )
    assert "env.tensor_runtime was removed" in capsys.readouterr().err


def test_path_rules(
    tmp_path: Path, captured: Captured, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "f").write_text("x")
    assert g1_soak_main(_paths(tmp_path)) == 2
    assert "is not empty" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exists.json").write_text("{}")
    assert g1_soak_main(["--log-dir", "new", "--output", "exists.json"]) == 2
    assert f"--output {tmp_path / 'exists.json'} already exists" in capsys.readouterr().err
    (tmp_path / "exists.json").write_text("{}")
    assert (
        g1_soak_main(
            ["--log-dir", str(tmp_path / "new"), "--output", str(tmp_path / "exists.json")]
        )
        == 2
    )
    assert "already exists" in capsys.readouterr().err
    assert (
        g1_soak_main(
            ["--log-dir", str(tmp_path / "new"), "--output", str(tmp_path / "new" / "a.json")]
        )
        == 2
    )
    assert "lies inside --log-dir" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert g1_soak_main(["--log-dir", str(empty), "--output", str(tmp_path / "ok.json")]) == 0


def test_soak_run_substitutes_the_log_dir_for_whole_arguments_only(
    tmp_path: Path, captured: Captured
) -> None:
    argv = [
        *_paths(tmp_path),
        "--sample-interval-seconds",
        "1",
        "--",
        "python",
        "t.py",
        "{log_dir}",
        "--x={log_dir}",
    ]
    assert soak_run_main(argv) == 0
    call = captured.calls[0]
    assert call["command"] == ["python", "t.py", str(tmp_path / "run"), "--x={log_dir}"]
    assert call["cfg"].sample_interval_s == 1


def test_soak_run_requires_a_command(tmp_path: Path, captured: Captured, capsys) -> None:
    assert soak_run_main(_paths(tmp_path)) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_failed_soak_exits_1_and_unwritable_artifact_exits_1(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    def failing(command, **kwargs):
        art = {
            "status": "failed",
            "failure_classification": "timeout/startup",
            "failure_reason": "r",
            "monitor": {},
        }
        return monitor.SoakResult(art, kwargs["output"], False, "OSError: disk full")

    monkeypatch.setattr(monitor, "run_soak", failing)
    assert soak_run_main([*_paths(tmp_path), "--json", "--", "true"]) == 1
    captured = capsys.readouterr()
    assert "could not write the soak artifact" in captured.err
    assert json.loads(captured.out)["status"] == "failed"


@pytest.mark.slow
@pytest.mark.parametrize("script", ["g1-soak", "soak-run"])
def test_console_scripts_print_one_error_line_and_never_import_torch(
    tmp_path: Path, script: str
) -> None:
    main = {"g1-soak": "g1_soak_main", "soak-run": "soak_run_main"}[script]
    code = (
        "import sys\n"
        f"from harness.soak.cli import {main} as main\n"
        "import harness.soak.monitor, harness.report.cli\n"
        "bad = [m for m in ('torch', 'mujoco', 'warp', 'mujoco_warp', 'trainer') if m in sys.modules]\n"
        "assert not bad, bad\n"
        f"args = ['--log-dir', 'relative', '--output', '{tmp_path / 'o.json'}']\n"
        f"sys.exit(main(args + ['--sample-interval-seconds', '0', '--', 'true'] if '{script}' == 'soak-run' "
        "else args + ['--num-envs', '0']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("error:") == 1 and proc.stderr.startswith(
        "error: --num-envs=0" if script == "g1-soak" else "error: --sample-interval-seconds=0"
    )
    assert proc.stdout == ""


def test_help_lists_every_monitor_flag() -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(cli.g1_soak_app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for flag in (
        "--num-envs",
        "--iterations",
        "--duration-seconds",
        "--min-duration-seconds",
        "--sample-interval-seconds",
        "--startup-timeout-seconds",
        "--stale-progress-seconds",
        "--post-shutdown-grace-seconds",
        "--sim",
        "--motion",
        "--extra-override",
        "--log-dir",
        "--output",
        "--trend-mode",
        "--trend-threshold",
        "--trend-warmup-seconds",
        "--trend-min-window-seconds",
        "--json",
    ):
        assert flag in result.output


@pytest.mark.parametrize("main", [g1_soak_main, soak_run_main])
def test_an_unusable_verdict_schema_stops_the_soak_before_launch(
    tmp_path: Path, schema_dir: Path, captured: Captured, capsys, main
) -> None:
    """The verdict runs after a long soak; a schema it needs must be there at the start."""
    (schema_dir / "soak_artifact.0.3.0.json").write_text("{", encoding="utf-8")
    argv = [*_paths(tmp_path), "--", "true"] if main is soak_run_main else _paths(tmp_path)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: schema 'soak_artifact.0.3.0.json' in {schema_dir} cannot be used: not JSON"
    )
    assert err.count("\n") == 1 and not captured.calls
    assert not (tmp_path / "out.json").exists()


def test_g1_soak_duration_seconds_sizes_the_soak_in_time(
    tmp_path: Path, captured: Captured
) -> None:
    assert g1_soak_main([*_paths(tmp_path), "--duration-seconds", "600"]) == 0
    call = captured.calls[0]
    assert call["command"][10:14] == [
        "algo.num_envs=1024",
        "algo.max_iterations=null",  # no cap: the budget ends the run
        "training.duration_seconds=600",
        "training.no_play=true",
    ]
    cfg = call["cfg"]
    assert cfg.min_duration_s == 600  # the budget is the minimum unless given
    assert cfg.plan == SoakPlan(iterations=None, duration_s=600.0, min_duration_s=600)


def test_g1_soak_iterations_become_a_cap_of_a_time_budget(
    tmp_path: Path, captured: Captured
) -> None:
    argv = [*_paths(tmp_path), "--duration-seconds", "1800", "--iterations", "250000"]
    argv += ["--min-duration-seconds", "0"]
    assert g1_soak_main(argv) == 0
    call = captured.calls[0]
    assert "algo.max_iterations=250000" in call["command"]
    assert "training.duration_seconds=1800" in call["command"]
    assert call["cfg"].plan == SoakPlan(iterations=250000, duration_s=1800.0, min_duration_s=0)


def test_the_seed_form_keeps_its_semantics(tmp_path: Path, captured: Captured) -> None:
    assert g1_soak_main([*_paths(tmp_path), "--iterations", "3000"]) == 0
    call = captured.calls[0]
    assert "algo.max_iterations=3000" in call["command"]
    assert not any(a.startswith("training.duration_seconds") for a in call["command"])
    assert call["cfg"].min_duration_s == 1800


def test_the_summary_table_shows_the_budget_what_was_reached_and_the_trend_window(
    tmp_path: Path,
) -> None:
    artifact = {
        "status": "passed",
        "failure_classification": None,
        "failure_reason": None,
        "duration_s": 631.0,
        "returncode": 0,
        "resource_summary": resource_summary(),
        "budget": {
            "kind": "duration",
            "duration_s": 600.0,
            "iterations": None,
            "min_duration_s": 600.0,
            "reached": {
                "final_iteration": 71234,
                "training_s": 600.012,
                "stopped_by": "duration",
            },
        },
        "resource_trends": {
            "verdict": "bounded",
            "mode": "enforce",
            "series": {},
            "warmup_s": 120.0,
            "min_window_s": 300.0,
            "window_rule": "scaled",
            "planned_length_s": 600.0,
            "window_end": "last_training_progress",
        },
    }
    table = cli.render_summary(artifact, tmp_path / "a.json")
    cells = [line.replace("│", "|").strip().strip("|").split("|") for line in table.splitlines()]
    rows = {c[0].strip(): c[1].strip() for c in cells if len(c) == 2}
    assert rows["budget"] == "600 s of training"
    assert rows["reached"] == "iteration 71,234 after 600.0 s of training (stopped by duration)"
    assert (
        rows["trend window"] == "warm-up 120 s, minimum 300 s (scaled to 600 s), to training's end"
    )


@pytest.mark.parametrize("main", [g1_soak_main, soak_run_main])
def test_relative_paths_are_taken_from_the_cwd(
    tmp_path: Path, captured: Captured, monkeypatch: pytest.MonkeyPatch, main
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["--log-dir", "runs/../runs/a", "--output", "out/a.json"]
    assert main([*argv, "--", "true", "{log_dir}"] if main is soak_run_main else argv) == 0
    call = captured.calls[0]
    assert (call["log_dir"], call["output"]) == (
        tmp_path / "runs" / "a",
        tmp_path / "out" / "a.json",
    )
    if main is soak_run_main:
        assert call["command"] == ["true", str(tmp_path / "runs" / "a")]
    else:
        assert f"training.log_dir={tmp_path / 'runs' / 'a'}" in call["command"]
