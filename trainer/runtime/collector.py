"""The collector process: owns the simulator, steps the G1 env, feeds the learner.

Spawned once by the learner (``torch.multiprocessing`` spawn context) as soon as its CUDA
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
"""

from __future__ import annotations

import json
import logging
import math
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
from typing import TYPE_CHECKING, Any

import torch

from trainer.evaluation.stage import prepare_collector, serve_evaluation
from trainer.runtime.control import ControlBlock, FailureKind, State, Word
from trainer.runtime.inference_ring import InferenceRing
from trainer.runtime.liveness import PeerDied, StopRequested, Waiter, make_identity_check
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

# Fixed part of the metrics report (floats area of the control block), then reward terms.
REPORT_FIELDS: tuple[str, ...] = (
    "tick",
    "window_ticks",
    "Perf/collector_inference_request_ms",
    "Perf/collector_learner_action_wait_ms",
    "Perf/collector_env_step_ms",
    "Perf/collector_transition_extract_ms",
    "Perf/collector_replay_write_ms",
    "Perf/collector_metrics_publish_ms",
    "Perf/collector_inference_queue_depth",
    "Perf/collector_inference_action_backlog",
    "Perf/collector_inference_max_action_backlog",
    "Perf/collector_inference_in_flight",
    "Perf/collector_inference_max_in_flight",
    "Perf/collector_inference_publication_lag",
    "Perf/collector_inference_max_publication_lag",
    "Train/mean_reward",
    "Train/mean_episode_length",
    "Episode/timeout_rate",
    "episodes_ended_total",
    "env_step_wall_s_total",
)
MAX_REWARD_TERMS = 64
# The action arrives one policy forward (~0.1-0.3 ms) after the observation: spin through
# it instead of paying a sleep's wake-up latency twice per tick.
ACTION_WAIT_SPIN_S = 1e-3
EPISODE_WINDOW = 100
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
    env_factory: Callable[..., Any]
    env_kwargs: dict[str, Any]
    device: str
    learner_pid: int
    learner_start_ticks: int
    stale_after_s: float = 30.0
    torch_threads: int | None = None
    motion: ResolvedMotion | None = None
    log_level: int = logging.INFO


@dataclass
class CollectorResources:
    """What the learner hands over at ``startup/collector_start`` (through the spawn pipe).

    Attributes:
        pack_fn: ``pack_transitions``-compatible callable building [n, 930] rows.
        total_ticks: W warm-up ticks + the iterations of this run as planned; the live
            limit is ``Word.TICK_LIMIT`` (a time budget lowers it).
        evaluation: the ``EvalPlan`` of the evaluation after training (None: none runs).
    """

    ring: InferenceRing
    ingress: ReplayIngress
    pack_fn: Callable[..., torch.Tensor]
    num_envs: int
    total_ticks: int
    metrics_interval: int
    evaluation: Any = None


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


