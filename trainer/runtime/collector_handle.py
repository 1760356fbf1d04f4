"""The learner's handle on its one collector: launch, hand-over, health, stop.

``training.collector_placement`` picks what the collector is (docs/runtime.md,
"Collector placement"):

- ``process`` (``ProcessCollector``): a spawned child with its own CUDA context. Right after
  the CUDA preflight the learner creates the control block and spawns it, and it starts
  building its env at once; the ring, the replay ingress and the tick count follow through
  the spawn pipe at ``startup/collector_start`` (docs/runtime.md, "Startup overlap").
- ``thread`` (``ThreadCollector``): a thread of ``train`` in the learner's CUDA context, so
  no context switch is paid between the learner's and the env's kernels and nothing is
  shared through CUDA IPC. The resources are handed over as objects.

Either handle reads what the collector publishes (its diagnostics text, its metrics
reports), turns its error flag or its end into ``CollectorFailure`` for the learner's
waits, and joins (a process: escalates) at the end.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch.multiprocessing as mp

from contracts.names import ShutdownClassification
from trainer.config.schema import CollectorPlacement, RunContext
from trainer.cpu_threads import ThreadPlan
from trainer.runtime.collector import (
    CollectorResources,
    CollectorSpec,
    LocalMailbox,
    collector_main,
    collector_thread_main,
)
from trainer.runtime.collector_metrics import read_report
from trainer.runtime.control import ControlBlock, FailureKind, Word
from trainer.runtime.protocols import TrainingEnv
from trainer.runtime.run_state import RunPlan
from trainer.runtime.shared_tensors import HELD_KEY
from trainer.runtime.shutdown import BENIGN_COLLECTOR_EXITCODES, CollectorFailure, collector_exit
from trainer.runtime.signals import SignalGuard

if TYPE_CHECKING:
    from trainer.task.motion import ResolvedMotion

logger = logging.getLogger(__name__)

COLLECTOR_JOIN_S = 30.0
COLLECTOR_TERM_S = 5.0

EnvFactory = Callable[..., TrainingEnv]


def _default_env_factory() -> EnvFactory:
    from trainer.task.g1_tracking import make_env

    return make_env


def _backend_options(ctx: RunContext, threads: ThreadPlan | None) -> dict[str, object]:
    """``make_backend``'s options for the collector: its stream priority, its physics threads."""
    options: dict[str, object] = {"stream_priority": ctx.training.collector_stream_priority}
    if threads is not None and threads.collector_physics is not None:
        options["num_threads"] = threads.collector_physics
    return options


def _preflight_motion(ctx: RunContext) -> ResolvedMotion:
    """The clip preflight resolved (``RunContext.motion_*``): the collector loads exactly it."""
    from trainer.task.motion import ResolvedMotion

    return ResolvedMotion(Path(ctx.motion_path), ctx.motion_source, ctx.motion_sha256)


def _collector_env(
    ctx: RunContext,
    plan: RunPlan,
    threads: ThreadPlan | None,
    env_factory: EnvFactory | None,
    env_kwargs: dict[str, Any] | None,
) -> tuple[EnvFactory, dict[str, Any], ResolvedMotion | None]:
    """The env factory, its keyword arguments and the clip the collector loads."""
    if env_kwargs is not None:  # the caller's env owns its motion and threads (test doubles)
        return env_factory or _default_env_factory(), env_kwargs, None
    kwargs: dict[str, Any] = {
        "task_cfg": ctx.task_cfg,
        "sim_backend": ctx.sim_backend,
        "num_envs": plan.num_envs,
        "device": str(plan.collector_device),
        "seed": int(ctx.seed.effective_seed),
        "backend_options": _backend_options(ctx, threads),
    }
    return env_factory or _default_env_factory(), kwargs, _preflight_motion(ctx)


