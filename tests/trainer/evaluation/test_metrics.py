"""The metric formulas of docs/evaluation.md on hand-made states and tallies."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from trainer.evaluation.metrics import (
    ERROR_NAMES,
    METRIC_NAMES,
    HostTally,
    mode_metrics,
    step_errors,
)
from trainer.sim.scene import ANCHOR_TRACKED_INDEX, EE_TRACKED_INDICES
from trainer.task.math import quat_apply, quat_from_yaw, quat_mul
from trainer.task.reference import relative_reference
from trainer.task.state import TrackedState

A = ANCHOR_TRACKED_INDEX
EE = torch.tensor(EE_TRACKED_INDICES)


def _state(rows: int = 3, seed: int = 0) -> TrackedState:
    gen = torch.Generator().manual_seed(seed)
    quat = torch.randn(rows, 14, 4, generator=gen)
    return TrackedState(
        joint_pos=torch.randn(rows, 29, generator=gen),
        joint_vel=torch.zeros(rows, 29),
        body_pos_w=torch.randn(rows, 14, 3, generator=gen),
        body_quat_w=quat / quat.norm(dim=-1, keepdim=True),
        body_lin_vel_w=torch.zeros(rows, 14, 3),
        body_ang_vel_w=torch.zeros(rows, 14, 3),
    )


def _with(state: TrackedState, **fields) -> TrackedState:
    return TrackedState(**{**state.__dict__, **fields})


def _errors(robot: TrackedState, ref: TrackedState) -> dict[str, torch.Tensor]:
    """The errors with the reference re-anchored on ``robot`` (as if it had not moved)."""
    relative = relative_reference(ref, robot.body_pos_w[:, A], robot.body_quat_w[:, A], A)
    e = step_errors(robot, ref, relative, anchor=A, ee_columns=EE)
    return dict(zip(ERROR_NAMES, e.unbind(-1), strict=True))


def test_identical_states_have_zero_error():
    ref = _state()
    for name, value in _errors(ref, ref).items():
        assert torch.allclose(value, torch.zeros(3), atol=1e-3), name


def test_a_constant_world_offset_scores_the_offset_and_nothing_relative():
    ref = _state()
    robot = _with(ref, body_pos_w=ref.body_pos_w + torch.tensor([0.0, 0.02, 0.0]))  # 20 mm
    e = _errors(robot, ref)
    for name in ("mpkpe_mm", "anchor_pos_error_mm"):
        assert torch.allclose(e[name], torch.full((3,), 20.0), atol=1e-3), name
    for name in ("r_mpkpe_mm", "end_effector_pos_error_mm"):  # re-anchored: no drift counts
        assert torch.allclose(e[name], torch.zeros(3), atol=1e-3), name


def test_turning_the_whole_body_about_the_anchor_is_free_relative_but_not_in_the_world():
    ref = _state()
    turn = quat_from_yaw(torch.full((3,), 0.7))[:, None].expand(-1, 14, -1)
    anchor = ref.body_pos_w[:, A : A + 1]
    robot = _with(
        ref,
        body_pos_w=anchor + quat_apply(turn, ref.body_pos_w - anchor),
        body_quat_w=quat_mul(turn, ref.body_quat_w),
    )
    e = _errors(robot, ref)
    assert torch.allclose(e["r_mpkpe_mm"], torch.zeros(3), atol=1e-3)
    assert (e["mpkpe_mm"] > 10).all() and torch.allclose(e["anchor_pos_error_mm"], torch.zeros(3))
    assert torch.allclose(e["anchor_ori_error_rad"], torch.full((3,), 0.7), atol=1e-5)


def test_one_body_offset_is_averaged_over_the_fourteen_bodies():
    ref = _state()
    moved = ref.body_pos_w.clone()
    moved[:, 0] += torch.tensor([0.0, 0.0, 0.14])  # pelvis 140 mm up, not an end effector
    e = _errors(_with(ref, body_pos_w=moved), ref)
    assert torch.allclose(e["mpkpe_mm"], torch.full((3,), 10.0), atol=1e-3)
    assert torch.allclose(e["r_mpkpe_mm"], torch.full((3,), 10.0), atol=1e-3)
    assert torch.allclose(e["end_effector_pos_error_mm"], torch.zeros(3), atol=1e-3)


def test_joint_error_is_the_mean_absolute_difference():
    ref = _state()
    offset = torch.zeros(29)
    offset[:10] = 0.29  # 10 of 29 joints off by 0.29 rad -> mean 0.1
    e = _errors(_with(ref, joint_pos=ref.joint_pos - offset), ref)
    assert torch.allclose(e["joint_pos_error_rad"], torch.full((3,), 0.1), atol=1e-6)


def test_joint_velocity_error_is_the_root_mean_square():
    ref = _state()
    offset = torch.zeros(29)
    offset[:4] = 2.9  # sqrt(4 * 2.9^2 / 29) = 1.077
    e = _errors(_with(ref, joint_vel=ref.joint_vel + offset), ref)
    assert torch.allclose(e["joint_vel_error_rad_s"], torch.full((3,), (4 * 2.9**2 / 29) ** 0.5))


def _tally(steps, success, errors=None, diverged=None) -> HostTally:
    steps = np.asarray(steps)
    n = steps.shape[0]
    err = np.zeros((n, len(ERROR_NAMES))) if errors is None else np.asarray(errors, float)
    return HostTally(
        error_sum=err,
        reward_sum=steps * 0.5,
        steps=steps,
        ended=np.ones(n, bool),
        success=np.asarray(success, bool),
        diverged=np.zeros(n, bool) if diverged is None else np.asarray(diverged, bool),
    )


def test_mode_metrics_by_hand():
    # Two episodes: 10 of 10 steps (success), terminated at its 4th step of 8 possible.
    errors = [[10.0 * 10, 0, 0, 0, 0, 0, 0, 0], [40.0 * 4, 0, 0, 0, 0, 0, 0, 0]]  # MPKPE 10, 40
    m = mode_metrics(_tally([10, 4], [True, False], errors), np.array([10, 8]))
    assert m["episodes"] == 2 and m["success_rate"] == 0.5
    assert m["completed_fraction"] == pytest.approx((1.0 + 3 / 8) / 2)
    assert m["mpkpe_mm"] == pytest.approx((10 + 40) / 2)  # each episode's mean, then their mean
    assert m["mean_step_reward"] == pytest.approx(0.5) and m["mean_episode_steps"] == 7.0
    assert set(m) == {"episodes", *METRIC_NAMES}


def test_a_diverged_row_makes_every_metric_of_its_mode_null():
    m = mode_metrics(_tally([3, 3], [True, True], diverged=[False, True]), np.array([3, 3]))
    assert m == {"episodes": 2, **dict.fromkeys(METRIC_NAMES)}


def test_a_non_finite_sum_is_null_not_a_number():
    errors = [[math.inf, 1, 1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1, 1, 1]]
    m = mode_metrics(_tally([2, 2], [True, True], errors), np.array([2, 2]))
    assert m["mpkpe_mm"] is None and m["r_mpkpe_mm"] == pytest.approx(0.5)


def test_metrics_of_unfinished_episodes_are_refused():
    tally = _tally([2], [False])
    tally.ended[:] = False
    with pytest.raises(ValueError, match="still running"):
        mode_metrics(tally, np.array([5]))
