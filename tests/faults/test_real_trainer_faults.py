"""Fault scenarios of the real CPU trainer under the real ``g1-soak`` (docs/soak.md, "Liveness"
and "Stopping a soak"): a training loop that hangs while its heartbeat keeps writing, and a
soak stopped by SIGINT, SIGTERM or SIGHUP. Each asserts the exact classification, a reason
naming the cause, an artifact that validates against its schema and that no process of the
soak survives; ``train`` itself is Ctrl-C'd too.

The trainer runs at a tiny size (4 envs, batch 8, a checkpoint every 3 iterations). Every
scenario runs more than once, each repeat in a directory of its own, and the repeats'
outcomes must be identical (tests/faults/repeat.py): the hang ``--fault-repeats`` times
(default 3; its detection depends on timing), its repeats side by side (most of a repeat
is the stale limit and the stop grace passing, and the stale check reads the trainer's own
loop counter, which no neighbour moves); the stops and the Ctrl-C
``--expensive-fault-repeats`` times (default 1, 20-30 s each; 3 for the full repetition).
Where a stop lands (the iteration, so the checkpoint's number, and the training phase) is
all a repeat may change.
"""

from __future__ import annotations

import math
import os
import re
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
from tests.faults.repeat import Outcome, normalize, repeated, soak_outcome
from trainer.runtime.fault_hooks import HANG_AT_ITERATION_ENV

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
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


def _artifact(root: Path) -> dict[str, Any]:
    doc = load_strict(root / "soak.json")
    assert validate(doc, "soak_artifact.0.3.0.json") == []
    assert _marked(doc["monitor"]["soak_id"]) == []
    return doc


def _outcome(doc: dict[str, Any], root: Path, exit_code: int) -> dict[str, Any]:
    return soak_outcome(
        doc, exit_code=exit_code, root=root, survivors=_marked(doc["monitor"]["soak_id"])
    )


# -- a hung training loop ---------------------------------------------------------------------
def _first_stuck_sample(samples: list[dict[str, Any]], tick: int) -> int:
    for index, sample in enumerate(samples):
        last = sample["progress"]["last"] or {}
        if last.get("loop_tick") == tick and last["phase"].startswith("training/"):
            return index
    raise AssertionError(f"no sample shows loop_tick {tick}")


@pytest.mark.timeout(1800)  # three soaks of the real trainer
@repeated("cheap", side_by_side=True)
def test_a_hung_training_loop_is_stale_although_its_heartbeat_writes(
    tmp_path: Path, isolated_cache
) -> Outcome:
    return _hung_soak(tmp_path)


def _hung_soak(root: Path) -> Outcome:
    argv = _soak_argv(root, "--stale-progress-seconds", str(STALE_S), "--stop-grace-seconds", "5")
    env = {**os.environ, HANG_AT_ITERATION_ENV: "4"}  # its own: the repeats run side by side
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    exit_code = _finish(proc)
    assert exit_code == 1
    doc = _artifact(root)
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
    # caught on the first sample past the threshold (the one before it was not past it), on
    # the monitor's grid of one sample interval: within stale + one sample interval
    since_first = [s["elapsed_s"] - samples[first]["elapsed_s"] for s in samples]
    assert since_first[-1] > STALE_S >= since_first[-2]
    assert len(samples) - 1 - first <= math.ceil(STALE_S / SAMPLE_S) + 1
    # the hung loop ignores SIGTERM (its handler only sets a flag the loop never reads)
    assert doc["monitor"]["termination"] == ["SIGTERM", "SIGKILL"]
    assert doc["monitor"]["stop_grace_s"] == 5
    assert doc["post_shutdown"]["residual_processes"] == []
    return _outcome(doc, root, exit_code)


# -- stopping a soak ----------------------------------------------------------------------------
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name
)
@repeated("expensive")
def test_a_stopped_soak_keeps_the_run_summary_and_its_checkpoint(
    tmp_path: Path, isolated_cache, sig: signal.Signals
) -> Outcome:
    return _stopped_soak(tmp_path, sig)


def _stopped_soak(root: Path, sig: signal.Signals) -> Outcome:
    argv = _soak_argv(root)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    _poll(_reached_iteration(root / "run", 4), "iteration 4", proc)
    proc.send_signal(sig)
    exit_code = _finish(proc)
    assert exit_code == 1
    doc = _artifact(root)
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
    assert checkpoint == root / "run" / f"model_{reached}.pt" and checkpoint.stat().st_size
    assert doc["post_shutdown"]["residual_processes"] == []
    # where the stop landed (iteration, checkpoint, training phase) is all a repeat may change
    return _outcome(_iteration_blanked_doc(doc, reached), root, exit_code)


def _iteration_blanked_doc(doc: dict[str, Any], reached: int) -> dict[str, Any]:
    """``doc`` with the point the stop landed on blanked in its reason and findings."""
    judgement = {
        source: [{**f, "reason": _iteration_blanked(f["reason"], reached)} for f in findings]
        if isinstance(findings, list)
        else findings
        for source, findings in doc["judgement"].items()
    }
    reason = doc["failure_reason"]
    return {
        **doc,
        "failure_reason": None if reason is None else _iteration_blanked(reason, reached),
        "judgement": judgement,
    }


def _iteration_blanked(text: str, reached: int) -> str:
    """``text`` with the point the stop landed on blanked: the iteration, its checkpoint's
    name and the training phase (``training/<phase>``; startup and finalize stay)."""
    text = text.replace(f"iteration {reached}", "iteration <k>")
    text = text.replace(f"model_{reached}.pt", "model_<k>.pt")
    return re.sub(r"\btraining/[a-z_]+", "training/<phase>", text)


@pytest.mark.timeout(1800)
@repeated("expensive")
def test_train_ctrl_c_exits_130_with_one_line_and_a_cancelled_summary(
    tmp_path: Path, isolated_cache
) -> Outcome:
    return _ctrl_c_train(tmp_path)


def _ctrl_c_train(root: Path) -> Outcome:
    run_dir = root / "run"
    argv = [sys.executable, "-m", "trainer", "train", *TRAIN_ARGS, f"training.log_dir={run_dir}"]
    stderr = root / "stderr.txt"
    with open(stderr, "w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True
        )
    _poll(_reached_iteration(run_dir, 4), "iteration 4", proc)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    exit_code = _finish(proc)
    assert exit_code == 130
    text = stderr.read_text(encoding="utf-8")
    assert "Traceback" not in text
    said = [line for line in text.splitlines() if line.startswith("run cancelled by SIGINT")]
    assert len(said) == 1, text[-3000:]
    summary = load_strict(run_dir / "run_summary.json")
    assert summary["status"] == "cancelled"
    reached = summary["completed_iterations"]
    assert summary["last_checkpoint"] == str(run_dir / f"model_{reached}.pt")
    assert f"last checkpoint: {run_dir / f'model_{reached}.pt'}" in said[0]
    table = proc.stdout.read()
    assert "cancelled" in table  # the summary table
    _poll_gone(proc.pid)  # nothing of the group is left, the collector included
    return {
        "exit_code": exit_code,
        "traceback": "Traceback" in text,
        "line": normalize(_iteration_blanked(said[0], reached), root=root),
        "status": summary["status"],
        "shutdown_classification": summary["runtime_manifest"]["shutdown"]["classification"],
        "checkpoint_is_last": Path(summary["last_checkpoint"]).stat().st_size > 0,
        "group_left": [p.pid for p in _group(proc.pid) if p.info["status"] != "zombie"],
    }


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
