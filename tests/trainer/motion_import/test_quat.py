"""Quaternion helpers of the importer against closed forms (wxyz, Hamilton)."""

from __future__ import annotations

import numpy as np

from trainer.motion_import import quat


def _axis_angle(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    axis = axis / np.linalg.norm(axis)
    half = 0.5 * np.asarray(angle, dtype=np.float64)[..., None]
    return np.concatenate((np.cos(half), np.sin(half) * axis), axis=-1)


AXIS = np.array([0.3, -0.5, 0.8])


def test_slerp_follows_a_constant_rotation_whatever_the_signs() -> None:
    q0, q1 = _axis_angle(AXIS, 0.2), _axis_angle(AXIS, 1.4)
    t = np.array([0.0, 0.25, 0.5, 1.0])
    want = _axis_angle(AXIS, 0.2 + 1.2 * t)
    got = quat.slerp(np.tile(q0, (4, 1)), np.tile(-q1, (4, 1)), t)  # −q1: same rotation
    assert quat.angle_between(got, want).max() < 1e-12


def test_continuous_sign_removes_flips_only() -> None:
    q = _axis_angle(AXIS, np.linspace(0.0, 3.0, 7))
    flipped = q * np.array([1, -1, 1, -1, -1, 1, -1])[:, None]
    np.testing.assert_allclose(quat.continuous_sign(flipped), q, atol=1e-15)


def test_world_angular_velocity_of_a_uniform_rotation_is_exact() -> None:
    rate, dt = 2.5, 0.02
    q = _axis_angle(AXIS, rate * dt * np.arange(50))
    want = rate * AXIS / np.linalg.norm(AXIS)
    np.testing.assert_allclose(
        quat.world_angular_velocity(q, dt), np.tile(want, (50, 1)), atol=1e-9
    )


def test_angle_between_is_accurate_near_zero_and_sign_blind() -> None:
    a = _axis_angle(AXIS, 0.7)
    b = quat.multiply(a, _axis_angle(np.array([1.0, 0, 0]), 1e-7))
    assert abs(float(quat.angle_between(a, b)) - 1e-7) < 1e-12
    assert abs(float(quat.angle_between(a, -b)) - 1e-7) < 1e-12


def test_rotate_and_up_z() -> None:
    q = _axis_angle(np.array([1.0, 0, 0]), np.pi / 2)  # roll 90°: body z → world −y
    np.testing.assert_allclose(quat.rotate(q, np.array([0.0, 0, 1])), [0, -1, 0], atol=1e-12)
    assert abs(float(quat.up_z(q))) < 1e-12
    assert float(quat.up_z(np.array([1.0, 0, 0, 0]))) == 1.0