class CollectorHandle(ABC):
    """The collector as the learner sees it (one per run); a placement subclasses it."""

    placement: CollectorPlacement

    def __init__(self, signals: SignalGuard, stale_after_s: float) -> None:
        self.signals = signals
        self.stale_after_s = stale_after_s
        self.block: ControlBlock | None = None
        self.handed_over = False
        """The collector has its ring and ingress."""
        self.info: dict[str, Any] = {}
        """The collector's diagnostics text (backend diagnostics, startup, motion, threads)."""
        self.reward_terms: list[str] = []

    @property
    def interprocess(self) -> bool:
        """The ring and the ingress cross a process boundary (shared memory, CUDA IPC)."""
        return self.placement == "process"

    def _spec(
        self,
        ctx: RunContext,
        plan: RunPlan,
        threads: ThreadPlan | None,
        env_factory: EnvFactory | None,
        env_kwargs: dict[str, Any] | None,
    ) -> CollectorSpec:
        """Create the control block and the collector's spec."""
        factory, kwargs, motion = _collector_env(ctx, plan, threads, env_factory, env_kwargs)
        me = os.getpid()
        from contracts.procfs import start_time_ticks

        if self.block is None:
            self.block = ControlBlock.create(shared=self.interprocess)
        return CollectorSpec(
            block=self.block,
            env_factory=factory,
            env_kwargs=kwargs,
            device=str(plan.collector_device),
            learner_pid=me,
            learner_start_ticks=int(start_time_ticks(me) or 0),
            stale_after_s=self.stale_after_s,
            torch_threads=(
                threads.collector_torch if threads is not None and self.interprocess else None
            ),
            motion=motion,
            in_thread=not self.interprocess,
        )

    # -- what it publishes -------------------------------------------------------------------
    def read_info(self) -> None:
        assert self.block is not None
        try:
            doc = json.loads(self.block.read_text() or "{}")
        except ValueError as err:
            doc = {
                "backend_diagnostics": {
                    "available": False,
                    "backend_type": None,
                    "unavailable_reason": str(err),
                }
            }
        self.info = doc
        self.reward_terms = list(doc.get("reward_terms") or self.reward_terms)

    def read_report(self) -> dict[str, float] | None:
        """The latest metrics report under the reward-term names known so far."""
        assert self.block is not None
        return read_report(self.block, self.reward_terms)

    def latest_report(self) -> dict[str, float] | None:
        """The latest report; the term names are read once the first report exists."""
        report = self.read_report()
        if report is not None and not self.reward_terms:
            self.read_info()
            report = self.read_report()
        return report

    # -- health ------------------------------------------------------------------------------
    def _raise_if_failed(self) -> None:
        """Raise the collector's reported exception, if it reported one."""
        assert self.block is not None
        if not self.block.ints[Word.COLLECTOR_FAILURE]:
            return
        kind, text = self.block.read_error()
        type_name, _, message = text.partition("\n")
        classification = (
            ShutdownClassification.BACKEND_WORKER_FAILURE
            if kind == FailureKind.BACKEND
            else ShutdownClassification.COLLECTOR_FAILURE
        )
        raise CollectorFailure(
            f"collector raised {type_name}: {message}",
            classification=classification,
            error_type=type_name or "Exception",
        )

    def _request_stop(self) -> None:
        if self.block is not None:
            self.block.set(Word.STOP, 1)
            self.block.set(Word.CLOSED, 1)

    # -- placement-specific ------------------------------------------------------------------
    @abstractmethod
    def launch(
        self,
        ctx: RunContext,
        plan: RunPlan,
        threads: ThreadPlan | None,
        *,
        env_factory: EnvFactory | None,
        env_kwargs: dict[str, Any] | None,
    ) -> None:
        """Create the control block and start the collector; it starts building its env."""

    @abstractmethod
    def hand_over(self, resources: CollectorResources) -> None:
        """Give the collector its ring, ingress and tick count (never blocks)."""

    @abstractmethod
    def check(self) -> None:
        """check_peer of the learner's waits: the collector's error flag, then its end."""

    @abstractmethod
    def is_alive(self) -> bool:
        """The collector still runs."""

    @abstractmethod
    def join(self) -> str | None:
        """After ``STOP``: wait for the collector's end; what went wrong, or None."""

    @abstractmethod
    def exit_record(self) -> dict[str, Any]:
        """``shutdown.collector`` (docs/contracts.md §shutdown)."""

    @abstractmethod
    def stop_after_failure(self) -> dict[str, Any] | None:
        """Ask the collector to stop, end it; return ``shutdown.collector`` (None: never started)."""

    @abstractmethod
    def release_problems(self) -> list[str]:
        """What the ended collector left referenced of the shared tensors."""