def is_backend_error(err: BaseException) -> bool:
    """True when the simulator backend raised (CONTRACTS §4.5 ``backend_worker_failure``).

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


class EpisodeWindow:
    """Returns and lengths of the last 100 ended episodes, on device without host syncs.

    Each tick appends the ended rows and keeps the 100 most recent valid entries (a
    ``topk`` over positions), so the only sync is the report's single ``.cpu()``.
    """

    def __init__(self, num_envs: int, device: torch.device) -> None:
        self.returns = torch.full((EPISODE_WINDOW,), math.nan, device=device)
        self.lengths = torch.full((EPISODE_WINDOW,), math.nan, device=device)
        self._position = torch.arange(EPISODE_WINDOW + num_envs, device=device)
        self.ended = torch.zeros((), dtype=torch.float64, device=device)
        self.interval_ended = torch.zeros((), dtype=torch.float64, device=device)
        self.interval_timeouts = torch.zeros((), dtype=torch.float64, device=device)

    def add(
        self,
        done: torch.Tensor,
        truncated: torch.Tensor,
        ep_return: torch.Tensor,
        ep_length: torch.Tensor,
    ) -> None:
        nan = torch.full_like(self.returns[:1], math.nan)
        rets = torch.cat([self.returns, torch.where(done, ep_return.float(), nan)])  # [100 + N]
        lens = torch.cat([self.lengths, torch.where(done, ep_length.float(), nan)])  # [100 + N]
        score = torch.where(torch.isnan(rets), -1, self._position)
        keep = torch.topk(score, EPISODE_WINDOW).indices  # the 100 most recent ended episodes
        self.returns = rets[keep]
        self.lengths = lens[keep]
        count = done.sum()
        self.ended += count
        self.interval_ended += count
        self.interval_timeouts += (truncated & done).sum()

    def stats(self) -> torch.Tensor:
        """[mean return, mean length, timeout rate, ended total] (nan where undefined)."""
        rate = self.interval_timeouts / self.interval_ended.clamp(min=1.0)
        rate = torch.where(self.interval_ended > 0, rate, torch.full_like(rate, math.nan))
        out = torch.stack(
            [
                torch.nanmean(self.returns).double(),
                torch.nanmean(self.lengths).double(),
                rate,
                self.ended,
            ]
        )
        self.interval_ended.zero_()
        self.interval_timeouts.zero_()
        return out


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
        )
        self.env: Any = None
        self.res: CollectorResources | None = None
        self._shared: StorageWatch | None = None  # the learner's tensors, once received
        self.startup_s: dict[str, float] = {}
        """Collector-side startup milestones (seconds; ``timings.startup.collector``)."""
        self.reward_terms: list[str] = []
        self._timers = dict.fromkeys(REPORT_FIELDS[2:8], 0.0)
        self._env_step_total_s = 0.0
        self._window_ticks = 0
        self._max_in_flight = 0
        self._max_publication_lag = 0
        self._max_action_backlog = 0
        self._reward_sums: torch.Tensor | None = None
        self._terms_published = False

    def _check_stop(self) -> None:
        if self.block.ints[Word.STOP] or self.block.ints[Word.CLOSED]:
            raise StopRequested("the learner requested a stop")

    def build_env(self) -> None:
        spec = self.spec
        start = time.perf_counter()
        kwargs = dict(spec.env_kwargs)
        if spec.motion is not None:
            kwargs["resolved_motion"] = spec.motion
        self.env = spec.env_factory(**kwargs)
        built = time.perf_counter() - start
        parts = {k: round(float(v), 3) for k, v in getattr(self.env, "setup_seconds", {}).items()}
        logger.info(
            "env built in %.1f s (%s)", built, ", ".join(f"{k} {v:.1f} s" for k, v in parts.items())
        )
        self.startup_s.update(env_build=round(built, 3), env_build_parts=parts)

    def receive_resources(self, mailbox: ResourceMailbox) -> None:
        """Wait (with liveness checks) for the learner's resources and attach them."""
        start = time.perf_counter()
        self.waiter.wait(mailbox.arrived, "the learner's ring and replay ingress")
        self.res = mailbox.take()
        self._shared = StorageWatch(shared_tensors(self.res.ring, self.res.ingress))
        self.startup_s["resources_wait"] = round(time.perf_counter() - start, 3)

    def publish_info(self) -> None:
        """Write the diagnostics and startup milestones the learner's manifest records."""
        doc = {
            "backend_diagnostics": _backend_diagnostics(self.env),
            "cuda_graph": _env_graph(self.env),
            "startup": self.startup_s,
        }
        motion = getattr(self.env, "motion", None)
        if motion is not None:
            doc["motion"] = {"path": motion.source, "sha256": motion.sha256}
        doc["cpu_threads"] = {
            "torch": torch.get_num_threads(),
            "physics": getattr(getattr(self.env, "backend", None), "num_threads", None),
        }
        self.block.write_text(json.dumps(doc))

    def run(self) -> None:
        res, block = self.res, self.block
        assert res is not None, "receive_resources() first"
        ring, ingress = res.ring, res.ingress
        ints = block.ints
        n = res.num_envs
        obs, critic_obs = self.env.reset_all()
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
            self._max_in_flight = max(self._max_in_flight, in_flight)
            self._max_publication_lag = max(self._max_publication_lag, in_flight)
            t1 = perf()
            self.waiter.wait(
                lambda t=tick: ints[Word.ACTION_TICK] > t,
                f"the action of tick {tick}",
                spin_s=ACTION_WAIT_SPIN_S,
            )
            backlog = int(ints[Word.ACTION_TICK]) - int(ints[Word.CONSUMED_TICK])
            self._max_action_backlog = max(self._max_action_backlog, backlog)
            ring.consume_action(block, tick, actions)
            t2 = perf()
            result = self.env.step(actions)
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
            )  # [N, 930]
            done = result.terminated | result.truncated
            episodes.add(done, result.truncated, result.episode_return, result.episode_length)
            self._accumulate_rewards(result.reward_terms)
            t4 = perf()
            for start in range(0, n, rows_per_chunk):
                if not ingress.push(block, rows[start : start + rows_per_chunk], self.waiter):
                    raise StopRequested("the replay ingress was closed or a stop was requested")
            t5 = perf()
            obs, critic_obs = result.obs, result.critic_obs
            timers = self._timers
            timers["Perf/collector_inference_request_ms"] += t1 - t0
            timers["Perf/collector_learner_action_wait_ms"] += t2 - t1
            timers["Perf/collector_env_step_ms"] += t3 - t2
            timers["Perf/collector_transition_extract_ms"] += t4 - t3
            timers["Perf/collector_replay_write_ms"] += t5 - t4
            self._env_step_total_s += t3 - t2
            self._window_ticks += 1
            if (tick + 1) % res.metrics_interval == 0 or tick + 1 == int(ints[Word.TICK_LIMIT]):
                self.check_health(tick)
                self.publish_report(tick + 1, episodes)
            tick += 1
        block.set(Word.COLLECTOR_DONE, 1)
        block.add(Word.COLLECTOR_PROGRESS)

    def _accumulate_rewards(self, terms: dict[str, torch.Tensor]) -> None:
        if not terms:
            return
        if not self.reward_terms:
            self.reward_terms = list(terms)[:MAX_REWARD_TERMS]
        values = torch.stack(
            [terms[k].detach().reshape(()).double() for k in self.reward_terms]
        )  # [T]
        if self._reward_sums is None:
            self._reward_sums = torch.zeros_like(values)
        self._reward_sums += values

    def publish_report(self, tick: int, episodes: EpisodeWindow) -> None:
        """Write one metrics report into the shared floats area under the seqlock."""
        start = time.perf_counter()
        ticks = max(self._window_ticks, 1)
        stats = episodes.stats()
        if self._reward_sums is not None:
            stats = torch.cat([stats, self._reward_sums / ticks])
            self._reward_sums.zero_()
        host = stats.cpu().tolist()  # the report's single host sync
        ints = self.block.ints
        flight = InferenceRing.flight(self.block)
        values = {
            "tick": float(tick),
            "window_ticks": float(ticks),
            **{k: 1000.0 * v / ticks for k, v in self._timers.items()},
            "Perf/collector_inference_queue_depth": float(flight.queue_depth),
            "Perf/collector_inference_action_backlog": float(flight.action_backlog),
            "Perf/collector_inference_max_action_backlog": float(self._max_action_backlog),
            "Perf/collector_inference_in_flight": float(flight.publication_lag),
            "Perf/collector_inference_max_in_flight": float(self._max_in_flight),
            "Perf/collector_inference_publication_lag": float(flight.publication_lag),
            "Perf/collector_inference_max_publication_lag": float(self._max_publication_lag),
            "Train/mean_reward": host[0],
            "Train/mean_episode_length": host[1],
            "Episode/timeout_rate": host[2],
            "episodes_ended_total": host[3],
            "env_step_wall_s_total": self._env_step_total_s,
        }
        if not self._terms_published:
            # Written once, before the first report becomes visible (the learner reads the
            # names only after it saw a report).
            doc = json.loads(self.block.read_text() or "{}")
            doc["reward_terms"] = self.reward_terms
            self.block.write_text(json.dumps(doc))
            self._terms_published = True
        floats = self.block.floats
        seq = int(ints[Word.METRICS_SEQ])
        ints[Word.METRICS_SEQ] = seq + 1  # odd: writing
        for i, name in enumerate(REPORT_FIELDS):
            floats[i] = values[name]
        for j, value in enumerate(host[4:]):
            floats[len(REPORT_FIELDS) + j] = value
        ints[Word.METRICS_SEQ] = seq + 2
        ints[Word.METRICS_REPORTS] += 1
        self._timers = dict.fromkeys(self._timers, 0.0)
        self._timers["Perf/collector_metrics_publish_ms"] = time.perf_counter() - start
        self._window_ticks = 0
        self._max_in_flight = self._max_publication_lag = self._max_action_backlog = 0

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
            return []  # never received: nothing of the learner's to free

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
        for owner in (self.env, getattr(self.env, "backend", None)):
            close = getattr(owner, "close", None)
            if callable(close):
                close()


