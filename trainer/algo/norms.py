"""Norm control of FlashSAC networks (FLASHSAC.md §2).

Applied under no-grad at construction and after every optimizer step of that network:
linear weights get unit rows, every BN's ``[gamma; beta]`` gets norm sqrt(d) per member,
RMSNorm gains get norm sqrt(d). Head biases, log alpha, BN buffers and target parameters
are never touched. All maths is in place, so parameter addresses (and CUDA graphs) hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

_EPS_ROW = 1e-8
_EPS_SQ = 1e-8


@torch.no_grad()
def renormalize_rows_(weight: Tensor) -> Tensor:
    """Divide each output row (last axis = input) by ``max(||row||_2, 1e-8)``, in place."""
    norm = torch.linalg.vector_norm(weight, dim=-1, keepdim=True)
    return weight.div_(norm.clamp_(min=_EPS_ROW))


@torch.no_grad()
def renormalize_affine_(gamma: Tensor, beta: Tensor) -> None:
    """Scale ``gamma`` and ``beta`` (``[..., d]``) by ``sqrt(d)/sqrt(sum g^2 + sum b^2 + 1e-8)``."""
    d = gamma.shape[-1]
    sq = gamma.square().sum(-1, keepdim=True) + beta.square().sum(-1, keepdim=True)
    factor = (sq + _EPS_SQ).rsqrt_().mul_(math.sqrt(d))
    gamma.mul_(factor)
    beta.mul_(factor)


@torch.no_grad()
def renormalize_gain_(gain: Tensor) -> Tensor:
    """Scale an RMSNorm gain (``[..., d]``) to norm sqrt(d): ``g * sqrt(d)/sqrt(sum g^2 + 1e-8)``."""
    d = gain.shape[-1]
    factor = (gain.square().sum(-1, keepdim=True) + _EPS_SQ).rsqrt_().mul_(math.sqrt(d))
    return gain.mul_(factor)


@dataclass
class RenormPlan:
    """The tensors of one network that §2 renormalises, collected once.

    Attributes:
        rows: linear weights ``[..., out, in]`` (trunk and heads).
        affines: ``(gamma, beta)`` pairs of every BN, ``[..., d]`` each.
        gains: RMSNorm gains ``[..., d]``.
    """

    rows: list[Tensor] = field(default_factory=list)
    affines: list[tuple[Tensor, Tensor]] = field(default_factory=list)
    gains: list[Tensor] = field(default_factory=list)

    @torch.no_grad()
    def apply(self) -> None:
        """Renormalise everything in place (idempotent up to rounding)."""
        for weight in self.rows:
            renormalize_rows_(weight)
        for gamma, beta in self.affines:
            renormalize_affine_(gamma, beta)
        for gain in self.gains:
            renormalize_gain_(gain)
