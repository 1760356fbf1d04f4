"""Re-evaluating checkpoints outside a run (the ``evaluate`` command's work).

A target is a run directory (every ``model_<k>.pt`` in it) or one checkpoint file. The task
configuration comes from the run's ``run_config.json`` (its owner and overrides, loaded the way
``train`` loaded them) when there is one beside the checkpoints, else from the owner's
defaults. ``--sim`` and ``--motion`` replace the run's backend and clip. The env is built for
this evaluation alone: as many rows as all points' episodes (capped), CUDA graphs on, no
``torch.compile`` (a compile per env size would cost more than the evaluation), so numbers
equal the run's own evaluation up to float rounding of the compiled step (docs/evaluation.md).

Every problem with the inputs is a :class:`~contracts.errors.UsageError` (exit 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from contracts import rundir
from contracts.errors import UsageError
from contracts.motions import MOTION_KEY
from contracts.names import Backend
from trainer.config.errors import ConfigError
from trainer.config.loader import load_config
from trainer.evaluation.document import build_document, motion_record
from trainer.evaluation.policy import (
    CheckpointError,
    PolicyPoint,
    checkpoint_files,
    load_policy_point,
)
from trainer.evaluation.protocol import Protocol
from trainer.task.motion import DANCE_MOTION_ID, SYNTHETIC_MOTION_ID, MotionError

__all__ = ["MAX_ROWS", "MOTION_SHORTCUTS", "OfflineSettings", "Target", "evaluate_offline"]

ALGO, TASK = "flashsac", "g1_motion_tracking"
MOTION_SHORTCUTS = {"synthetic": SYNTHETIC_MOTION_ID, "dance": DANCE_MOTION_ID}
MAX_ROWS = {Backend.MJWARP: 4096, Backend.MUJOCO: 64}
"""Default cap of the evaluation env's rows (more episodes run in several rollouts)."""


@dataclass(frozen=True)
class Target:
    """What to evaluate: checkpoint files and the run they belong to (if any)."""

    checkpoints: list[tuple[int, Path]]
    run_dir: Path
    run_config: dict[str, Any] | None
    single: bool
    """One checkpoint file was given (its point records the path as given)."""


@dataclass(frozen=True)
class OfflineSettings:
    """The resolved inputs of one ``evaluate`` call."""

    sim: str
    device: str
    task_cfg: Any
    motion_id: str
    motion_hub: str
    uniform_episodes: int
    frame0_episodes: int


