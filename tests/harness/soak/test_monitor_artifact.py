"""The monitor in-process and the 0.3.0 artifact writer (docs/contracts.md §soak-monitor, §soak-artifact)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from contracts.jsonio import load_strict
from contracts.schemas import validate
from harness.soak import artifact as artifact_mod
from harness.soak.context import motion_context, software_context
from harness.soak.eta import SoakPlan
from harness.soak.monitor import MonitorCfg, SoakResult, StatusPrinter, run_soak, status_line

FAST = MonitorCfg(
    sample_interval_s=0.05,
    startup_timeout_s=5,
    stale_progress_s=5,
    post_shutdown_grace_s=0,
    min_duration_s=0,
)

# A trainer that reports its environment and process group, writes to both streams.
ENV_REPORTER = r"""
import json, os, sys
log_dir = sys.argv[1]
print("to stdout"); print("to stderr", file=sys.stderr)
keys = ("PYTHONUNBUFFERED", "G1SOAK_LOG_DIR", "G1SOAK_RUN_ID")
info = {k: os.environ.get(k) for k in keys}
info.update(pid=os.getpid(), pgid=os.getpgid(0), sid=os.getsid(0))
with open(os.path.join(log_dir, "env.json"), "w") as f:
    json.dump(info, f)
"""


def _soak(tmp_path: Path, command: list[str], output: Path | None = None) -> SoakResult:
    """``run_soak`` with the fast config, no status line, ``tmp_path/run`` as the log dir."""
    return run_soak(
        command,
        log_dir=tmp_path / "run",
        output=output if output is not None else tmp_path / "a.json",
        cfg=FAST,
        status_stream=None,
    )


def _env_reporter(tmp_path: Path) -> SoakResult:
    """Soak ENV_REPORTER, which writes ``env.json`` into its log dir and no summary."""
    return _soak(tmp_path, [sys.executable, "-c", ENV_REPORTER, str(tmp_path / "run")])


def test_launch_gives_a_new_session_marker_env_and_console_log(tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = _env_reporter(tmp_path)
    info = load_strict(run / "env.json")
    art = result.artifact
    assert info["PYTHONUNBUFFERED"] == "1" and info["G1SOAK_LOG_DIR"] == str(run)
    assert info["G1SOAK_RUN_ID"] == art["monitor"]["soak_id"]
    assert info["pgid"] == info["pid"] == info["sid"] != os.getpgid(0)
    console = (run / "soak-console.log").read_text()
    assert "to stdout" in console and "to stderr" in console
    assert art["monitor"]["subreaper"] is True
    # The trainer wrote no summary: the verdict says so, and the artifact still validates.
    assert art["failure_classification"] == "missing_run_summary"
    assert validate(load_strict(tmp_path / "a.json"), "soak_artifact.0.3.0.json") == []
    # progress excludes the console log: only env.json counts.
    assert art["resource_summary"]["max_progress_bytes"] in (0, (run / "env.json").stat().st_size)


def test_unstartable_command_still_writes_a_failed_artifact(tmp_path: Path) -> None:
    result = _soak(tmp_path, [str(tmp_path / "no-such-trainer")])
    art = load_strict(tmp_path / "a.json")
    assert result.written and art["status"] == "failed"
    assert art["failure_classification"] == "launch_failure"
    assert art["failure_reason"].startswith("could not start the trainer: ")
    assert art["returncode"] is None and art["samples"] == []
    assert validate(art, "soak_artifact.0.3.0.json") == []


def test_self_validation_failure_is_a_monitor_failure_and_still_written(
    tmp_path: Path, monkeypatch
) -> None:
    real = artifact_mod.assemble_artifact

    def broken(inputs):
        doc = real(inputs)
        doc["duration_s"] = "long"
        return doc

    monkeypatch.setattr(artifact_mod, "assemble_artifact", broken)
    result = _soak(tmp_path, ["true"])
    art = load_strict(tmp_path / "a.json")
    assert result.written and not result.passed
    assert art["status"] == "failed"
    # missing_run_summary came first; the self-validation reason is appended.
    assert "artifact self-validation failed: $.duration_s" in art["failure_reason"]


def test_self_validate_sets_monitor_failure_on_an_otherwise_passing_artifact() -> None:
    doc = {"status": "passed", "failure_reason": None, "failure_classification": None}
    artifact_mod.self_validate(doc)
    assert doc["status"] == "failed" and doc["failure_classification"] == "monitor_failure"
    assert doc["failure_reason"].startswith(
        "soak monitor failed: artifact self-validation failed: $"
    )


def test_unwritable_output_is_reported_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = _soak(tmp_path, ["true"], output=blocker / "a.json")
    assert not result.written and result.write_error and not result.passed


def _sample() -> dict:
    classes = dict.fromkeys(
        ("pipe", "socket", "memfd", "eventfd", "eventpoll", "nvidia", "shared_memory", "other"), 0
    )
    classes["eventfd"] = 3
    return {
        "elapsed_s": 3725.2,
        "process": {
            "process_count": 2,
            "rss_kib_total": 2 * 1024 * 1024,
            "fd_count_total": 40,
            "fd_classes_total": classes,
            "processes": [],
        },
        "gpu": {
            "process_count": 1,
            "used_memory_mib_total": 1234,
            "processes": [],
            "source": "nvml",
            "errors": [],
        },
        "progress": {
            "file_count": 3,
            "bytes_total": 10,
            "max_mtime": 1.0,
            "last": {"phase": "training/learner_update", "iteration": 1200, "total_env_steps": 99},
        },
    }


def test_status_line_shows_elapsed_iteration_rss_gpu_and_fds() -> None:
    line = status_line(_sample())
    for part in (
        "[01:02:05]",
        "iter 1,200",
        "steps 99",
        "procs 2",
        "rss 2.0 GiB",
        "gpu 1234 MiB",
        "fds 40",
        "eventfd 3",
    ):
        assert part in line


def test_status_line_shows_the_trainers_windowed_rate_and_the_eta() -> None:
    sample = _sample()
    sample["progress"]["last"].update(
        env_steps_per_sec=122040.4, iterations_per_sec=119.2, rate_window_s=10.0
    )
    plan = SoakPlan(iterations=65000, duration_s=None, min_duration_s=1800)
    line = status_line(sample, plan)
    assert "iter 1,200/65,000 steps 99 | 122,040 env steps/s (10 s) | 119.2 it/s | " in line
    # (65000 - 1200) / 119.2 = 535 s left; at 3725 s the soak has long cleared 1800 s.
    assert "ETA 00:08:55, ends ~01:11:00 clears min 00:30:00" in line


def test_status_printer_plain_lines_off_a_tty() -> None:
    stream = io.StringIO()
    printer = StatusPrinter(stream)
    printer.show("a")
    printer.show("b")
    printer.finish()
    assert stream.getvalue() == "a\nb\n"


def test_status_printer_redraws_on_a_tty() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    printer = StatusPrinter(stream)
    printer.show("a")
    printer.show("b")
    printer.finish()
    assert stream.getvalue() == "\r\x1b[2Ka\r\x1b[2Kb\n"


def test_resource_summary_takes_sample_maxima_and_producer_counters() -> None:
    summary = artifact_mod.resource_summary([_sample()], None, 0)
    assert summary["max_process_rss_kib"] == 2 * 1024 * 1024
    assert summary["max_gpu_used_memory_mib"] == 1234 and summary["max_eventfd_count"] == 3
    assert summary["replay_ingress_depth"] is None and summary["ipc_event_count"] is None


def test_context_never_imports_torch_and_hashes_the_motion(tmp_path: Path) -> None:
    clip = tmp_path / "clip.npz"
    clip.write_bytes(b"abc")
    ctx = motion_context(str(clip))
    digest = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # of b"abc"
    assert ctx == {"id": str(clip), "file_sha256": digest, "sha256": digest, "source": "path"}
    missing = motion_context("motions/g1/none.npz")
    assert missing["file_sha256"] is None and missing["sha256"] is None
    software = software_context()
    assert software["python"] and "torch" in software


def test_monitor_exception_terminates_the_trainer_and_is_a_monitor_failure(
    tmp_path: Path, monkeypatch
) -> None:
    from harness.soak import monitor as monitor_mod

    calls = {"n": 0}
    real = monitor_mod.sample_progress

    def flaky(log_dir):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("disk vanished")
        return real(log_dir)

    monkeypatch.setattr(monitor_mod, "sample_progress", flaky)
    result = _soak(tmp_path, [sys.executable, "-c", "import time; time.sleep(60)"])
    art = result.artifact
    assert art["failure_classification"] == "monitor_failure"
    assert art["failure_reason"].startswith("soak monitor failed: RuntimeError: disk vanished")
    assert art["monitor"]["termination"] == ["SIGTERM"] and art["returncode"] == -15
    assert validate(load_strict(tmp_path / "a.json"), "soak_artifact.0.3.0.json") == []


def test_children_the_monitor_had_before_the_launch_are_not_residue(tmp_path: Path) -> None:
    # An embedding program's own helper (here a sleeper; in pytest, multiprocessing's
    # resource tracker) is not something the trainer left behind.
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        result = _env_reporter(tmp_path)
        art = result.artifact
        assert art["post_shutdown"]["residual_processes"] == []
        assert art["failure_classification"] == "missing_run_summary"
        assert helper.poll() is None, "the monitor must leave processes it did not launch alone"
    finally:
        helper.kill()
        helper.wait()


# A trainer that trains far too fast for its minimum: progress lines at 20 % and 100 %.
FAST_TRAINER = r"""
import json, os, sys, time
log_dir = sys.argv[1]
def line(iteration, phase="training/learner_update"):
    doc = {"time_utc": "2026-11-29T00:00:00Z", "phase": phase, "iteration": iteration,
           "total_env_steps": iteration * 8, "env_steps_per_sec": 8000.0,
           "iterations_per_sec": 1000.0, "rate_window_s": 10.0,
           "training_elapsed_s": iteration / 1000.0}
    with open(os.path.join(log_dir, "progress.jsonl"), "a") as f:
        f.write(json.dumps(doc) + "\n")
