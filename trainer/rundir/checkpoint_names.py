"""The names of checkpoint files, ``model_<iter>.pt``: torch-free, so a command can check
its paths before it imports torch (``play``)."""

from __future__ import annotations

import re
from pathlib import Path

CHECKPOINT_PREFIX = "model_"
_CHECKPOINT_NAME = re.compile(rf"^{CHECKPOINT_PREFIX}([0-9]+)\.pt$")


def checkpoint_name(iteration: int) -> str:
    return f"{CHECKPOINT_PREFIX}{iteration}.pt"


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
