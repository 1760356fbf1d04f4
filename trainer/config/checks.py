"""Semantic checks of a loaded config (docs/contracts.md §train step 5) and the run-dir choice.

The loader guarantees keys and types; this module checks what the values mean together:
ranges of the runtime knobs, the replay-ingress slot size against ``algo.num_envs``, the
device against the backend and the CUDA-sharing mode, the scene id, ``FlashSacCfg.validate()``,
whether ``training.resume_from`` names a checkpoint with iterations left to train and whether
``training.log_dir`` names a fresh directory. Every failure is a ``ConfigError`` (exit 2) and nothing is
written: the directory is only inspected here, ``train`` creates it in step 6.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Mapping
from pathlib import Path

from contracts import rundir
from contracts.names import Backend
from trainer.config.errors import ConfigError
from trainer.config.loader import LoadedConfig
from trainer.config.schema import TrainingCfg

SLOT_LIMIT = 16
"""Upper bound of ``training.inference_slot_capacity`` and ``training.replay_ingress_depth``."""

METRICS_INTERVAL_LIMIT = 10000
"""Upper bound of ``training.collector_metrics_interval``."""

SCENE_MODEL_ID = "robots/g1/scene_flat.xml"
"""The scene asset id ``train`` materialises (docs/contracts.md §assets-and-motion); the only supported model_file."""

LOG_DIR_ENV = "G1SOAK_LOG_DIR"
"""Set by ``soak-run`` for the trainer; used when ``training.log_dir`` is null."""


def _range(key: str, value: int, low: int, high: int, fix: object) -> None:
    if not low <= value <= high:
        raise ConfigError(f"{key}={value} must be in {low}..{high}; use {fix}")


def _divisor_hint(num_envs: int, rows: int) -> int:
    for candidate in range(min(rows, num_envs), 0, -1):
        if num_envs % candidate == 0:
            return candidate
    return num_envs


def check_semantics(loaded: LoadedConfig, *, read_checkpoint: bool = True) -> None:
    """Step 5 value checks in contract order (the log dir is :func:`resolve_log_dir`).

    Closed sets (``training.device``, ``training.motion_hub``, ``training.cuda_process_sharing``)
    are ``Literal`` fields, so the loader has already rejected a value outside them.

    Args:
        loaded: the loaded config.
        read_checkpoint: read ``training.resume_from``'s iteration (needs torch); False
            checks only that the file exists (``python -m trainer check-config``).

    Raises:
        ConfigError: the first unmet condition, naming the key, the value and the fix.
    """
    training, algo = loaded.training, loaded.algo_cfg
    _check_runtime_sizes(training, algo.num_envs)
    if algo.n_step != 1:
        raise ConfigError(
            f"algo.n_step={algo.n_step} is not supported; only algo.n_step=1 is implemented"
        )
    _check_device_pairing(loaded.sim, training)
    _check_lock_step(training)
    model_file = loaded.loader_values.get("env.scene.model_file", SCENE_MODEL_ID)
    if model_file != SCENE_MODEL_ID:
        raise ConfigError(
            f"env.scene.model_file={model_file!r} is not supported: train builds "
            f"{SCENE_MODEL_ID} itself; to use another robot file set env.scene.robot_mjcf"
        )
    check_duration(training.duration_seconds, max_iterations=algo.max_iterations)
    algo.validate()  # FlashSacCfg: sizes, capacity, fp16 (raises a ConfigError subclass)
    check_resume_from(
        training.resume_from,
        max_iterations=algo.max_iterations,
        cwd=Path.cwd(),
        read_checkpoint=read_checkpoint,
    )


def _check_runtime_sizes(training: TrainingCfg, num_envs: int) -> None:
    """The ring/ingress slot counts, the ingress slot rows and the metrics cadence."""
    _range("training.inference_slot_capacity", training.inference_slot_capacity, 1, SLOT_LIMIT, 1)
    _range("training.replay_ingress_depth", training.replay_ingress_depth, 1, SLOT_LIMIT, 2)
    rows = training.replay_ingress_slot_rows
    if rows is not None:
        if rows < 1:
            raise ConfigError(
                f"training.replay_ingress_slot_rows={rows} must be null or an int >= 1; "
                "use null (= algo.num_envs)"
            )
        if num_envs > 0 and num_envs % rows != 0:
            raise ConfigError(
                f"training.replay_ingress_slot_rows={rows} must divide algo.num_envs="
                f"{num_envs}; use e.g. {_divisor_hint(num_envs, rows)} or null"
            )
    _range(
        "training.collector_metrics_interval",
        training.collector_metrics_interval,
        1,
        METRICS_INTERVAL_LIMIT,
        "100 (mjwarp) or 1 (mujoco)",
    )


def _check_device_pairing(sim: str, training: TrainingCfg) -> None:
    """A CPU learner cannot serve mjwarp or CUDA MPS; only mjwarp has a stream priority; MPS
    needs the collector in a process of its own."""
    if sim == Backend.MJWARP and training.device == "cpu":
        raise ConfigError(
            "training.device=cpu cannot run --sim mjwarp (MuJoCo Warp trains on one CUDA GPU); "
            "use training.device=auto, or --sim mujoco for a CPU run"
        )
    if training.cuda_process_sharing == "mps" and training.device == "cpu":
        raise ConfigError(
            "training.cuda_process_sharing=mps needs a CUDA learner but training.device=cpu; "
            "use training.device=auto or cuda_process_sharing=null"
        )
    if training.collector_stream_priority != "default" and sim != Backend.MJWARP:
        raise ConfigError(
            f"training.collector_stream_priority={training.collector_stream_priority} applies to "
            f"--sim mjwarp only (--sim {sim} steps its physics on the CPU); use default"
        )
    if training.collector_placement == "thread" and training.cuda_process_sharing == "mps":
        raise ConfigError(
            "training.collector_placement=thread runs the collector inside train's one CUDA "
            "context, so training.cuda_process_sharing=mps has no second process to share the "
            "GPU with; use collector_placement=process with mps, or cuda_process_sharing=null"
        )


def _check_lock_step(training: TrainingCfg) -> None:
    """``train`` only trains, collector and learner run lock-step, ``log_interval`` >= 1."""
    if training.play_only:
        raise ConfigError(
            "training.play_only=true: train only trains; set training.play_only: false "
            "in the owner file"
        )
    if training.env_steps_per_sync != 1:
        raise ConfigError(
            f"training.env_steps_per_sync={training.env_steps_per_sync} is not supported: the "
            "collector and learner run lock-step; use 1"
        )
    if training.log_interval < 1:
        raise ConfigError(f"training.log_interval={training.log_interval} must be >= 1; use 1")


def check_duration(duration_seconds: float | None, *, max_iterations: int | None) -> None:
    """``training.duration_seconds`` is null or a finite number > 0, and a run without an
    iteration cap (``algo.max_iterations=null``) has a time budget.

    Raises:
        ConfigError: a non-positive or non-finite budget, or neither budget nor cap.
    """
    if duration_seconds is not None and not (
        math.isfinite(duration_seconds) and duration_seconds > 0
    ):
        raise ConfigError(
            f"training.duration_seconds={duration_seconds:g} must be null or a number of "
            "seconds > 0; use e.g. training.duration_seconds=1800"
        )
    if duration_seconds is None and max_iterations is None:
        raise ConfigError(
            "algo.max_iterations=null needs a time budget; set training.duration_seconds=S "
            "(then max_iterations is an optional cap) or algo.max_iterations=N"
        )


def resolve_resume_path(value: str, cwd: Path) -> Path:
    """``training.resume_from`` as an absolute path (a relative one is taken from ``cwd``)."""
    return Path(os.path.abspath(cwd / Path(value).expanduser()))


def check_resume_from(
    value: str | None, *, max_iterations: int | None, cwd: Path, read_checkpoint: bool = True
) -> None:
    """``training.resume_from`` names an existing checkpoint file with iterations left.

    Only the file's iteration is read here (memory-mapped); a file that cannot be loaded or
    does not match the config fails later, at startup (exit 1, docs/runtime.md "Resuming").

    Raises:
        ConfigError: empty value, missing path, a directory, or iteration >= max_iterations
            (a run without an iteration cap always has iterations left).
    """
    if value is None:
        return
    fix = "pass an existing model_<iter>.pt of an earlier run, or null for a fresh start"
    if not value.strip():
        raise ConfigError(f"training.resume_from='' is empty; {fix}")
    path = resolve_resume_path(value, cwd)
    if path.is_dir():
        raise ConfigError(
            f"training.resume_from={path} is a directory; pass one of its model_<iter>.pt files"
        )
    if not path.is_file():
        raise ConfigError(f"training.resume_from={path} is not an existing file; {fix}")
    if not read_checkpoint:
        return
    from trainer.rundir.checkpoint import peek_iteration  # torch: only when resuming

    iteration = peek_iteration(path)
    if iteration is not None and max_iterations is not None and iteration >= max_iterations:
        raise ConfigError(
            f"training.resume_from={path} is at iteration {iteration} but algo.max_iterations="
            f"{max_iterations} is the total target, so nothing is left to train; raise "
            f"algo.max_iterations above {iteration} (e.g. algo.max_iterations={2 * iteration})"
        )


def default_log_dir(algo: str, task: str, sim: str, now: dt.datetime, cwd: Path) -> Path:
    """``<cwd>/logs/<algo>/<task>/<UTC stamp>_<sim>``; a suffix keeps it fresh."""
    stamp = now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
    base = cwd / "logs" / algo / task / f"{stamp}_{sim}"
    candidate, n = base, 1
    while candidate.exists():
        candidate = base.with_name(f"{base.name}-{n}")
        n += 1
    return candidate


def check_fresh_log_dir(path: Path, key: str) -> None:
    """A run dir must be missing or hold nothing but ``soak-console.log`` (docs/contracts.md §train).

    Raises:
        ConfigError: the path is a file, unreadable, or holds other entries.
    """
    if not path.exists():
        if path.is_symlink():
            raise ConfigError(f"{key}={path} is a dangling symlink; pass a fresh directory")
        return
    if not path.is_dir():
        raise ConfigError(f"{key}={path} exists and is not a directory; pass a fresh directory")
    try:
        entries = sorted(os.listdir(path))
    except OSError as err:
        raise ConfigError(
            f"{key}={path} cannot be read ({err.strerror}); pass a fresh directory"
        ) from err
    others = [e for e in entries if e != rundir.SOAK_CONSOLE_LOG]
    if rundir.SOAK_CONSOLE_LOG in entries and not (path / rundir.SOAK_CONSOLE_LOG).is_file():
        others.insert(0, rundir.SOAK_CONSOLE_LOG)
    if others:
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        raise ConfigError(
            f"{key}={path} is not empty (holds {shown}); a run directory holds exactly one run: "
            "pass a missing or empty directory"
        )


def resolve_log_dir(
    loaded: LoadedConfig,
    *,
    now: dt.datetime,
    cwd: Path,
    environ: Mapping[str, str],
) -> Path:
    """The absolute run directory: ``training.log_dir``, else ``$G1SOAK_LOG_DIR``, else the
    default ``logs/<algo>/<task>/<UTC stamp>_<sim>`` (relative paths are taken from ``cwd``).

    Raises:
        ConfigError: the chosen directory is not fresh.
    """
    configured = loaded.training.log_dir
    if configured is not None:
        if not configured.strip():
            raise ConfigError("training.log_dir='' is empty; pass a directory or null")
        path = Path(os.path.abspath(cwd / Path(configured).expanduser()))
        check_fresh_log_dir(path, "training.log_dir")
        return path
    from_env = environ.get(LOG_DIR_ENV, "")
    if from_env:
        path = Path(os.path.abspath(cwd / Path(from_env).expanduser()))
        check_fresh_log_dir(path, LOG_DIR_ENV)
        return path
    return Path(os.path.abspath(default_log_dir(loaded.algo, loaded.task, loaded.sim, now, cwd)))
