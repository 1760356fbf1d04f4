"""The phase runner: one control step as eight named phases, eager or as CUDA graphs.

A step is :data:`STEP_PHASES` in a fixed order, each reading and writing only fixed buffers
(docs/task.md "Step phases")::

    actions (sanitise, ctrl) · physics_step (backend) · exchange (backend views and the
    reference frame → fixed buffers) · update (clock, terms, rewards, sampler, k, terminal obs)
    · select (reset mask = done) · stage_reset (start frames, reset targets) · physics_reset
    (backend) · finish (post-reset observations, outputs)

:class:`PhaseRunner` holds the env's torch phases and the backend's two physics phases and
hands them out as ``(name, run)`` pairs (what ``env.step`` and ``g1-backend-probe`` run). On a
staged backend with a CUDA stream it can replace each torch phase by a CUDA graph recorded on
that stream through :func:`trainer.cuda_graphs.record_graph` (one memory pool, the env's
generators registered, so every replay draws fresh numbers of the same streams as eager).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import torch

from trainer.cuda_graphs import record_graph

__all__ = ["NO_RESET_PHASES", "PHYSICS_PHASES", "STEP_PHASES", "PhaseRunner"]

STEP_PHASES = (
    "actions",
    "physics_step",
    "exchange",
    "update",
    "select",
    "stage_reset",
    "physics_reset",
    "finish",
)
"""The phases of one control step, in order (module docstring)."""
PHYSICS_PHASES = ("physics_step", "physics_reset")
"""The phases the physics backend runs (Warp graphs on mjwarp); the others are torch."""
NO_RESET_PHASES = ("actions", "physics_step", "exchange", "update")
"""Steps 1-7 without the reset: what ``env.step_without_reset`` runs."""
WARMUP_STEPS = 2
"""Eager steps on the backend stream before the graphs are recorded."""

Run = Callable[[], None]


class PhaseRunner:
    """The :data:`STEP_PHASES` of one env as callables, eager or replayed graphs.

    Args:
        torch_phases: the env's phases other than :data:`PHYSICS_PHASES`, by name.
        physics: the backend's :data:`PHYSICS_PHASES`, by name.
        stream: the backend's CUDA stream the step runs on (None: the caller's stream).
    """

    def __init__(
        self,
        torch_phases: Mapping[str, Run],
        physics: Mapping[str, Run],
        stream: torch.cuda.Stream | None,
    ) -> None:
        expected = [p for p in STEP_PHASES if p not in PHYSICS_PHASES]
        if sorted(torch_phases) != sorted(expected) or sorted(physics) != sorted(PHYSICS_PHASES):
            msg = f"phases {sorted(torch_phases)} + {sorted(physics)} != {list(STEP_PHASES)}"
            raise ValueError(msg)
        self._torch = dict(torch_phases)
        self._physics = dict(physics)
        self.stream = stream
        self.graphs: dict[str, torch.cuda.CUDAGraph] | None = None
        self.runs = self._build_runs()

    def _build_runs(self) -> tuple[tuple[str, Run], ...]:
        """The ``(name, run)`` pairs; rebuilt only when the graphs change, so a step does no
        per-call lookups."""
        runs: dict[str, Run] = dict(self._torch)
        if self.graphs is not None:
            runs = {name: g.replay for name, g in self.graphs.items()}
        runs.update(self._physics)
        return tuple((name, runs[name]) for name in STEP_PHASES)

    @contextmanager
    def on_stream(self) -> Iterator[None]:
        """Run the block on :attr:`stream`, ordered after and before the caller's stream; a
        no-op without one."""
        if self.stream is None:
            yield
            return
        caller = torch.cuda.current_stream(self.stream.device)
        self.stream.wait_stream(caller)
        with torch.cuda.stream(self.stream):
            yield
        caller.wait_stream(self.stream)

    def run(self, names: Sequence[str] = STEP_PHASES) -> None:
        """Run the phases of ``names`` in step order (call inside :meth:`on_stream`)."""
        for name, run in self.runs:
            if name in names:
                run()

    def capture(self, generators: Sequence[torch.Generator]) -> None:
        """Warm the step up eagerly on :attr:`stream`, then record one graph per torch phase.

        The warm-up moves the env state and the generators: the caller restarts the env.

        Raises:
            RuntimeError: there is no stream, or recording failed (the eager runs stay).
        """
        if self.stream is None:
            msg = "graph capture needs the backend's CUDA stream"
            raise RuntimeError(msg)
        with self.on_stream():
            for _ in range(WARMUP_STEPS):
                self.run()
        torch.cuda.synchronize(self.stream.device)
        graphs: dict[str, torch.cuda.CUDAGraph] = {}
        pool = None  # one pool: the phases always replay in order on one stream
        for name, phase in self._torch.items():
            graph = record_graph(
                phase,
                pool=pool,
                stream=self.stream,
                generators=generators,
                capture_error_mode="thread_local",
            )
            pool = graph.pool()
            graphs[name] = graph
        self.graphs = graphs
        self.runs = self._build_runs()
