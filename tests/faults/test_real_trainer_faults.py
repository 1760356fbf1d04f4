"""Fault scenarios of the real CPU trainer under the real ``g1-soak`` (docs/soak.md, "Liveness"
and "Stopping a soak"): a training loop that hangs while its heartbeat keeps writing, and a
soak stopped by SIGINT, SIGTERM or SIGHUP. Each asserts the exact classification, a reason
naming the cause, an artifact that validates against its schema and that no process of the
soak survives; ``train`` itself is Ctrl-C'd too.

The trainer runs at a tiny size (4 envs, batch 8, a checkpoint every 3 iterations). Each
hang runs ``REPEATS`` times (its detection depends on timing, so every repeat must give the
same outcome); the stop scenarios run once per signal, the same shutdown path three times.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from contracts.jsonio import load_strict, loads_strict
from contracts.schemas import validate
from trainer.runtime.fault_hooks import HANG_AT_ITERATION_ENV

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
REPEATS = 3
SAMPLE_S = 0.5
STALE_S = 15.0  # above the trainer's 10 s progress-line interval
DEADLINE_S = 300.0
TINY_OVERRIDES = ("algo.batch_size=8", "algo.learning_starts=2", "algo.save_interval=3")
TRAIN_ARGS = (
    "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mujoco",
    "algo.num_envs=4", *TINY_OVERRIDES, "algo.max_iterations=100000", "training.no_play=true",
    "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz",
)  # fmt: skip


def _soak_argv(tmp_path: Path, *extra: str) -> list[str]:
    return [
        str(BIN / "g1-soak"),
        "--sim", "mujoco", "--motion", "synthetic", "--num-envs", "4",
        "--iterations", "100000", "--min-duration-seconds", "0",
        "--sample-interval-seconds", str(SAMPLE_S), "--post-shutdown-grace-seconds", "0.5",
        "--learning-mode", "report",
        *[arg for o in TINY_OVERRIDES for arg in ("--extra-override", o)],
        *extra,
        "--log-dir", str(tmp_path / "run"), "--output", str(tmp_path / "soak.json"), "--json",
    ]  # fmt: skip


def _poll(condition: Callable[[], bool], what: str, proc: subprocess.Popen[Any]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert proc.poll() is None, f"exited ({proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE_S:g} s"
        time.sleep(0.1)


def _reached_iteration(run_dir: Path, iteration: int) -> Callable[[], bool]:
    """True once progress.jsonl has a complete line at ``iteration`` or beyond."""

    def reached() -> bool:
        try:
            text = (run_dir / "progress.jsonl").read_text(encoding="utf-8")
        except FileNotFoundError:
            return False
        lines = text.split("\n")[:-1]
        return any(loads_strict(line)["iteration"] >= iteration for line in lines if line)

    return reached


def _finish(proc: subprocess.Popen[Any]) -> int:
    try:
        return proc.wait(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _marked(soak_id: str) -> list[int]:
    """Live processes that carry this soak's marker (the trainer and its children)."""
    found = []
    for proc in psutil.process_iter(["environ", "status"]):
        environ = proc.info["environ"] or {}
        if environ.get("G1SOAK_RUN_ID") == soak_id and proc.info["status"] != "zombie":
            found.append(proc.pid)
    return found


def _artifact(tmp_path: Path) -> dict[str, Any]:
    doc = load_strict(tmp_path / "soak.json")
    assert validate(doc, "soak_artifact.0.3.0.json") == []
    assert _marked(doc["monitor"]["soak_id"]) == []
    return doc


# -- a hung training loop ---------------------------------------------------------------------
def _first_stuck_sample(samples: list[dict[str, Any]], tick: int) -> int:
    for index, sample in enumerate(samples):
        last = sample["progress"]["last"] or {}
        if last.get("loop_tick") == tick and last["phase"].startswith("training/"):
            return index
    raise AssertionError(f"no sample shows loop_tick {tick}")


