"""Shared pieces of the fault-injection trainers: a valid run directory and summaries.

The valid documents come from the schema tests' builders (tests/harness/schemas/builders.py)
so the fault suite and the verdict tests agree on what "valid" means. Children are plain
programs run by the real ``soak-run``; they import this file by path.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "harness" / "schemas"))

import builders
import evaluation_builders

from contracts.jsonio import dumps_strict


def log_dir_from_argv() -> Path:
    return Path(sys.argv[1])


def start_run(log_dir: Path) -> None:
    """What a trainer writes first: run_config.json, the event file, a progress line."""
    builders.make_run_dir(log_dir)  # run_config.json, one event file, every checkpoint
    progress(log_dir, "startup/begin", 0)


def progress(log_dir: Path, phase: str, iteration: int) -> None:
    line = {
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "phase": phase,
        "iteration": iteration,
        "total_env_steps": iteration * builders.NUM_ENVS,
        "env_steps_per_sec": 1000.0,
    }
    with open(log_dir / "progress.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")


def train_for(log_dir: Path, seconds: float, *, step_s: float = 0.05, each: Any = None) -> None:
    """Append progress lines for ``seconds`` (calling ``each(i)`` every step)."""
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        i += 1
        if each is not None:
            each(i)
        progress(log_dir, "training/learner_update", i)
        time.sleep(step_s)


def write_summary(log_dir: Path, summary: Any) -> None:
    (log_dir / "run_summary.json").write_text(dumps_strict(summary), encoding="utf-8")


def write_raw_summary(log_dir: Path, text: str) -> None:
    (log_dir / "run_summary.json").write_text(text, encoding="utf-8")


def completed(log_dir: Path) -> dict[str, Any]:
    return builders.make_completed_summary(str(log_dir))


def failed(classification: str = "learner_failure", **over: Any) -> dict[str, Any]:
    return builders.make_failed_summary(classification, **over)


def with_foreign_evaluation(log_dir: Path) -> dict[str, Any]:
    """A completed summary whose evaluation.json names this run's checkpoints with the
    sha256 of other bytes (the evaluation of another run's checkpoints)."""
    doc = evaluation_builders.make_evaluation(evaluation_builders.HEALTHY_CURVE)
    for point in doc["points"]:
        if point["checkpoint"] is not None:
            point["checkpoint_sha256"] = hashlib.sha256(b"another run's weights").hexdigest()
    evaluation_builders.write_evaluation(log_dir, doc)
    summary = completed(log_dir)
    summary["evaluation"] = evaluation_builders.summary_section(doc)
    return summary


def recorded(name: str) -> Any:
    """A run summary recorded from an older writer (tests/harness/schemas/data)."""
    path = REPO / "tests" / "harness" / "schemas" / "data" / name
    return json.loads(path.read_text(encoding="utf-8"))
