"""Checkpoints ``model_<iter>.pt`` (docs/contracts.md §run-directory, docs/flashsac.md §update-schedule) and resuming from one.

Written at every multiple of ``algo.save_interval`` and at the final iteration: the
learner's resumable state (networks, log α, optimizers, schedulers, reward scaler,
exploration, update counts; no replay), the run counters and ``meta``, the facts a resume
must match (algo, task, num_envs, network sizes). The file is written to a temporary name
and renamed, so a crash never leaves a truncated ``model_<k>.pt``.

``training.resume_from`` reads one back: :func:`peek_iteration` (config check, exit 2 when
nothing is left to train), then :func:`load_checkpoint` + :func:`check_matches` in the
learner's ``startup/learner_prepare`` phase, which fail closed with a ``ResumeError``
naming the mismatch (docs/runtime.md, "Resuming").
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import shutil
import struct
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from contracts.rundir import (  # noqa: F401 - the names' home; re-exported here
    CHECKPOINT_PREFIX,
    checkpoint_files,
    checkpoint_iteration,
    checkpoint_name,
)

CHECKPOINT_FORMAT = 1
"""``payload["format"]``; ``meta`` was added without a bump (files without it still load)."""

MATCHED_META_KEYS: tuple[str, ...] = (
    "algo",
    "task",
    "num_envs",
    "obs_dim",
    "critic_obs_dim",
    "action_dim",
    "actor_hidden_dim",
    "critic_hidden_dim",
    "num_blocks",
    "num_atoms",
)
"""``meta`` keys a resume must match exactly (they fix tensor shapes or the problem solved);
every other hyperparameter (learning rates, gamma, batch size, ...) may change on resume."""

_META_CONFIG_KEY = {
    "algo": "--algo",
    "task": "--task",
    "num_envs": "algo.num_envs",
    "actor_hidden_dim": "algo.actor_hidden_dim",
    "critic_hidden_dim": "algo.critic_hidden_dim",
    "num_blocks": "algo.num_blocks",
    "num_atoms": "algo.num_atoms",
}


class ResumeError(Exception):
    """``training.resume_from`` cannot be loaded or does not match the configuration.

    Raised in ``startup/learner_prepare``: a ``learner_failure`` summary, exit 1.
    """


def is_checkpoint_iteration(iteration: int, *, save_interval: int, final: bool) -> bool:
    """True at multiples of ``save_interval`` and at the run's final iteration (≥ 1), which
    is ``max_iterations`` or, under a time budget, the one that found it spent."""
    return iteration >= 1 and (iteration % save_interval == 0 or final)


def save_checkpoint(
    run_dir: str | Path,
    *,
    iteration: int,
    total_env_steps: int,
    learner_state: dict[str, Any],
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Atomically write ``<run_dir>/model_<iteration>.pt``; return its path.

    Args:
        iteration: the global iteration (a resumed run continues the count).
        total_env_steps: env steps of the whole lineage through this iteration (a resumed
            run adds its own to the checkpoint's).
        learner_state: ``FlashSacLearner.state_dict()``.
        meta: the facts a resume must match (:data:`MATCHED_META_KEYS`).
    """
    target = Path(run_dir) / checkpoint_name(iteration)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "iteration": iteration,
        "total_env_steps": total_env_steps,
        "meta": dict(meta or {}),
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


LOAD_ERRORS = (OSError, EOFError, RuntimeError, ValueError, pickle.UnpicklingError)
"""What ``torch.load`` raises for a missing, truncated, foreign or unsafe file."""


_WEIGHTS_UNPICKLER = re.compile(r"WeightsUnpickler error: (.*?)(?: Check the documentation|$)")
_TORCH_ADVICE = re.compile(
    r"weights_only|arbitrary code|trusted source|Please file an issue|Check the documentation|"
    r"In PyTorch 2\.6|Could this error message be improved|enhancement request|Weights only load",
    re.IGNORECASE,
)


def load_error_detail(err: BaseException) -> str:
    """``<type>: <why>`` for a failed ``load_checkpoint``, on one line, never relaying
    torch's advice to retry with ``weights_only=False`` (arbitrary code execution)."""
    text = " ".join(str(err).split())
    if "weights_only" not in text:
        return f"{type(err).__name__}: {_without_advice(text) or text}"[:300]
    match = _WEIGHTS_UNPICKLER.search(text)
    why = match.group(1).strip() if match else _without_advice(text)
    return f"{type(err).__name__}: not a checkpoint train wrote ({why or 'not tensors only'})"[:300]


