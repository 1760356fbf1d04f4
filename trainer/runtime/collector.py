"""The collector: owns the simulator, steps the G1 env, feeds the learner.

A process or a thread of ``train`` (``training.collector_placement``; both run ``serve``).
The process is spawned once by the learner (``torch.multiprocessing`` spawn context) as soon as its CUDA
preflight passed, with a ``CollectorSpec``: the shared control block and how to build the
env. It builds the env at once, while the learner constructs its networks and replay
(the two slow startups overlap, docs/runtime.md "Startup overlap"), then receives the
``CollectorResources`` (inference ring, replay ingress, tick count) through its spawn pipe
at the learner's ``startup/collector_start``. Per tick t (``t < Word.TICK_LIMIT``, which
the learner lowers once when its time budget ends the run, before it publishes that last
tick's action):

1. publish the current observations and done flags into ring slot ``t % capacity``;
2. wait for the learner's actions, copy them out, mark them consumed;
3. ``env.step(actions)``;
4. pack the transitions (obs, terminal next obs, action, reward, flags, critic obs) into
   ``num_envs / slot_rows`` replay-ingress chunks and push them (bounded: waits when full);
5. every ``collector_metrics_interval`` ticks, run the env's health check (a diverged
   policy, physics overflow) and publish a metrics report (seqlock).

The transitions of tick t are pushed *before* the observations of tick t + 1 are
published, so when the learner sees tick t + 1 it can commit all of tick t. After its last
tick the collector publishes a final report, sets ``COLLECTOR_DONE`` and waits for the
learner's ``STOP``: it never exits on its own while the learner may still read shared
memory. It detects learner death by PID + start time and exits. Exceptions are written to
the control block's error area with their class (``backend_worker_failure`` when the
simulator backend raised, ``collector_failure`` otherwise) and the process exits 1.
However it ends, it frees its copies of the shared ring and ingress tensors before it exits
and acknowledges that with ``SHARED_RELEASED`` (shared_tensors.py: the learner is their
CUDA IPC producer and must outlive every copy).

A collector thread (``collector_thread_main``) is started at ``startup/collector_start``,
after the learner built its side, steps on a CUDA stream of its own, gets the resources as
objects (``LocalMailbox``), yields the GIL in its waits and simply ends on a failure (the
error flag says why); it shares the learner's objects, so it has nothing to release.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import TYPE_CHECKING, Any, Protocol

import torch

from contracts.env_spec import EnvSpec
from contracts.parent_death import die_with_parent
from trainer.runtime.collector_metrics import CollectorMetrics, EpisodeWindow
from trainer.runtime.control import ControlBlock, FailureKind, State, Word
from trainer.runtime.evaluation_stage import EvalPlan, prepare_collector, serve_evaluation
from trainer.runtime.inference_ring import InferenceRing
from trainer.runtime.liveness import PeerDied, StopRequested, Waiter, make_identity_check
from trainer.runtime.protocols import EnvBackend, TrainingEnv
from trainer.runtime.replay_ingress import ReplayIngress
from trainer.runtime.shared_tensors import (
    HELD_KEY,
    StorageWatch,
    release,
    release_all,
    shared_tensors,
)

if TYPE_CHECKING:
    from trainer.task.motion import ResolvedMotion

logger = logging.getLogger(__name__)

# The action arrives one policy forward (~0.1-0.3 ms) after the observation: spin through
# it instead of paying a sleep's wake-up latency twice per tick.
ACTION_WAIT_SPIN_S = 1e-3
_BACKEND_PATH_MARKERS = (
    f"{os.sep}trainer{os.sep}sim{os.sep}",
    f"{os.sep}mujoco_warp{os.sep}",
    f"{os.sep}warp{os.sep}",
)


@dataclass
class CollectorSpec:
    """What the collector needs at spawn; pickled into the spawned process.

    Attributes:
        block: the shared control block (readiness, liveness, errors).
        env_factory: ``make_env``-compatible callable; called as
            ``env_factory(**env_kwargs)`` inside the collector.
        learner_pid, learner_start_ticks: identity of the learner (death detection).
        torch_threads: intra-op threads of the collector (None keeps torch's default); the
            learner picks it with ``trainer.cpu_threads.plan_training_threads``.
        motion: the clip preflight resolved; passed to the factory as ``resolved_motion``,
            which loads exactly that path and rejects a file whose digest changed since.
            None when the caller's ``env_kwargs`` own the env (test doubles).
    """

    block: ControlBlock
    env_factory: Callable[..., TrainingEnv]
    env_kwargs: dict[str, Any]
    device: str
    learner_pid: int
    learner_start_ticks: int
    stale_after_s: float = 30.0
    torch_threads: int | None = None
    motion: ResolvedMotion | None = None
    log_level: int = logging.INFO
    in_thread: bool = False
    """A thread of the learner's process (``training.collector_placement=thread``): its
    waits yield the GIL, and the ring and ingress are the learner's own objects."""


@dataclass
class CollectorResources:
    """What the learner hands over at ``startup/collector_start`` (through the spawn pipe).

    Attributes:
        pack_fn: ``pack_transitions``-compatible callable building
            [n, ``env_spec.row_width``] rows.
        env_spec: the sizes the learner built the ring, the ingress and its replay for; the
            collector's env must report exactly these (``check_env_spec``).
        total_ticks: W warm-up ticks + the iterations of this run as planned; the live
            limit is ``Word.TICK_LIMIT`` (a time budget lowers it).
        evaluation: the ``EvalPlan`` of the evaluation after training (None: none runs).
    """

    ring: InferenceRing
    ingress: ReplayIngress
    pack_fn: Callable[..., torch.Tensor]
    env_spec: EnvSpec
    num_envs: int
    total_ticks: int
    metrics_interval: int
    evaluation: EvalPlan | None = None


class Mailbox(Protocol):
    """Where the collector's ``CollectorResources`` arrive (``receive_resources``)."""

    def arrived(self) -> bool: ...

    def take(self) -> CollectorResources: ...


class LocalMailbox:
    """The mailbox of a collector thread: the learner puts the resources object itself."""

    def __init__(self) -> None:
        self._resources: CollectorResources | None = None
        self._done = threading.Event()

    def put(self, resources: CollectorResources) -> None:
        self._resources = resources
        self._done.set()

    def arrived(self) -> bool:
        return self._done.is_set()

    def take(self) -> CollectorResources:
        self._done.wait()
        resources, self._resources = self._resources, None
        assert resources is not None, "take() once"
        return resources


class ResourceMailbox:
    """Receives the learner's one ``CollectorResources`` message on a background thread.

    The thread only reads the bytes, so the learner's ``send`` never blocks on a collector
    that is still building its env; the main thread unpickles them (opening the CUDA IPC
    handles) once the env is built, outside any graph capture.
    """

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._payload: bytes | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._read, name="resource-mailbox", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            self._payload = self._conn.recv_bytes()
        except (EOFError, OSError) as err:
            self._error = err
        self._done.set()

    def arrived(self) -> bool:
        return self._done.is_set()

    def take(self) -> CollectorResources:
        """The resources (call once ``arrived()``); PeerDied when the learner hung up."""
        self._done.wait()
        if self._payload is None:
            raise PeerDied(f"the learner closed the resource pipe ({self._error!r})")
        resources = ForkingPickler.loads(self._payload)
        self._payload = None
        self._conn.close()
        return resources


def check_env_spec(env_spec: EnvSpec, planned: EnvSpec) -> None:
    """Fail closed when the env's sizes differ from the ones the learner sized everything for."""
    if env_spec != planned:
        raise ValueError(
            f"the collector's env reports {env_spec} but the learner sized its replay, ring and "
            f"ingress for {planned}; run the env whose spec the learner was given"
        )


def is_backend_error(err: BaseException) -> bool:
    """True when the simulator backend raised (docs/contracts.md §shutdown ``backend_worker_failure``).

    Typed backend errors (a class from ``trainer.sim``, mujoco or warp) count, and so does
    any exception whose innermost frames run inside those packages.
    """
    module = type(err).__module__ or ""
    if module.startswith(("trainer.sim", "mujoco", "warp")):
        return True
    frames = traceback.extract_tb(err.__traceback__)
    for frame in reversed(frames[-3:]):
        if any(marker in frame.filename for marker in _BACKEND_PATH_MARKERS):
            return True
    return False


class Collector:
    """The collector's tick loop (runs inside the spawned process)."""

    def __init__(self, spec: CollectorSpec) -> None:
        self.spec = spec
        self.block = spec.block
        self.device = torch.device(spec.device)
        self.waiter = Waiter(
            spec.block,
            side="collector",
            check_peer=make_identity_check(spec.learner_pid, spec.learner_start_ticks),
            interrupt=self._check_stop,
            stale_after_s=spec.stale_after_s,
            yield_while_spinning=spec.in_thread,
        )
        self.env: TrainingEnv | None = None
        self.res: CollectorResources | None = None
        self._shared: StorageWatch | None = None  # the learner's tensors, once received
        self.startup_s: dict[str, Any] = {}
        """Collector-side startup milestones (seconds; ``timings.startup.collector``)."""
        self.metrics = CollectorMetrics()

    def _check_stop(self) -> None:
        if self.block.ints[Word.STOP] or self.block.ints[Word.CLOSED]:
            raise StopRequested("the learner requested a stop")

    def build_env(self) -> None:
        spec = self.spec
        start = time.perf_counter()
        kwargs = dict(spec.env_kwargs)
        if spec.motion is not None:
            kwargs["resolved_motion"] = spec.motion
        self.env = env = spec.env_factory(**kwargs)
        built = time.perf_counter() - start
        parts = {k: round(float(v), 3) for k, v in env.setup_seconds.items()}
        logger.info(
            "env built in %.1f s (%s)", built, ", ".join(f"{k} {v:.1f} s" for k, v in parts.items())
        )
        self.startup_s.update(env_build=round(built, 3), env_build_parts=parts)
        self.block.set(Word.ENV_BUILT, 1)
        self.block.add(Word.COLLECTOR_PROGRESS)

    def receive_resources(self, mailbox: Mailbox) -> None:
        """Wait (with liveness checks) for the learner's resources and attach them."""
        start = time.perf_counter()
        self.waiter.wait(mailbox.arrived, "the learner's ring and replay ingress")
        self.res = mailbox.take()
        if not self.spec.in_thread:  # a thread's copies are the learner's own objects
            self._shared = StorageWatch(shared_tensors(self.res.ring, self.res.ingress))
        assert self.env is not None, "build_env() first"
        check_env_spec(self.env.spec, self.res.env_spec)  # after the watch: a failure frees them
        self.startup_s["resources_wait"] = round(time.perf_counter() - start, 3)

    def publish_info(self) -> None:
        """Write the diagnostics and startup milestones the learner's manifest records.

        ``cuda_graph`` is null: the env's graphs are recorded in its backend diagnostics
        (``task_cuda_graph`` and ``cuda_graph``).
        """
        env = self.env
        assert env is not None, "build_env() first"
        doc = {
            "backend_diagnostics": _backend_diagnostics(env.backend),
            "cuda_graph": None,
            "startup": self.startup_s,
        }
        if env.motion is not None:
            doc["motion"] = {"path": env.motion.source, "sha256": env.motion.sha256}
        doc["cpu_threads"] = {
            "torch": torch.get_num_threads(),
            "physics": env.backend.num_threads,
        }
        self.block.write_text(json.dumps(doc))

    def run(self) -> None:
        res, block, env, m = self.res, self.block, self.env, self.metrics
        assert res is not None and env is not None, "receive_resources() first"
        ring, ingress = res.ring, res.ingress
        ints = block.ints
        n = res.num_envs
        obs, critic_obs = env.reset_all()
        done = torch.zeros(n, dtype=torch.bool, device=self.device)
        actions = torch.zeros_like(ring.actions[0])
        episodes = EpisodeWindow(n, self.device)
        block.set(Word.COLLECTOR_READY, 1)
        block.add(Word.COLLECTOR_PROGRESS)
        rows_per_chunk = ingress.slot_rows
        perf = time.perf_counter
        tick = 0
        while tick < int(ints[Word.TICK_LIMIT]):
            t0 = perf()
            ring.publish_observation(block, tick, obs, critic_obs, done)
            in_flight = tick + 1 - int(ints[Word.CONSUMED_TICK])
            m.max_in_flight = max(m.max_in_flight, in_flight)
            m.max_publication_lag = max(m.max_publication_lag, in_flight)
            t1 = perf()
            self.waiter.wait(
                lambda t=tick: ints[Word.ACTION_TICK] > t,
                f"the action of tick {tick}",
                spin_s=ACTION_WAIT_SPIN_S,
            )
            backlog = int(ints[Word.ACTION_TICK]) - int(ints[Word.CONSUMED_TICK])
            m.max_action_backlog = max(m.max_action_backlog, backlog)
            ring.consume_action(block, tick, actions)
            t2 = perf()
            result = env.step(actions)
            t3 = perf()
            slot = tick % ring.capacity
            rows = res.pack_fn(
                ring.obs[slot],
                result.terminal_obs,
                actions,
                result.reward,
                result.terminated,
                result.truncated,
                ring.critic_obs[slot],
                result.terminal_critic_obs,
            )  # [N, row_width]
            done = result.terminated | result.truncated
            episodes.add(done, result.truncated, result.episode_return, result.episode_length)
            m.accumulate_rewards(result.reward_terms)
            t4 = perf()
            for start in range(0, n, rows_per_chunk):
                if not ingress.push(block, rows[start : start + rows_per_chunk], self.waiter):
                    raise StopRequested("the replay ingress was closed or a stop was requested")
            t5 = perf()
            obs, critic_obs = result.obs, result.critic_obs
            timers = m.timers
            timers["Perf/collector_inference_request_ms"] += t1 - t0
            timers["Perf/collector_learner_action_wait_ms"] += t2 - t1
            timers["Perf/collector_env_step_ms"] += t3 - t2
            timers["Perf/collector_transition_extract_ms"] += t4 - t3
            timers["Perf/collector_replay_write_ms"] += t5 - t4
            m.env_step_total_s += t3 - t2
            m.window_ticks += 1
            if (tick + 1) % res.metrics_interval == 0 or tick + 1 == int(ints[Word.TICK_LIMIT]):
                self.check_health(tick)
                m.publish(block, tick + 1, episodes)
            tick += 1
        block.set(Word.COLLECTOR_DONE, 1)
        block.add(Word.COLLECTOR_PROGRESS)

    def wait_for_stop(self) -> None:
        """After the last tick: wait until the learner says stop (or dies)."""
        try:
            self.waiter.wait(lambda: bool(self.block.ints[Word.STOP]), "the learner's stop")
        except StopRequested:
            return

    def check_health(self, tick: int) -> None:
        """Let the env raise on a diverged policy or a physics overflow (syncs: once per report).

        The env's own check covers both: on mjwarp it zeroes non-finite actions on the device
        and only this call turns them into an error, and it checks the backend's contact and
        constraint overflow after that. The error names the tick, so the run's failure
        record says when the collector noticed.
        """
        assert self.env is not None
        try:
            self.env.check_health()
        except Exception as err:
            err.add_note(f"collector health check after tick {tick}")
            raise

    def release_shared(self) -> list[str]:
        """Free our copies of the learner's shared tensors, then acknowledge it.

        Frees them (their CUDA IPC deleters hand the references back to the learner), records
        the names of any copy something still holds under ``shared_tensors_held`` in the
        diagnostics text and sets ``SHARED_RELEASED``. Returns those names.
        """
        if self._shared is None:
            self.res = None  # never received, or a thread's: nothing of ours to free
            return []

        def drop() -> None:
            if self.res is not None:  # also empties the ring and ingress a frame may hold
                release_all(self.res.ring, self.res.ingress)
            self.res = None

        held = release(drop, self._shared, [self.device])
        self._shared = None
        if held:
            logger.warning("shared tensors still referenced after the release: %s", held)
        doc = json.loads(self.block.read_text() or "{}")
        doc[HELD_KEY] = held
        self.block.write_text(json.dumps(doc))
        self.block.set(Word.SHARED_RELEASED, 1)
        return held

    def close(self) -> None:
        """Close the env's backend (the env itself holds nothing native)."""
        if self.env is not None:
            self.env.backend.close()


def _backend_diagnostics(backend: EnvBackend) -> dict[str, Any]:
    """docs/contracts.md §backend-diagnostics snapshot from the env's backend; never a bare null."""
    try:
        diag = backend.diagnostics()
    except Exception as err:  # noqa: BLE001 - the probe's failure is itself the diagnostic
        return {
            "available": False,
            "backend_type": type(backend).__name__,
            "unavailable_reason": f"backend diagnostics raised {type(err).__name__}: {err}",
        }
    if not isinstance(diag, dict) or "available" not in diag:
        return {
            "available": False,
            "backend_type": type(backend).__name__,
            "unavailable_reason": "the env backend reports no diagnostics",
        }
    return diag


def collector_main(spec: CollectorSpec, conn: Connection, launched_at: float) -> None:
    """Entry point of the spawned collector process.

    Args:
        spec: built by the learner right after its CUDA preflight.
        conn: the receiving end of the spawn pipe; one ``CollectorResources`` arrives on it.
        launched_at: the learner's ``time.time()`` just before ``Process.start``.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the learner's to handle
    # A learner killed outright (SIGKILL, OOM) takes its collector with it at once, instead
    # of leaving it to notice through the control block.
    die_with_parent(spec.learner_pid)
    logging.basicConfig(
        level=spec.log_level,
        stream=sys.stderr,
        format=f"%(asctime)s collector[{os.getpid()}] %(levelname)s %(message)s",
    )
    mailbox = ResourceMailbox(conn)
    spec.block.set(Word.COLLECTOR_PID, os.getpid())
    if spec.torch_threads is not None:
        torch.set_num_threads(spec.torch_threads)
    collector, failed = serve(spec, mailbox, launched_at)
    # Past serve() the exception is gone, and with it the traceback whose frames still
    # referenced the shared tensors (run()'s locals), so the release below frees them.
    _release_quietly(collector)
    _close_quietly(collector)
    if failed:
        collector = None
        sys.stderr.flush()
        os._exit(1)


def collector_thread_main(spec: CollectorSpec, mailbox: Mailbox, launched_at: float) -> None:
    """Entry point of a collector thread (``training.collector_placement=thread``).

    It steps the env on a CUDA stream of its own, so the learner's work on its stream never
    queues behind the env's. A failure is reported through the control block, as a
    process's is; the thread then ends (there is no exit code).
    """
    collector, _ = serve(spec, mailbox, launched_at)
    _release_quietly(collector)
    _close_quietly(collector)


def serve(
    spec: CollectorSpec, mailbox: Mailbox, launched_at: float
) -> tuple[Collector | None, bool]:
    """Build the env, take the resources, run every tick, serve the evaluation, await the stop.

    An exception is written to the control block's error area, classified (backend or
    collector) and logged; the collector state ends ``FINISHED`` either way. Returns the
    collector (None when it could not be built) and whether it failed.
    """
    block = spec.block
    collector: Collector | None = None
    failure: tuple[FailureKind, str, str] | None = None
    try:
        if spec.device.startswith("cuda"):
            device = torch.device(spec.device)
            torch.cuda.set_device(device)
            if spec.in_thread:  # the current stream is per thread; the learner has its own
                torch.cuda.set_stream(torch.cuda.Stream(device=device))
        collector = Collector(spec)
        collector.startup_s["process_up"] = round(max(0.0, time.time() - launched_at), 3)
        logger.info("collector up %.1f s after launch", collector.startup_s["process_up"])
        collector.build_env()
        collector.receive_resources(mailbox)
        prepare_collector(collector.res)
        collector.publish_info()
        collector.run()
        serve_evaluation(collector)
        collector.wait_for_stop()
    except (StopRequested, PeerDied) as err:
        logger.info("collector stopping: %s", err)
    except BaseException as err:  # noqa: BLE001 - reported through the control block
        kind = FailureKind.BACKEND if is_backend_error(err) else FailureKind.COLLECTOR
        failure = (
            kind,
            f"{type(err).__name__}\n{_error_message(err)}",
            "".join(traceback.format_exception(err)),
        )
        traceback.clear_frames(err.__traceback__)
    if failure is not None:
        kind, text, trace = failure
        block.write_error(kind, text)
        logger.error("collector failed: %s", trace)
    block.set(Word.COLLECTOR_STATE, State.FINISHED)
    return collector, failure is not None


def _release_quietly(collector: Collector | None) -> None:
    """``Collector.release_shared``; a failure is logged (the learner then sees no ack)."""
    if collector is None:
        return
    try:
        collector.release_shared()
    except Exception as err:  # noqa: BLE001 - shutting down; the learner reports the missing ack
        logger.warning("releasing the shared tensors failed: %s: %s", type(err).__name__, err)


def _error_message(err: BaseException) -> str:
    """The exception's message with its notes (e.g. which health check raised it)."""
    notes = getattr(err, "__notes__", ())
    return " ".join([str(err), *(f"({note})" for note in notes)])


def _close_quietly(collector: Collector | None) -> None:
    if collector is None:
        return
    try:
        collector.close()
        if collector.device.type == "cuda":
            torch.cuda.synchronize(collector.device)
    except Exception as err:  # noqa: BLE001 - shutting down; the learner records the exit code
        logger.warning("collector cleanup failed: %s: %s", type(err).__name__, err)
