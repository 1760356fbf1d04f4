"""An env that steps in a process of its own, beside a measurement.

In ``train`` the collector steps the env in its own process on the same GPU while the
learner runs its update cycle; under CUDA MPS the two share the SMs, without it they are
time-sliced. :class:`EnvBeside` reproduces that neighbour for the learner profile: a spawned
child builds the G1 task env (the same ``make_env`` the collector uses), steps it with
uniform random actions until told to stop, and counts its steps in shared memory, so the
profile can time the learner's cycle while an env competes for the GPU and report the env's
rate over the same interval.

The child is stopped and joined when the context exits, killed if it does not stop within
:data:`STOP_TIMEOUT_S`, and killed by the kernel if its parent dies first; a child that dies before it is ready raises :class:`EnvBesideError`
with its exit code and last error.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
import traceback
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from types import TracebackType
from typing import Any, Self

from contracts.motions import SYNTHETIC_MOTION_ID
from contracts.parent_death import die_with_parent
from trainer.sim.mjwarp_options import StreamPriority

READY_TIMEOUT_S = 900.0
"""A cold mjwarp build with inductor compiles takes ~3 minutes on the H200 (docs/benchmarks.md)."""
STOP_TIMEOUT_S = 60.0
COUNT_EVERY = 10
"""Steps between two device syncs of the child, each followed by a counter update."""


class EnvBesideError(RuntimeError):
    """The neighbour env could not be built or died; the message says why."""


@dataclass(frozen=True)
class EnvBesideSpec:
    """What the neighbour runs.

    Attributes:
        sim: the simulation backend (``mjwarp`` on CUDA, ``mujoco`` on the CPU).
        num_envs: parallel envs of the neighbour.
        device: torch device string of the neighbour's task tensors.
        motion_file: motion asset id or path (the built-in synthetic dance by default).
        warmup: untimed steps before the neighbour reports ready (compiles, graph capture).
        seed: action and task seed.
        stream_priority: the mjwarp physics stream, as ``training.collector_stream_priority``.
    """

    sim: str
    num_envs: int
    device: str
    motion_file: str = SYNTHETIC_MOTION_ID
    warmup: int = 20
    seed: int = 7
    stream_priority: StreamPriority = "default"


@dataclass(frozen=True)
class Window:
    """Steps the neighbour made between :meth:`EnvBeside.mark` and :meth:`EnvBeside.rate`."""

    steps: int
    start_s: float


def _step_until_stopped(
    spec: EnvBesideSpec, ready: Any, stop: Any, steps: Synchronized, error: Any, parent: int
) -> None:
    """The child: build, warm up, signal ready, then step until ``stop`` is set (or its
    parent ``parent`` dies: the kernel kills it then, so it never spins alone)."""
    die_with_parent(parent)
    try:
        import torch

        from trainer.bench.env_throughput import EnvFactory

        device = torch.device(spec.device)
        env = EnvFactory.for_motion(spec.motion_file).build(
            spec.sim,
            spec.num_envs,
            device,
            seed=spec.seed,
            compile_task=device.type == "cuda",
            stream_priority=spec.stream_priority,
        )
        gen = torch.Generator(device=device)
        gen.manual_seed(spec.seed)
        actions = torch.empty(spec.num_envs, env.spec.action_dim, device=device)

        def step() -> None:
            env.step(torch.rand(actions.shape, generator=gen, device=device, out=actions) * 2 - 1)

        for _ in range(spec.warmup):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        ready.set()
        while not stop.is_set():
            for _ in range(COUNT_EVERY):
                step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            with steps.get_lock():
                steps.value += COUNT_EVERY * spec.num_envs
    except BaseException as exc:  # reported to the parent, which raises it
        error.put(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")
        raise


class EnvBeside:
    """``with EnvBeside(spec) as env:`` a stepping neighbour; ``mark()`` / ``rate()`` measure it."""

    def __init__(self, spec: EnvBesideSpec) -> None:
        self.spec = spec
        ctx = mp.get_context("spawn")  # CUDA in the child: never fork a CUDA parent
        self._ready = ctx.Event()
        self._stop = ctx.Event()
        self._steps: Synchronized = ctx.Value("q", 0)
        self._error = ctx.Queue()
        self._proc = ctx.Process(
            target=_step_until_stopped,
            args=(spec, self._ready, self._stop, self._steps, self._error, os.getpid()),
            name="env-beside",
            daemon=True,
        )

    def __enter__(self) -> Self:
        self._proc.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._ready.wait(timeout=0.5):
            if not self._proc.is_alive():
                self._close()
                raise EnvBesideError(
                    f"the env beside ({self.spec.sim}, {self.spec.num_envs} envs) exited "
                    f"{self._proc.exitcode} before it was ready: {self._last_error()}"
                )
            if time.monotonic() > deadline:
                self._close()
                raise EnvBesideError(
                    f"the env beside was not ready within {READY_TIMEOUT_S:g} s; "
                    "check that the backend builds with `python -m trainer.bench.env_throughput`"
                )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close()

    def mark(self) -> Window:
        """Start a measurement window now."""
        return Window(self._count(), time.perf_counter())

    @property
    def pid(self) -> int | None:
        """The neighbour's process id (None before it started)."""
        return self._proc.pid

    def rate(self, window: Window) -> float:
        """Env steps/s since ``window``; waits for the neighbour's next count when none
        landed inside the window yet (a window shorter than :data:`COUNT_EVERY` steps)."""
        while self._count() == window.steps:
            self.check_alive()
            time.sleep(0.005)
        self.check_alive()
        return (self._count() - window.steps) / (time.perf_counter() - window.start_s)

    def check_alive(self) -> None:
        """Raise if the neighbour died while a measurement relied on it."""
        if not self._proc.is_alive():
            raise EnvBesideError(
                f"the env beside exited {self._proc.exitcode} during the measurement: "
                f"{self._last_error()}"
            )

    def _count(self) -> int:
        with self._steps.get_lock():
            return int(self._steps.value)

    def _last_error(self) -> str:
        try:
            return str(self._error.get(timeout=1.0)).splitlines()[0]
        except (queue.Empty, OSError, EOFError, ValueError):  # nothing sent, or a broken queue
            return "no error reported (killed, or died in the interpreter)"

    def _close(self) -> None:
        self._stop.set()
        self._proc.join(timeout=STOP_TIMEOUT_S)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(timeout=STOP_TIMEOUT_S)
