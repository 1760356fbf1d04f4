"""Quaternion helpers for clip conversion (numpy, float64, wxyz, Hamilton product).

The task's torch helpers (``trainer.task.math``) run on device tensors in the hot path; these
run once per imported clip on the host and cover what conversion needs: sign continuity,
slerp, relative angles and angular velocity from a sampled orientation trajectory.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "angle_between",
    "conjugate",
    "continuous_sign",
    "multiply",
    "rotate",
    "rotvec",
    "slerp",
    "up_z",
    "world_angular_velocity",
]

_SMALL_ANGLE = 1e-12


def conjugate(q: np.ndarray) -> np.ndarray:
    """q* (the inverse of a unit quaternion). [..., 4]"""
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a ⊗ b. [..., 4]"""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        axis=-1,
    )


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """R(q)·v for unit q. [..., 3]"""
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def continuous_sign(q: np.ndarray) -> np.ndarray:
    """Flip q_k to −q_k wherever ⟨q_{k−1}, q_k⟩ < 0, so neighbours take the short arc.

    q and −q are the same rotation; a sign flip between frames would make slerp and finite
    differences go the long way round. Applied along axis 0. [T, ..., 4]
    """
    out = np.array(q, dtype=np.float64, copy=True)
    for k in range(1, out.shape[0]):
        dots = np.sum(out[k - 1] * out[k], axis=-1, keepdims=True)
        out[k] = np.where(dots < 0.0, -out[k], out[k])
    return out


def rotvec(q: np.ndarray) -> np.ndarray:
    """Rotation vector (axis · angle, angle in [0, π]) of unit q. [..., 3]"""
    q = np.where(q[..., :1] < 0.0, -q, q)  # short arc
    sin_half = np.linalg.norm(q[..., 1:], axis=-1)
    angle = 2.0 * np.arctan2(sin_half, q[..., 0])
    scale = np.where(sin_half > _SMALL_ANGLE, angle / np.maximum(sin_half, _SMALL_ANGLE), 2.0)
    return q[..., 1:] * scale[..., None]


def angle_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rotation angle of a* ⊗ b in [0, π] (sign-insensitive). [...]

    ``2·atan2(|v|, |w|)`` of the relative rotation rather than ``2·acos(⟨a, b⟩)``: acos loses
    half the digits near 0, which would turn float32 rounding into a 1e-3 rad "error".
    """
    rel = multiply(conjugate(a), b)
    return 2.0 * np.arctan2(np.linalg.norm(rel[..., 1:], axis=-1), np.abs(rel[..., 0]))


def slerp(q0: np.ndarray, q1: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Spherical interpolation from q0 (t = 0) to q1 (t = 1) along the short arc.

    Args:
        q0, q1: [N, 4] unit quaternions.
        t: [N] fractions in [0, 1].

    Returns:
        [N, 4] unit quaternions; nearly equal pairs fall back to normalised lerp.
    """
    dots = np.sum(q0 * q1, axis=-1)
    q1 = np.where(dots[:, None] < 0.0, -q1, q1)
    dots = np.abs(dots)
    theta = np.arccos(np.clip(dots, -1.0, 1.0))
    sin_theta = np.sin(theta)
    near = sin_theta < 1e-9
    safe = np.where(near, 1.0, sin_theta)
    w0 = np.where(near, 1.0 - t, np.sin((1.0 - t) * theta) / safe)
    w1 = np.where(near, t, np.sin(t * theta) / safe)
    out = w0[:, None] * q0 + w1[:, None] * q1
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def world_angular_velocity(q: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocity of an orientation trajectory sampled every ``dt``.

    Central differences ω_k = rotvec(q_{k+1} ⊗ q_{k−1}*) / 2dt inside, one-sided at the two
    ends, matching ``numpy.gradient`` on the positions. [T, 3]
    """
    q = continuous_sign(q)
    out = np.empty((q.shape[0], 3))
    out[1:-1] = rotvec(multiply(q[2:], conjugate(q[:-2]))) / (2.0 * dt)
    out[0] = rotvec(multiply(q[1], conjugate(q[0]))) / dt
    out[-1] = rotvec(multiply(q[-1], conjugate(q[-2]))) / dt
    return out


def up_z(q: np.ndarray) -> np.ndarray:
    """World z of the body z axis, 1 − 2(x² + y²): 1 upright, −1 upside down. [...]"""
    return 1.0 - 2.0 * (q[..., 1] ** 2 + q[..., 2] ** 2)
