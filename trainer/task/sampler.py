"""Adaptive start-frame sampling (TASK.md §8): reset more often where the policy fails.

The clip's T frames are split into B = floor(T / bin_frames) + 1 bins. A row that
*terminated* (truncations do not count) at frame k adds one failure to bin
min(floor(k·B/T), B − 1); on a step with any termination the statistics move by an EMA,
F ← (1 − α)F + α·c, otherwise they stay. Start frames are drawn from p ∝ F + uniform/B.

Everything is a fixed-shape tensor op: the "any termination" test is a device-side
``torch.where``, never a host branch, so the update is sync-free and graph-capturable.
"""

from __future__ import annotations

import math

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
    ) -> None:
        if num_frames < 2:
            msg = f"motion has {num_frames} frames; adaptive sampling needs T >= 2"
            raise ValueError(msg)
        self.num_frames = num_frames
        self.num_bins = num_frames // bin_frames + 1
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

    def bin_of(self, frames: Tensor) -> Tensor:
        """Bin index min(floor(k·B/T), B − 1) of each frame. [N] long"""
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
