"""The ``g1-soak`` preflight: the trainer checks its own command line before the launch.

Two steps, both before anything is launched or written:

1. ``--motion`` names clips: each item of a comma list is an alias (``synthetic``,
   ``march``, ``dance``), an existing file or directory (made absolute, so the trainer and
   the artifact see the same path), or an asset id ending in ``.npz`` or ``.csv`` (the
   trainer resolves it: package, cache, hub). Anything else is a usage error naming the
   closest alias, so a typo costs no hub round trip.
2. ``python -m trainer check-config`` runs, with this interpreter, on exactly the arguments
   ``train`` will get: the owner chain, every override, the run directory, the motion clip
   and its contents. It imports neither torch nor warp (the harness still never does), so
   bad input fails in about a second with the trainer's own one-line message: its exit 2
   becomes a usage error (exit 2), its exit 1 a failure (exit 1).

docs/soak.md "Before the launch" describes both.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from contracts.errors import HarnessError, StrictJsonError, UsageError
from contracts.jsonio import loads_strict
from contracts.paths import absolute

__all__ = ["CHECK_TIMEOUT_S", "check_argv", "check_trainer_command", "motion_arg"]

CHECK_TIMEOUT_S = 600.0
"""Upper bound of the check: it may download the clip from the hub once."""

TRAIN_PREFIX = ("-m", "trainer", "train")


def motion_arg(value: str, aliases: Mapping[str, str]) -> str:
    """The clip(s) ``--motion`` names, each item of a comma list (a clip set) on its own: an
    alias's id, an existing file or directory as an absolute path, or an asset id ending in
    ``.npz`` or ``.csv``; the items joined by commas again.

    Raises:
        UsageError: an empty item, a missing path, or a name that is none of these.
    """
    choices = (
        f"one of {', '.join(aliases)}, an asset id ending in .npz or .csv, or an existing file"
    )
    library = _library_selection(value)
    if library is not None:
        return library
    items = [item.strip() for item in value.split(",")]
    if not all(items):
        raise UsageError(
            f"--motion {value!r} has an empty item; pass {choices} (a comma list is a clip set)"
        )
    return ",".join(_motion_item(item, aliases, choices) for item in items)


ASSET_ID_SUFFIXES = (".npz", ".csv")


def _library_selection(value: str) -> str | None:
    """``DIR:GLOB[,GLOB...]`` (a subset of a motion library folder) with DIR made absolute;
    None when ``value`` is not of that form. The trainer matches the globs (docs/assets.md)."""
    head, sep, tail = value.partition(":")
    if not sep or not head or not absolute(head).is_dir():
        return None
    if not tail.strip(" ,"):
        raise UsageError(
            f"--motion {value!r} names no clip after ':'; give a glob such as {head}:karate/*"
        )
    return f"{absolute(head)}:{tail}"


def _motion_item(item: str, aliases: Mapping[str, str], choices: str) -> str:
    if item in aliases:
        return aliases[item]
    path = absolute(item)
    if path.exists():
        return str(path)
    expanded = os.path.expanduser(item)
    if os.path.isabs(expanded) or item.startswith(("./", "../")):
        raise UsageError(f"--motion {item!r}: no such file ({path}); pass {choices}")
    if item.lower().endswith(ASSET_ID_SUFFIXES):
        return item
    hint = difflib.get_close_matches(item, list(aliases), n=1, cutoff=0.5)
    fix = f"; did you mean '{hint[0]}'?" if hint else ""
    raise UsageError(f"--motion {item!r} is no clip: pass {choices}{fix}")


def check_argv(command: Sequence[str]) -> list[str]:
    """The check-config argv for a trainer argv ``[python, -m, trainer, train, ARGS...]``."""
    if tuple(command[1:4]) != TRAIN_PREFIX:
        raise ValueError(f"not an interpreter-pinned train command: {list(command)[:4]}")
    return [command[0], "-m", "trainer", "check-config", *command[4:], "--json"]


def _error_line(stderr: str) -> str | None:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("error:"):
            return line.removeprefix("error:").strip()
    return lines[-1] if lines else None


def check_trainer_command(
    command: Sequence[str], *, timeout_s: float = CHECK_TIMEOUT_S
) -> dict[str, Any]:
    """Run ``check-config`` on the trainer's arguments; returns its JSON result.

    Warnings it printed (a hub endpoint that failed over) are passed on to stderr.

    Raises:
        UsageError: the trainer rejected its input (check-config exit 2), its own message.
        HarnessError: the check could not be made (exit 1), did not finish, or crashed.
    """
    argv = check_argv(command)
    try:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise HarnessError(
            f"the trainer's config check did not finish within {timeout_s:g} s (a slow hub "
            "download?); fetch the clip first with g1-pull-assets, or pass --motion synthetic"
        ) from err
    except OSError as err:
        raise HarnessError(f"cannot run the trainer's config check {argv[0]}: {err}") from err
    message = _error_line(proc.stderr)
    if proc.returncode == 2:
        raise UsageError(message or "the trainer rejected its command line")
    if proc.returncode != 0:
        detail = message or "no output"
        if proc.returncode == 1:
            raise HarnessError(detail)
        raise HarnessError(
            f"the trainer's config check exited with status {proc.returncode}: {detail}"
        )
    sys.stderr.write(proc.stderr)
    try:
        doc = loads_strict(proc.stdout)
    except StrictJsonError as err:
        raise HarnessError(f"the trainer's config check printed no JSON result: {err}") from err
    if not isinstance(doc, dict):
        raise HarnessError("the trainer's config check printed no JSON object")
    return doc
