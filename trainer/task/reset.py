"""Reset targets: the reference at a start frame plus uniform noise (docs/task.md "Reset").

Every reset draws a fixed amount from the reset generator (start-frame uniforms, then one
uniform per noise dimension), so the masked reset of a captured step needs no host test.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainer.task.config import G1TrackingCfg
from trainer.task.math import quat_apply_inverse, quat_from_euler_xyz, quat_mul
from trainer.task.sampler import AdaptiveSampler
from trainer.task.state import TrackedState

__all__ = ["ResetNoise"]

ROOT_NOISE_DIM = 12
"""Root noise: position (3), roll/pitch/yaw (3), linear (3) and angular (3) velocity."""


class ResetNoise:
    """The reset-noise half-widths of ``cfg`` for ``num_joints`` joints, and the targets.

    Args:
        cfg: task configuration (``reset_*`` ranges).
        joint_lower, joint_upper: [J] XML joint range the noisy joint positions are clamped to.
        root: tracked-body column of the root (pelvis).
    """

    def __init__(
        self, cfg: G1TrackingCfg, joint_lower: Tensor, joint_upper: Tensor, root: int
    ) -> None:
        self.num_joints = num_joints = int(joint_lower.shape[0])
        self.dim = ROOT_NOISE_DIM + num_joints
        self._lo, self._hi, self._root = joint_lower, joint_upper, root
        self.scale = torch.as_tensor(
            (
                *cfg.reset_root_pos_range_m,
                *cfg.reset_root_rpy_range_rad,
                *cfg.reset_root_lin_vel_range,
                *cfg.reset_root_ang_vel_range,
                *([cfg.reset_joint_pos_range_rad] * num_joints),
            ),
            dtype=torch.float32,
            device=joint_lower.device,
        )  # [12 + J]

    def draw(
        self, sampler: AdaptiveSampler, num: int, generator: torch.Generator
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The generator's fixed draws of one reset: start-frame uniforms ``(u_bin, u_frac)``
        [N] each, then the noise uniforms ``u`` [N, 12 + J]."""
        u_bin, u_frac = sampler.draw(num, generator)
        u = torch.rand(num, self.dim, generator=generator, device=self.scale.device)
        return u_bin, u_frac, u

    def noiseless(self, num: int) -> tuple[Tensor, Tensor, Tensor]:
        """Draws that add no noise (``2u - 1 = 0``) for explicit start frames."""
        f32 = {"dtype": torch.float32, "device": self.scale.device}
        return (
            torch.zeros(num, **f32),
            torch.zeros(num, **f32),
            torch.full((num, self.dim), 0.5, **f32),
        )

    def targets(self, ref: TrackedState, u: Tensor) -> tuple[Tensor, Tensor]:
        """Noisy reset state of every row for the reference ``ref`` at the start frames and the
        uniforms ``u [N, 12 + J]`` (docs/task.md §reset). qpos [N, 7 + J], qvel [N, 6 + J]"""
        noise = (2.0 * u - 1.0) * self.scale  # [N, 12 + J]
        r = self._root
        root_pos = ref.body_pos_w[:, r] + noise[:, 0:3]
        q_noise = quat_from_euler_xyz(noise[:, 3], noise[:, 4], noise[:, 5])
        root_quat = quat_mul(q_noise, ref.body_quat_w[:, r])
        lin_vel = ref.body_lin_vel_w[:, r] + noise[:, 6:9]
        ang_vel_w = ref.body_ang_vel_w[:, r] + noise[:, 9:12]
        ang_vel_b = quat_apply_inverse(root_quat, ang_vel_w)  # free joint stores body frame
        joint_pos = torch.clamp(ref.joint_pos + noise[:, ROOT_NOISE_DIM:], self._lo, self._hi)
        qpos = torch.cat((root_pos, root_quat, joint_pos), dim=-1)
        qvel = torch.cat((lin_vel, ang_vel_b, ref.joint_vel), dim=-1)
        return qpos, qvel
