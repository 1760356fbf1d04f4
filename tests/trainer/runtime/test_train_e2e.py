"""The real stack on CPU: `python -m trainer train --sim mujoco` (CLI, G1 env, FlashSAC learner,
collector/learner runtime) at a tiny size, judged by the soak's docs/contracts.md §verdict checks; and the same stack
killed mid-run (collector SIGKILL, SIGINT to the learner) must still leave a valid, correctly
classified summary and no process behind."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from contracts.jsonio import load_strict
from contracts.schemas import validate
from harness.soak.verdict import judge_run_dir
from tests.trainer.runtime.train_cmd import train_argv

pytestmark = pytest.mark.slow


def _train_argv(run_dir: Path, *, max_iterations: int) -> list[str]:
    return train_argv(
        run_dir,
        "algo.num_envs=4",
        f"algo.max_iterations={max_iterations}",
        "algo.batch_size=8",
        "algo.learning_starts=2",
        "algo.save_interval=2",
        "training.no_play=true",
        "training.replay_ingress_slot_rows=2",
        "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz",
    )


def test_tiny_cpu_training_run_passes_the_soak_checks(tmp_path, isolated_cache):
    run_dir = tmp_path / "run"
    argv = _train_argv(run_dir, max_iterations=24)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pid = proc.pid
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    summary = load_strict(run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    assert summary["total_env_steps"] == (2 + 24) * 4
    assert summary["play"]["status"] == "skipped"  # training.no_play=true, as the soak sets it
    assert summary["play"]["reason"] == "training.no_play=true"
    ingress = summary["runtime_manifest"]["replay_ingress"]
    assert ingress["published_sequence"] == ingress["release_sequence"] == (2 + 24) * 4 // 2
    assert summary["runtime_manifest"]["backend_diagnostics"]["available"] is False
    # The collector loaded the clip preflight resolved (not a second resolution of the id).
    assert summary["runtime_manifest"]["motion"]["path"].endswith("motions/g1/synthetic_dance.npz")
    assert sorted(p.name for p in run_dir.glob("model_*.pt")) == sorted(
        [f"model_{k}.pt" for k in range(2, 25, 2)]
    )
    verdict = judge_run_dir(run_dir, monitor_reasons=[], monitor_classification=None)
    assert verdict.status == "passed", verdict.reasons
    leftovers = [p for p in psutil.process_iter(["ppid"]) if p.info["ppid"] == pid]
    assert leftovers == []


def _start_training(run_dir: Path) -> tuple[subprocess.Popen[str], psutil.Process]:
    """Start a long run; return it once the learner is iterating, with its collector process."""
    proc = subprocess.Popen(
        _train_argv(run_dir, max_iterations=100_000),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 300
    progress = run_dir / "progress.jsonl"
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0][-4000:]
        if progress.is_file() and "training/startup_complete" in progress.read_text():
            break
        time.sleep(0.2)
    else:
        proc.kill()
        raise AssertionError("training never started")
    time.sleep(2.0)  # a few iterations
    collectors = [
        child
        for child in psutil.Process(proc.pid).children()
        if "resource_tracker" not in " ".join(child.cmdline())
    ]
    assert len(collectors) == 1, [c.cmdline() for c in collectors]
    return proc, collectors[0]


def _finish(
    proc: subprocess.Popen[str],
    collector: psutil.Process,
    run_dir: Path,
    *,
    classification: str,
    owner: str,
    returncode: int = 1,
) -> dict:
    """Wait for the failed run; check its exit code (1, or 128 + the signal that cancelled
    it), that it left nothing behind and was classified as expected."""
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == returncode, out[-4000:]
    assert [p for p in psutil.process_iter(["ppid"]) if p.info["ppid"] == proc.pid] == []
    summary = load_strict(run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert (shutdown["classification"], shutdown["owner"]) == (classification, owner)
    assert not collector.is_running()
    verdict = judge_run_dir(run_dir, monitor_reasons=[], monitor_classification=None)
    assert verdict.failure_classification == classification, verdict.reasons
    return summary


def test_killing_the_collector_mid_run_is_a_collector_failure(tmp_path, isolated_cache):
    run_dir = tmp_path / "run"
    proc, collector = _start_training(run_dir)
    collector.send_signal(signal.SIGKILL)
    summary = _finish(
        proc, collector, run_dir, classification="collector_failure", owner="collector"
    )
    assert summary["status"] != "completed"
    assert summary["runtime_manifest"]["shutdown"]["collector"]["signal_name"] == "SIGKILL"


def test_sigint_to_the_trainer_is_an_external_cancellation(tmp_path, isolated_cache):
    run_dir = tmp_path / "run"
    proc, collector = _start_training(run_dir)
    proc.send_signal(signal.SIGINT)
    summary = _finish(
        proc,
        collector,
        run_dir,
        classification="external_cancellation",
        owner="external",
        returncode=128 + signal.SIGINT,
    )
    assert summary["status"] == "cancelled"
