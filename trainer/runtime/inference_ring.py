"""The inference ring: observations out of the collector, actions back from the learner.

``capacity`` slots, each holding one tick's actor observations [N, obs_dim], critic
observations [N, critic_obs_dim], done flags [N] and actions [N, action_dim]. The tensors
live on the collector's device: CUDA tensors shared through CUDA IPC when the simulator
runs on the GPU, CPU shared-memory tensors otherwise; plain tensors when the collector is a
thread of the learner's process. The learner allocates them before the hand-over, so both
sides see the same memory for the whole run (no per-tick allocation).

Tick protocol (tick t uses slot ``t % capacity``; counters in control.py):

1. collector writes obs/critic obs/done, records ``obs_ready[slot]``, then
   ``PUBLISHED_TICK = t + 1``;
2. learner sees it, sets ``OBSERVED_TICK = t + 1``, makes its stream wait on
   ``obs_ready[slot]``, runs the policy, writes the actions (after waiting on
   ``action_consumed[slot]`` of the slot's previous use), records ``action_ready[slot]``,
   then ``ACTION_TICK = t + 1``;
3. collector sees it, waits on ``action_ready[slot]``, copies the actions out, records
   ``action_consumed[slot]``, then ``CONSUMED_TICK = t + 1``.

So a device ring uses 3 CUDA events per slot, interprocess ones for a collector process
(``ipc_event_count``). Host
counters say *that* a step was enqueued; the events order the GPU work behind it, so no
side ever synchronises its stream with the host inside the loop.

Flight (docs/contracts.md §runtime-manifest): ``queue_depth = published - observed``, ``publication_lag =
published - consumed``, ``in_flight = published - consumed``, ``action_backlog = action -
consumed``. With ``env_steps_per_sync = 1`` the loop is lock-step, so at most one tick is in
flight; after the collector stopped, all four counters are equal (drained).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from trainer.runtime.control import ControlBlock, Word


def make_events(
    count: int, device: torch.device, *, interprocess: bool
) -> list[torch.cuda.Event] | None:
    """``count`` ordering events on a CUDA ``device`` (None on the CPU); ``interprocess`` for a
    collector process (CUDA IPC), plain for a collector thread."""
    if device.type != "cuda":
        return None
    with torch.cuda.device(device):
        return [torch.cuda.Event(blocking=False, interprocess=interprocess) for _ in range(count)]


@dataclass
class FlightSnapshot:
    """Instantaneous flight counters derived from the control block."""

    published_tick: int
    observation_tick: int
    action_tick: int
    consumed_tick: int

    @property
    def queue_depth(self) -> int:
        return self.published_tick - self.observation_tick

    @property
    def publication_lag(self) -> int:
        return self.published_tick - self.consumed_tick

    @property
    def action_backlog(self) -> int:
        return self.action_tick - self.consumed_tick


class InferenceRing:
    """Shared observation/action slots plus their stream-ordering events.

    Args:
        capacity: number of slots (``training.inference_slot_capacity``, 1..16).
        num_envs, obs_dim, critic_obs_dim, action_dim: slot shapes.
        device: the collector's device; ``cuda`` allocates a device ring.
        interprocess: the collector is a process: CPU slots in shared memory, CUDA events
            that cross processes. False for a collector thread (plain memory and events).
    """

    def __init__(
        self,
        *,
        capacity: int,
        num_envs: int,
        obs_dim: int,
        critic_obs_dim: int,
        action_dim: int,
        device: torch.device | str,
        interprocess: bool = True,
    ) -> None:
        if not 1 <= capacity <= 16:
            raise ValueError(f"training.inference_slot_capacity={capacity} must be in 1..16")
        self.capacity = capacity
        self.device = torch.device(device)
        kw: dict[str, Any] = {"device": self.device}
        self.obs = torch.zeros(capacity, num_envs, obs_dim, dtype=torch.float32, **kw)
        self.critic_obs = torch.zeros(capacity, num_envs, critic_obs_dim, dtype=torch.float32, **kw)
        self.done = torch.zeros(capacity, num_envs, dtype=torch.bool, **kw)
        self.actions = torch.zeros(capacity, num_envs, action_dim, dtype=torch.float32, **kw)
        self.interprocess = interprocess
        if self.device.type == "cpu" and interprocess:
            for t in (self.obs, self.critic_obs, self.done, self.actions):
                t.share_memory_()
        self.nbytes = sum(
            t.numel() * t.element_size()
            for t in (self.obs, self.critic_obs, self.done, self.actions)
        )
        """Bytes of the four slot tensors (kept after ``release_tensors``)."""
        events = make_events(3 * capacity, self.device, interprocess=interprocess)
        self.obs_ready = events[0::3] if events else None
        self.action_ready = events[1::3] if events else None
        self.action_consumed = events[2::3] if events else None

    @property
    def is_device_ring(self) -> bool:
        return self.device.type == "cuda"

    @property
    def ipc_event_count(self) -> int:
        return 3 * self.capacity if self.is_device_ring and self.interprocess else 0

    def release_tensors(self) -> None:
        """Drop this process's references to the slot tensors (shutdown, shared_tensors.py).

        The counters, ``snapshot`` and ``nbytes`` stay usable; the slots are empty after this.
        """
        self.obs = self.critic_obs = self.actions = torch.empty(0, device=self.device)
        self.done = torch.empty(0, dtype=torch.bool, device=self.device)

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # -- collector side -------------------------------------------------------------
    def publish_observation(
        self,
        block: ControlBlock,
        tick: int,
        obs: torch.Tensor,
        critic_obs: torch.Tensor,
        done: torch.Tensor,
    ) -> None:
        """Write tick ``tick``'s observations into its slot and publish it."""
        slot = tick % self.capacity
        self.obs[slot].copy_(obs, non_blocking=True)
        self.critic_obs[slot].copy_(critic_obs, non_blocking=True)
        self.done[slot].copy_(done, non_blocking=True)
        if self.obs_ready is not None:
            self.obs_ready[slot].record()
        block.set(Word.PUBLISHED_TICK, tick + 1)
        block.add(Word.COLLECTOR_PROGRESS)

    def consume_action(self, block: ControlBlock, tick: int, out: torch.Tensor) -> torch.Tensor:
        """Copy tick ``tick``'s actions (already published) into ``out`` and mark them consumed."""
        slot = tick % self.capacity
        if self.action_ready is not None:
            torch.cuda.current_stream(self.device).wait_event(self.action_ready[slot])
        out.copy_(self.actions[slot], non_blocking=True)
        if self.action_consumed is not None:
            self.action_consumed[slot].record()
        block.set(Word.CONSUMED_TICK, tick + 1)
        block.add(Word.COLLECTOR_PROGRESS)
        return out

    # -- learner side ---------------------------------------------------------------
    def observe(
        self, block: ControlBlock, tick: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Mark tick ``tick`` observed; return views of its obs, critic obs and done flags.

        The current stream of the caller waits on the slot's ``obs_ready`` event, so work it
        enqueues afterwards reads the published values.
        """
        slot = tick % self.capacity
        block.set(Word.OBSERVED_TICK, tick + 1)
        if self.obs_ready is not None:
            torch.cuda.current_stream(self.device).wait_event(self.obs_ready[slot])
        return self.obs[slot], self.critic_obs[slot], self.done[slot]

    def publish_action(self, block: ControlBlock, tick: int, actions: torch.Tensor) -> None:
        """Write tick ``tick``'s actions into its slot and publish them."""
        slot = tick % self.capacity
        if self.action_consumed is not None and tick >= self.capacity:
            torch.cuda.current_stream(self.device).wait_event(self.action_consumed[slot])
        self.actions[slot].copy_(actions, non_blocking=True)
        if self.action_ready is not None:
            self.action_ready[slot].record()
        block.set(Word.ACTION_TICK, tick + 1)
        block.add(Word.LEARNER_PROGRESS)

    # -- both -----------------------------------------------------------------------
    @staticmethod
    def flight(block: ControlBlock) -> FlightSnapshot:
        return FlightSnapshot(
            published_tick=block.get(Word.PUBLISHED_TICK),
            observation_tick=block.get(Word.OBSERVED_TICK),
            action_tick=block.get(Word.ACTION_TICK),
            consumed_tick=block.get(Word.CONSUMED_TICK),
        )

    def snapshot(self, block: ControlBlock) -> dict[str, Any]:
        """``shutdown.inference_ring`` (docs/contracts.md §shutdown)."""
        flight = self.flight(block)
        return {
            "capacity": self.capacity,
            "device": str(self.device),
            "epoch": block.get(Word.EPOCH),
            "published_tick": flight.published_tick,
            "observation_tick": flight.observation_tick,
            "action_tick": flight.action_tick,
            "consumed_tick": flight.consumed_tick,
            "closed": bool(block.get(Word.CLOSED)),
        }