@pytest.mark.parametrize("repeat", range(REPEATS))
def test_a_hung_training_loop_is_stale_although_its_heartbeat_writes(
    tmp_path: Path, isolated_cache, monkeypatch: pytest.MonkeyPatch, repeat: int
) -> None:
    monkeypatch.setenv(HANG_AT_ITERATION_ENV, "4")
    argv = _soak_argv(
        tmp_path, "--stale-progress-seconds", str(STALE_S), "--stop-grace-seconds", "5"
    )
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert _finish(proc) == 1
    doc = _artifact(tmp_path)
    assert loads_strict(proc.stdout.read())["failure_classification"] == "timeout/stale_tick"
    assert (doc["status"], doc["failure_classification"]) == ("failed", "timeout/stale_tick")
    samples = doc["samples"]
    stuck = samples[-1]["progress"]["last"]
    assert stuck["iteration"] == 4 and stuck["phase"] == "training/learner_update"
    # warm-up of 2 ticks, then iteration k is tick k + 1: the loop stopped at tick 5
    assert stuck["loop_tick"] == 5
    assert doc["failure_reason"].startswith(
        f"training loop made no progress for {STALE_S:g} s: loop_tick stayed at 5 in "
        "training/learner_update (its progress heartbeat kept writing, so the process is "
        "alive but its training loop hangs)"
    )
    first = _first_stuck_sample(samples, 5)
    # the files kept growing after the loop stopped: bytes alone would never call it stale
    assert samples[-1]["progress"]["bytes_total"] > samples[first]["progress"]["bytes_total"]
    # caught on the first sample past the threshold: within stale + one sample interval
    assert samples[-1]["elapsed_s"] - samples[first]["elapsed_s"] > STALE_S
    assert len(samples) - 1 - first <= math.ceil(STALE_S / SAMPLE_S) + 1
    # the hung loop ignores SIGTERM (its handler only sets a flag the loop never reads)
    assert doc["monitor"]["termination"] == ["SIGTERM", "SIGKILL"]
    assert doc["post_shutdown"]["residual_processes"] == []


# -- stopping a soak ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name
)
def test_a_stopped_soak_keeps_the_run_summary_and_its_checkpoint(
    tmp_path: Path, isolated_cache, sig: signal.Signals
) -> None:
    argv = _soak_argv(tmp_path)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    _poll(_reached_iteration(tmp_path / "run", 4), "iteration 4", proc)
    proc.send_signal(sig)
    assert _finish(proc) == 1
    doc = _artifact(tmp_path)
    assert loads_strict(proc.stdout.read())["status"] == "failed"
    assert doc["failure_classification"] == "external_cancellation"
    assert doc["failure_reason"].startswith(f"soak cancelled by {sig.name}")
    # the default grace let the trainer finish: SIGTERM alone, exit 128 + SIGTERM
    assert doc["monitor"]["termination"] == ["SIGTERM"]
    assert doc["monitor"]["stop_grace_s"] == 60
    assert doc["returncode"] == 128 + signal.SIGTERM
    summary = doc["run_summary"]
    assert summary["status"] == "cancelled"
    assert summary["runtime_manifest"]["shutdown"]["classification"] == "external_cancellation"
    reached = summary["completed_iterations"]
    assert reached >= 4
    checkpoint = Path(summary["last_checkpoint"])
    assert checkpoint == tmp_path / "run" / f"model_{reached}.pt" and checkpoint.stat().st_size
    assert doc["post_shutdown"]["residual_processes"] == []


def test_train_ctrl_c_exits_130_with_one_line_and_a_cancelled_summary(
    tmp_path: Path, isolated_cache
) -> None:
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "trainer", "train", *TRAIN_ARGS, f"training.log_dir={run_dir}"]
    stderr = tmp_path / "stderr.txt"
    with open(stderr, "w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True
        )
    _poll(_reached_iteration(run_dir, 4), "iteration 4", proc)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    assert _finish(proc) == 130
    text = stderr.read_text(encoding="utf-8")
    assert "Traceback" not in text
    said = [line for line in text.splitlines() if line.startswith("run cancelled by SIGINT")]
    assert len(said) == 1, text[-3000:]
    summary = load_strict(run_dir / "run_summary.json")
    assert summary["status"] == "cancelled"
    reached = summary["completed_iterations"]
    assert summary["last_checkpoint"] == str(run_dir / f"model_{reached}.pt")
    assert f"last checkpoint: {run_dir / f'model_{reached}.pt'}" in said[0]
    assert "cancelled" in proc.stdout.read()  # the summary table
    _poll_gone(proc.pid)  # nothing of the group is left, the collector included


def _poll_gone(pgid: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while any(p.info["status"] != "zombie" for p in _group(pgid)):
        assert time.monotonic() < deadline, f"group {pgid} still alive: {_group(pgid)}"
        time.sleep(0.1)


def _group(pgid: int) -> list[psutil.Process]:
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid:
                members.append(proc)
        except ProcessLookupError:
            continue
    return members
