"""What ``play`` plays: a run directory or one of its checkpoints, with the run's own configs.

``play RUN_DIR`` takes the run's newest ``model_<iter>.pt``; ``play CHECKPOINT`` that file,
whose folder must be the run directory ``train`` wrote (it holds ``run_config.json``). The
task and algorithm configs are rebuilt from the ``config`` recorded in ``run_config.json``,
so the policy is replayed with exactly the values it trained with, whatever the owner files
say today. Every problem with the input is a :class:`PlayInputError` (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from contracts import rundir
from contracts.rundir import checkpoint_files
from trainer.config.errors import ConfigError
from trainer.play.precheck import PlayInputError, locate

if TYPE_CHECKING:
    from trainer.algo.config import FlashSacCfg
    from trainer.algo.networks import Actor
    from trainer.config.schema import TrainingCfg
    from trainer.task.config import G1TrackingCfg

__all__ = ["PlayInputError", "PlaySource", "find_checkpoint", "load_actor", "resolve_source"]


@dataclass(frozen=True)
class PlaySource:
    """A checkpoint and the run it belongs to."""

    run_dir: Path
    checkpoint: Path
    run_config: dict[str, Any]
    """``run_config.json`` as written by ``train``."""
    task_cfg: G1TrackingCfg
    algo_cfg: FlashSacCfg
    training: TrainingCfg

    @property
    def git(self) -> dict[str, Any]:
        """``{commit, branch, dirty}`` of the checkout that trained the run (nulls unknown)."""
        return dict(self.run_config.get("run", {}).get("git") or {})


def find_checkpoint(run_dir: Path) -> Path:
    """The ``model_<iter>.pt`` with the highest iteration in ``run_dir``.

    Raises:
        PlayInputError: the directory holds no checkpoint.
    """
    found = checkpoint_files(run_dir)
    if not found:
        msg = (
            f"{run_dir} holds no model_<iter>.pt; train writes one at every "
            "algo.save_interval and at the last iteration: pass a run directory that has one"
        )
        raise PlayInputError(msg)
    return max(found)[1]


def _read_run_config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / rundir.RUN_CONFIG
    try:  # lenient: the config section is checked below, the rest play does not read
        doc = rundir.read(path, lenient=True)
    except rundir.DocumentError as err:
        if err.problem == "missing":
            msg = (
                f"{run_dir} has no run_config.json; play needs the run directory train wrote "
                "(a checkpoint must stay in it)"
            )
            raise PlayInputError(msg) from None
        raise PlayInputError(f"{path} is unreadable: {err.detail}") from err
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise PlayInputError(f"{path} has no 'config' object; it was not written by train")
    return doc


def resolve_source(target: Path) -> PlaySource:
    """Turn ``play``'s argument into a :class:`PlaySource`.

    Raises:
        PlayInputError: missing path, no checkpoint, no or unreadable run_config.json, or a
            recorded config that no longer fits the config dataclasses.
    """
    from trainer.config.loader import typed_sections

    run_dir, checkpoint = locate(target)
    run_config = _read_run_config(run_dir)
    try:
        built, _ = typed_sections(
            run_config["config"],
            source=f"{run_dir / rundir.RUN_CONFIG}",
            fix="the run was written by an incompatible g1soak version; retrain it",
        )
    except ConfigError as err:
        raise PlayInputError(str(err)) from err
    return PlaySource(
        run_dir=run_dir.resolve(),
        checkpoint=checkpoint.resolve(),
        run_config=run_config,
        task_cfg=built["env"],
        algo_cfg=built["algo"],
        training=built["training"],
    )


class LoadedActor(NamedTuple):
    """A checkpoint's policy ready to play and export."""

    actor: Actor
    """On the CPU, in eval mode."""
    iteration: int
    """The checkpoint's training iteration."""
    weights: str
    """Which weights of the checkpoint: ``policy_average`` or ``actor``."""


def load_actor(source: PlaySource) -> LoadedActor:
    """The checkpoint's policy (its averaged policy where the run kept one, else its actor)
    on the CPU in eval mode, with the checkpoint's iteration and which weights it holds.

    Network sizes come from the checkpoint's ``meta`` (the recorded config, and the task's
    ``G1_TRACKING_SPEC`` for the widths, where a key is absent), so the state dict must match
    exactly.

    Raises:
        PlayInputError: the checkpoint is unreadable or its actor does not fit.
    """
    from trainer.algo.learner_state import policy_state
    from trainer.algo.networks import Actor
    from trainer.rundir.checkpoint import LOAD_ERRORS, load_checkpoint, load_error_detail
    from trainer.task.spec import G1_TRACKING_SPEC

    try:
        payload = load_checkpoint(source.checkpoint, map_location="cpu")
    except LOAD_ERRORS as err:
        detail = load_error_detail(err)
        msg = f"{source.checkpoint} cannot be loaded ({detail}); pass a model_<iter>.pt written by train"
        raise PlayInputError(msg) from err
    meta = payload.get("meta") or {}
    cfg = source.algo_cfg
    actor = Actor(
        int(meta.get("obs_dim", G1_TRACKING_SPEC.obs_dim)),
        int(meta.get("action_dim", G1_TRACKING_SPEC.action_dim)),
        int(meta.get("actor_hidden_dim", cfg.actor_hidden_dim)),
        int(meta.get("num_blocks", cfg.num_blocks)),
    )
    key, state = policy_state(payload["learner"])
    if not isinstance(state, dict):
        raise PlayInputError(f"{source.checkpoint}: the learner state has no {key!r} dict")
    try:
        actor.load_state_dict(state)
    except RuntimeError as err:
        detail = " ".join(str(err).split())[:300]
        raise PlayInputError(f"{source.checkpoint}: the actor does not load ({detail})") from err
    return LoadedActor(actor.eval(), int(payload["iteration"]), key)
