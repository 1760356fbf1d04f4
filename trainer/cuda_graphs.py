"""The one place that captures torch CUDA graphs (docs/architecture.md §hot-loops).

``capture_graph(fn, state)`` warms ``fn`` up eagerly on a side stream (cuBLAS handles,
lazily built autograd and optimizer paths), restores every tensor in ``state`` to its
pre-warm-up value in place (warm-up must not count as training), then records one call of
``fn`` into a ``torch.cuda.CUDAGraph``. Replaying it re-runs exactly those kernels on the
same addresses: inputs must be static tensors written with ``copy_``, never rebound.
Failures never pass silently: ``GraphStatus`` records whether a graph runs and why not.

``record_graph(fn, ...)`` is the recording step alone, for callers that warm up and restore
their state themselves: the env step records one graph per phase on the physics backend's
stream after warming the whole step up there (docs/task.md "Step phases"). Both keep the
garbage collector off while recording, so no finalizer (one freeing a Warp array, say) runs
inside a capture.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor


@dataclass
class GraphStatus:
    """``{requested, enabled, disable_reason}`` of one captured call (docs/contracts.md §backend-diagnostics shape)."""

    requested: bool
    enabled: bool = False
    disable_reason: str | None = None

    def as_dict(self) -> dict:
        return {
            "requested": self.requested,
            "enabled": self.enabled,
            "disable_reason": self.disable_reason,
        }


def unavailable_reason(requested: bool, device: torch.device, config_key: str) -> str | None:
    """Why a graph cannot be used on ``device`` (None when capture may be attempted)."""
    if not requested:
        return f"disabled by {config_key}=false"
    if device.type != "cuda":
        return f"device {device} is not CUDA; the eager path runs"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False; the eager path runs"
    return None


def capture_graph(
    fn: Callable[[], None],
    state: Sequence[Tensor],
    *,
    warmup_calls: int = 2,
    pool: object | None = None,
) -> torch.cuda.CUDAGraph:
    """Warm up ``fn``, restore ``state`` in place, capture one call and return the graph.

    Args:
        fn: the body; it reads and writes only long-lived tensors (static inputs, module
            state, static outputs). Temporaries come from the graph's private pool.
        state: every tensor ``fn`` mutates (parameters, buffers, optimizer state, counters);
            each is restored after warm-up so the warm-up calls leave no trace. The default
            CUDA generator is restored too, so the first replay draws what an eager first
            call would have drawn, wherever the capture happens.
        warmup_calls: eager calls before capture.
        pool: optional memory pool handle shared with another graph.

    Raises:
        RuntimeError: capture failed; ``state`` has been restored, the eager path stays valid.
    """
    saved = [t.detach().clone() for t in state]
    rng = torch.cuda.get_rng_state()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):
            for _ in range(warmup_calls):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        _restore(state, saved)
        torch.cuda.set_rng_state(rng)
        graph = record_graph(fn, pool=pool)
    except Exception:
        torch.cuda.synchronize()
        _restore(state, saved)
        torch.cuda.set_rng_state(rng)
        raise
    torch.cuda.synchronize()
    _restore(state, saved)  # capture does not run kernels, but keep the contract explicit
    return graph


def record_graph(
    fn: Callable[[], None],
    *,
    pool: object | None = None,
    stream: torch.cuda.Stream | None = None,
    generators: Sequence[torch.Generator] = (),
    capture_error_mode: Literal["global", "thread_local", "relaxed"] = "global",
) -> torch.cuda.CUDAGraph:
    """Record one call of ``fn`` into a new graph; no warm-up, no state restore.

    Args:
        fn: the body, already warmed up by the caller (same contract as :func:`capture_graph`).
        pool: optional memory pool handle shared with another graph (``graph.pool()``).
        stream: the stream to capture on (None: a side stream of torch's choosing).
        generators: CUDA generators besides the default one that ``fn`` draws from; each is
            registered, so every replay advances its offset (fresh numbers per replay).
        capture_error_mode: ``torch.cuda.graph``'s check for unsafe calls during capture
            (``thread_local`` ignores other threads' CUDA calls).

    Raises:
        RuntimeError: capture failed.
    """
    graph = torch.cuda.CUDAGraph()
    for generator in generators:
        graph.register_generator_state(generator)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with torch.cuda.graph(
            graph, pool=pool, stream=stream, capture_error_mode=capture_error_mode
        ):
            fn()
    finally:
        if gc_was_enabled:
            gc.enable()
    return graph


def _restore(state: Sequence[Tensor], saved: Sequence[Tensor]) -> None:
    with torch.no_grad():
        for dst, src in zip(state, saved, strict=True):
            dst.copy_(src)
