"""The probe's workload pieces: the reset schedule, the phase clock, one measured iteration
and the CPU backend's transfer inventory (docs/probe.md).

:func:`probe_iteration` runs the env's own step phases (docs/task.md "Step phases") with the
probe's reset rows in place of the done rows; :mod:`trainer.probe` drives it per backend.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = [
    "PhaseClock",
    "probe_iteration",
    "reset_stride",
    "scheduled_mask",
    "scheduled_reset_rows",
    "summarize_ms",
    "transfer_inventory",
]


def reset_stride(num_envs: int) -> int:
    """Scheduled-reset stride: 16 when ``num_envs >= 16``, else ``num_envs``."""
    return min(16, num_envs)


def scheduled_reset_rows(num_envs: int) -> int:
    """Nominal rows reset per iteration by the schedule: ``max(1, num_envs // 16)``."""
    return max(1, num_envs // 16)


def scheduled_mask(num_envs: int, iteration: int) -> np.ndarray:
    """Rows with ``row % stride == iteration % stride``. bool [N]"""
    stride = reset_stride(num_envs)
    return np.arange(num_envs) % stride == iteration % stride


def summarize_ms(values_ms: np.ndarray | list[float]) -> dict[str, Any]:
    """``{mean_ms, std_ms, p50_ms, min_ms, max_ms, iters}`` (population std)."""
    arr = np.asarray(values_ms, dtype=np.float64)
    return {
        "mean_ms": float(arr.mean()),
        "std_ms": float(arr.std()),
        "p50_ms": float(np.median(arr)),
        "min_ms": float(arr.min()),
        "max_ms": float(arr.max()),
        "iters": int(arr.size),
    }


def transfer_inventory() -> list[dict[str, Any]]:
    """The CPU ``mujoco`` backend's packed transfers per control step (docs/contracts.md §backend-probe)."""
    rows = (
        ("control", "d2h", 1, "MujocoCpuBackend.step: one packed copy of ctrl [N, nu] to the host"),
        ("cpu_physics", "none", 0, "mj_step x substeps per world on host threads (no transfer)"),
        (
            "update_state_full_read",
            "h2d",
            1,
            (
                "MujocoCpuBackend.step: one packed copy of the state rows (qpos, qvel, xpos, "
                "xquat, cvel, subtree_com, sensordata) to the device"
            ),
        ),
        (
            "update_state_manager_compute",
            "none",
            0,
            "terminations, rewards, sampler, observations as torch ops on the device",
        ),
        ("reset_done_selection", "none", 0, "scheduled | clip-end rows as a device mask"),
        (
            "reset_commit",
            "d2h",
            1,
            "MujocoCpuBackend.reset_rows: one packed [mask, qpos, qvel, ctrl] copy to the host",
        ),
        (
            "reset_publication",
            "h2d",
            1,
            "MujocoCpuBackend.reset_rows: one packed state copy to the device (none on an empty mask)",
        ),
        ("replay_publication", "excluded", None, "replay ingestion is excluded from the probe"),
    )
    return [
        {
            "phase": phase,
            "direction": direction,
            "semantic_limit_per_control_step": limit,
            "implementation": implementation,
        }
        for phase, direction, limit, implementation in rows
    ]


class PhaseClock:
    """``now()`` = host time after all queued device work finished (CUDA synchronize)."""

    def __init__(self, device: torch.device | str) -> None:
        import torch

        self.cuda = torch.device(device).type == "cuda"
        self._sync: Callable[[], None] = torch.cuda.synchronize if self.cuda else (lambda: None)

    def now(self) -> float:
        self._sync()
        return time.perf_counter()


_PROBE_GROUPS = (
    ("backend_step_ms", ("actions", "physics_step")),
    ("state_exchange_ms", ("exchange",)),
    ("update_state_ms", ("update",)),
    ("reset_selection_ms", ("select",)),
    ("reset_done_ms", ("stage_reset",)),
    ("backend_reset_ms", ("physics_reset",)),
    ("reset_publish_ms", ("finish",)),
)
"""Probe phases as groups of the env's step phases."""


def probe_iteration(
    env: Any, actions: Any, scheduled: Any, clock: PhaseClock
) -> tuple[dict[str, float], Any, Any]:
    """One measured iteration: the env's step phases in order, with the probe's reset rows
    (``scheduled | clip_end``) in place of the done rows.

    The iteration is synchronized at both ends (host clock). On a staged backend with CUDA the
    phase boundaries are CUDA events on the step stream, not host syncs, so the phases run
    back to back as in training (docs/contracts.md §backend-probe: "total_iteration_synchronized;
    phase_boundaries_may_be_stream_ordered"); otherwise every boundary is a synchronized host
    timestamp. On the CPU backend an empty reset mask skips the reset (no backend call).

    Returns:
        ``(phase milliseconds, reset mask [N], clip-end rows [N])``; both tensors are the env's
        fixed buffers, valid until the next iteration.
    """
    import torch

    runs = dict(env.step_phases())
    runs["select"] = lambda: torch.bitwise_or(scheduled, env.clip_end, out=env.reset_mask)
    events = env.staged and clock.cuda
    mark = _event_mark if events else (time.perf_counter if env.staged else clock.now)
    t0 = clock.now()
    env.stage_actions(actions)
    with env.phase_stream():
        marks = [mark()]
        for _, group in _PROBE_GROUPS:
            for phase in group:
                runs[phase]()
            marks.append(mark())
    t1 = clock.now()
    if events:
        spans = [a.elapsed_time(b) for a, b in itertools.pairwise(marks)]
    else:
        spans = [1000.0 * (b - a) for a, b in itertools.pairwise(marks)]
    ms = {name: span for (name, _), span in zip(_PROBE_GROUPS, spans, strict=True)}
    ms["iteration_ms"] = 1000.0 * (t1 - t0)
    return ms, env.reset_mask, env.clip_end


def _event_mark() -> Any:
    import torch

    event = torch.cuda.Event(enable_timing=True)
    event.record()  # on the current (step) stream
    return event
