"""Plausibility checks of a converted clip, reported with numbers (docs/assets.md).

Each check compares one number against a stated bound. They describe the clip; they fail a
conversion only under ``--strict``, because a clip can be valid and still odd (a jump lifts
both feet, a get-up starts low). The forward-kinematics residual rows check the name
mapping rather than the motion and appear only when the source has body poses.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trainer.motion_import import quat
from trainer.motion_import.convert import Conversion
from trainer.motion_import.model import g1_model
from trainer.motion_import.repair import REPAIRS, Discontinuity
from trainer.sim.scene import JOINT_NAMES

__all__ = ["BOUNDS", "Check", "JointRange", "joint_ranges", "run_checks"]


@dataclass(frozen=True)
class Bound:
    limit: float
    unit: str
    kind: str
    """``max``: value ≤ limit passes; ``min``: value ≥ limit passes."""
    what: str
    label: str
    """A short name for narrow tables (``g1-motion import`` names the check below them)."""


BOUNDS: dict[str, Bound] = {
    "joint_limit_excess": Bound(
        0.01, "rad", "max", "largest excess of a joint beyond its XML range", "limits"
    ),
    "foot_height_min": Bound(
        -0.02, "m", "min", "lowest foot point over the clip (penetration)", "foot-low"
    ),
    "airborne_max_s": Bound(
        0.5, "s", "max", "longest time both feet are over 5 cm up (a jump, or a float)", "airborne"
    ),
    "root_height_min": Bound(0.25, "m", "min", "lowest pelvis height", "root-low"),
    "root_height_max": Bound(1.20, "m", "max", "highest pelvis height", "root-high"),
    "joint_speed_max": Bound(
        25.0, "rad/s", "max", "largest frame-to-frame joint step × fps, named jumps aside", "speed"
    ),
    "joint_discontinuities": Bound(
        0.0, "jumps", "max", "joint jumps named wrap, spike or step (repairable)", "jumps"
    ),
    "root_speed_max": Bound(
        5.0, "m/s", "max", "largest frame-to-frame root jump × fps", "root-speed"
    ),
    "root_turn_rate_max": Bound(
        15.0, "rad/s", "max", "largest frame-to-frame root rotation × fps", "root-turn"
    ),
    "fk_residual_pos": Bound(0.01, "m", "max", "producer's body positions vs our FK", "fk-pos"),
    "fk_residual_ori": Bound(
        0.05, "rad", "max", "producer's body orientations vs our FK", "fk-ori"
    ),
}
"""Every check's bound, unit and meaning (docs/assets.md lists and justifies them)."""


@dataclass(frozen=True)
class Check:
    """One check row."""

    name: str
    value: float
    limit: float
    unit: str
    passed: bool
    detail: str
    """Where the value occurs (joint, body, frame)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class JointRange:
    """A joint's range over the clip next to its XML range (for the table and the PNG)."""

    joint: str
    clip_min: float
    clip_max: float
    lower: float
    upper: float

    @property
    def excess(self) -> float:
        return max(0.0, self.clip_max - self.upper, self.lower - self.clip_min)


def _row(name: str, value: float, detail: str) -> Check:
    bound = BOUNDS[name]
    passed = value <= bound.limit if bound.kind == "max" else value >= bound.limit
    return Check(name, float(value), bound.limit, bound.unit, bool(passed), detail)


def joint_ranges(joint_pos: np.ndarray) -> list[JointRange]:
    """Range of every G1 joint over ``joint_pos [T, 29]`` and its XML range."""
    model = g1_model()
    out = []
    for j, name in enumerate(JOINT_NAMES):
        lower, upper = (float(v) for v in model.jnt_range[model.joint(name).id])
        out.append(
            JointRange(
                name, float(joint_pos[:, j].min()), float(joint_pos[:, j].max()), lower, upper
            )
        )
    return out


def _within_clips(steps: np.ndarray, clip_ends: tuple[int, ...]) -> np.ndarray:
    """Zero the frame steps that cross from one clip of a clip set into the next. [T − 1, ...]"""
    steps = steps.copy()
    for end in clip_ends[:-1]:
        steps[end - 1] = 0.0
    return steps


AIRBORNE_M = 0.05
"""Both feet count as off the ground when their lowest point is higher than this."""


def _longest_run(flags: np.ndarray) -> int:
    """Length of the longest run of True in ``flags``."""
    best = run = 0
    for flag in flags:
        run = run + 1 if flag else 0
        best = max(best, run)
    return best


