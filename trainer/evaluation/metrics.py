"""Tracking metrics of the fixed-protocol evaluation (formulas in docs/evaluation.md).

Per step, :func:`step_errors` compares the robot with the reference of the scored frame (the
very states the reward terms saw) over the 14 tracked bodies. :class:`RowTally` sums them per
row on the device while the row is in its episode (no host sync); :func:`mode_metrics` turns
the host copy of some rows into the ``metrics`` record of ``evaluation.json``. A row whose
action or errors were ever non-finite (a diverged policy or physics) makes every metric of its
mode null: a reader treats null as a failure, never as missing data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from trainer.task.math import quat_apply_inverse, quat_error_angle, quat_from_yaw, yaw_from_quat
from trainer.task.state import TrackedState

if TYPE_CHECKING:
    from trainer.task.eval_mode import EvalStep

__all__ = [
    "ERROR_NAMES",
    "METRIC_NAMES",
    "HostTally",
    "RowTally",
    "anchor_frame_positions",
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
_MM = 1000.0


def anchor_frame_positions(state: TrackedState, anchor: int) -> Tensor:
    """Tracked-body positions relative to the anchor body, in its yaw frame. [N, B, 3]

    ``p_b^a = R_z(ψ_a)ᵀ (p_b − p_a)``, ψ_a the anchor's yaw: the pose without where the body
    stands and which way it faces, so a drift of the whole body does not count.
    """
    anchor_pos = state.body_pos_w[:, anchor : anchor + 1]  # [N, 1, 3]
    yaw = quat_from_yaw(yaw_from_quat(state.body_quat_w[:, anchor]))  # [N, 4]
    yaw = yaw.unsqueeze(1).expand(-1, state.body_pos_w.shape[1], -1)
    return quat_apply_inverse(yaw, state.body_pos_w - anchor_pos)


def step_errors(
    robot: TrackedState, reference: TrackedState, *, anchor: int, ee_columns: Tensor
) -> Tensor:
    """The :data:`ERROR_NAMES` of every row at one step. [N, 6] float32

    Args:
        robot: the robot's tracked state (14 bodies, 29 joints).
        reference: the reference at the scored frame.
        anchor: tracked-body column of the anchor (torso_link).
        ee_columns: tracked-body columns of the end effectors (ankles and wrists).
    """
    world = torch.linalg.vector_norm(robot.body_pos_w - reference.body_pos_w, dim=-1)  # [N, B]
    local = anchor_frame_positions(robot, anchor) - anchor_frame_positions(reference, anchor)
    ori = quat_error_angle(robot.body_quat_w[:, anchor], reference.body_quat_w[:, anchor])
    return torch.stack(
        (
            _MM * world.mean(-1),
            _MM * torch.linalg.vector_norm(local, dim=-1).mean(-1),
            (robot.joint_pos - reference.joint_pos).abs().mean(-1),
            _MM * world[:, anchor],
            ori,
            _MM * world.index_select(1, ee_columns).mean(-1),
        ),
        dim=-1,
    )


class RowTally:
    """Per-row sums of one rollout, on the device (float64 sums, no host sync per step)."""

    def __init__(self, num_rows: int, device: torch.device) -> None:
        f64 = {"dtype": torch.float64, "device": device}
        self.error_sum = torch.zeros(num_rows, len(ERROR_NAMES), **f64)
        self.reward_sum = torch.zeros(num_rows, **f64)
        self.steps = torch.zeros(num_rows, dtype=torch.long, device=device)
        self.ended = torch.zeros(num_rows, dtype=torch.bool, device=device)
        self.success = torch.zeros(num_rows, dtype=torch.bool, device=device)
        self.diverged = torch.zeros(num_rows, dtype=torch.bool, device=device)

    def add(self, step: EvalStep, errors: Tensor, nonfinite_action: Tensor) -> None:
        """Count one step of the rows that were in their episode.

        Args:
            step: the evaluation step (``active``, ``ended``, the env's per-row result).
            errors: :func:`step_errors` of this step. [N, 6]
            nonfinite_action: [N] bool, rows whose policy output was not finite (the
                evaluator zeroed it before the env saw it).
        """
        active, reward = step.active, step.result.reward
        finite = torch.isfinite(errors).all(-1) & torch.isfinite(reward)
        self.diverged |= active & (nonfinite_action | ~finite)
        self.error_sum += torch.where(active[:, None], errors.double(), 0.0)
        self.reward_sum += torch.where(active, reward.double(), 0.0)
        self.steps += active.long()
        self.success |= step.ended & step.result.truncated
        self.ended |= step.ended

    def to_host(self) -> HostTally:
        """One device-to-host copy of every sum."""
        return HostTally(
            error_sum=self.error_sum.cpu().numpy(),
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


def mode_metrics(tally: HostTally, possible: np.ndarray) -> dict[str, Any]:
    """The ``metrics`` record of one start mode from its rows' tallies.

    Args:
        tally: the mode's rows, every one ended.
        possible: [rows] steps each episode could last (``protocol.possible_steps``).

    Returns:
        ``episodes`` plus :data:`METRIC_NAMES`; every metric null when a row diverged.
    """
    episodes = int(tally.steps.shape[0])
    if episodes == 0 or not bool(tally.ended.all()):
        msg = f"mode_metrics needs ended episodes; {int((~tally.ended).sum())} are still running"
        raise ValueError(msg)
    out: dict[str, Any] = {"episodes": episodes}
    if bool(tally.diverged.any()):
        return out | dict.fromkeys(METRIC_NAMES)
    steps = tally.steps.astype(np.float64)
    total = float(steps.sum())
    survived = np.where(tally.success, steps, steps - 1.0)
    errors = tally.error_sum.sum(0) / total
    out["success_rate"] = _finite(tally.success.mean())
    out["completed_fraction"] = _finite(np.mean(survived / np.asarray(possible, np.float64)))
    out |= {name: _finite(v) for name, v in zip(ERROR_NAMES, errors, strict=True)}
    out["mean_step_reward"] = _finite(tally.reward_sum.sum() / total)
    out["mean_episode_steps"] = _finite(steps.mean())
    return out
