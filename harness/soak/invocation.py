"""The soak commands' pre-launch checks and the trainer command they build (docs/soak.md).

Everything here runs before anything is launched or written: bounds of the timing flags,
the run directory and artifact paths, ``--extra-override`` syntax and reserved keys, the
soak's size (:func:`resolve_plan`), ``--motion``, and the interpreter-pinned ``train`` argv.
Every problem is a ``UsageError`` (exit 2).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from contracts.config_keys import removed_key_message
from contracts.errors import UsageError
from contracts.motions import MOTION_IDS, MOTION_KEY
from contracts.paths import absolute
from harness.soak.claim import check_replaceable
from harness.soak.eta import SoakPlan
from harness.soak.preflight import motion_arg

SOAK_OWNED_KEYS: tuple[str, ...] = (
    "algo",
    "task",
    "training.sim_backend",
    "training.play_only",
    "training.no_play",
    "training.log_dir",
    "algo.num_envs",
    "algo.max_iterations",
    "training.duration_seconds",
)
SEED_ITERATIONS = 65000
SEED_MIN_DURATION_S = 1800.0
REMOVED_KEY_PREFIX = "env.tensor_runtime"
"""Every override key under it is refused (both removed keys share this prefix)."""
DEFAULT_SAVE_INTERVAL_OVERRIDE = "algo.save_interval=10000"
_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$")


def _check_positive(flag: str, value: float) -> None:
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{flag}={value:g} must be a number > 0")


def check_non_negative(flag: str, value: float | None) -> None:
    if value is not None and (not math.isfinite(value) or value < 0):
        raise UsageError(f"{flag}={value:g} must be a number >= 0")


def checked_timing(
    sample: float,
    startup: float,
    stale: float,
    grace: float,
    min_duration: float,
    warmup: float | None,
    window: float | None,
    stop_grace: float,
) -> dict[str, float | None]:
    """The monitor's timing flags (shared by g1-soak and soak-run), bounds-checked."""
    check_non_negative("--min-duration-seconds", min_duration)
    _check_positive("--sample-interval-seconds", sample)
    _check_positive("--startup-timeout-seconds", startup)
    _check_positive("--stale-progress-seconds", stale)
    check_non_negative("--post-shutdown-grace-seconds", grace)
    check_non_negative("--trend-warmup-seconds", warmup)
    check_non_negative("--trend-min-window-seconds", window)
    _check_positive("--stop-grace-seconds", stop_grace)
    return {
        "sample": sample,
        "startup": startup,
        "stale": stale,
        "grace": grace,
        "min_duration": min_duration,
        "warmup": warmup,
        "window": window,
        "stop_grace": stop_grace,
    }


def check_paths(log_dir: Path, output: Path, *, overwrite: bool = False) -> tuple[Path, Path]:
    """Both made absolute (contracts.paths: relative to the CWD); log dir missing or empty;
    output new (or replaced: ``overwrite``) and outside it."""
    log_dir, output = absolute(log_dir), absolute(output)
    if log_dir.exists():
        if not log_dir.is_dir():
            raise UsageError(
                f"--log-dir {log_dir} exists and is not a directory; pass a new directory"
            )
        if any(log_dir.iterdir()):
            raise UsageError(f"--log-dir {log_dir} is not empty; pass a missing or empty directory")
    check_replaceable(output, overwrite)
    if output == log_dir or log_dir in output.parents:
        raise UsageError(
            f"--output {output} lies inside --log-dir {log_dir}; write the artifact outside the run dir"
        )
    return log_dir, output


def override_key(text: str) -> str:
    """Key of ``K=V``: text before the first ``=``, stripped, one leading ``+``/``~`` dropped."""
    key = text.split("=", 1)[0].strip()
    if key[:1] in ("+", "~"):
        key = key[1:]
    return key


def check_overrides(overrides: Sequence[str]) -> None:
    """Syntax, then soak-owned keys, then removed keys (docs/contracts.md §g1-soak pre-launch order)."""
    for text in overrides:
        key = override_key(text)
        if "=" not in text or not _KEY_RE.match(key):
            raise UsageError(
                f"--extra-override {text!r} must look like KEY=VALUE with a dotted key "
                "(e.g. algo.save_interval=10000)"
            )
    for text in overrides:
        key = override_key(text)
        if key == "training.duration_seconds":
            raise UsageError(
                "'training.duration_seconds' is a soak-owned override; use --duration-seconds instead"
            )
        if key in SOAK_OWNED_KEYS:
            raise UsageError(
                f"'{key}' is a soak-owned override; use --num-envs/--iterations/--log-dir instead"
            )
    for text in overrides:
        key = override_key(text)
        if key.startswith(REMOVED_KEY_PREFIX):
            raise UsageError(removed_key_message(key))


