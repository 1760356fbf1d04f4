"""Tracking metrics of the fixed-protocol evaluation (formulas in docs/evaluation.md).

Per step, :func:`step_errors` compares the post-step robot with the reference of the scored
frame and with that reference re-anchored on the pre-step robot (root position and yaw: the
very states the reward terms saw) over the 14 tracked bodies, as mjlab 1.6.0's evaluation
does. :class:`RowTally` sums them per row on the device while the row is in its episode (no
host sync); :func:`mode_metrics` turns the host copy of some rows into the ``metrics`` record
of ``evaluation.json``: each error is a mean over an episode's steps, then a mean over the
episodes (mjlab's order). The joint position error is also tallied joint by joint
(:func:`joint_errors`, :data:`JOINT_ERROR_FIELD`): the same means over the same steps, one
per joint, so the mean of the 29 equals ``joint_pos_error_rad`` up to float rounding. A row
whose action or errors were ever non-finite (a diverged policy or physics) makes every metric
of its mode null: a reader treats null as a failure, never as missing data. Where on the clip
the failed episodes ended is kept exactly (:data:`FAILURE_FRAMES_FIELD`): a success rate says
how many episodes failed, the frames say where, e.g. all at one glitch of the reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from contracts.evaluation_text import FAILURE_FRAMES_FIELD
from trainer.sim.scene import JOINT_NAMES
from trainer.task.math import quat_error_angle
from trainer.task.state import TrackedState

if TYPE_CHECKING:
    from trainer.task.eval_mode import EvalStep

__all__ = [
    "ERROR_NAMES",
    "FAILURE_FRAMES_FIELD",
    "JOINT_ERROR_FIELD",
    "METRIC_NAMES",
    "HostTally",
    "RowTally",
    "joint_errors",
    "mode_metrics",
    "step_errors",
]

ERROR_NAMES: tuple[str, ...] = (
    "mpkpe_mm",
    "r_mpkpe_mm",
    "joint_pos_error_rad",
    "anchor_pos_error_mm",
    "anchor_ori_error_rad",
    "end_effector_pos_error_mm",
    "joint_vel_error_rad_s",
    "end_effector_ori_error_rad",
)
"""Per-step errors, in :func:`step_errors` column order (means over all steps of a mode)."""
METRIC_NAMES: tuple[str, ...] = (
    "success_rate",
    "completed_fraction",
    *ERROR_NAMES,
    "mean_step_reward",
    "mean_episode_steps",
)
"""The metrics of one start mode, besides ``episodes`` (schemas/evaluation.v1.json)."""
JOINT_ERROR_FIELD = "joint_pos_error_rad_by_joint"
"""The per-joint breakdown of ``joint_pos_error_rad`` in a mode's metrics: ``{joint name: rad}``
over :data:`~trainer.sim.scene.JOINT_NAMES`, in their order (not a scalar, so not in
:data:`METRIC_NAMES` and no ``Eval/*`` tag)."""
_MM = 1000.0


def joint_errors(robot: TrackedState, reference: TrackedState) -> Tensor:
    """``|θ_j − θ*_j|`` of every row and joint at one step, in JOINT_NAMES order. [N, 29]"""
    return (robot.joint_pos - reference.joint_pos).abs()


def step_errors(
    robot: TrackedState,
    reference: TrackedState,
    relative: tuple[Tensor, Tensor],
    *,
    anchor: int,
    ee_columns: Tensor,
) -> Tensor:
    """The :data:`ERROR_NAMES` of every row at one step. [N, 8] float32

    Args:
        robot: the robot's tracked state after the step (14 bodies, 29 joints).
        reference: the reference at the scored frame.
        relative: ``(positions [N, 14, 3], orientations [N, 14, 4])`` of that reference
            re-anchored on the robot before the step (the reward's relative reference).
        anchor: tracked-body column of the anchor (torso_link).
        ee_columns: tracked-body columns of the end effectors (ankles and wrists).
    """
    rel_pos, rel_quat = relative
    world = torch.linalg.vector_norm(robot.body_pos_w - reference.body_pos_w, dim=-1)  # [N, B]
    local = torch.linalg.vector_norm(rel_pos - robot.body_pos_w, dim=-1)  # [N, B]
    ori = quat_error_angle(robot.body_quat_w[:, anchor], reference.body_quat_w[:, anchor])
    ee_ori = quat_error_angle(
        rel_quat.index_select(1, ee_columns), robot.body_quat_w.index_select(1, ee_columns)
    )
    joint_vel = (reference.joint_vel - robot.joint_vel).square().mean(-1).sqrt()
    return torch.stack(
        (
            _MM * world.mean(-1),
            _MM * local.mean(-1),
            joint_errors(robot, reference).mean(-1),
            _MM * world[:, anchor],
            ori,
            _MM * local.index_select(1, ee_columns).mean(-1),
            joint_vel,
            ee_ori.mean(-1),
        ),
        dim=-1,
    )


class RowTally:
    """Per-row sums of one rollout, on the device (float64 sums, no host sync per step)."""

    def __init__(self, num_rows: int, device: torch.device) -> None:
        f64 = {"dtype": torch.float64, "device": device}
        self.error_sum = torch.zeros(num_rows, len(ERROR_NAMES), **f64)
        self.joint_error_sum = torch.zeros(num_rows, len(JOINT_NAMES), **f64)
        self.reward_sum = torch.zeros(num_rows, **f64)
        self.steps = torch.zeros(num_rows, dtype=torch.long, device=device)
        self.ended = torch.zeros(num_rows, dtype=torch.bool, device=device)
        self.success = torch.zeros(num_rows, dtype=torch.bool, device=device)
        self.diverged = torch.zeros(num_rows, dtype=torch.bool, device=device)

    def add(self, step: EvalStep, errors: Tensor, joints: Tensor, nonfinite_action: Tensor) -> None:
        """Count one step of the rows that were in their episode.

        Args:
            step: the evaluation step (``active``, ``ended``, the env's per-row result).
            errors: :func:`step_errors` of this step. [N, 8]
            joints: :func:`joint_errors` of this step. [N, 29]
            nonfinite_action: [N] bool, rows whose policy output was not finite (the
                evaluator zeroed it before the env saw it).
        """
        active, reward = step.active, step.result.reward
        finite = torch.isfinite(errors).all(-1) & torch.isfinite(reward)
        self.diverged |= active & (nonfinite_action | ~finite)
        self.error_sum += torch.where(active[:, None], errors.double(), 0.0)
        self.joint_error_sum += torch.where(active[:, None], joints.double(), 0.0)
        self.reward_sum += torch.where(active, reward.double(), 0.0)
        self.steps += active.long()
        self.success |= step.ended & step.result.truncated
        self.ended |= step.ended

    def to_host(self) -> HostTally:
        """One device-to-host copy of every sum."""
        return HostTally(
            error_sum=self.error_sum.cpu().numpy(),
            joint_error_sum=self.joint_error_sum.cpu().numpy(),
            reward_sum=self.reward_sum.cpu().numpy(),
            steps=self.steps.cpu().numpy(),
            ended=self.ended.cpu().numpy(),
            success=self.success.cpu().numpy(),
            diverged=self.diverged.cpu().numpy(),
        )


@dataclass(frozen=True)
class HostTally:
    """:class:`RowTally` on the host (NumPy), for some rows."""

    error_sum: np.ndarray
    joint_error_sum: np.ndarray
    reward_sum: np.ndarray
    steps: np.ndarray
    ended: np.ndarray
    success: np.ndarray
    diverged: np.ndarray

    def rows(self, index: Any) -> HostTally:
        """The tally of the rows ``index`` selects."""
        return HostTally(*(getattr(self, f)[index] for f in self.__dataclass_fields__))

    @staticmethod
    def concat(parts: list[HostTally]) -> HostTally:
        fields = HostTally.__dataclass_fields__
        return HostTally(*(np.concatenate([getattr(p, f) for p in parts]) for f in fields))


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def failure_frames(tally: HostTally, starts: np.ndarray) -> list[int]:
    """:data:`FAILURE_FRAMES_FIELD` of some ended rows that started at clip frames ``starts``:
    the clip frame each failed row ended on, the one its terminating step scored (start frame
    + steps − 1), ascending. Not a scalar, so not in :data:`METRIC_NAMES`; never null (a frame
    is an integer even when a diverged row nulls the metrics)."""
    failed = ~tally.success
    ends = np.asarray(starts, dtype=np.int64)[failed] + tally.steps[failed] - 1
    return sorted(int(frame) for frame in ends)


def mode_metrics(
    tally: HostTally, possible: np.ndarray, *, starts: np.ndarray | None = None
) -> dict[str, Any]:
    """The ``metrics`` record of one start mode from its rows' tallies.

    Args:
        tally: the mode's rows, every one ended.
        possible: [rows] steps each episode could last (``protocol.possible_steps``).
        starts: [rows] the clip frame each episode started on; with it the record has
            :data:`FAILURE_FRAMES_FIELD` (the runner leaves it out of a clip set's aggregate,
            whose frames belong to different clips).

    Returns:
        ``episodes`` plus :data:`METRIC_NAMES` and :data:`JOINT_ERROR_FIELD`; every metric
        (the per-joint object included) null when a row diverged.
    """
    episodes = int(tally.steps.shape[0])
    if episodes == 0 or not bool(tally.ended.all()):
        msg = f"mode_metrics needs ended episodes; {int((~tally.ended).sum())} are still running"
        raise ValueError(msg)
    out: dict[str, Any] = {"episodes": episodes}
    if starts is not None:
        out[FAILURE_FRAMES_FIELD] = failure_frames(tally, starts)
    if bool(tally.diverged.any()):
        return out | dict.fromkeys((*METRIC_NAMES, JOINT_ERROR_FIELD))
    steps = tally.steps.astype(np.float64)
    total = float(steps.sum())
    survived = np.where(tally.success, steps, steps - 1.0)
    lengths = np.maximum(steps, 1.0)[:, None]
    errors = (tally.error_sum / lengths).mean(0)
    joints = (tally.joint_error_sum / lengths).mean(0)
    out["success_rate"] = _finite(tally.success.mean())
    out["completed_fraction"] = _finite(np.mean(survived / np.asarray(possible, np.float64)))
    out |= {name: _finite(v) for name, v in zip(ERROR_NAMES, errors, strict=True)}
    out[JOINT_ERROR_FIELD] = {name: _finite(v) for name, v in zip(JOINT_NAMES, joints, strict=True)}
    out["mean_step_reward"] = _finite(tally.reward_sum.sum() / total)
    out["mean_episode_steps"] = _finite(steps.mean())
    return out