def _read_run_config(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / rundir.RUN_CONFIG
    if not path.is_file():
        return None
    try:
        doc = rundir.read(path)
    except rundir.DocumentError as err:
        raise UsageError(
            f"{path} is not a run_config.json written by train ({err.detail})"
        ) from err
    run = doc["run"]  # the schema requires these
    return {"algo": run["algo"], "task": run["task"], "sim": run["sim_backend"],
            "overrides": list(doc["overrides"])}  # fmt: skip


def resolve_target(path: Path) -> Target:
    """The checkpoints of a run directory, or one checkpoint file, and the run's config."""
    if path.is_dir():
        files = checkpoint_files(path)
        if not files:
            raise UsageError(f"{path} holds no model_<k>.pt; pass a run directory of train")
        return Target(files, path, _read_run_config(path), single=False)
    if path.is_file():
        return Target([(0, path)], path.parent, _read_run_config(path.parent), single=True)
    raise UsageError(f"{path} does not exist; pass a run directory or a model_<k>.pt")


def resolve_settings(
    target: Target,
    *,
    sim: str | None,
    motion: str | None,
    episodes: int | None,
    frame0_episodes: int | None,
) -> OfflineSettings:
    """Load the task config the run used (or the owner defaults) with the caller's changes."""
    run = target.run_config or {"algo": ALGO, "task": TASK, "sim": Backend.MUJOCO, "overrides": []}
    sim = sim or run["sim"]
    overrides = list(run["overrides"])
    if motion is not None:
        overrides.append(f"{MOTION_KEY}={MOTION_SHORTCUTS.get(motion, motion)}")
    try:
        loaded = load_config(run["algo"], run["task"], sim, overrides)
    except ConfigError as err:
        raise UsageError(f"cannot load the run's configuration for --sim {sim}: {err}") from err
    device = "cpu"
    if sim == Backend.MJWARP:
        if not torch.cuda.is_available():
            raise UsageError("--sim mjwarp needs a CUDA device; use --sim mujoco on this machine")
        device = "cuda"
    uniform, frame0 = loaded.eval_cfg.episodes(int(loaded.algo_cfg.num_envs))
    return OfflineSettings(
        sim=sim,
        device=device,
        task_cfg=loaded.task_cfg,
        motion_id=loaded.task_cfg.motion_file,
        motion_hub=loaded.training.motion_hub,
        uniform_episodes=episodes or uniform,
        frame0_episodes=frame0_episodes or frame0,
    )


def _load_points(target: Target, device: str, actor_only: bool) -> list[PolicyPoint]:
    points = []
    last = len(target.checkpoints) - 1
    for i, (_, path) in enumerate(target.checkpoints):
        source = "final" if i == last else "checkpoint"
        name = str(path) if target.single else path.name
        try:
            point = load_policy_point(path, device, source=source, name=name, actor_only=actor_only)
            points.append(point)
        except CheckpointError as err:
            raise UsageError(str(err)) from err
    if len({p.iteration for p in points}) != len(points):
        raise UsageError(f"two checkpoints of {target.run_dir} hold the same iteration")
    return sorted(points, key=lambda p: p.iteration)


def evaluate_offline(
    path: Path,
    *,
    sim: str | None = None,
    motion: str | None = None,
    episodes: int | None = None,
    frame0_episodes: int | None = None,
    num_envs: int | None = None,
    output: Path | None = None,
    on_point: Callable[[dict[str, Any]], None] | None = None,
    actor_only: bool = False,
) -> dict[str, Any]:
    """Evaluate ``path`` (a run directory or a checkpoint); return the evaluation document.

    The highest iteration is recorded as the ``final`` point. ``output`` is rewritten after
    every point (validated, atomic). ``actor_only``: each checkpoint's actor even where the
    run kept an averaged policy (which is evaluated otherwise, as in the run).

    Raises:
        UsageError: bad inputs (exit 2).
        BackendFailure, RuntimeError: the evaluation itself failed (exit 1).
    """
    from trainer.evaluation.runner import evaluate_points
    from trainer.motion_import.resolve import install_motion_importer
    from trainer.sim.scene import build_g1_model
    from trainer.task.g1_tracking import make_env
    from trainer.task.motion import load_motion, resolve_motion

    install_motion_importer()
    target = resolve_target(path)
    settings = resolve_settings(
        target, sim=sim, motion=motion, episodes=episodes, frame0_episodes=frame0_episodes
    )
    points = _load_points(target, settings.device, actor_only)
    try:
        resolved = resolve_motion(
            settings.motion_id, hub_repo=settings.task_cfg.hub_repo, hub=settings.motion_hub
        )
        model = build_g1_model(settings.task_cfg.scene)
        clip = load_motion(resolved.path, model)
    except MotionError as err:
        raise UsageError(str(err)) from err
    per_point = settings.uniform_episodes + settings.frame0_episodes
    rows = min(per_point * len(points), num_envs or MAX_ROWS[settings.sim])
    env = make_env(
        settings.task_cfg,
        sim_backend=settings.sim,
        num_envs=rows,
        device=settings.device,
        seed=0,
        motion=clip,
        model=model,
        compile_backend=None,
    )
    protocol = Protocol(
        uniform_episodes=settings.uniform_episodes,
        frame0_episodes=settings.frame0_episodes,
        max_episode_steps=int(env.max_episode_steps),
        sim_backend=settings.sim,
        device=str(env.device),
    )
    record = motion_record(settings.motion_id, clip.sha256, clip.num_frames, float(clip.fps))
    done: list[dict[str, Any]] = []

    def point_done(point: dict[str, Any]) -> None:
        done.append(point)
        if output is not None:
            rundir.write(output, build_document(protocol, record, done), rundir.EVALUATION)
        if on_point is not None:
            on_point(point)

    evaluate_points(env, points, protocol, on_point=point_done)
    return build_document(protocol, record, done)
