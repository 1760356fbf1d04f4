"""Norm control of FlashSAC networks (docs/flashsac.md §norm-control).

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
_EPS_HYPOT = 1e-4  # sqrt of the 1e-8 under the square root


_EPS_CACHE: dict[torch.device, Tensor] = {}


def _eps_hypot(device: torch.device) -> Tensor:
    # Created on first use (construction, outside any graph capture) and reused.
    eps = _EPS_CACHE.get(device)
    if eps is None:
        eps = _EPS_CACHE[device] = torch.tensor(_EPS_HYPOT, device=device)
    return eps


def prepare_device(device: torch.device) -> None:
    """Create the device's constant now, so a compiled or captured plan never creates it."""
    _eps_hypot(device)


@torch.no_grad()
def renormalize_rows_(weight: Tensor) -> Tensor:
    """Divide each output row (last axis = input) by ``max(||row||_2, 1e-8)``, in place."""
    norm = torch.linalg.vector_norm(weight, dim=-1, keepdim=True)
    return weight.div_(norm.clamp_(min=_EPS_ROW))


@torch.no_grad()
def renormalize_affine_(affine: Tensor) -> Tensor:
    """Scale ``affine = [gamma; beta]`` (``[2, ..., d]``) per member to norm sqrt(d).

    The joint factor is ``sqrt(d)/sqrt(sum gamma^2 + sum beta^2 + 1e-8)``.
    """
    d = affine.shape[-1]
    dims = (0, affine.dim() - 1)
    norm = torch.linalg.vector_norm(affine, dim=dims, keepdim=True)
    # hypot(n, 1e-4) = sqrt(n^2 + 1e-8), in one kernel
    return affine.div_(torch.hypot(norm, _eps_hypot(norm.device)).div_(math.sqrt(d)))


@torch.no_grad()
def renormalize_gain_(gain: Tensor) -> Tensor:
    """Scale an RMSNorm gain (``[..., d]``) to norm sqrt(d): ``g * sqrt(d)/sqrt(sum g^2 + 1e-8)``."""
    d = gain.shape[-1]
    norm = torch.linalg.vector_norm(gain, dim=-1, keepdim=True)
    return gain.div_(torch.hypot(norm, _eps_hypot(norm.device)).div_(math.sqrt(d)))


@dataclass
class RenormPlan:
    """The tensors of one network that docs/flashsac.md §norm-control renormalises, collected once.

    Attributes:
        rows: linear weights ``[..., out, in]`` (trunk and heads).
        affines: ``[gamma; beta]`` of every BN, ``[2, ..., d]``.
        gains: RMSNorm gains ``[..., d]``.
    """

    rows: list[Tensor] = field(default_factory=list)
    affines: list[Tensor] = field(default_factory=list)
    gains: list[Tensor] = field(default_factory=list)

    @torch.no_grad()
    def apply(self) -> None:
        """Renormalise everything in place (idempotent up to rounding)."""
        for weight in self.rows:
            renormalize_rows_(weight)
        for affine in self.affines:
            renormalize_affine_(affine)
        for gain in self.gains:
            renormalize_gain_(gain)
