"""``play``'s argument checks that need no torch or mujoco, run before either is imported,
so a mistyped path or clip fails in a second instead of after the heavy imports.

:func:`locate` finds the run directory and the checkpoint; :func:`motion_choice` turns
``--motion`` into what the resolver takes: a short name becomes its asset id, and a name that
is neither a path, nor an asset id, nor a short name is refused with the nearest name
``g1-motion list`` knows.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from contracts import rundir
from contracts.motions import MOTION_IDS
from contracts.rundir import checkpoint_files, checkpoint_iteration
from trainer.assets import asset_roots

__all__ = ["PlayInputError", "known_motion_names", "locate", "motion_choice"]

CLIP_SUFFIXES = (".npz", ".csv")


class PlayInputError(ValueError):
    """The run directory, checkpoint or clip cannot be played (``play`` exits 2)."""


def locate(target: Path) -> tuple[Path, Path]:
    """``(run directory, checkpoint)`` of ``play``'s argument.

    Raises:
        PlayInputError: a missing path, a file that is no ``model_<iter>.pt``, a directory
            without one, or a run directory without ``run_config.json``.
    """
    target = Path(target).expanduser()
    if target.is_dir():
        found = checkpoint_files(target)
        if not found:
            msg = (
                f"{target} holds no model_<iter>.pt; train writes one at every "
                "algo.save_interval and at the last iteration: pass a run directory that has one"
            )
            raise PlayInputError(msg)
        run_dir, checkpoint = target, max(found)[1]
    elif target.is_file():
        if checkpoint_iteration(target.name) is None:
            msg = f"{target} is not a model_<iter>.pt; pass a run directory or a checkpoint"
            raise PlayInputError(msg)
        run_dir, checkpoint = target.parent, target
    else:
        msg = f"{target} does not exist; pass a run directory written by train or a model_<iter>.pt in one"
        raise PlayInputError(msg)
    if not (run_dir / rundir.RUN_CONFIG).is_file():
        msg = (
            f"{run_dir} has no run_config.json; play needs the run directory train wrote "
            "(a checkpoint must stay in it)"
        )
        raise PlayInputError(msg)
    return run_dir, checkpoint


def known_motion_names() -> list[str]:
    """The short names and the clips' asset ids under the asset roots (``g1-motion list``)."""
    names = list(MOTION_IDS)
    for root in asset_roots():
        base = Path(root) / "motions"
        if base.is_dir():
            names += sorted(
                p.relative_to(root).as_posix()
                for p in base.rglob("*")
                if p.is_file() and p.suffix.lower() in CLIP_SUFFIXES
            )
    return list(dict.fromkeys(names))


def motion_choice(motion: str | None) -> str | None:
    """What the resolver gets for ``--motion``: None (the run's clip), a short name's asset
    id, or the value itself when it can name a clip (a path, a comma list, an asset id).

    Raises:
        PlayInputError: none of these, with a "did you mean" when a known name is close.
    """
    if motion is None or motion in MOTION_IDS.values() or "," in motion:
        return motion
    if motion in MOTION_IDS:
        return MOTION_IDS[motion]
    if Path(motion).expanduser().exists() or motion.lower().endswith(CLIP_SUFFIXES):
        return motion
    names = known_motion_names()
    close = difflib.get_close_matches(motion, names, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    msg = (
        f"--motion {motion!r} is no clip: not a path, a short name or an asset id ending in "
        f".npz or .csv; {hint}g1-motion list shows the names"
    )
    raise PlayInputError(msg)
