"""The averaged policy (docs/flashsac.md §averaged-policy): a Polyak average of the actor.

SAC's actor chases a critic that keeps moving, so consecutive checkpoints of a policy that is
still learning can gain and lose a hard move of the clip: on M_Move4 the uniform-start success
of neighbouring checkpoints 2,000 iterations apart swung by 9-14 points around one kick while
the tracking error kept falling (docs/journal/benchmarks-2026.md, "M_Move4 as recorded beside
its shoulder steps blended"). With ``algo.policy_average_rate`` r > 0 the learner keeps
``avg ← avg + r · (actor − avg)`` after every update cycle, an average over about the last
1/r cycles; checkpoints carry it and evaluation, play and export use it, while the actor
itself goes on acting and learning. Buffers average too (the input BatchNorm's running
statistics); integer ones (the batch counter) are copied.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor, nn

from trainer.algo.polyak import module_tensors


class PolicyAverage:
    """A frozen copy of ``actor`` that :meth:`update` moves ``rate`` of the way to it."""

    def __init__(self, actor: nn.Module, rate: float) -> None:
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"policy average rate {rate!r} must lie in (0, 1]")
        self.rate = float(rate)
        self.module = copy.deepcopy(actor).requires_grad_(False)
        pairs = list(zip(module_tensors(self.module), module_tensors(actor), strict=True))
        self._mean = [avg for avg, _ in pairs if avg.is_floating_point()]
        self._mean_source = [src for avg, src in pairs if avg.is_floating_point()]
        self._copy = [avg for avg, _ in pairs if not avg.is_floating_point()]
        self._copy_source = [src for avg, src in pairs if not avg.is_floating_point()]

    @torch.no_grad()
    def update(self) -> None:
        """``avg += rate * (actor - avg)``: one multi-tensor lerp (no host sync)."""
        torch._foreach_lerp_(self._mean, self._mean_source, self.rate)
        if self._copy:
            torch._foreach_copy_(self._copy, self._copy_source)

    @torch.no_grad()
    def restart(self) -> None:
        """Set the average to the actor as it is now (a resume from a run without one)."""
        torch._foreach_copy_(self._mean + self._copy, self._mean_source + self._copy_source)

    def state_dict(self) -> dict[str, Tensor]:
        """A detached copy, loadable into an ``Actor`` of the same sizes."""
        return {key: value.clone() for key, value in self.module.state_dict().items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.module.load_state_dict(state)
