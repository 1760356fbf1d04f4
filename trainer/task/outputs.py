"""What one control step returns: :class:`StepResult` and the packed buffer its tensors view.

Every output of a step lives in one byte buffer with a typed view per field
(:class:`StepOutputs`), so handing out a fresh copy of the whole step is one ``clone``, and a
captured step writes fixed addresses (docs/task.md "Step phases").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from contracts.env_spec import EnvSpec
from trainer.task import terminations as term
from trainer.task.config import REWARD_TERM_NAMES
from trainer.task.state import TrackedState

__all__ = ["INFO_NAMES", "REWARD_TAGS", "SAMPLER_DIAG_NAMES", "StepOutputs", "StepResult"]

SAMPLER_DIAG_NAMES = ("sampler/entropy", "sampler/top1_prob", "sampler/top1_bin_frac")
INFO_NAMES = (
    *(f"Episode_Termination/{k}" for k in term.CONDITION_NAMES),
    *SAMPLER_DIAG_NAMES,
)
REWARD_TAGS = tuple(f"reward/{k}" for k in REWARD_TERM_NAMES)
_ALIGN = 16  # byte alignment of each field in the packed output buffer


@dataclass
class StepResult:
    """What one control step returns.

    By default every tensor is a view of one fresh per-step allocation (safe to keep across
    steps). With ``G1TrackingEnv(static_outputs=True)`` they are views of the env's fixed output
    buffer instead, overwritten by the next ``step``: read or copy them before stepping again.
    """

    obs: Tensor
    """[N, obs_dim] after resets: what the policy sees next."""
    critic_obs: Tensor
    """[N, critic_obs_dim] after resets."""
    terminal_obs: Tensor
    """[N, obs_dim] step-7 observation (replay next_obs); equals ``obs`` where not done."""
    terminal_critic_obs: Tensor
    """[N, critic_obs_dim] step-7 critic observation."""
    reward: Tensor
    """[N] ctrl_dt · Σ wᵢ·termᵢ."""
    terminated: Tensor
    """[N] bool, terminal conditions."""
    truncated: Tensor
    """[N] bool, time-out or clip end, excluding terminated rows."""
    done: Tensor
    """[N] bool, terminated | truncated."""
    reward_terms: dict[str, Tensor]
    """``reward/<term>`` → env mean of wᵢ·termᵢ before the dt factor (scalar tensors)."""
    episode_return: Tensor
    """[N] return of the episode that ended (valid where done)."""
    episode_length: Tensor
    """[N] length in control steps of the episode that ended (valid where done)."""
    info: dict[str, Tensor]
    """Termination rates and sampler diagnostics (scalar tensors, stay on device)."""
    # Per-row fields of :meth:`G1TrackingEnv.step_without_reset` (evaluation); None from
    # ``step``, whose training hot path copies nothing it does not need.
    frame: Tensor | None = None
    """[N] long, the reference frame k this step was scored against."""
    conditions: Tensor | None = None
    """[N, 5] bool, the :data:`~trainer.task.terminations.CONDITION_NAMES` conditions."""
    row_reward_terms: Tensor | None = None
    """[N, 9] wᵢ·termᵢ of every row (before the dt factor), ``REWARD_TERM_NAMES`` order."""
    robot: TrackedState | None = None
    """The robot state the terms saw (after physics; the terminal state where done)."""
    reference: TrackedState | None = None
    """The reference at ``frame``."""


def output_layout(n: int, spec: EnvSpec) -> tuple[list, int]:
    """(name, byte offset, dtype, shape) of every ``StepResult`` field in one byte buffer."""
    actor, critic = spec.obs_dim, spec.critic_obs_dim
    fields = (
        ("obs", torch.float32, (n, actor)),
        ("critic_obs", torch.float32, (n, critic)),
        ("terminal_obs", torch.float32, (n, actor)),
        ("terminal_critic_obs", torch.float32, (n, critic)),
        ("reward", torch.float32, (n,)),
        ("episode_return", torch.float32, (n,)),
        ("episode_length", torch.long, (n,)),
        ("terminated", torch.bool, (n,)),
        ("truncated", torch.bool, (n,)),
        ("done", torch.bool, (n,)),
        ("reward_terms", torch.float32, (len(REWARD_TERM_NAMES),)),
        ("info", torch.float32, (len(INFO_NAMES),)),
    )
    layout, offset = [], 0
    for name, dtype, shape in fields:
        layout.append((name, offset, dtype, shape))
        nbytes = math.prod(shape) * dtype.itemsize
        offset += -(-nbytes // _ALIGN) * _ALIGN
    return layout, offset


class StepOutputs:
    """The fixed output buffer of an env: typed views by field (:attr:`fields`)."""

    def __init__(self, n: int, spec: EnvSpec, device: torch.device) -> None:
        self._layout, nbytes = output_layout(n, spec)
        self.buffer = torch.zeros(nbytes, dtype=torch.uint8, device=device)
        self.fields = self._views(self.buffer)
        """Field name → typed view of :attr:`buffer` (what the phases write)."""

    def _views(self, buf: Tensor) -> dict[str, Tensor]:
        return {
            name: buf[off : off + math.prod(shape) * dtype.itemsize].view(dtype).view(shape)
            for name, off, dtype, shape in self._layout
        }

    def result(self, *, fresh: bool) -> StepResult:
        """The outputs as a :class:`StepResult`: views of a copy (``fresh``) or of the buffer."""
        v = self._views(self.buffer.clone() if fresh else self.buffer)
        return StepResult(
            obs=v["obs"],
            critic_obs=v["critic_obs"],
            terminal_obs=v["terminal_obs"],
            terminal_critic_obs=v["terminal_critic_obs"],
            reward=v["reward"],
            terminated=v["terminated"],
            truncated=v["truncated"],
            done=v["done"],
            reward_terms=dict(zip(REWARD_TAGS, v["reward_terms"].unbind(0), strict=True)),
            episode_return=v["episode_return"],
            episode_length=v["episode_length"],
            info=dict(zip(INFO_NAMES, v["info"].unbind(0), strict=True)),
        )
