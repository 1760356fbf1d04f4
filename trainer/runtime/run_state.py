"""What one training run planned, built and has done so far (the learner's side).

The runtime's parts (trainer/runtime/learner_loop.py composes them) share three records:
``RunPlan`` (fixed once the config is read), ``RunState`` (counters and timestamps the tick
loop and the resume advance, the report reads) and ``LearnerResources`` (what startup builds,
each None until its phase ran, so a failure report reads exactly what exists).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from trainer.config.schema import RunContext
from trainer.cpu_threads import ThreadPlan
from trainer.runtime.budget import UNBOUNDED_TICKS
from trainer.runtime.control import ControlBlock, Word
from trainer.runtime.inference_ring import InferenceRing
from trainer.runtime.liveness import Waiter
from trainer.runtime.protocols import Learner
from trainer.runtime.replay_ingress import ReplayIngress
from trainer.runtime.shared_tensors import StorageWatch
from trainer.runtime.span_rate import SpanRate
from trainer.runtime.steady_rate import SteadyRate

TAIL_WINDOW = 100


def warmup_ticks(learning_starts: int, batch_size: int, num_envs: int) -> int:
    """W = max(learning_starts, ceil(B / N)) (docs/flashsac.md §update-schedule)."""
    return max(learning_starts, -(-batch_size // num_envs))


@dataclass(frozen=True)
class RunPlan:
    """The run's fixed sizes and devices, read once from the ``RunContext``."""

    num_envs: int
    warmup: int
    """W: the warm-up ticks before the first update."""
    max_iterations: int | None
    slot_rows: int
    whole_run_cosine: bool
    """``algo.lr_decay_steps`` is null: a time budget re-sizes the cosine as it goes."""
    """Rows per replay-ingress slot (``training.replay_ingress_slot_rows``, null: N)."""
    device: torch.device
    collector_device: torch.device

    @classmethod
    def from_context(cls, ctx: RunContext) -> RunPlan:
        algo = ctx.algo_cfg
        num_envs = int(algo.num_envs)
        cap = algo.max_iterations
        rows = ctx.training.replay_ingress_slot_rows
        return cls(
            num_envs=num_envs,
            warmup=warmup_ticks(int(algo.learning_starts), int(algo.batch_size), num_envs),
            max_iterations=None if cap is None else int(cap),
            slot_rows=num_envs if rows is None else int(rows),
            whole_run_cosine=algo.lr_decay_steps is None,
            device=torch.device(ctx.learner_device),
            collector_device=torch.device(ctx.collector_device),
        )

    def planned_ticks(self, start_iteration: int) -> int:
        """W + the iterations left to the cap; without a cap, unbounded until the budget."""
        if self.max_iterations is None:
            return UNBOUNDED_TICKS
        return self.warmup + self.max_iterations - start_iteration


@dataclass
class RunState:
    """Counters and timestamps of the run (the tick loop, the resume and startup advance it)."""

    total_ticks: int
    """Ticks of this run: ``W + max_iterations - start_iteration``; a spent budget lowers it."""
    start_iteration: int = 0
    """Global iteration the run starts after (the resumed checkpoint's, else 0)."""
    iteration: int = 0
    lineage_env_steps: int = 0
    """Env steps of the earlier runs of a resumed lineage (the checkpoint's count)."""
    resumed_from: dict[str, Any] | None = None
    stopped_by: str | None = None
    """``iterations`` (the cap ended the run) or ``duration`` (the time budget did)."""
    last_checkpoint: str | None = None
    start_wall: float = field(default_factory=time.time)
    start_mono: float = field(default_factory=time.monotonic)
    phase_starts: list[tuple[str, float]] = field(default_factory=list)
    training_start: float | None = None
    first_iteration_end: float | None = None
    learner_capture_s: float | None = None
    tail: collections.deque[tuple[float, int]] = field(
        default_factory=lambda: collections.deque(maxlen=TAIL_WINDOW + 1)
    )
    """(perf_counter at the update's end, env steps) of the last TAIL_WINDOW + 1 updates."""
    final_span: SpanRate = field(default_factory=SpanRate)
    """The same marks over the run's last ten seconds (``final_env_steps_per_sec``)."""
    steady: SteadyRate | None = None
    """Marks the first and the last update of the run on the device's timeline (TickLoop)."""

    @property
    def run_iterations(self) -> int:
        """Iterations completed by THIS run (``run_summary.completed_iterations``)."""
        return self.iteration - self.start_iteration


@dataclass
class LearnerResources:
    """What startup builds, in its phase order; None until that phase ran."""

    threads: ThreadPlan | None = None
    """Thread counts of this run's processes (chosen at ``startup/begin``)."""
    torch_threads_before: int | None = None
    stream_before: torch.cuda.Stream | None = None
    """The caller's current CUDA stream, replaced by the learner's own next to a collector
    thread (restored at the end, for in-process callers)."""
    memory_budget: dict[str, Any] | None = None
    learner: Learner | None = None
    ring: InferenceRing | None = None
    ingress: ReplayIngress | None = None
    shared: StorageWatch | None = None
    """The ring's and ingress's tensors, until freed."""
    waiter: Waiter | None = None


def released_env_steps(
    block: ControlBlock | None, ingress: ReplayIngress | None, slot_rows: int
) -> int:
    """Env steps the learner committed (``run_summary.total_env_steps``)."""
    if block is None or ingress is None:
        return 0
    return block.get(Word.INGRESS_RELEASED) * slot_rows
