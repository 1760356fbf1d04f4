"""The run directory: what a trainer writes and the harness judges (docs/contracts.md §run-directory).

This module owns the layout, so every file name is spelled here once: the documents
(``run_config.json``, ``run_summary.json``, ``evaluation.json``), the progress file, the one
TensorBoard event file, the checkpoints ``model_<k>.pt`` and the harness's console log.
Pure Python (no torch): the harness finds a run's files with it, the trainer names what it
writes with it.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = [
    "CHECKPOINT_GLOB",
    "CHECKPOINT_PREFIX",
    "CHECKPOINT_SUFFIX",
    "EVALUATION",
    "EVENT_GLOB",
    "EVENT_PREFIX",
    "PROGRESS",
    "RUN_CONFIG",
    "RUN_SUMMARY",
    "SOAK_CONSOLE_LOG",
    "checkpoint_files",
    "checkpoint_iteration",
    "checkpoint_name",
    "event_files",
]

RUN_CONFIG = "run_config.json"
"""Written at start, before preflight: the run, the resolved config and the overrides."""
RUN_SUMMARY = "run_summary.json"
"""Written at the end of every run once the directory exists (docs/contracts.md §run-summary)."""
EVALUATION = "evaluation.json"
"""Written after training unless ``eval.enabled`` is false (docs/evaluation.md)."""
PROGRESS = "progress.jsonl"
"""Strict-JSON lines all along the run (docs/contracts.md §progress-file)."""
SOAK_CONSOLE_LOG = "soak-console.log"
"""The trainer's stdout and stderr under ``g1-soak``/``soak-run``; the only file a harness may
put in the run directory before the trainer starts."""
EVENT_PREFIX = "events.out.tfevents."
EVENT_GLOB = f"{EVENT_PREFIX}*"
"""The one TensorBoard event file at the root of the run directory (docs/contracts.md §metric-schema)."""
CHECKPOINT_PREFIX = "model_"
CHECKPOINT_SUFFIX = ".pt"
CHECKPOINT_GLOB = f"{CHECKPOINT_PREFIX}*{CHECKPOINT_SUFFIX}"
_CHECKPOINT_NAME = re.compile(rf"^{CHECKPOINT_PREFIX}([0-9]+){re.escape(CHECKPOINT_SUFFIX)}$")


def checkpoint_name(iteration: int) -> str:
    """``model_<iteration>.pt``."""
    return f"{CHECKPOINT_PREFIX}{iteration}{CHECKPOINT_SUFFIX}"


def checkpoint_iteration(name: str) -> int | None:
    """The iteration ``k`` of a file named ``model_<k>.pt``; None for any other name."""
    match = _CHECKPOINT_NAME.match(name)
    return int(match.group(1)) if match else None


def checkpoint_files(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``(iteration, path)`` of every ``model_<k>.pt`` file in ``run_dir``, by iteration."""
    found = []
    for path in Path(run_dir).iterdir():
        iteration = checkpoint_iteration(path.name)
        if iteration is not None and path.is_file():
            found.append((iteration, path))
    return sorted(found)


def event_files(run_dir: str | Path) -> list[Path]:
    """The ``events.out.tfevents.*`` files at the root of ``run_dir``, by name (a valid run
    has exactly one)."""
    return sorted(Path(run_dir).glob(EVENT_GLOB))