def motion_override(motion: str | None) -> tuple[str | None, str]:
    """``(override or None, motion id)`` for ``--motion`` (None = the owner's default, dance).

    Aliases are expanded in each item of a comma list (a clip set, docs/assets.md)."""
    if motion is None:
        return None, MOTION_IDS["dance"]
    if ":" in motion:  # a library subset DIR:GLOB,...: its globs are no aliases
        return f"{MOTION_KEY}={motion}", motion
    motion_id = ",".join(MOTION_IDS.get(item.strip(), item.strip()) for item in motion.split(","))
    return f"{MOTION_KEY}={motion_id}", motion_id


def build_g1_command(
    *,
    sim: str,
    num_envs: int,
    iterations: int | None,
    log_dir: Path,
    extras: Sequence[str],
    duration_s: float | None = None,
) -> list[str]:
    """The interpreter-pinned trainer argv (docs/soak.md); a time budget adds
    ``training.duration_seconds`` and makes ``algo.max_iterations`` a cap (null: none)."""
    budget = [] if duration_s is None else [f"training.duration_seconds={_fmt_number(duration_s)}"]
    return [
        sys.executable,
        "-m",
        "trainer",
        "train",
        "--algo",
        "flashsac",
        "--task",
        "g1_motion_tracking",
        "--sim",
        sim,
        f"algo.num_envs={num_envs}",
        f"algo.max_iterations={'null' if iterations is None else iterations}",
        *budget,
        "training.no_play=true",
        f"training.log_dir={log_dir}",
        *extras,
    ]


def _fmt_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def resolve_plan(
    iterations: int | None, duration_s: float | None, min_duration_s: float | None
) -> SoakPlan:
    """The soak's size: the seed form (``--iterations``, default 65000, minimum 1800 s)
    or the time-budgeted form (``--duration-seconds``, ``--iterations`` an optional cap,
    minimum = the budget unless given). Raises UsageError on bad bounds."""
    if iterations is not None and iterations <= 0:
        raise UsageError(f"--iterations={iterations} must be an integer > 0")
    if duration_s is None:
        minimum = SEED_MIN_DURATION_S if min_duration_s is None else min_duration_s
        return SoakPlan(SEED_ITERATIONS if iterations is None else iterations, None, minimum)
    if not math.isfinite(duration_s) or duration_s <= 0:
        raise UsageError(
            f"--duration-seconds={duration_s:g} must be a number of seconds > 0, e.g. 1800"
        )
    minimum = duration_s if min_duration_s is None else min_duration_s
    if minimum > duration_s:
        raise UsageError(
            f"--min-duration-seconds={minimum:g} exceeds --duration-seconds={duration_s:g}: the "
            "trainer stops training when its budget is spent, so the soak would fail; raise "
            f"--duration-seconds to {minimum:g} or lower --min-duration-seconds"
        )
    return SoakPlan(iterations, float(duration_s), minimum)


def motion_selection(motion: str | None, user: Sequence[str]) -> tuple[str | None, str]:
    """``(override or None, clip id)``: ``--motion`` (checked: names clips, or exit 2), else
    the user's own ``--extra-override`` of the clip, else the owner's default (dance)."""
    motion_extra, motion_id = motion_override(
        None if motion is None else motion_arg(motion, MOTION_IDS)  # names clips, or exit 2
    )
    if motion_extra is not None and any(override_key(o) == MOTION_KEY for o in user):
        raise UsageError(
            f"--motion and --extra-override {MOTION_KEY}=... both set the clip; pass only --motion"
        )
    if motion_extra is None:
        motion_id = next(
            (o.split("=", 1)[1] for o in user if override_key(o) == MOTION_KEY), motion_id
        )
    return motion_extra, motion_id


def trainer_extras(user: Sequence[str], motion_extra: str | None) -> list[str]:
    """The overrides after the soak-owned ones: the default checkpoint interval (unless the
    user set one), the clip, then the user's, in that order."""
    extras: list[str] = []
    if not any(override_key(o) == "algo.save_interval" for o in user):
        extras.append(DEFAULT_SAVE_INTERVAL_OVERRIDE)
    if motion_extra is not None:
        extras.append(motion_extra)
    extras.extend(user)
    return extras
