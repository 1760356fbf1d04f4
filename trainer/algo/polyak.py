"""The target critic's Polyak average in two launches (docs/runtime.md, "Learner profile").

``target += tau * (critic - target)`` over ~2.4M values, four times per cycle. As multi-tensor
foreach ops it is three passes over every value, split across several launches per update;
``_foreach_lerp_`` with a device weight falls back to one kernel per parameter. Here the
target's parameters are views into one flat buffer, the critic's values are gathered into a
second flat buffer (one multi-tensor copy), and the update is one ``lerp_`` of the two buffers.

The critic's own parameters are left where they are: the compiled norm control mutates them
in place, and parameters that alias one storage would send it through AOTAutograd's slower
path for aliased, mutated inputs.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

ALIGN_ELEMENTS = 16
"""Every view starts on a 64-byte boundary of the buffer (fp32), as a separate allocation would."""


def module_tensors(module: nn.Module) -> list[Tensor]:
    """Parameters then buffers, in registration order (two copies of one module align)."""
    return [p.data for p in module.parameters()] + list(module.buffers())


def _padded(count: int) -> int:
    return count + (-count % ALIGN_ELEMENTS)


def flat_size(like: list[Tensor]) -> int:
    """Elements of a buffer that holds ``like`` at aligned offsets (:func:`flat_views`)."""
    return sum(_padded(t.numel()) for t in like)


def flat_views(buffer: Tensor, like: list[Tensor]) -> list[Tensor]:
    """Views of ``buffer`` shaped like ``like``, each at an ``ALIGN_ELEMENTS``-aligned offset."""
    views, offset = [], 0
    for tensor in like:
        views.append(buffer[offset : offset + tensor.numel()].view(tensor.shape))
        offset += _padded(tensor.numel())
    return views


class PolyakTarget:
    """Moves ``target``'s parameters ``tau`` of the way to ``source``'s: one multi-tensor
    gather of ``source`` into a flat buffer, then one ``lerp_`` of the two flat buffers.

    On construction the target's parameters are re-seated as views into one zero-padded fp32
    buffer (their values and the ``Parameter`` objects are kept, so ``state_dict``,
    ``load_state_dict`` and in-place copies work as before).
    """

    def __init__(self, source: nn.Module, target: nn.Module) -> None:
        self.source_params = [p.data for p in source.parameters()]
        target_params = list(target.parameters())
        shapes = [tuple(p.shape) for p in target_params]
        if shapes != [tuple(p.shape) for p in self.source_params]:
            raise ValueError("the Polyak target must have the source's parameter shapes")
        if any(p.dtype != torch.float32 for p in target_params + self.source_params):
            raise ValueError("the Polyak target and source must be fp32")
        device = target_params[0].device
        size = flat_size(self.source_params)
        self.target_buffer = torch.zeros(size, dtype=torch.float32, device=device)
        for param, view in zip(
            target_params, flat_views(self.target_buffer, target_params), strict=True
        ):
            view.copy_(param.data)
            param.data = view
        self.source_buffer = torch.zeros(size, dtype=torch.float32, device=device)
        self._source_views = flat_views(self.source_buffer, self.source_params)

    @torch.no_grad()
    def update(self, tau: Tensor) -> None:
        """``target += tau * (source - target)`` (``lerp``'s formula for ``tau < 0.5``);
        ``tau`` is a 0-dim device tensor, so a captured graph reads its current value."""
        torch._foreach_copy_(self._source_views, self.source_params)
        self.target_buffer.lerp_(self.source_buffer, tau)
