"""The fixed evaluation protocol (docs/evaluation.md): start modes, start frames, lengths.

Every evaluation point runs the same episodes, clip by clip: on a motion of C clips each clip
c of T_c frames starting at s_c gets ``k0 = ceil(frame0_episodes / C)`` episodes from its
frame 0 (s_c) and ``k = ceil(uniform_episodes / C)`` from evenly spaced frames, episode i of k
at ``s_c + floor(i·(T_c − 1)/k)`` ≤ s_c + T_c − 2: never a clip's last frame, and every clip
has its own frame-0 and uniform episodes. One clip (C = 1) is the original protocol. An
episode ends at its first termination, at the time limit (``max_episode_steps``) or at its
clip's last frame, so from frame f it can last ``min(max_episode_steps, last(f) − f + 1)``
steps (the step that scores the last frame ends it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = [
    "METRICS_VARIANT",
    "POLICY",
    "START_MODES",
    "Episode",
    "Protocol",
    "clip_start_frames",
    "per_clip",
    "possible_steps",
    "start_frames",
]

POLICY = "deterministic_mean_action"
"""The policy of every evaluation: ``tanh(mu)`` of the actor, no exploration noise."""
START_MODES: tuple[str, ...] = ("frame0", "uniform")
METRICS_VARIANT = "mjlab-1.6.0"
"""Whose definitions the shared metrics follow (docs/evaluation.md, "Metrics")."""
Mode = Literal["frame0", "uniform"]


def start_frames(mode: str, episodes: int, num_frames: int) -> list[int]:
    """The start frame of each of ``episodes`` episodes of ``mode`` on a ``num_frames`` axis."""
    if num_frames < 2:
        msg = f"a motion of {num_frames} frames cannot be evaluated; it needs at least 2"
        raise ValueError(msg)
    if mode == "frame0":
        return [0] * episodes
    if mode == "uniform":
        return [i * (num_frames - 1) // episodes for i in range(episodes)]
    msg = f"unknown start mode {mode!r}; valid modes: {list(START_MODES)}"
    raise ValueError(msg)


def per_clip(episodes: int, num_clips: int) -> int:
    """Episodes of one start mode per clip: ``ceil(episodes / num_clips)``."""
    return max(1, math.ceil(episodes / num_clips))


def clip_start_frames(mode: str, episodes: int, clip_ends: np.ndarray) -> list[tuple[int, int]]:
    """``(clip, start frame)`` of every episode of ``mode``, clip by clip (module docstring)."""
    ends = [int(e) for e in np.asarray(clip_ends).reshape(-1)]
    each = per_clip(episodes, len(ends))
    out: list[tuple[int, int]] = []
    for clip, (start, end) in enumerate(zip([0, *ends[:-1]], ends, strict=True)):
        out += [(clip, start + f) for f in start_frames(mode, each, end - start)]
    return out


def possible_steps(frames: list[int], clip_ends: np.ndarray, max_episode_steps: int) -> list[int]:
    """Steps an episode from each frame can last: ``min(max_episode_steps, last(f) − f + 1)``,
    ``last(f)`` the last frame of f's clip on the concatenated axis."""
    ends = np.asarray(clip_ends, dtype=np.int64)
    index = np.searchsorted(ends, np.asarray(frames, dtype=np.int64), side="right")
    last = ends[index] - 1
    return [min(max_episode_steps, int(e) - f + 1) for f, e in zip(frames, last, strict=True)]


@dataclass(frozen=True)
class Episode:
    """One evaluation episode of one point."""

    mode: Mode
    frame: int
    possible: int
    """Steps it can last (:func:`possible_steps`)."""
    clip: int = 0
    """Index of the clip it starts in."""


@dataclass(frozen=True)
class Protocol:
    """The protocol record of ``evaluation.json`` and the episodes it implies."""

    uniform_episodes: int
    frame0_episodes: int
    max_episode_steps: int
    sim_backend: str
    device: str

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": POLICY,
            "start_modes": list(START_MODES),
            "uniform_episodes": self.uniform_episodes,
            "frame0_episodes": self.frame0_episodes,
            "max_episode_steps": self.max_episode_steps,
            "sim_backend": self.sim_backend,
            "device": self.device,
            "metrics_variant": METRICS_VARIANT,
        }

    def episodes(self, num_frames: int, clip_ends: np.ndarray) -> list[Episode]:
        """Every episode of one point: the frame-0 ones, then the uniform ones, each clip by
        clip (``num_frames`` must be the end of the last clip)."""
        ends = np.asarray(clip_ends, dtype=np.int64).reshape(-1)
        if int(ends[-1]) != num_frames:
            msg = f"clip_ends end at {int(ends[-1])}, the motion has {num_frames} frames"
            raise ValueError(msg)
        out: list[Episode] = []
        for mode, count in (("frame0", self.frame0_episodes), ("uniform", self.uniform_episodes)):
            starts = clip_start_frames(mode, count, ends)
            steps = possible_steps([f for _, f in starts], ends, self.max_episode_steps)
            out += [Episode(mode, f, s, c) for (c, f), s in zip(starts, steps, strict=True)]
        return out