class ProcessCollector(CollectorHandle):
    """``collector_placement=process``: a spawned child process (see the module docstring)."""

    placement: CollectorPlacement = "process"

    def __init__(self, signals: SignalGuard, stale_after_s: float) -> None:
        super().__init__(signals, stale_after_s)
        self.process: BaseProcess | None = None
        self._conn: Connection | None = None  # the learner's end of the spawn pipe

    # -- spawn and hand-over -----------------------------------------------------------------
    def launch(
        self,
        ctx: RunContext,
        plan: RunPlan,
        threads: ThreadPlan | None,
        *,
        env_factory: EnvFactory | None,
        env_kwargs: dict[str, Any] | None,
    ) -> None:
        """Create the control block and spawn the collector; it starts building its env.

        The ring and the replay ingress do not exist yet: they follow through the spawn
        pipe at ``startup/collector_start`` (``hand_over``).
        """
        spec = self._spec(ctx, plan, threads, env_factory, env_kwargs)
        spawn = mp.get_context("spawn")
        receiver, self._conn = spawn.Pipe(duplex=False)
        self.process = spawn.Process(
            target=collector_main,
            args=(spec, receiver, time.time()),
            name="g1soak-collector",
            daemon=False,
        )
        self.process.start()
        receiver.close()  # the child holds its own copy
        logger.info("collector started: pid %d", self.process.pid)

    def hand_over(self, resources: CollectorResources) -> None:
        """Send the ring, the ingress and the tick count down the spawn pipe (never blocks:
        the collector reads it on a thread)."""
        assert self._conn is not None
        try:
            self._conn.send(resources)
            self.handed_over = True
        except OSError as err:  # the collector is gone: say how it ended
            self.check()
            raise CollectorFailure(f"could not hand the collector its resources: {err}") from err
        finally:
            self._conn.close()

    # -- health ------------------------------------------------------------------------------
    def check(self) -> None:
        """check_peer of the learner's waits: collector error flag, then process death."""
        self._raise_if_failed()
        if self.process is not None and not self.process.is_alive():
            exitcode = self.process.exitcode
            if exitcode in BENIGN_COLLECTOR_EXITCODES and exitcode != 0:
                # A group-wide SIGINT/SIGTERM also reaches us; let our own flag decide.
                time.sleep(0.2)
                self.signals.check()
            self._raise_if_failed()
            raise CollectorFailure(
                f"collector process {self.process.pid} exited with code {exitcode}"
                + (
                    f" ({collector_exit(False, exitcode)['signal_name']})"
                    if exitcode and exitcode < 0
                    else ""
                ),
            )

    def is_alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    # -- the end -----------------------------------------------------------------------------
    def join(self) -> str | None:
        """After ``STOP``: wait for the exit, then SIGTERM, then SIGKILL."""
        proc = self.process
        if proc is None:
            return None
        proc.join(COLLECTOR_JOIN_S)
        if proc.is_alive():
            logger.warning("collector %d did not exit; sending SIGTERM", proc.pid)
            proc.terminate()
            proc.join(COLLECTOR_TERM_S)
        if proc.is_alive():
            logger.warning("collector %d ignored SIGTERM; sending SIGKILL", proc.pid)
            proc.kill()
            proc.join(COLLECTOR_TERM_S)
        if proc.exitcode in BENIGN_COLLECTOR_EXITCODES:
            return None
        return f"collector exited with code {proc.exitcode} after its last tick"

    def exit_record(self) -> dict[str, Any]:
        proc = self.process
        assert proc is not None
        return collector_exit(proc.is_alive(), proc.exitcode)

    def stop_after_failure(self) -> dict[str, Any] | None:
        proc = self.process
        if proc is None:
            return None
        self._request_stop()
        if not self.handed_over:
            # Still building its env (it cannot see STOP inside a compile) and holding
            # nothing of ours but the control block: terminate it now.
            assert self._conn is not None
            self._conn.close()
            proc.terminate()
        proc.join(COLLECTOR_TERM_S)
        if proc.is_alive():
            proc.terminate()
            proc.join(COLLECTOR_TERM_S)
        if proc.is_alive():
            proc.kill()
            proc.join(COLLECTOR_TERM_S)
        return self.exit_record()

    def release_problems(self) -> list[str]:
        """What the exited collector left referenced ([] when it never got the tensors)."""
        if not self.handed_over:
            return []
        assert self.block is not None
        if not self.block.get(Word.SHARED_RELEASED):
            exitcode = self.process.exitcode if self.process is not None else None
            what = "its copies of the shared ring and ingress tensors"
            return [f"the collector exited without freeing {what} (exit code {exitcode})"]
        try:
            held = json.loads(self.block.read_text() or "{}").get(HELD_KEY) or []
        except ValueError as err:
            return [f"the collector's release report is unreadable: {err}"]
        if held:
            return [f"the collector still referenced {', '.join(map(str, held))} when it exited"]
        return []


