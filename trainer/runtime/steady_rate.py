"""The run's env steps/s over all its training iterations, on the device's timeline.

The per-window rate (``Perf/total_fps``) and the last-100 tail are host clocks over windows
of under a second at GPU speeds (``final_env_steps_per_sec`` spans ten: span_rate.py). The host runs ahead of an
asynchronous device by a number of ticks that changes whenever something waits for the
device (a metric row's values, a checkpoint), so those windows scatter (docs/runtime.md,
"Metrics"). This span is timed where the work finished: on CUDA by two timing events that the
tick loop records on the update stream after the first and the last update, read once after
the run, so the loop gains no host sync; on the CPU, where the work is done when the call
returns, by the host time the tick loop already read at the update's end.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class _Mark:
    env_steps: int
    at: torch.cuda.Event | float


class SteadyRate:
    """Env steps/s from the end of the run's first update to the end of its last."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.first: _Mark | None = None
        self.last: _Mark | None = None

    def _mark(self, env_steps: int, host_s: float) -> _Mark:
        if not self.cuda:
            return _Mark(env_steps, host_s)
        event = torch.cuda.Event(enable_timing=True)
        event.record()  # the caller's current stream: the learner's update stream
        return _Mark(env_steps, event)

    def first_update_done(self, env_steps: int, host_s: float) -> None:
        """``host_s``: ``time.perf_counter()`` at the update's end (the CPU's mark)."""
        self.first = self._mark(env_steps, host_s)

    def last_update_done(self, env_steps: int, host_s: float) -> None:
        self.last = self._mark(env_steps, host_s)

    def env_steps_per_sec(self) -> float | None:
        """The rate between the two marks (None before both exist or over no env step).

        On CUDA this waits for the last mark's event: call it after the run.
        """
        first, last = self.first, self.last
        if first is None or last is None or last.env_steps <= first.env_steps:
            return None
        if self.cuda:
            assert isinstance(first.at, torch.cuda.Event) and isinstance(last.at, torch.cuda.Event)
            last.at.synchronize()
            seconds = first.at.elapsed_time(last.at) / 1000.0
        else:
            assert isinstance(first.at, float) and isinstance(last.at, float)
            seconds = last.at - first.at
        return (last.env_steps - first.env_steps) / seconds if seconds > 0 else None
