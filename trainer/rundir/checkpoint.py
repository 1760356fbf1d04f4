"""Checkpoints ``model_<iter>.pt`` (CONTRACTS §3, FLASHSAC.md §6).

Written at every multiple of ``algo.save_interval`` and at the final iteration: the
learner's resumable state (networks, log α, optimizers, schedulers, reward scaler, update
count; no replay) plus the run counters. The file is written to a temporary name and
renamed, so a crash never leaves a truncated ``model_<k>.pt``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

CHECKPOINT_FORMAT = 1


def checkpoint_name(iteration: int) -> str:
    return f"model_{iteration}.pt"


def is_checkpoint_iteration(iteration: int, *, save_interval: int, max_iterations: int) -> bool:
    """True at multiples of ``save_interval`` and at the final iteration (iteration ≥ 1)."""
    return iteration >= 1 and (iteration % save_interval == 0 or iteration == max_iterations)


def save_checkpoint(
    run_dir: str | Path, *, iteration: int, total_env_steps: int, learner_state: dict[str, Any]
) -> Path:
    """Atomically write ``<run_dir>/model_<iteration>.pt``; return its path."""
    target = Path(run_dir) / checkpoint_name(iteration)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "iteration": iteration,
        "total_env_steps": total_env_steps,
        "learner": learner_state,
    }
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load_checkpoint(
    path: str | Path, *, map_location: str | torch.device = "cpu"
) -> dict[str, Any]:
    """Load a checkpoint written by ``save_checkpoint``; raise ValueError on a foreign file."""
    payload = torch.load(path, map_location=map_location, weights_only=False)
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a g1soak checkpoint (format {CHECKPOINT_FORMAT})")
    return payload
