"""Batched rotation helpers for the tracking task (quaternions are wxyz, docs/task.md §tracked-bodies).

Every function is pure, works on any leading batch shape and allocates only its result, so
the task terms that use them stay readable one-liners and remain CUDA-graph capturable
(no host syncs, no data-dependent shapes).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "cross",
    "matrix_from_quat",
    "projected_gravity_z",
    "quat_apply",
    "quat_apply_inverse",
    "quat_conjugate",
    "quat_error_angle",
    "quat_from_euler_xyz",
    "quat_from_yaw",
    "quat_mul",
    "rot6_from_matrix",
    "rot6_from_quat",
    "yaw_from_quat",
]


def quat_mul(q1: Tensor, q2: Tensor) -> Tensor:
    """Hamilton product ``q1 ⊗ q2`` (wxyz). Shapes broadcast: ``[..., 4]``."""
    w1, x1, y1, z1 = q1.unbind(-1)
    w2, x2, y2, z2 = q2.unbind(-1)
    return torch.stack(
        (
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ),
        dim=-1,
    )


def quat_conjugate(q: Tensor) -> Tensor:
    """Conjugate (the inverse of a unit quaternion), wxyz."""
    return torch.cat((q[..., :1], -q[..., 1:]), dim=-1)


def cross(a: Tensor, b: Tensor) -> Tensor:
    """Cross product ``a × b`` over the last axis (``[..., 3]``, shapes broadcast).

    Written out per component instead of ``torch.linalg.cross``: inductor decomposes that
    into ``index_select`` with the index tensors ``(arange(3) + k) % 3``, and where it fuses
    the product into a concatenation (the reset's ``qvel``) it emits them as indirect loads
    with a device-side bounds assert on CUDA, which fired while the env compiled
    (docs/troubleshooting.md). Component arithmetic has no indexing to check.
    """
    ax, ay, az = a.unbind(-1)
    bx, by, bz = b.unbind(-1)
    return torch.stack((ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx), dim=-1)


def quat_apply(q: Tensor, v: Tensor) -> Tensor:
    """Rotate vectors ``v [..., 3]`` by unit quaternions ``q [..., 4]`` (R v)."""
    w = q[..., :1]
    xyz = q[..., 1:]
    t = 2.0 * cross(xyz, v)
    return v + w * t + cross(xyz, t)


def quat_apply_inverse(q: Tensor, v: Tensor) -> Tensor:
    """Rotate vectors by the inverse rotation (Rᵀ v)."""
    w = q[..., :1]
    xyz = -q[..., 1:]
    t = 2.0 * cross(xyz, v)
    return v + w * t + cross(xyz, t)


def matrix_from_quat(q: Tensor) -> Tensor:
    """Rotation matrices ``[..., 3, 3]`` from unit quaternions (wxyz)."""
    w, x, y, z = q.unbind(-1)
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    return torch.stack(
        (
            1 - 2 * (yy + zz),
            2 * (xy - wz),
            2 * (xz + wy),
            2 * (xy + wz),
            1 - 2 * (xx + zz),
            2 * (yz - wx),
            2 * (xz - wy),
            2 * (yz + wx),
            1 - 2 * (xx + yy),
        ),
        dim=-1,
    ).reshape(q.shape[:-1] + (3, 3))


def rot6_from_matrix(mat: Tensor) -> Tensor:
    """First two columns of R, row by row: ``(R00, R01, R10, R11, R20, R21)`` (docs/task.md §observations)."""
    return mat[..., :, :2].reshape(mat.shape[:-2] + (6,))


def rot6_from_quat(q: Tensor) -> Tensor:
    """``rot6`` of the rotation of ``q`` without building the third column."""
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        (
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
        ),
        dim=-1,
    )


def yaw_from_quat(q: Tensor) -> Tensor:
    """Yaw angle ``atan2(2(wz + xy), 1 - 2(y² + z²))`` (docs/task.md §rewards)."""
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def quat_from_yaw(yaw: Tensor) -> Tensor:
    """Rotation about world z by ``yaw`` (wxyz)."""
    half = 0.5 * yaw
    zero = torch.zeros_like(half)
    return torch.stack((torch.cos(half), zero, zero, torch.sin(half)), dim=-1)


def quat_from_euler_xyz(roll: Tensor, pitch: Tensor, yaw: Tensor) -> Tensor:
    """``Rz(yaw) · Ry(pitch) · Rx(roll)`` as a wxyz quaternion (docs/task.md §reset reset noise)."""
    cr, sr = torch.cos(0.5 * roll), torch.sin(0.5 * roll)
    cp, sp = torch.cos(0.5 * pitch), torch.sin(0.5 * pitch)
    cy, sy = torch.cos(0.5 * yaw), torch.sin(0.5 * yaw)
    return torch.stack(
        (
            cy * cp * cr + sy * sp * sr,
            cy * cp * sr - sy * sp * cr,
            cy * sp * cr + sy * cp * sr,
            sy * cp * cr - cy * sp * sr,
        ),
        dim=-1,
    )


def quat_error_angle(q1: Tensor, q2: Tensor) -> Tensor:
    """Rotation angle between two orientations: ``2·atan2(‖vec d‖, |w d|)``, d = q1⁻¹ ⊗ q2."""
    d = quat_mul(quat_conjugate(q1), q2)
    return 2.0 * torch.atan2(torch.linalg.vector_norm(d[..., 1:], dim=-1), d[..., 0].abs())


def projected_gravity_z(q: Tensor) -> Tensor:
    """z of gravity seen in the body frame, ``g(q) = 2(x² + y²) − 1`` (docs/task.md §terminations-and-truncations)."""
    return 2.0 * (q[..., 1] * q[..., 1] + q[..., 2] * q[..., 2]) - 1.0
