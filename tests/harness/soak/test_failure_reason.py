"""The soak's failure reason says the cause once and the fix once, and a soak that only ran
too short, or whose trainer never started, is classed as such (harness.soak.headline).

The command tests run the real ``soak-run`` and ``g1-soak`` as subprocesses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.jsonio import load_strict
from contracts.schemas import validate
from harness.soak.console import error_line, read_tail
from harness.soak.eta import SoakPlan, min_duration_reason
from harness.soak.headline import failure_reason, unclassified
from harness.soak.rejudge import replay

REPO = Path(__file__).resolve().parents[3]
FAKE_TRAINER = REPO / "tests" / "faults" / "children" / "fake_trainer.py"
SOAK_RUN = [sys.executable, "-c", "from harness.soak.cli import soak_run_main; soak_run_main()"]
G1_SOAK = [sys.executable, "-m", "harness.soak"]
FAST = [
    "--sample-interval-seconds", "0.1", "--startup-timeout-seconds", "5",
    "--stale-progress-seconds", "5", "--post-shutdown-grace-seconds", "0",
]  # fmt: skip
MAX_REASON = 200
TRAINER_ERROR = (
    "error: preflight failed (startup/cuda_preflight): --sim mjwarp needs CUDA but "
    "torch.cuda.is_available() is False (torch 2.15.0+cu132, CUDA 13.2, "
    "CUDA_VISIBLE_DEVICES=unset); run on an NVIDIA GPU host, or use --sim mujoco for a CPU run"
)


def _soak_run(tmp_path: Path, *trainer: str, min_duration: str) -> dict:
    out = tmp_path / "soak.json"
    argv = [*SOAK_RUN, *FAST, "--min-duration-seconds", min_duration]
    argv += ["--log-dir", str(tmp_path / "run"), "--output", str(out), "--", *trainer]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    artifact = load_strict(out)
    assert validate(artifact, "soak_artifact.0.3.0.json") == []
    judgement = artifact["judgement"]
    replayed = replay(
        judgement["monitor_findings"],
        judgement["run_dir_findings"],
        judgement["trainer_classification"],
    )
    assert replayed.failure_reason == artifact["failure_reason"]
    assert replayed.failure_classification == artifact["failure_classification"]
    return artifact


def test_a_sound_run_that_ended_too_soon_is_too_short_with_one_fix(tmp_path: Path) -> None:
    trainer = (sys.executable, str(FAKE_TRAINER), "{log_dir}", "ok")
    artifact = _soak_run(tmp_path, *trainer, min_duration="60")
    reason = artifact["failure_reason"]
    assert artifact["failure_classification"] == "too_short"
    assert reason.startswith("soak completed before min_duration_seconds=60 (ran ")
    assert reason.endswith("; size it in time with --duration-seconds 60")
    assert len(reason) <= MAX_REASON


def test_a_trainer_that_cannot_start_is_a_launch_failure_with_no_trend_claim(
    tmp_path: Path,
) -> None:
    artifact = _soak_run(tmp_path, str(tmp_path / "no-such-trainer"), min_duration="60")
    assert artifact["failure_classification"] == "launch_failure"
    assert artifact["failure_reason"] == (
        f"could not start the trainer: {tmp_path / 'no-such-trainer'}: No such file or "
        "directory; check the trainer command's path"
    )
    assert artifact["resource_trends"]["verdict"] == "insufficient_data"
    assert "monitor" not in artifact["failure_reason"]


@pytest.mark.slow
def test_the_readme_gpu_soak_on_a_cpu_box_gives_the_trainers_error_once(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine runs the README's GPU soak")
    out = tmp_path / "soak.json"
    argv = [*G1_SOAK, "--motion", "synthetic", "--duration-seconds", "1800"]
    argv += ["--log-dir", str(tmp_path / "run"), "--output", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    artifact = load_strict(out)
    line = error_line(read_tail(tmp_path / "run" / "soak-console.log"))
    assert line is not None and line.startswith("error: preflight failed (startup/cuda_preflight)")
    assert artifact["failure_reason"] == f"trainer exited with returncode 1: {line}"
    assert artifact["failure_classification"] == "learner_failure"
    assert artifact["resource_trends"]["verdict"] == "insufficient_data"
    assert "size it in time" not in json.dumps(artifact["judgement"])


def test_consequences_of_a_trainer_error_leave_the_reason() -> None:
    reasons = [
        f"trainer exited with returncode 1: {TRAINER_ERROR}",
        (
            "soak completed before min_duration_seconds=1800 (ran 9.8 s); training ended "
            "before its --duration-seconds 1800 budget"
        ),
        "run_summary status is 'failed', expected 'completed' ($.status)",
        (
            "shutdown classification=learner_failure, owner=learner, "
            f"phase=startup/cuda_preflight, exception=PreflightError: {TRAINER_ERROR[50:]}"
        ),
    ]
    assert failure_reason(reasons) == reasons[0]
    assert unclassified(reasons) == "unknown_failure"


def test_a_shutdown_the_trainer_did_not_explain_and_other_causes_stay() -> None:
    reasons = [
        "trainer exited with returncode -9",
        (
            "shutdown classification=collector_failure, owner=collector, phase=training/step, "
            "exception=RuntimeError: boom"
        ),
        "residual child processes after shutdown: 12",
    ]
    assert failure_reason(reasons) == "; ".join(reasons)
    assert failure_reason([]) is None


def test_only_a_minimum_duration_finding_is_too_short() -> None:
    short = "soak completed before min_duration_seconds=60 (ran 3.0 s); size it in time with ..."
    assert unclassified([short]) == "too_short"
    assert unclassified([short, "final inference flight is not drained"]) == "unknown_failure"


def _progress(elapsed: float, iteration: int) -> dict:
    line = {"phase": "training/iteration", "iteration": iteration}
    return {"elapsed_s": elapsed, "progress": {"bytes_total": 1, "last": line}}


def test_a_time_budgeted_soak_is_never_told_to_pass_the_flag_it_had() -> None:
    samples = [_progress(10.0 + k, k * 100) for k in range(20)]
    capped = SoakPlan(iterations=3000, duration_s=1800.0, min_duration_s=1800.0)
    reason = min_duration_reason(capped, 40.0, samples)
    assert reason == (
        "soak completed before min_duration_seconds=1800 (ran 40.0 s, 1900 iterations at "
        "100.0 it/s); training ended before its --duration-seconds 1800 budget: its "
        "--iterations 3000 cap came first; raise it"
    )
    uncapped = SoakPlan(iterations=None, duration_s=1800.0, min_duration_s=1800.0)
    assert min_duration_reason(uncapped, 40.0, []).endswith(
        "(ran 40.0 s); training ended before its --duration-seconds 1800 budget"
    )
    seed = SoakPlan(iterations=65000, duration_s=None, min_duration_s=1800.0)
    assert len(min_duration_reason(seed, 546.2, samples)) <= MAX_REASON
