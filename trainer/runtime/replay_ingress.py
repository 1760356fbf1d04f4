"""The bounded replay ingress: packed transitions from the collector to the learner's replay.

``depth`` slots (``training.replay_ingress_depth``, default 2) of ``slot_rows`` packed rows
[slot_rows, EnvSpec.row_width] each (``training.replay_ingress_slot_rows``, default ``num_envs``). One
chunk is one slot's worth of rows; a tick of N envs is ``N / slot_rows`` chunks. Slots live
on the collector's device (IPC-shared CUDA memory or CPU shared memory; plain memory for a
collector thread).

Protocol (counters in control.py, one writer each):

- collector ``push``: wait until ``published - released < depth`` (a full ingress is
  *backpressure*: counted in ``backpressure_waits`` and ``backpressure_wait_s``), make its
  stream wait on the slot's ``slot_free`` event, copy the rows in, record ``slot_ready``,
  bump ``published``; record ``high_water = max(high_water, published - released)``;
- learner ``commit_next``: when ``released < published``, wait on ``slot_ready``, commit the
  rows into the device replay *in sequence order*, record ``slot_free``, bump ``released``.

A push that cannot complete is an *early return* and its batch is *dropped*:
``closed_returns`` when the learner had closed the ingress, ``stop_returns`` when a stop
was requested while it waited for space. So ``early_returns == dropped_batches ==
closed_returns + stop_returns`` by construction, and a completed run has none
(docs/contracts.md §verdict: ``published == released == total_env_steps / slot_rows``, occupancy 0).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from trainer.runtime.control import ControlBlock, Word
from trainer.runtime.inference_ring import make_events
from trainer.runtime.liveness import StopRequested, Waiter


class ReplayIngress:
    """Shared replay-ingress slots and their counters.

    Args:
        depth: number of slots (1..16).
        slot_rows: rows per slot; must divide ``num_envs``.
        num_envs: rows per tick.
        row_width: packed row width (the env's ``EnvSpec.row_width``).
        device: the collector's device.
        interprocess: as ``InferenceRing``'s (False for a collector thread).
    """

    def __init__(
        self,
        *,
        depth: int,
        slot_rows: int,
        num_envs: int,
        device: torch.device | str,
        row_width: int,
        interprocess: bool = True,
    ) -> None:
        if not 1 <= depth <= 16:
            raise ValueError(f"training.replay_ingress_depth={depth} must be in 1..16")
        if slot_rows < 1 or num_envs % slot_rows:
            raise ValueError(
                f"training.replay_ingress_slot_rows={slot_rows} must divide algo.num_envs={num_envs}; "
                f"use null (= num_envs) or a divisor"
            )
        self.depth = depth
        self.slot_rows = slot_rows
        self.chunks_per_tick = num_envs // slot_rows
        self.row_width = row_width
        self.device = torch.device(device)
        self.slots = torch.zeros(
            depth, slot_rows, row_width, dtype=torch.float32, device=self.device
        )
        self.nbytes = self.slots.numel() * self.slots.element_size()
        """Bytes of the slots (kept after ``release_tensors``)."""
        self.interprocess = interprocess
        if self.device.type == "cpu" and interprocess:
            self.slots.share_memory_()
        events = make_events(2 * depth, self.device, interprocess=interprocess)
        self.slot_ready = events[0::2] if events else None
        self.slot_free = events[1::2] if events else None

    @property
    def ipc_event_count(self) -> int:
        return 0 if self.slot_ready is None or not self.interprocess else 2 * self.depth

    def release_tensors(self) -> None:
        """Drop this process's reference to the slots (shutdown, shared_tensors.py).

        The counters, ``snapshot`` and ``nbytes`` stay usable; the slots are empty after this.
        """
        self.slots = torch.empty(0, self.slot_rows, self.row_width, device=self.device)

    # -- collector side -------------------------------------------------------------
    def push(self, block: ControlBlock, rows: torch.Tensor, waiter: Waiter | None) -> bool:
        """Publish ``rows`` [slot_rows, row_width] as the next chunk.

        Waits while the ingress is full (backpressure). Returns False, and counts an early
        return with its dropped batch, when the ingress is closed or a stop is requested;
        True when the chunk was published.
        """
        ints = block.ints
        if ints[Word.CLOSED]:
            block.add(Word.INGRESS_CLOSED_RETURNS)
            return False
        published = int(ints[Word.INGRESS_PUBLISHED])
        if published - int(ints[Word.INGRESS_RELEASED]) >= self.depth:
            block.add(Word.INGRESS_BP_WAITS)
            start = time.perf_counter_ns()
            try:
                if waiter is None:
                    raise StopRequested("replay ingress is full and no waiter was given")
                waiter.wait(
                    lambda: (
                        ints[Word.CLOSED]
                        or published - int(ints[Word.INGRESS_RELEASED]) < self.depth
                    ),
                    "a free replay-ingress slot",
                )
            except StopRequested:
                block.add(Word.INGRESS_STOP_RETURNS)
                return False
            finally:
                block.add(Word.INGRESS_BP_WAIT_NS, time.perf_counter_ns() - start)
            if ints[Word.CLOSED]:
                block.add(Word.INGRESS_CLOSED_RETURNS)
                return False
        slot = published % self.depth
        if self.slot_free is not None and published >= self.depth:
            torch.cuda.current_stream(self.device).wait_event(self.slot_free[slot])
        self.slots[slot].copy_(rows, non_blocking=True)
        if self.slot_ready is not None:
            self.slot_ready[slot].record()
        ints[Word.INGRESS_PUBLISHED] = published + 1
        occupancy = published + 1 - int(ints[Word.INGRESS_RELEASED])
        ints[Word.INGRESS_HIGH_WATER] = max(ints[Word.INGRESS_HIGH_WATER], occupancy)
        block.add(Word.COLLECTOR_PROGRESS)
        return True

    # -- learner side ---------------------------------------------------------------
    @staticmethod
    def pending(block: ControlBlock) -> int:
        return int(block.ints[Word.INGRESS_PUBLISHED]) - int(block.ints[Word.INGRESS_RELEASED])

    def commit_next(self, block: ControlBlock, commit: Callable[[torch.Tensor], None]) -> bool:
        """Commit the oldest published chunk with ``commit(rows)`` and release its slot.

        ``commit`` must enqueue its read of ``rows`` on the caller's current stream (the
        replay copy); the slot is handed back behind that read. Returns False if nothing
        was pending.
        """
        ints = block.ints
        released = int(ints[Word.INGRESS_RELEASED])
        if released >= int(ints[Word.INGRESS_PUBLISHED]):
            return False
        slot = released % self.depth
        if self.slot_ready is not None:
            torch.cuda.current_stream(self.device).wait_event(self.slot_ready[slot])
        commit(self.slots[slot])
        if self.slot_free is not None:
            self.slot_free[slot].record()
        ints[Word.INGRESS_RELEASED] = released + 1
        block.add(Word.LEARNER_PROGRESS)
        return True

    # -- both -----------------------------------------------------------------------
    def snapshot(self, block: ControlBlock) -> dict[str, Any]:
        """The 12 ``replay_ingress`` fields of docs/contracts.md §runtime-manifest from the shared counters."""
        ints = block.ints
        published = int(ints[Word.INGRESS_PUBLISHED])
        released = int(ints[Word.INGRESS_RELEASED])
        closed_returns = int(ints[Word.INGRESS_CLOSED_RETURNS])
        stop_returns = int(ints[Word.INGRESS_STOP_RETURNS])
        early = closed_returns + stop_returns
        return {
            "ingress_depth": self.depth,
            "ingress_slot_rows": self.slot_rows,
            "published_sequence": published,
            "release_sequence": released,
            "occupancy": published - released,
            "high_water_occupancy": int(ints[Word.INGRESS_HIGH_WATER]),
            "backpressure_waits": int(ints[Word.INGRESS_BP_WAITS]),
            "backpressure_wait_s": int(ints[Word.INGRESS_BP_WAIT_NS]) / 1e9,
            "early_returns": early,
            "dropped_batches": early,
            "closed_returns": closed_returns,
            "stop_returns": stop_returns,
        }