line(200)
time.sleep(0.5)
line(1000)
time.sleep(0.3)
line(1000, "finalize/logger_finish")
time.sleep(0.3)
"""


def test_a_soak_that_will_end_too_soon_is_warned_about_and_told_how_to_fill_it(
    tmp_path: Path,
) -> None:
    stream = io.StringIO()
    cfg = MonitorCfg(
        sample_interval_s=0.05,
        startup_timeout_s=5,
        stale_progress_s=5,
        post_shutdown_grace_s=0,
        min_duration_s=60,
        plan=SoakPlan(iterations=1000, duration_s=None, min_duration_s=60),
    )
    result = run_soak(
        [sys.executable, "-c", FAST_TRAINER, str(tmp_path / "run")],
        log_dir=tmp_path / "run",
        output=tmp_path / "a.json",
        cfg=cfg,
        status_stream=stream,
    )
    art = result.artifact
    warnings = [x for x in stream.getvalue().splitlines() if x.startswith("warning:")]
    assert len(warnings) == 1  # once, not per sample
    assert "this soak will end near" in warnings[0]
    assert "before --min-duration-seconds=60, and fail" in warnings[0]
    assert "--duration-seconds 60" in warnings[0]
    assert art["budget"]["early_warning"] == warnings[0]
    assert art["budget"]["kind"] == "iterations" and art["budget"]["iterations"] == 1000
    reason = next(
        f["reason"] for f in art["judgement"]["monitor_findings"] if f["check"] == "min_duration"
    )
    assert reason.startswith("soak completed before min_duration_seconds=60 (ran ")
    assert " 1000 iterations at " in reason
    assert reason.endswith("it/s); size it in time with --duration-seconds 60")
    assert validate(load_strict(tmp_path / "a.json"), "soak_artifact.0.3.0.json") == []


# A trainer that fails the way ours does: a traceback-free console, one error line, exit 2.
SAYS_WHY = r"""
import sys
for i in range(60):
    print(f"log line {i}")