def read_report(block: ControlBlock, reward_terms: list[str]) -> dict[str, float] | None:
    """Consistent copy of the latest collector report (seqlock read), or None if none yet."""
    ints, floats = block.ints, block.floats
    for _ in range(1000):
        seq = int(ints[Word.METRICS_SEQ])
        if seq == 0:
            return None
        if seq % 2:
            time.sleep(10e-6)
            continue
        values = floats[: len(REPORT_FIELDS) + len(reward_terms)].copy()
        if int(ints[Word.METRICS_SEQ]) == seq:
            out = {name: float(values[i]) for i, name in enumerate(REPORT_FIELDS)}
            for j, term in enumerate(reward_terms):
                # The env may key its terms by name or by the full tag (reward/<term>).
                tag = term if term.startswith("reward/") else f"reward/{term}"
                out[tag] = float(values[len(REPORT_FIELDS) + j])
            return out
    return None


def _backend_diagnostics(env: Any) -> dict[str, Any]:
    """CONTRACTS §4.3 snapshot from the env's backend; never a bare null."""
    backend = getattr(env, "backend", None)
    try:
        diag = backend.diagnostics() if backend is not None else None
    except Exception as err:  # noqa: BLE001 - the probe's failure is itself the diagnostic
        return {
            "available": False,
            "backend_type": type(backend).__name__ if backend is not None else None,
            "unavailable_reason": f"backend diagnostics raised {type(err).__name__}: {err}",
        }
    if not isinstance(diag, dict) or "available" not in diag:
        return {
            "available": False,
            "backend_type": type(backend).__name__ if backend is not None else None,
            "unavailable_reason": "the env backend reports no diagnostics",
        }
    return diag


