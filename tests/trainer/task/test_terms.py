"""Pure task terms: rotation helpers, observation layout, done split and the sampler."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.config.defaults import default_task_cfg
from trainer.task import observations as obs_terms
from trainer.task.math import (
    matrix_from_quat,
    projected_gravity_z,
    quat_apply,
    quat_apply_inverse,
    quat_error_angle,
    quat_from_euler_xyz,
    quat_from_yaw,
    quat_mul,
    rot6_from_matrix,
    rot6_from_quat,
    yaw_from_quat,
)
from trainer.task.sampler import AdaptiveSampler
from trainer.task.terminations import split_done


def _rz(angle: float) -> torch.Tensor:
    return quat_from_yaw(torch.tensor(angle))


def test_rot6_of_z_rotation_by_90_degrees_is_first_two_columns_row_by_row():
    expected = torch.tensor([0.0, -1.0, 1.0, 0.0, 0.0, 0.0])
    q = _rz(math.pi / 2)
    assert torch.allclose(rot6_from_quat(q), expected, atol=1e-6)
    assert torch.allclose(rot6_from_matrix(matrix_from_quat(q)), expected, atol=1e-6)
    assert torch.allclose(
        rot6_from_quat(torch.tensor([1.0, 0, 0, 0])), torch.tensor([1.0, 0, 0, 1, 0, 0])
    )


def test_quaternion_helpers_agree_with_rotation_matrices():
    gen = torch.Generator().manual_seed(3)
    q = torch.nn.functional.normalize(torch.randn(64, 4, generator=gen), dim=-1)
    v = torch.randn(64, 3, generator=gen)
    mat = matrix_from_quat(q)
    assert torch.allclose(quat_apply(q, v), (mat @ v[..., None])[..., 0], atol=1e-5)
    assert torch.allclose(
        quat_apply_inverse(q, v), (mat.transpose(-1, -2) @ v[..., None])[..., 0], atol=1e-5
    )
    q2 = torch.nn.functional.normalize(torch.randn(64, 4, generator=gen), dim=-1)
    assert torch.allclose(matrix_from_quat(quat_mul(q, q2)), mat @ matrix_from_quat(q2), atol=1e-5)
    assert torch.allclose(projected_gravity_z(q), -mat[:, 2, 2], atol=1e-6)
    # err is the rotation angle between the two, sign of q irrelevant.
    assert torch.allclose(quat_error_angle(q, q), torch.zeros(64), atol=1e-3)
    assert torch.allclose(quat_error_angle(q, -q), torch.zeros(64), atol=1e-3)
    assert torch.allclose(quat_error_angle(_rz(0.0), _rz(0.7)), torch.tensor(0.7), atol=1e-5)


def test_euler_noise_composes_z_then_y_then_x_and_yaw_roundtrips():
    roll, pitch, yaw = torch.tensor(0.1), torch.tensor(-0.05), torch.tensor(0.3)
    q = quat_from_euler_xyz(roll, pitch, yaw)
    rx = torch.tensor([math.cos(0.05), math.sin(0.05), 0, 0])
    ry = torch.tensor([math.cos(-0.025), 0, math.sin(-0.025), 0])
    expected = quat_mul(quat_mul(_rz(0.3), ry), rx)
    assert torch.allclose(q, expected, atol=1e-6)
    assert torch.allclose(yaw_from_quat(_rz(1.2)), torch.tensor(1.2), atol=1e-6)


def test_observation_layouts_are_contiguous_with_the_task_offsets():
    for layout, total in (
        (obs_terms.ACTOR_OBS_LAYOUT, 160),
        (obs_terms.CRITIC_OBS_LAYOUT, 289),
    ):
        offset = 0
        for _, start, width in layout:
            assert start == offset
            offset += width
        assert offset == total
    offsets = {name: start for name, start, _ in obs_terms.CRITIC_OBS_LAYOUT}
    assert offsets == {
        "command": 0,
        "motion_anchor_pos_b": 58,
        "motion_anchor_ori_b": 61,
        "base_lin_vel": 67,
        "base_ang_vel": 70,
        "joint_pos": 73,
        "joint_vel": 102,
        "actions": 131,
        "body_pos": 160,
        "body_ori": 202,
        "sac_base_lin_vel": 286,
    }


def test_actor_noise_scale_follows_the_config_per_term():
    scale = obs_terms.actor_noise_scale(default_task_cfg(), torch.device("cpu"))
    assert scale[:67].abs().sum() == 0 and scale[131:].abs().sum() == 0
    assert torch.all(scale[67:70] == 0.1) and torch.all(scale[70:73] == 0.2)
    assert torch.all(scale[73:102] == 0.01) and torch.all(scale[102:131] == 1.5)


def test_truncated_excludes_terminated_rows():
    terminal = torch.tensor([True, True, False, False])
    truncation = torch.tensor([True, False, True, False])
    terminated, truncated, done = split_done(terminal, truncation)
    assert truncated.tolist() == [False, False, True, False]
    assert done.tolist() == [True, True, True, False]
    assert not (terminated & truncated).any()


def test_max_episode_steps_is_500_for_10_seconds_at_50_hz():
    assert default_task_cfg().max_episode_steps == 500
    assert default_task_cfg().ctrl_dt == pytest.approx(0.02)


def test_sampler_is_uniform_without_failures_and_counts_one_step_of_failures():
    sampler = AdaptiveSampler(500, torch.device("cpu"))
    assert sampler.num_bins == 11
    assert torch.allclose(sampler.diagnostics()["sampler/entropy"], torch.tensor(1.0))
    before = sampler.failures.clone()
    sampler.update(torch.zeros(4, dtype=torch.bool), torch.tensor([0, 100, 200, 300]))
    assert torch.equal(sampler.failures, before)  # no termination: F unchanged
    frames = torch.tensor([100, 105, 110, 460, 5])
    terminated = torch.tensor([True, True, True, False, False])
    sampler.update(terminated, frames)
    b = int(sampler.bin_of(torch.tensor(120)))
    assert b == 120 * 11 // 500
    expected = torch.zeros(11)
    expected[b] = 0.001 * 3
    assert torch.allclose(sampler.failures, expected)
    assert sampler.diagnostics()["sampler/entropy"] < 1.0
    assert torch.allclose(sampler.diagnostics()["sampler/top1_bin_frac"], torch.tensor(b / 11))


def test_sampler_draws_stay_on_the_clip_and_consume_a_fixed_amount():
    sampler = AdaptiveSampler(120, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    frames = sampler.sample(4096, gen)
    assert int(frames.min()) >= 0 and int(frames.max()) <= 120 - 2
    a = torch.Generator().manual_seed(1)
    b = torch.Generator().manual_seed(1)
    sampler.sample(7, a)
    torch.rand(14, generator=b)
    assert torch.equal(a.get_state(), b.get_state())


def test_sampler_kernel_smoothing_pads_right_with_the_edge_value():
    sampler = AdaptiveSampler(200, torch.device("cpu"), kernel_size=3, kernel_lambda=0.5)
    sampler.failures.copy_(torch.tensor([0.0, 0.0, 0.0, 0.0, 7.0]))
    w = torch.tensor([1.0, 0.5, 0.25]) / 1.75
    smooth = torch.tensor([0.0, 0.0, 7 * w[2], 7 * (w[1] + w[2]), 7.0])
    expected = smooth + 0.1 / 5
    assert torch.allclose(sampler.probabilities(), expected / expected.sum())
