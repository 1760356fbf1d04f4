"""The evaluated policy: the actor of a checkpoint, acting with its mean action.

``model_<k>.pt`` holds the whole learner state; evaluation needs only its policy: the
averaged policy where the run kept one (``algo.policy_average_rate``), else ``learner["actor"]``.
The network sizes are read from the tensors themselves, so any checkpoint ``train`` wrote
loads without its config. The policy is ``tanh(mu)`` with batch-norm in eval mode (its
running statistics), in float32, without exploration noise (docs/evaluation.md).
"""

from __future__ import annotations

import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor

from trainer.algo.learner_state import policy_state
from trainer.algo.networks import Actor
from trainer.rundir.checkpoint import (
    checkpoint_files,
    file_sha256,
    load_checkpoint,
    load_error_detail,
)

__all__ = [
    "CheckpointError",
    "PolicyPoint",
    "actor_from_state",
    "checkpoint_files",
    "load_policy_point",
]

_BLOCK_RE = re.compile(r"^trunk\.blocks\.([0-9]+)\.up\.weight$")


class CheckpointError(ValueError):
    """A checkpoint cannot be evaluated (unreadable, foreign, or no actor in it)."""


@dataclass(frozen=True)
class PolicyPoint:
    """One policy to evaluate and what its evaluation point records about it."""

    iteration: int
    env_steps: int
    source: Literal["checkpoint", "final"]
    checkpoint: str | None
    """File name inside the run directory (or the path given to ``evaluate``)."""
    checkpoint_sha256: str | None
    actor: Actor
    network: str = "actor"
    """Which weights of the checkpoint ``actor`` holds: ``actor`` or ``policy_average``."""

    @torch.no_grad()
    def act(self, obs: Tensor) -> Tensor:
        """The deterministic action ``tanh(mu)`` for ``obs [n, obs_dim]``: ``[n, action_dim]``."""
        return self.actor.deterministic(obs)


def actor_from_state(state: dict[str, Tensor], device: torch.device | str) -> Actor:
    """Rebuild the actor whose ``state_dict()`` is ``state`` (sizes read from its tensors)."""
    try:
        hidden, obs_dim = (int(x) for x in state["trunk.embed.weight"].shape[1:])
        action_dim = int(state["mu_head.weight"].shape[1])
    except (KeyError, ValueError, IndexError) as err:
        msg = f"the actor state lacks its embedding or mean head ({type(err).__name__}: {err})"
        raise CheckpointError(msg) from err
    blocks = sum(1 for key in state if _BLOCK_RE.match(key))
    actor = Actor(obs_dim, action_dim, hidden, blocks)
    try:
        actor.load_state_dict(state)
    except RuntimeError as err:
        detail = " ".join(str(err).split())[:300]
        raise CheckpointError(f"the actor state does not load: {detail}") from err
    return actor.to(device).eval()


def load_policy_point(
    path: Path,
    device: torch.device | str,
    *,
    source: Literal["checkpoint", "final"] = "checkpoint",
    name: str | None = None,
    actor_only: bool = False,
) -> PolicyPoint:
    """The policy of the checkpoint at ``path``, ready to act on ``device``.

    Args:
        path: a ``model_<k>.pt`` written by ``train``.
        device: where the actor runs (the env's device).
        source: ``final`` for the run's final policy.
        name: what ``checkpoint`` records (default: the file name).
        actor_only: the actor's own weights even where the run kept an averaged policy
            (``evaluate --policy actor``: the average against the actor of the same run).

    Raises:
        CheckpointError: unreadable, not a g1soak checkpoint, or no loadable actor.
    """
    try:
        payload = load_checkpoint(path, map_location="cpu")
    except (OSError, EOFError, RuntimeError, ValueError, pickle.UnpicklingError) as err:
        raise CheckpointError(
            f"{path} cannot be loaded ({load_error_detail(err)}); pass a model_<iter>.pt "
            "written by train"
        ) from err
    learner = payload["learner"]
    key, actor_state = ("actor", learner.get("actor")) if actor_only else policy_state(learner)
    if not isinstance(actor_state, dict):
        raise CheckpointError(f"{path} holds no actor state (learner[{key!r}])")
    try:
        actor = actor_from_state(actor_state, device)
    except CheckpointError as err:
        raise CheckpointError(f"{path}: {err}") from err
    steps = payload.get("total_env_steps")
    return PolicyPoint(
        iteration=int(payload["iteration"]),
        env_steps=steps if type(steps) is int and steps >= 0 else 0,
        source=source,
        checkpoint=name or path.name,
        checkpoint_sha256=file_sha256(path),
        actor=actor,
        network=key,
    )
