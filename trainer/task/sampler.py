"""Adaptive start-frame sampling (docs/task.md §reset): reset more often where the policy fails.

The clip's T frames are split into B = floor(T / bin_frames) + 1 bins. A row that
*terminated* (truncations do not count) at frame k adds one failure to bin
min(floor(k·B/T), B − 1); on a step with any termination the statistics move by an EMA,
F ← (1 − α)F + α·c, otherwise they stay. Start frames are drawn from p ∝ F + uniform/B.

Everything is a fixed-shape tensor op: the "any termination" test is a device-side
``torch.where``, never a host branch, so the update is sync-free and graph-capturable.

Several clips on one frame axis (``clip_ends``): each clip c of T_c frames gets its own
B_c = floor(T_c / bin_frames) + 1 bins, so no bin spans a clip boundary, and a start frame
drawn in a bin of clip c is s_c + floor((b − b_c + u)/B_c · (T_c − 1)) ≤ s_c + T_c − 2: never
a clip's last frame, so an episode starts inside one clip and its ``motion_clip_end`` comes
from that clip. One clip keeps the formulas above unchanged (the single-clip path adds no op).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["AdaptiveSampler"]


class AdaptiveSampler:
    """Failure statistics over start-frame bins and the categorical draw of start frames.

    Args:
        num_frames: T, total frames on the (concatenated) clip axis; must be ≥ 2.
        device: device of the statistics.
        bin_frames: frames per bin (50).
        alpha: EMA rate (0.001).
        uniform_ratio: uniform mix (0.1).
        kernel_size: smoothing kernel size (1 = none).
        kernel_lambda: kernel decay λ (0.8).
        start_ratio: initial F as a fraction of uniform, per bin (0).
        clip_ends: exclusive end frame of each clip on the axis (None or one entry = one
            clip); every clip must have ≥ 2 frames.
    """

    def __init__(
        self,
        num_frames: int,
        device: torch.device,
        *,
        bin_frames: int = 50,
        alpha: float = 0.001,
        uniform_ratio: float = 0.1,
        kernel_size: int = 1,
        kernel_lambda: float = 0.8,
        start_ratio: float = 0.0,
        clip_ends: Sequence[int] | None = None,
    ) -> None:
        if num_frames < 2:
            msg = f"motion has {num_frames} frames; adaptive sampling needs T >= 2"
            raise ValueError(msg)
        self.num_frames = num_frames
        ends = [num_frames] if clip_ends is None else [int(e) for e in clip_ends]
        self._multi = len(ends) > 1
        if self._multi:
            self._setup_clips(ends, bin_frames, device)
        self.num_bins = self._clip_bins if self._multi else num_frames // bin_frames + 1
        self.alpha = alpha
        self.uniform_ratio = uniform_ratio
        self.device = device
        self.failures = torch.full(
            (self.num_bins,), start_ratio / self.num_bins, dtype=torch.float32, device=device
        )  # F [B]
        weights = torch.tensor([kernel_lambda**i for i in range(kernel_size)], dtype=torch.float32)
        self._kernel = (weights / weights.sum()).to(device).view(1, 1, -1)
        self._kernel_size = kernel_size
        self._bin_ids = torch.arange(self.num_bins, device=device)

    def _setup_clips(self, ends: list[int], bin_frames: int, device: torch.device) -> None:
        """Per-bin tables of the multi-clip draw and the frame → bin table of the update."""
        starts = [0, *ends[:-1]]
        lengths = [e - s for s, e in zip(starts, ends, strict=True)]
        if ends[-1] != self.num_frames or min(lengths) < 2:
            msg = f"clip_ends {ends[:8]} must increase to T={self.num_frames} with every clip >= 2 frames"
            raise ValueError(msg)
        first, offset, count, span, frame_bin = [], [], [], [], []
        for start, length in zip(starts, lengths, strict=True):
            bins = length // bin_frames + 1
            b0 = len(first)
            first += [float(start)] * bins
            offset += [float(i) for i in range(bins)]
            count += [float(bins)] * bins
            span += [float(length - 1)] * bins
            local = torch.arange(length)
            frame_bin.append(b0 + torch.clamp(local * bins // length, max=bins - 1))
        f32 = {"dtype": torch.float32, "device": device}
        self._clip_bins = len(first)
        self._bin_start = torch.tensor(first, **f32)  # s_c of each bin's clip
        self._bin_offset = torch.tensor(offset, **f32)  # b − b_c
        self._bin_count = torch.tensor(count, **f32)  # B_c
        self._bin_span = torch.tensor(span, **f32)  # T_c − 1
        self._frame_bin = torch.cat(frame_bin).to(device)  # [T] bin of each frame

    def bin_of(self, frames: Tensor) -> Tensor:
        """Bin index min(floor(k·B/T), B − 1) of each frame (per clip with several). [N] long"""
        if self._multi:
            return self._frame_bin[frames]
        return torch.clamp(frames * self.num_bins // self.num_frames, max=self.num_bins - 1)

    def update(self, terminated: Tensor, frames: Tensor) -> None:
        """Count terminated rows per bin and apply the EMA if any row terminated (no sync)."""
        counts = torch.zeros(self.num_bins, dtype=torch.float32, device=self.device)
        counts.index_add_(0, self.bin_of(frames), terminated.to(torch.float32))  # c [B]
        blended = torch.lerp(self.failures, counts, self.alpha)
        self.failures.copy_(torch.where(terminated.any(), blended, self.failures))

    def probabilities(self) -> Tensor:
        """Sampling probabilities p ∝ smooth(F) + uniform_ratio / B. [B]"""
        stats = self.failures
        if self._kernel_size > 1:
            padded = torch.cat((stats, stats[-1:].expand(self._kernel_size - 1)))
            stats = torch.nn.functional.conv1d(padded.view(1, 1, -1), self._kernel).view(-1)
        weights = stats + self.uniform_ratio / self.num_bins
        return weights / weights.sum()

    def sample(self, num: int, generator: torch.Generator) -> Tensor:
        """Draw ``num`` start frames f = floor((bin + u)/B · (T − 1)) ≤ T − 2. [num] long

        Consumes exactly ``2·num`` uniform numbers from ``generator`` (fixed per call).
        """
        return self.frames_from(*self.draw(num, generator))

    def draw(self, num: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """The ``2·num`` uniforms :meth:`sample` consumes, ``(u_bin, u_frac)`` [num] each.

        Split from :meth:`frames_from` so a compiled caller can keep the generator draw eager
        (``torch.compile`` does not trace ``generator=``) and fuse the rest.
        """
        u_bin = torch.rand(num, generator=generator, device=self.device)
        u_frac = torch.rand(num, generator=generator, device=self.device)
        return u_bin, u_frac

    def frames_from(self, u_bin: Tensor, u_frac: Tensor) -> Tensor:
        """Start frames for the uniforms of :meth:`draw` (inverse-CDF bin, uniform in bin)."""
        cdf = torch.cumsum(self.probabilities(), 0)
        bins = torch.searchsorted(cdf, (u_bin * cdf[-1]).unsqueeze(-1), right=True).squeeze(-1)
        bins = bins.clamp(max=self.num_bins - 1)
        if self._multi:
            span = self._bin_span[bins]
            local = torch.floor((self._bin_offset[bins] + u_frac) / self._bin_count[bins] * span)
            return (self._bin_start[bins] + torch.minimum(local, span - 1.0)).long()
        frames = torch.floor((bins + u_frac) / self.num_bins * (self.num_frames - 1)).long()
        return frames.clamp(max=self.num_frames - 2)

    def diagnostics(self) -> dict[str, Tensor]:
        """Entropy −Σp ln p / ln B, top-1 probability and top-1 bin / B (device scalars)."""
        p = self.probabilities()
        entropy = -(p * torch.log(p.clamp_min(1e-30))).sum()
        norm = math.log(self.num_bins) if self.num_bins > 1 else 1.0
        top_p, top_bin = p.max(0)
        return {
            "sampler/entropy": entropy / norm if self.num_bins > 1 else torch.ones_like(entropy),
            "sampler/top1_prob": top_p,
            "sampler/top1_bin_frac": top_bin.to(torch.float32) / self.num_bins,
        }
