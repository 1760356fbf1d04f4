"""The fixed evaluation protocol (docs/evaluation.md): start modes, start frames, lengths.

Every evaluation point runs the same episodes: ``frame0_episodes`` from frame 0 and
``uniform_episodes`` from evenly spaced frames, episode i of n at ``floor(i·(T − 1)/n)``. An
episode ends at its first termination, at the time limit (``max_episode_steps``) or at its
clip's last frame, so from frame f it can last ``min(max_episode_steps, last(f) − f + 1)``
steps (the step that scores the last frame ends it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = [
    "POLICY",
    "START_MODES",
    "Episode",
    "Protocol",
    "possible_steps",
    "start_frames",
]

POLICY = "deterministic_mean_action"
"""The policy of every evaluation: ``tanh(mu)`` of the actor, no exploration noise."""
START_MODES: tuple[str, ...] = ("frame0", "uniform")
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
        }

    def episodes(self, num_frames: int, clip_ends: np.ndarray) -> list[Episode]:
        """Every episode of one point: the frame-0 ones, then the uniform ones."""
        out: list[Episode] = []
        for mode, count in (("frame0", self.frame0_episodes), ("uniform", self.uniform_episodes)):
            frames = start_frames(mode, count, num_frames)
            steps = possible_steps(frames, clip_ends, self.max_episode_steps)
            out += [Episode(mode, f, s) for f, s in zip(frames, steps, strict=True)]
        return out
