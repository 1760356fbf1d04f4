"""Host timings of the learner's ticks, summed between two metric writes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch


@dataclass
class TickWindow:
    """Seconds per tick part and the device-metric sum since ``start`` (one log interval);
    the tick loop starts a fresh window after each metric write."""

    start: float = field(default_factory=time.perf_counter)
    iterations: int = 0
    collector_wait_s: float = 0.0
    h2d_s: float = 0.0
    forward_s: float = 0.0
    d2h_s: float = 0.0
    release_s: float = 0.0
    inference_s: float = 0.0
    batch_wait_s: float = 0.0
    commit_s: float = 0.0
    learn_s: float = 0.0
    metric_sum: torch.Tensor | None = None
