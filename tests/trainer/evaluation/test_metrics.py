"""The metric formulas of docs/evaluation.md on hand-made states and tallies."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from trainer.evaluation.metrics import (
    ERROR_NAMES,
    FAILURE_FRAMES_FIELD,
    JOINT_ERROR_FIELD,
    METRIC_NAMES,
    HostTally,
    RowTally,
    failure_frames,
    joint_errors,
    mode_metrics,
    step_errors,
)
from trainer.sim.scene import ANCHOR_TRACKED_INDEX, EE_TRACKED_INDICES, JOINT_NAMES
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


def test_joint_errors_are_per_joint_and_average_to_the_joint_error():
    ref = _state()
    offset = torch.zeros(29)
    offset[JOINT_NAMES.index("right_ankle_roll_joint")] = -0.3
    robot = _with(ref, joint_pos=ref.joint_pos + offset)
    per_joint = joint_errors(robot, ref)
    assert per_joint.shape == (3, 29)
    assert torch.allclose(per_joint, offset.abs().expand(3, -1), atol=1e-6)
    assert torch.allclose(per_joint.mean(-1), _errors(robot, ref)["joint_pos_error_rad"])


def test_joint_velocity_error_is_the_root_mean_square():
    ref = _state()
    offset = torch.zeros(29)
    offset[:4] = 2.9  # sqrt(4 * 2.9^2 / 29) = 1.077
    e = _errors(_with(ref, joint_vel=ref.joint_vel + offset), ref)
    assert torch.allclose(e["joint_vel_error_rad_s"], torch.full((3,), (4 * 2.9**2 / 29) ** 0.5))


def _tally(steps, success, errors=None, diverged=None, joints=None) -> HostTally:
    steps = np.asarray(steps)
    n = steps.shape[0]
    err = np.zeros((n, len(ERROR_NAMES))) if errors is None else np.asarray(errors, float)
    return HostTally(
        error_sum=err,
        joint_error_sum=np.zeros((n, 29)) if joints is None else np.asarray(joints, float),
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
    assert set(m) == {"episodes", *METRIC_NAMES, JOINT_ERROR_FIELD}


def test_per_joint_errors_are_episode_means_then_their_mean_keyed_by_joint_name():
    joints = np.zeros((2, 29))
    joints[0, 5] = 0.2 * 10  # episode 1: joint 5 off by 0.2 rad for its 10 steps
    joints[1, 5], joints[1, 28] = 0.6 * 4, 0.29 * 4  # episode 2: 0.6 and 0.29 for 4 steps
    m = mode_metrics(_tally([10, 4], [True, False], joints=joints), np.array([10, 8]))
    by_joint = m[JOINT_ERROR_FIELD]
    assert list(by_joint) == list(JOINT_NAMES)  # the model's names, in its order
    assert all(type(v) is float for v in by_joint.values())
    assert by_joint[JOINT_NAMES[5]] == pytest.approx((0.2 + 0.6) / 2)
    assert by_joint[JOINT_NAMES[28]] == pytest.approx(0.29 / 2)
    assert sum(v for i, v in enumerate(by_joint.values()) if i not in (5, 28)) == 0.0


def test_the_mean_of_the_per_joint_errors_is_the_joint_error():
    """Through the device tally: episodes of different lengths (rows leave at different
    steps), random joint errors; the two means agree to float32 rounding."""
    rows, gen = 5, torch.Generator().manual_seed(7)
    lengths = torch.tensor([1, 3, 4, 7, 7])
    tally = RowTally(rows, torch.device("cpu"))
    for t in range(int(lengths.max())):
        ref = _state(rows, seed=100 + t)
        robot = _with(ref, joint_pos=ref.joint_pos + torch.randn(rows, 29, generator=gen))
        relative = relative_reference(ref, robot.body_pos_w[:, A], robot.body_quat_w[:, A], A)
        result = SimpleNamespace(reward=torch.ones(rows), truncated=torch.ones(rows, dtype=bool))
        step = SimpleNamespace(active=t < lengths, ended=t == lengths - 1, result=result)
        errors = step_errors(robot, ref, relative, anchor=A, ee_columns=EE)
        tally.add(step, errors, joint_errors(robot, ref), torch.zeros(rows, dtype=bool))
    m = mode_metrics(tally.to_host(), lengths.numpy())
    assert m["episodes"] == rows and m["success_rate"] == 1.0 and m["joint_pos_error_rad"] > 0.5
    mean = sum(m[JOINT_ERROR_FIELD].values()) / 29
    assert mean == pytest.approx(m["joint_pos_error_rad"], rel=1e-6)


def test_a_diverged_row_makes_every_metric_of_its_mode_null():
    m = mode_metrics(_tally([3, 3], [True, True], diverged=[False, True]), np.array([3, 3]))
    assert m == {"episodes": 2, **dict.fromkeys(METRIC_NAMES), JOINT_ERROR_FIELD: None}


def test_failure_frames_are_the_frames_the_failed_episodes_ended_on():
    # Starts 0, 30, 60 and 90; the second and fourth terminated at their 4th and 1st step
    # (the step that scores start + steps - 1), the others succeeded.
    tally = _tally([50, 4, 20, 1], [True, False, True, False])
    m = mode_metrics(tally, np.array([50, 50, 20, 10]), starts=np.array([0, 30, 60, 90]))
    assert m[FAILURE_FRAMES_FIELD] == [33, 90]
    assert all(type(f) is int for f in m[FAILURE_FRAMES_FIELD])
    assert len(m[FAILURE_FRAMES_FIELD]) == round(m["episodes"] * (1 - m["success_rate"]))
    assert failure_frames(_tally([9, 3], [False, False]), np.array([5, 0])) == [2, 13]  # ascending
    diverged = _tally([3, 2], [True, False], diverged=[False, True])
    m = mode_metrics(diverged, np.array([3, 3]), starts=np.array([10, 20]))
    assert m[FAILURE_FRAMES_FIELD] == [21] and m["success_rate"] is None  # frames survive nulls
    assert FAILURE_FRAMES_FIELD not in mode_metrics(tally, np.array([50, 50, 20, 10]))


def test_a_non_finite_sum_is_null_not_a_number():
    errors = [[math.inf, 1, 1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1, 1, 1]]
    m = mode_metrics(_tally([2, 2], [True, True], errors), np.array([2, 2]))
    assert m["mpkpe_mm"] is None and m["r_mpkpe_mm"] == pytest.approx(0.5)


def test_metrics_of_unfinished_episodes_are_refused():
    tally = _tally([2], [False])
    tally.ended[:] = False
    with pytest.raises(ValueError, match="still running"):
        mode_metrics(tally, np.array([5]))
