"""Evaluate policies on one env: every point's episodes packed into rollouts of the env's rows.

The episodes of all points are laid out one after the other (point by point, frame-0 episodes
first) and cut into chunks of ``env.num_envs`` rows; each chunk is one rollout of the env's
evaluation mode, every row acting with its own point's policy. On the GPU a step costs about
the same for 100 rows as for 1,000 (docs/evaluation.md, "Cost"), so several checkpoints share
one rollout. A rollout ends when no row is still in its episode (checked every
:data:`CHECK_EVERY` steps) and always within the longest episode's possible steps.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trainer.evaluation.clips import clip_summary
from trainer.evaluation.metrics import (
    HostTally,
    RowTally,
    joint_errors,
    mode_metrics,
    step_errors,
)
from trainer.evaluation.policy import PolicyPoint
from trainer.evaluation.protocol import START_MODES, Episode, Protocol
from trainer.sim.scene import ANCHOR_TRACKED_INDEX, EE_TRACKED_INDICES
from trainer.task.eval_mode import EvalMode
from trainer.task.g1_tracking import G1TrackingEnv

__all__ = ["CHECK_EVERY", "evaluate_points"]

CHECK_EVERY = 25
"""Steps between the host checks whether any row is still in its episode."""


@contextlib.contextmanager
def _single_threaded_on_cpu(device: torch.device) -> Iterator[None]:
    """On a CPU device, run torch on one thread for the evaluation: its tensors are a few
    rows wide, so a second intra-op thread only adds contention (a 45 ms actor forward
    instead of 2 ms on a busy 2-core machine); the physics keeps its own thread pool."""
    if device.type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class _Chunk:
    """One rollout: which point and episode each of its first rows runs."""

    rows: list[tuple[int, Episode]]

    def groups(self) -> list[tuple[int, int, int]]:
        """``(point, lo, hi)`` for each run of consecutive rows of one point."""
        out: list[tuple[int, int, int]] = []
        for i, (point, _) in enumerate(self.rows):
            if out and out[-1][0] == point:
                out[-1] = (point, out[-1][1], i + 1)
            else:
                out.append((point, i, i + 1))
        return out


def _rollout(
    ev: EvalMode,
    chunk: _Chunk,
    points: Sequence[PolicyPoint],
    interrupt: Callable[[], None] | None,
) -> HostTally:
    """Run one chunk's episodes to their ends; the tally of its rows."""
    env = ev.env
    n, used = env.num_envs, len(chunk.rows)
    frames = [ep.frame for _, ep in chunk.rows] + [0] * (n - used)
    active = torch.zeros(n, dtype=torch.bool)
    active[:used] = True
    obs = ev.start(torch.tensor(frames), active)
    tally = RowTally(n, env.device)
    raw = torch.zeros(n, env.action_dim, device=env.device)
    ee = torch.as_tensor(EE_TRACKED_INDICES, device=env.device)
    groups = chunk.groups()
    longest = max(ep.possible for _, ep in chunk.rows)
    for t in range(longest):
        for point, lo, hi in groups:
            raw[lo:hi] = points[point].act(obs[lo:hi])
        finite = torch.isfinite(raw).all(-1)
        step = ev.step(torch.where(finite[:, None], raw, 0.0))
        result = step.result
        errors = step_errors(
            result.robot,
            result.reference,
            step.relative,
            anchor=ANCHOR_TRACKED_INDEX,
            ee_columns=ee,
        )
        tally.add(step, errors, joint_errors(result.robot, result.reference), ~finite)
        obs = result.obs
        if (t + 1) % CHECK_EVERY == 0:
            if interrupt is not None:
                interrupt()
            if not ev.any_active():
                break
    host = tally.to_host().rows(slice(0, used))
    possible = np.array([ep.possible for _, ep in chunk.rows])
    if not bool(host.ended.all()) or bool((host.steps > possible).any()):
        msg = (
            f"an evaluation rollout ran past its episodes' lengths ({int((~host.ended).sum())} "
            f"of {used} episodes did not end within {longest} steps)"
        )
        raise RuntimeError(msg)
    env.backend.check_health()
    return host