print("\x1b[1mbold\x1b[0m progress 10%\rprogress 100%")
print("error: unknown config key 'algo.batchsize'; did you mean 'algo.batch_size'?", file=sys.stderr)
sys.exit(2)
"""


def test_a_failed_trainer_is_quoted_in_the_reason_and_its_console_tail_is_kept(
    tmp_path: Path,
) -> None:
    result = _soak(tmp_path, [sys.executable, "-c", SAYS_WHY])
    art = load_strict(tmp_path / "a.json")
    assert validate(art, "soak_artifact.0.3.0.json") == []
    assert art["failure_reason"] == (
        "trainer exited with returncode 2: error: unknown config key 'algo.batchsize'; "
        "did you mean 'algo.batch_size'?; trainer did not write run_summary.json"
    )
    tail = art["console_tail"]
    assert len(tail) == 40 and tail[0] == "log line 22"
    assert tail[-2:] == [
        "progress 100%",
        "error: unknown config key 'algo.batchsize'; did you mean 'algo.batch_size'?",
    ]
    assert result.artifact["console_tail"] == tail


def test_console_tail_is_null_without_a_console_log(tmp_path: Path) -> None:
    from harness.soak.console import exit_reason, read_tail

    assert read_tail(tmp_path / "none.log") is None
    assert exit_reason(1, tmp_path / "none.log") == "trainer exited with returncode 1"
    log = tmp_path / "long.log"
    log.write_bytes(b"x" * 300_000 + b"\n" + "é".encode() * 1200 + b"\nlast\n")
    tail = read_tail(log)
    assert tail is not None and tail[-1] == "last" and len(tail[-2]) == 1000
    assert tail[-2].endswith("...")
