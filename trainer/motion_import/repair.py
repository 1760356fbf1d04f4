"""Joint discontinuities of a source clip, named by shape, and their explicit repairs.

Real retargeted motion capture has frame-to-frame joint jumps no robot can follow
(docs/assets.md, "Discontinuities and repairs"). A jump faster than :data:`JUMP_RAD_S` is
classified by its shape, on the source's own frames:

* ``wrap``: the jump is a multiple of 2π (an angle written modulo 2π);
* ``spike``: the joint leaves and comes back within :data:`SPIKE_FRAMES` frames (a glitch);
* ``step``: the joint jumps and stays, in one to three frames each at least
  :data:`STEP_RATIO` times the steps around them (an inverse-kinematics branch flip of the
  retargeter);
* anything else is fast but smooth motion: not a discontinuity (the speed check judges it).

Nothing is repaired unless asked: ``unwrap`` removes wraps, ``despike`` interpolates across
spikes, ``blend-steps`` spreads each step over :data:`BLEND_S` seconds. Every repair is
recorded in the converted file's provenance.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from trainer.motion_import.source import SourceMotion
from trainer.sim.scene import JOINT_NAMES

__all__ = [
    "BLEND_S",
    "JUMP_RAD_S",
    "REPAIRS",
    "Discontinuity",
    "apply_repairs",
    "find_discontinuities",
    "parse_repairs",
]

JUMP_RAD_S = 25.0
"""A joint step faster than this (rad/s) is examined (the speed check's bound)."""
SPIKE_FRAMES = 2
"""Longest excursion (frames) that still counts as a spike."""
STEP_RATIO = 2.5
"""A step is at least this many times the largest of its two neighbouring steps each side."""
BLEND_S = 0.2
"""Duration over which ``blend-steps`` spreads a step."""

Kind = Literal["wrap", "spike", "step"]
REPAIRS: dict[str, Kind] = {"unwrap": "wrap", "despike": "spike", "blend-steps": "step"}
"""Repair option → the discontinuity kind it removes."""


@dataclass(frozen=True)
class Discontinuity:
    """One named jump of one joint, on the source's frames."""

    kind: Kind
    joint: int
    frame: int
    """Source frame before the jump (the jump is from ``frame`` to ``frame + 1``)."""
    length: int
    """Frames the excursion lasts (spikes) or 1."""
    jump_rad: float

    def describe(self) -> str:
        return (
            f"{self.kind} {JOINT_NAMES[self.joint]} frame {self.frame} ({self.jump_rad:+.2f} rad)"
        )


def parse_repairs(text: str | None) -> tuple[str, ...]:
    """``unwrap,despike`` → ``("unwrap", "despike")`` in :data:`REPAIRS` order.

    Raises:
        ValueError: an unknown repair name (the message lists the valid ones).
    """
    if not text:
        return ()
    names = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [n for n in names if n not in REPAIRS]
    if unknown:
        msg = f"unknown repair {unknown[0]!r}; valid repairs: {', '.join(REPAIRS)}"
        raise ValueError(msg)
    return tuple(n for n in REPAIRS if n in names)


def _run_length(steps: np.ndarray, i: int, limit: float) -> int:
    """Steps from ``i`` in one direction, each over half the jump limit (at most 3)."""
    n = 1
    while (
        n < 3
        and i + n < steps.shape[0]
        and np.sign(steps[i + n]) == np.sign(steps[i])
        and abs(steps[i + n]) > 0.5 * limit
    ):
        n += 1
    return n


def _classify(q: np.ndarray, steps: np.ndarray, i: int, limit: float) -> tuple[Kind, int] | None:
    """The kind and length of the jump at step ``i`` of one joint, or None for smooth motion."""
    jump = steps[i]
    turns = round(jump / (2.0 * math.pi))
    if turns != 0 and abs(jump - 2.0 * math.pi * turns) <= limit:
        return "wrap", 1
    for length in range(1, SPIKE_FRAMES + 1):
        back = i + length
        if (
            back < steps.shape[0]
            and abs(q[back + 1] - q[i]) <= 0.25 * abs(jump)
            and np.sign(steps[back]) != np.sign(jump)
            and abs(steps[back]) > limit
        ):
            return "spike", length
    run = _run_length(steps, i, limit)
    if i == 0 or i + run >= steps.shape[0]:
        return None  # a step needs motion on both sides to be told from a fast start or end
    around = np.abs(np.concatenate((steps[max(0, i - 2) : i], steps[i + run : i + run + 2])))
    peak = float(np.abs(steps[i : i + run]).max())
    if peak >= STEP_RATIO * float(around.max()):
        return "step", run
    return None


def find_discontinuities(joint_pos: np.ndarray, fps: float) -> list[Discontinuity]:
    """Every named jump of ``joint_pos [T, J]`` at ``fps``, by joint then frame."""
    limit = JUMP_RAD_S / fps
    out: list[Discontinuity] = []
    for j in range(joint_pos.shape[1]):
        q = joint_pos[:, j]
        steps = np.diff(q)
        skip_until = -1
        for i in np.flatnonzero(np.abs(steps) > limit):
            if i <= skip_until:
                continue
            found = _classify(q, steps, int(i), limit)
            if found is None:
                continue
            kind, length = found
            jump = float(q[int(i) + length] - q[int(i)]) if kind == "step" else float(steps[i])
            out.append(Discontinuity(kind, j, int(i), length, jump))
            skip_until = int(i) + length
    return out


def _unwrap(q: np.ndarray, d: Discontinuity) -> None:
    q[d.frame + 1 :] -= 2.0 * math.pi * round(d.jump_rad / (2.0 * math.pi))


def _despike(q: np.ndarray, d: Discontinuity) -> None:
    a, b = d.frame, d.frame + d.length + 1
    q[a + 1 : b] = np.interp(np.arange(a + 1, b), [a, b], [q[a], q[b]])


def _blend(q: np.ndarray, d: Discontinuity, fps: float) -> None:
    half = max(d.length, round(BLEND_S * fps / 2))
    i, end = d.frame, d.frame + d.length  # the step runs from frame i to frame end
    steps = np.diff(q)
    near = np.concatenate((steps[max(0, i - 2) : i], steps[end : end + 2]))
    excess = float(q[end] - q[i]) - d.length * (float(near.mean()) if near.size else 0.0)
    lo, hi = max(0, i - half + 1), min(q.shape[0] - 1, end + half - 1)
    frames = np.arange(lo, hi + 1)
    ramp = (frames - lo + 0.5) / (hi - lo + 1)
    jumped = np.clip((frames - i) / d.length, 0.0, 1.0)
    q[lo : hi + 1] -= excess * (jumped - ramp)


def apply_repairs(
    source: SourceMotion, repairs: tuple[str, ...]
) -> tuple[SourceMotion, list[Discontinuity]]:
    """``source`` with the named repairs applied to its joints, and what was repaired.

    Discontinuities are found once, before any repair, and repaired joint by joint in frame
    order; a clip without the repaired kinds is returned unchanged.
    """
    if not repairs:
        return source, []
    kinds = {REPAIRS[name] for name in repairs}
    joint_pos = source.joint_pos.astype(np.float64, copy=True)
    done = [d for d in find_discontinuities(joint_pos, source.fps) if d.kind in kinds]
    for d in done:
        q = joint_pos[:, d.joint]
        if d.kind == "wrap":
            _unwrap(q, d)
        elif d.kind == "spike":
            _despike(q, d)
        else:
            _blend(q, d, source.fps)
    if not done:
        return source, []
    return dataclasses.replace(source, joint_pos=joint_pos), done