def _modes(
    episodes: list[Episode], tally: HostTally, keep: np.ndarray, clip_starts: np.ndarray | None
) -> dict[str, Any]:
    """The ``metrics`` record of each start mode over the episodes ``keep`` marks; with
    ``clip_starts`` (each clip's first frame on the axis) the failed episodes' clip frames."""
    modes = {}
    for mode in START_MODES:
        index = np.array([i for i, ep in enumerate(episodes) if ep.mode == mode and keep[i]])
        possible = np.array([episodes[i].possible for i in index])
        starts = None
        if clip_starts is not None:
            starts = np.array([episodes[i].frame - clip_starts[episodes[i].clip] for i in index])
        modes[mode] = mode_metrics(tally.rows(index), possible, starts=starts)
    return modes


def _point_record(
    point: PolicyPoint,
    episodes: list[Episode],
    tally: HostTally,
    seconds: float,
    clip_names: Sequence[str],
    clip_starts: np.ndarray,
) -> dict[str, Any]:
    everything = np.ones(len(episodes), dtype=bool)
    several = len(clip_names) > 1
    clip_of = np.array([ep.clip for ep in episodes])
    record: dict[str, Any] = {
        "iteration": point.iteration,
        "env_steps": point.env_steps,
        "source": point.source,
        "checkpoint": point.checkpoint,
    }
    if point.checkpoint_sha256 is not None:
        record["checkpoint_sha256"] = point.checkpoint_sha256
    record["network"] = point.network
    record["eval_wall_time_s"] = round(seconds, 6)
    record["modes"] = _modes(episodes, tally, everything, None if several else clip_starts)
    if several:
        clips = [
            {"clip": name, "modes": _modes(episodes, tally, clip_of == c, clip_starts)}
            for c, name in enumerate(clip_names)
        ]
        record["clips"] = clips
        record["clip_summary"] = clip_summary(clips)
    return record


def evaluate_points(
    env: G1TrackingEnv,
    points: Sequence[PolicyPoint],
    protocol: Protocol,
    *,
    on_point: Callable[[dict[str, Any]], None] | None = None,
    interrupt: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate every point with ``protocol`` on ``env``; return their point records.

    Args:
        env: the env whose rows run the episodes (the collector's training env in a run).
        points: the policies, in the order their records are returned.
        protocol: episode counts and the record of the backend and device.
        on_point: called with each point's record as soon as its last rollout ended.
        interrupt: called every :data:`CHECK_EVERY` steps; may raise to abandon the work.

    Returns:
        One ``evaluation.json`` point record per policy. ``eval_wall_time_s`` is the point's
        share of the rollouts it ran in (by rows), so the records add up to the total.

    Raises:
        BackendFailure: the physics backend overflowed during a rollout.
        RuntimeError: an episode outlived its possible length (an env bug).
    """
    episodes = protocol.episodes(env.motion.num_frames, env.motion.clip_ends)
    clip_starts = np.concatenate(([0], np.asarray(env.motion.clip_ends, dtype=np.int64)[:-1]))
    rows = [(p, ep) for p in range(len(points)) for ep in episodes]
    n = env.num_envs
    parts: list[list[HostTally]] = [[] for _ in points]
    seconds = [0.0] * len(points)
    records: list[dict[str, Any] | None] = [None] * len(points)
    with _single_threaded_on_cpu(env.device), env.evaluation() as ev:
        for start in range(0, len(rows), n):
            chunk = _Chunk(rows[start : start + n])
            began = time.perf_counter()
            host = _rollout(ev, chunk, points, interrupt)
            took = time.perf_counter() - began
            for point, lo, hi in chunk.groups():
                parts[point].append(host.rows(slice(lo, hi)))
                seconds[point] += took * (hi - lo) / len(chunk.rows)
            end = start + len(chunk.rows)
            for point in sorted({p for p, _, _ in chunk.groups()}):
                if records[point] is None and (point + 1) * len(episodes) <= end:
                    tally = HostTally.concat(parts[point])
                    records[point] = _point_record(
                        points[point],
                        episodes,
                        tally,
                        seconds[point],
                        env.motion.clip_labels,
                        clip_starts,
                    )
                    if on_point is not None:
                        on_point(records[point])
    assert all(r is not None for r in records)
    return [r for r in records if r is not None]