def _without_advice(text: str) -> str:
    sentences = re.split(r"(?<=[.?!])\s+", text)
    return " ".join(s for s in sentences if not _TORCH_ADVICE.search(s)).strip()


def load_checkpoint(
    path: str | Path, *, map_location: str | torch.device = "cpu", mmap: bool = False
) -> dict[str, Any]:
    """Load a checkpoint written by ``save_checkpoint`` (tensors and plain data only).

    ``weights_only=True``: a file that would need arbitrary unpickling is refused.

    Raises:
        ValueError: not a g1soak checkpoint (wrong format, missing keys).
        OSError, EOFError, RuntimeError, pickle.UnpicklingError: unreadable or corrupt.
    """
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except (LookupError, TypeError, AttributeError, OverflowError, struct.error) as err:
        # A damaged file can trip the unpickler anywhere; it is still just unreadable.
        raise pickle.UnpicklingError(f"damaged file ({type(err).__name__}: {err})") from err
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a g1soak checkpoint (format {CHECKPOINT_FORMAT})")
    iteration = payload.get("iteration")
    if type(iteration) is not int or iteration < 1:
        raise ValueError(f"{path}: 'iteration' must be an int >= 1, got {iteration!r}")
    if not isinstance(payload.get("learner"), dict):
        raise ValueError(f"{path}: the learner state is missing")  # noqa: TRY004 - a foreign file, not a caller bug
    return payload


def peek_iteration(path: str | Path) -> int | None:
    """The checkpoint's iteration, read cheaply (tensors memory-mapped); None if unreadable.

    Used by the config check; an unreadable file is reported later, at startup, as a
    ``ResumeError`` (a failed run, exit 1), not as a usage error.
    """
    try:
        return int(load_checkpoint(path, mmap=True)["iteration"])
    except LOAD_ERRORS:
        return None


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """:func:`load_checkpoint` with every load failure as a one-line ``ResumeError``."""
    try:
        return load_checkpoint(path, map_location="cpu")
    except LOAD_ERRORS as err:
        raise ResumeError(
            f"training.resume_from={path} cannot be loaded ({load_error_detail(err)}); "
            "pass a model_<iter>.pt written by train"
        ) from err


def check_matches(payload: Mapping[str, Any], expected: Mapping[str, Any], path: Path) -> None:
    """Fail closed when the checkpoint's ``meta`` differs from this run's on a matched key.

    A checkpoint without ``meta`` is checked by the tensor shapes alone (the learner's
    ``load_state_dict``).

    Raises:
        ResumeError: names the key, both values and the fix.
    """
    meta = payload.get("meta") or {}
    for key in MATCHED_META_KEYS:
        if key not in meta or key not in expected or meta[key] == expected[key]:
            continue
        name = _META_CONFIG_KEY.get(key, key)
        raise ResumeError(
            f"training.resume_from={path} does not match the configuration: the checkpoint has "
            f"{name}={meta[key]} but this run has {name}={expected[key]}; resume with "
            f"{name}={meta[key]} or start a fresh run (training.resume_from=null)"
        )


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def carry_prior_checkpoints(
    source: Path, run_dir: Path, *, iteration: int, save_interval: int
) -> tuple[list[str], list[str]]:
    """Put the lineage's checkpoints up to ``iteration`` into the new run directory.

    docs/contracts.md §run-directory asks a run directory for ``model_<k>.pt`` at every multiple of
    ``save_interval`` up to ``max_iterations``; the ones up to the resume point belong to
    the earlier run. Each is hard-linked (copied across file systems) from the resumed
    checkpoint's directory, the resumed file itself standing for ``model_<iteration>.pt``.
    Nothing in the old directory changes.

    Returns:
        ``(carried, missing)`` file names; a missing one is logged by the caller.
    """
    carried: list[str] = []
    missing: list[str] = []
    for k in range(save_interval, iteration + 1, save_interval):
        name = checkpoint_name(k)
        origin = source if k == iteration else source.parent / name
        if not origin.is_file():
            missing.append(name)
            continue
        target = run_dir / name
        try:
            os.link(origin, target)
        except OSError:
            shutil.copyfile(origin, target)
        carried.append(name)
    return carried, missing
