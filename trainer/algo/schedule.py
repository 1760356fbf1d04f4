"""Cosine learning-rate schedule (docs/flashsac.md §update-schedule), as host maths and as device tensors.

``lr(k) = lr_end + (peak - lr_end) * 0.5 * (1 + cos(pi * min(k / T, 1)))`` for the k-th
update of one optimizer (k starts at 0, no warm-up by default). The device form lets the
captured update cycle compute the rate from an on-device counter without host syncs.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def cosine_lr(
    step: int, *, peak: float, end: float, decay_steps: int, warmup_steps: int = 0
) -> float:
    """Learning rate of update ``step`` (host form, used by tests and for reference)."""
    if warmup_steps > 0 and step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    progress = min(max(step - warmup_steps, 0) / decay_steps, 1.0)
    return end + (peak - end) * 0.5 * (1.0 + math.cos(math.pi * progress))


def cosine_lr_tensor(
    step: Tensor,
    *,
    peak: float | Tensor,
    end: float,
    decay_steps: int | Tensor,
    warmup_steps: int = 0,
) -> Tensor:
    """Device form of :func:`cosine_lr`; ``step``, ``peak`` and ``decay_steps`` broadcast."""
    progress = ((step - warmup_steps).clamp(min=0.0) / decay_steps).clamp(max=1.0)
    lr = end + (peak - end) * 0.5 * (1.0 + torch.cos(math.pi * progress))
    if warmup_steps > 0:
        lr = torch.where(step < warmup_steps, peak * (step + 1.0) / warmup_steps, lr)
    return lr
