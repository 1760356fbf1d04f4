"""The evaluation mode of ``G1TrackingEnv``: fixed episodes with public per-row outputs.

``with env.evaluation() as ev:`` switches the actor observation noise off (in place, the config
is untouched) and keeps the adaptive sampler's statistics out of it; leaving restores both and
resets every row, so the env is a fresh training env again. Inside:

- :meth:`EvalMode.start` resets every row exactly to the reference at its explicit start
  frame (no reset noise, no generator draw, no recompile of a compiled env) and marks which
  rows take part; the others are held from the start.
- :meth:`EvalMode.step` runs one control step without auto-reset
  (:meth:`~trainer.task.g1_tracking.G1TrackingEnv.step_without_reset`). A row whose episode
  ends (termination, time limit or clip end) is *held*: every later step writes its terminal
  qpos/qvel back through the backend's masked reset (the reset the training step runs every
  step anyway), so it never starts a new episode, never drifts, and its terminal state stays
  what the step reported. :attr:`EvalStep.active` says which rows were in their episode during
  the step; only those count.

Nothing here syncs with the host except :meth:`EvalMode.any_active` (and the CPU backend's own
bridge copies). docs/evaluation.md describes the protocol built on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Self, runtime_checkable

import torch
from torch import Tensor

from trainer.task.outputs import StepResult
from trainer.task.terminations import TERMINATION_NAMES

if TYPE_CHECKING:
    from trainer.sim.backend import SimBackend
    from trainer.task.motion import MotionClip
    from trainer.task.sampler import AdaptiveSampler

__all__ = ["EvalMode", "EvalStep", "EvaluableEnv"]

_NUM_TERMINAL = len(TERMINATION_NAMES)


@runtime_checkable
class EvaluableEnv(Protocol):
    """What :class:`EvalMode` drives (``G1TrackingEnv`` implements it)."""

    backend: SimBackend
    num_envs: int
    device: torch.device
    obs: Tensor
    rel_body_pos: Tensor
    rel_body_quat: Tensor

    @property
    def motion(self) -> MotionClip: ...

    @property
    def sampler(self) -> AdaptiveSampler: ...

    @property
    def observation_noise(self) -> bool: ...

    def set_observation_noise(self, enabled: bool) -> None: ...

    def reset_all(self) -> tuple[Tensor, Tensor]: ...

    def reset_rows(
        self, mask: Tensor, frames: Tensor | None = None, *, noise: bool = True
    ) -> None: ...

    def step_without_reset(self, actions: Tensor) -> StepResult: ...


@dataclass(frozen=True)
class EvalStep:
    """One evaluation step: the env's per-row result and who was in an episode."""

    result: StepResult
    """``step_without_reset``'s result (views of fixed buffers, valid until the next step)."""
    active: Tensor
    """[N] bool, rows that were in their episode during this step."""
    ended: Tensor
    """[N] bool, rows whose episode ended at this step (``active & done``)."""
    relative: tuple[Tensor, Tensor]
    """The reference of the scored frame re-anchored on the robot before the step
    (positions [N, 14, 3], orientations [N, 14, 4]): what the reward terms compared with.
    Buffers of the :class:`EvalMode`, valid until its next step."""

    def termination_reason(self) -> Tensor:
        """[N] long: index into ``TERMINATION_NAMES`` of the first terminal condition that
        ended the row's episode at this step, −1 where none did."""
        terminal = self.result.conditions[:, :_NUM_TERMINAL] & self.ended[:, None]
        first = torch.argmax(terminal.to(torch.int8), dim=-1)
        return torch.where(terminal.any(-1), first, torch.full_like(first, -1))


class EvalMode:
    """Fixed-episode evaluation on one env (see the module docstring).

    Args:
        env: the env; its rows are the evaluation's episodes.
    """

    def __init__(self, env: EvaluableEnv) -> None:
        self.env = env
        backend = env.backend
        self.active = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        """[N] bool, rows still in their episode (fixed buffer)."""
        self._held_qpos = backend.qpos.clone()
        self._held_qvel = backend.qvel.clone()
        self._relative = (env.rel_body_pos.clone(), env.rel_body_quat.clone())
        """The pre-step relative reference (fixed buffers, overwritten by every step)."""
        self._noise_before: bool | None = None
        self._failures: Tensor | None = None

    def __enter__(self) -> Self:
        env = self.env
        self._noise_before = env.observation_noise
        self._failures = env.sampler.failures.clone()
        env.set_observation_noise(False)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        env = self.env
        assert self._failures is not None and self._noise_before is not None
        env.sampler.failures.copy_(self._failures)
        env.set_observation_noise(self._noise_before)
        if exc_type is None:
            env.reset_all()

    def start(self, frames: Tensor, active: Tensor | None = None) -> Tensor:
        """Start one episode per row at ``frames [N]`` (the reference state, no noise).

        Args:
            frames: start frame of every row, in ``[0, num_frames - 2]``.
            active: [N] bool rows that take part (default all); the others are held.

        Returns:
            The rows' first observations ``[N, 160]`` (a fixed buffer).

        Raises:
            ValueError: a frame outside the clip, or shapes that do not match the env.
        """
        env = self.env
        n = env.num_envs
        frames = torch.as_tensor(frames, dtype=torch.long).to(env.device)
        if frames.shape != (n,):
            msg = f"start frames have shape {tuple(frames.shape)}; the env has {n} rows"
            raise ValueError(msg)
        last = env.motion.num_frames - 2
        if bool((frames < 0).any()) or bool((frames > last).any()):
            msg = f"start frames must lie in [0, {last}] (the clip has {last + 2} frames)"
            raise ValueError(msg)
        rows = torch.ones(n, dtype=torch.bool, device=env.device)
        if active is not None:
            rows = torch.as_tensor(active, dtype=torch.bool).to(env.device)
            if rows.shape != (n,):
                msg = f"active has shape {tuple(rows.shape)}; the env has {n} rows"
                raise ValueError(msg)
        env.reset_rows(torch.ones(n, dtype=torch.bool, device=env.device), frames, noise=False)
        self.active.copy_(rows)
        self._held_qpos.copy_(env.backend.qpos)
        self._held_qvel.copy_(env.backend.qvel)
        return env.obs

    def step(self, actions: Tensor) -> EvalStep:
        """One control step without auto-reset; rows that end are held from now on."""
        env, backend = self.env, self.env.backend
        was_active = self.active.clone()
        self._relative[0].copy_(env.rel_body_pos)
        self._relative[1].copy_(env.rel_body_quat)
        result = env.step_without_reset(actions)
        ended = result.done & was_active
        self._held_qpos.copy_(torch.where(ended[:, None], backend.qpos, self._held_qpos))
        self._held_qvel.copy_(torch.where(ended[:, None], backend.qvel, self._held_qvel))
        self.active &= ~result.done
        backend.reset_rows(~self.active, self._held_qpos, self._held_qvel)
        return EvalStep(result=result, active=was_active, ended=ended, relative=self._relative)

    def any_active(self) -> bool:
        """True while some row is still in its episode (one host sync)."""
        return bool(self.active.any())