def _mask_named(steps: np.ndarray, named: tuple[Discontinuity, ...], ratio: float) -> np.ndarray:
    """Zero the converted joint steps within two frames of a named jump (source frame × ratio)."""
    steps = steps.copy()
    for d in named:
        centre = int((d.frame + 0.5) * ratio)
        steps[max(0, centre - 2) : centre + 3, d.joint] = 0.0
    return steps


def _discontinuity_row(conv: Conversion) -> Check:
    named = conv.discontinuities
    if not named:
        detail = "none" + (f" ({len(conv.repaired)} repaired)" if conv.repaired else "")
        return _row("joint_discontinuities", 0.0, detail)
    kinds = {d.kind for d in named}
    fixes = ",".join(name for name, kind in REPAIRS.items() if kind in kinds)
    first = "; ".join(d.describe() for d in named[:3])
    more = f"; {len(named) - 3} more" if len(named) > 3 else ""
    return _row("joint_discontinuities", float(len(named)), f"{first}{more}; --repair {fixes}")


def _argmax(steps: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(steps)), steps.shape))


def _motion_checks(conv: Conversion) -> list[Check]:
    arrays = conv.arrays
    fps = float(arrays["fps"])
    joint_pos = arrays["joint_pos"].astype(np.float64)
    ranges = joint_ranges(joint_pos)
    worst = max(ranges, key=lambda r: r.excess)
    over = [r.joint for r in ranges if r.excess > BOUNDS["joint_limit_excess"].limit]
    limit_detail = (
        f"{worst.joint}" + (f"; {len(over)} joints over the bound" if over else "")
        if worst.excess > 0.0
        else "every joint within its range"
    )
    feet = conv.foot_min_z
    pelvis = arrays["body_pos_w"][:, list(arrays["body_names"]).index("pelvis")].astype(np.float64)
    root_quat = arrays["body_quat_w"][:, list(arrays["body_names"]).index("pelvis")].astype(
        np.float64
    )
    ends = conv.source.clip_ends
    joint_steps = _within_clips(np.abs(np.diff(joint_pos, axis=0)) * fps, ends)
    joint_steps = _mask_named(joint_steps, conv.discontinuities, fps / conv.source.fps)
    airborne = _longest_run(feet > AIRBORNE_M) / fps
    joint_frame, joint_col = _argmax(joint_steps)
    joint_jump = float(joint_steps[joint_frame, joint_col])
    speed = _within_clips(np.linalg.norm(np.diff(pelvis, axis=0), axis=-1) * fps, ends)
    (root_frame,) = _argmax(speed)
    turn = _within_clips(quat.angle_between(root_quat[1:], root_quat[:-1]) * fps, ends)
    (turn_frame,) = _argmax(turn)
    return [
        _row("joint_limit_excess", worst.excess, limit_detail),
        _row("foot_height_min", float(feet.min()), f"frame {int(np.argmin(feet))}"),
        _row("airborne_max_s", airborne, f"highest lowest-foot point {float(feet.max()):.3f} m"),
        _row("root_height_min", float(pelvis[:, 2].min()), f"frame {int(np.argmin(pelvis[:, 2]))}"),
        _row("root_height_max", float(pelvis[:, 2].max()), f"frame {int(np.argmax(pelvis[:, 2]))}"),
        _row(
            "joint_speed_max",
            joint_jump,
            f"{JOINT_NAMES[joint_col]}, frames {joint_frame}-{joint_frame + 1}",
        ),
        _discontinuity_row(conv),
        _row("root_speed_max", float(speed[root_frame]), f"frames {root_frame}-{root_frame + 1}"),
        _row(
            "root_turn_rate_max", float(turn[turn_frame]), f"frames {turn_frame}-{turn_frame + 1}"
        ),
    ]


def _residual_checks(conv: Conversion) -> list[Check]:
    if not conv.residual:
        return []
    by_pos = max(conv.residual, key=lambda r: r.pos_m)
    by_ori = max(conv.residual, key=lambda r: r.ori_rad)
    bodies = len(conv.residual)
    return [
        _row("fk_residual_pos", by_pos.pos_m, f"{by_pos.body} (over {bodies} bodies)"),
        _row("fk_residual_ori", by_ori.ori_rad, f"{by_ori.body} (over {bodies} bodies)"),
    ]


def run_checks(conv: Conversion) -> list[Check]:
    """Every plausibility check of ``conv``, then the residual rows where they apply."""
    return _motion_checks(conv) + _residual_checks(conv)