class ThreadCollector(CollectorHandle):
    """``collector_placement=thread``: a thread of ``train`` (see the module docstring).

    It is launched at ``startup/collector_start``, after the learner built its resources:
    a CUDA graph capture in one thread is invalidated by an allocation or a module load in
    another (the capture mode is global), so the env's build and captures and the learner's
    build and captures take turns instead of overlapping.

    A thread cannot be killed: a stop is a request it sees at its next wait or tick, and a
    collector hung inside ``env.step`` is reported alive at the end instead of being
    escalated. It is a daemon thread, so it never keeps ``train`` from exiting.
    """

    placement: CollectorPlacement = "thread"

    def __init__(self, signals: SignalGuard, stale_after_s: float) -> None:
        super().__init__(signals, stale_after_s)
        # Before the launch: the learner builds its resources into it, then starts the env.
        self.block = ControlBlock.create(shared=False)
        self.thread: threading.Thread | None = None
        self._mailbox = LocalMailbox()

    def launch(
        self,
        ctx: RunContext,
        plan: RunPlan,
        threads: ThreadPlan | None,
        *,
        env_factory: EnvFactory | None,
        env_kwargs: dict[str, Any] | None,
    ) -> None:
        spec = self._spec(ctx, plan, threads, env_factory, env_kwargs)
        self.thread = threading.Thread(
            target=collector_thread_main,
            args=(spec, self._mailbox, time.time()),
            name="g1soak-collector",
            daemon=True,
        )
        self.thread.start()
        logger.info("collector started: thread %s", self.thread.native_id)

    def hand_over(self, resources: CollectorResources) -> None:
        self.check()
        self._mailbox.put(resources)
        self.handed_over = True

    def check(self) -> None:
        self._raise_if_failed()
        if self.thread is not None and not self.thread.is_alive():
            self._raise_if_failed()
            raise CollectorFailure("the collector thread ended before the learner's stop")

    def is_alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def join(self) -> str | None:
        if self.thread is None:
            return None
        self.thread.join(COLLECTOR_JOIN_S)
        if self.thread.is_alive():
            return f"the collector thread did not end within {COLLECTOR_JOIN_S:g} s of the stop"
        return None

    def exit_record(self) -> dict[str, Any]:
        return collector_exit(self.is_alive(), None)  # a thread has no exit code

    def stop_after_failure(self) -> dict[str, Any] | None:
        if self.thread is None:
            return None
        self._request_stop()
        self.thread.join(COLLECTOR_TERM_S)
        if self.thread.is_alive():
            logger.warning(
                "the collector thread did not stop within %g s (hung in the env?)",
                COLLECTOR_TERM_S,
            )
        return self.exit_record()

    def release_problems(self) -> list[str]:
        """Nothing crosses a process: the ring and ingress are the learner's own objects."""
        return []


def make_collector_handle(
    placement: CollectorPlacement, signals: SignalGuard, stale_after_s: float
) -> CollectorHandle:
    """The handle for ``training.collector_placement``."""
    handles: dict[str, type[CollectorHandle]] = {
        "process": ProcessCollector,
        "thread": ThreadCollector,
    }
    if placement not in handles:
        raise ValueError(
            f"training.collector_placement={placement!r} must be one of {', '.join(handles)}"
        )
    return handles[placement](signals, stale_after_s)
