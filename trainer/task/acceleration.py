"""torch.compile and CUDA graphs for the env's step phases, set up at construction.

With ``compile_backend`` (make_env: ``inductor`` when ``env.torch_compile`` and the device is
CUDA) the arithmetic of each torch phase is compiled before capture, so a phase is a handful
of fused kernels instead of hundreds of small ones. Random draws stay eager (dynamo does not
trace ``generator=``) and are passed in, so the compiled and eager steps draw the same numbers.
A compile failure reverts to the eager functions with the reason in ``task_compile``.

On mjwarp with a CUDA device each torch phase is then captured as one CUDA graph by the phase
runner (:meth:`trainer.task.phases.PhaseRunner.capture`) and replayed on Warp's stream
between the backend's two Warp graphs; the reset and observation generators are registered
with the graphs. Capture failure falls back to eager with the reason in ``task_cuda_graph``,
never silently; if compiling worked but capturing the compiled phases failed, the capture is
retried uncompiled. Both entries land in the backend diagnostics (docs/task.md "Step phases").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch

from trainer.compile_mode import compile_in_process
from trainer.sim.backend import DiagnosticEntry

if TYPE_CHECKING:
    from torch import Tensor

    from trainer.sim.backend import SimBackend
    from trainer.task.phases import PhaseRunner
    from trainer.task.sampler import AdaptiveSampler

__all__ = ["AcceleratedEnv", "accelerate"]

log = logging.getLogger(__name__)


@runtime_checkable
class AcceleratedEnv(Protocol):
    """What :func:`accelerate` needs of an env (``G1TrackingEnv`` implements it)."""

    backend: SimBackend
    device: torch.device
    setup_seconds: dict[str, float]
    reset_generator: torch.Generator
    obs_generator: torch.Generator

    @property
    def staged(self) -> bool: ...

    @property
    def sampler(self) -> AdaptiveSampler: ...

    @property
    def phase_runner(self) -> PhaseRunner: ...

    def phase_stream(self) -> AbstractContextManager[None]: ...

    def phase_cores(self) -> dict[str, Callable]: ...

    def set_phase_functions(self, fns: dict[str, Callable]) -> None: ...

    def use_eager_phases(self) -> None: ...

    def clear_action_input(self) -> None: ...

    def reset_all(self) -> tuple[Tensor, Tensor]: ...

    def restart(self, failures: Tensor) -> None: ...


def accelerate(
    env: AcceleratedEnv, *, compile_backend: str | None, cuda_graph: bool
) -> tuple[DiagnosticEntry, DiagnosticEntry]:
    """Compile, then capture, the phases of ``env``; returns ``(task_compile,
    task_cuda_graph)`` and records both (and their wall seconds) on the env and backend."""
    t0 = time.perf_counter()
    compile_entry = _setup_compile(env, compile_backend)
    t1 = time.perf_counter()
    graph_entry, capture_failed = _setup_cuda_graphs(env, cuda_graph)
    env.setup_seconds.update(task_compile=t1 - t0, task_graph_capture=time.perf_counter() - t1)
    if compile_entry.enabled and capture_failed:
        # Compiling was fine but capture failed: retry the capture without compile
        # (an inductor kernel that cannot be captured must not cost the graphs).
        reason = f"reverted after graph capture failed: {graph_entry.disable_reason}"
        env.use_eager_phases()
        compile_entry = DiagnosticEntry(True, False, reason[:300], fell_back=True)
        graph_entry, _ = _setup_cuda_graphs(env, cuda_graph)
    env.backend.set_diagnostic("task_cuda_graph", graph_entry)
    env.backend.set_diagnostic("task_compile", compile_entry)
    return compile_entry, graph_entry


def _setup_compile(env: AcceleratedEnv, backend: str | None) -> DiagnosticEntry:
    """Compile the phase functions with ``backend`` and run them once (a full reset and,
    on a staged backend, one step), so compile errors surface here and revert to eager."""
    if backend is None:
        return DiagnosticEntry(False, False, "compile_backend=None was requested")
    failures = env.sampler.failures.clone()
    if backend == "inductor":
        compile_in_process()  # before the first compile: no inductor worker pool
    try:
        env.set_phase_functions(
            {
                name: torch.compile(core, backend=backend, dynamic=False)
                for name, core in env.phase_cores().items()
            }
        )
        env.reset_all()
        if env.staged:
            env.clear_action_input()
            with env.phase_stream():
                env.phase_runner.run()
        entry = DiagnosticEntry(True, True, None)
    except Exception as err:  # noqa: BLE001 - recorded and logged, then eager
        env.use_eager_phases()
        reason = f"torch.compile({backend}) failed: {type(err).__name__}: {err}"[:300]
        log.warning("task_compile disabled, running the phases eagerly: %s", reason)
        entry = DiagnosticEntry(True, False, reason, fell_back=True)
    env.restart(failures)
    return entry


def _setup_cuda_graphs(env: AcceleratedEnv, requested: bool) -> tuple[DiagnosticEntry, bool]:
    """Warm up, capture one graph per torch phase and restore the post-``reset_all`` state;
    returns the entry and whether a capture was attempted and failed."""
    if not requested:
        return DiagnosticEntry(False, False, "cuda_graph=False was requested"), False
    if env.device.type != "cuda":
        reason = f"torch device is {env.device.type}; CUDA graphs need CUDA"
        return DiagnosticEntry(True, False, reason), False
    if not env.staged or env.phase_runner.stream is None:
        reason = (
            f"sim backend {env.backend.name!r} has no staged device launches "
            "(only mjwarp on CUDA can be interleaved with torch graphs)"
        )
        return DiagnosticEntry(True, False, reason), False
    failures = env.sampler.failures.clone()
    failed = False
    try:
        env.clear_action_input()
        env.phase_runner.capture((env.reset_generator, env.obs_generator))
        entry = DiagnosticEntry(True, True, None)
    except Exception as err:  # noqa: BLE001 - recorded and logged, then eager
        failed = True
        reason = f"torch CUDA graph capture failed: {type(err).__name__}: {err}"
        log.warning("task_cuda_graph disabled, stepping eagerly: %s", reason)
        entry = DiagnosticEntry(True, False, reason, fell_back=True)
    # Warm-up steps moved the state and the generators: start over from the same seed, so
    # a graphed env begins exactly where an eager one does.
    env.restart(failures)
    return entry, failed