def _env_graph(env: Any) -> dict[str, Any] | None:
    backend = getattr(env, "backend", None)
    fn = getattr(backend, "cuda_graph_diagnostics", None)
    if callable(fn):
        try:
            return fn()
        except Exception as err:  # noqa: BLE001
            return {
                "requested": None,
                "enabled": False,
                "disable_reason": f"{type(err).__name__}: {err}",
            }
    return None


def collector_main(spec: CollectorSpec, conn: Connection, launched_at: float) -> None:
    """Entry point of the spawned collector process.

    Args:
        spec: built by the learner right after its CUDA preflight.
        conn: the receiving end of the spawn pipe; one ``CollectorResources`` arrives on it.
        launched_at: the learner's ``time.time()`` just before ``Process.start``.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the learner's to handle
    logging.basicConfig(
        level=spec.log_level,
        stream=sys.stderr,
        format=f"%(asctime)s collector[{os.getpid()}] %(levelname)s %(message)s",
    )
    mailbox = ResourceMailbox(conn)
    block = spec.block
    block.set(Word.COLLECTOR_PID, os.getpid())
    collector: Collector | None = None
    failure: tuple[FailureKind, str, str] | None = None
    try:
        if spec.torch_threads is not None:
            torch.set_num_threads(spec.torch_threads)
        if spec.device.startswith("cuda"):
            torch.cuda.set_device(torch.device(spec.device))
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
    except BaseException as err:  # noqa: BLE001 - reported through the control block, then exit 1
        kind = FailureKind.BACKEND if is_backend_error(err) else FailureKind.COLLECTOR
        failure = (
            kind,
            f"{type(err).__name__}\n{_error_message(err)}",
            "".join(traceback.format_exception(err)),
        )
        traceback.clear_frames(err.__traceback__)
    # Past the except clauses the exception is gone, and with it the traceback whose frames
    # still referenced the shared tensors (run()'s locals), so the release below frees them.
    if failure is not None:
        kind, text, trace = failure
        block.write_error(kind, text)
        logger.error("collector failed: %s", trace)
    block.set(Word.COLLECTOR_STATE, State.FINISHED)
    _release_quietly(collector)
    _close_quietly(collector)
    if failure is not None:
        collector = None
        sys.stderr.flush()
        os._exit(1)


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
