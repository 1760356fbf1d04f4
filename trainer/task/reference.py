"""The motion reference on the task device: the clip table, frames, the relative reference and
the start-frame sampler (docs/task.md "Reset" and "Rewards").

The clip becomes one ``[T, 240]`` tensor (joint pos/vel, body pos/quat/lin/ang vel of the 14
tracked columns), so the reference at any frames is one gather. The last frame of each frame's
clip gives the ``motion_clip_end`` truncation of a clip set, and the adaptive sampler draws
the start frames of resets. It lives beside the task's terms rather than in
:mod:`trainer.task.motion` (pure numpy clips and files), which imports nothing of the task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from trainer.task.math import quat_apply, quat_conjugate, quat_from_yaw, quat_mul, yaw_from_quat
from trainer.task.sampler import AdaptiveSampler
from trainer.task.state import TrackedState

if TYPE_CHECKING:
    from trainer.task.config import G1TrackingCfg
    from trainer.task.motion.clip import MotionClip

__all__ = ["MotionReference", "relative_reference"]


class MotionReference:
    """A loaded clip on ``device``: :meth:`state` gathers the reference at frames."""

    def __init__(self, clip: MotionClip, cfg: G1TrackingCfg, device: torch.device) -> None:
        self.clip = clip
        self.num_frames = num_frames = clip.num_frames
        parts = [
            torch.as_tensor(x, dtype=torch.float32, device=device).flatten(1)
            for x in (
                clip.joint_pos,
                clip.joint_vel,
                clip.body_pos_w,
                clip.body_quat_w,
                clip.body_lin_vel_w,
                clip.body_ang_vel_w,
            )
        ]
        self.table = torch.cat(parts, dim=1).contiguous()
        widths = [p.shape[1] for p in parts]
        bounds = [sum(widths[:i]) for i in range(len(widths) + 1)]
        self._slices = [slice(bounds[i], bounds[i + 1]) for i in range(len(widths))]
        ends = torch.as_tensor(clip.clip_ends, dtype=torch.long)
        clip_of = torch.bucketize(torch.arange(num_frames), ends, right=True)
        self.last_frame_of = (ends[clip_of] - 1).to(device)
        """[T] the last frame of the clip each frame belongs to."""
        self.sampler = AdaptiveSampler(
            num_frames,
            device,
            bin_frames=cfg.sampler_bin_frames,
            alpha=cfg.sampler_alpha,
            uniform_ratio=cfg.sampler_uniform_ratio,
            kernel_size=cfg.sampler_kernel_size,
            kernel_lambda=cfg.sampler_kernel_lambda,
            start_ratio=cfg.sampling_start_ratio,
            clip_ends=clip.clip_ends.tolist(),
        )

    def state(self, frames: Tensor) -> TrackedState:
        """The reference at ``frames [N]`` (one gather from the table)."""
        row = self.table.index_select(0, frames)
        jp, jv, bp, bq, bl, ba = (row[:, s] for s in self._slices)
        return TrackedState(
            joint_pos=jp,
            joint_vel=jv,
            body_pos_w=bp.unflatten(1, (-1, 3)),
            body_quat_w=bq.unflatten(1, (-1, 4)),
            body_lin_vel_w=bl.unflatten(1, (-1, 3)),
            body_ang_vel_w=ba.unflatten(1, (-1, 3)),
        )


def relative_reference(
    ref: TrackedState, robot_anchor_pos_w: Tensor, robot_anchor_quat_w: Tensor, anchor: int
) -> tuple[Tensor, Tensor]:
    """Reference body poses re-posed around the robot anchor (yaw only, z kept).

    Args:
        ref: reference at frame k.
        robot_anchor_pos_w: [N, 3] robot anchor position at the moment the reference is built.
        robot_anchor_quat_w: [N, 4] robot anchor orientation at that moment.
        anchor: tracked-body column of the anchor.

    Returns:
        ``(p̂_b [N, 14, 3], q̂_b [N, 14, 4])``.
    """
    ref_anchor_pos = ref.body_pos_w[:, anchor : anchor + 1]  # [N, 1, 3]
    ref_anchor_quat = ref.body_quat_w[:, anchor]  # [N, 4]
    delta_yaw = yaw_from_quat(quat_mul(robot_anchor_quat_w, quat_conjugate(ref_anchor_quat)))
    delta_q = quat_from_yaw(delta_yaw).unsqueeze(1)  # [N, 1, 4]
    delta_q_b = delta_q.expand_as(ref.body_quat_w)
    rotated = quat_apply(delta_q_b, ref.body_pos_w - ref_anchor_pos)  # [N, 14, 3]
    pos_xy = robot_anchor_pos_w[:, None, :2] + rotated[..., :2]
    pos = torch.cat((pos_xy, ref.body_pos_w[..., 2:3]), dim=-1)
    quat = quat_mul(delta_q_b, ref.body_quat_w)
    return pos, quat
