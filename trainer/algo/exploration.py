"""Repeated-noise exploration (docs/flashsac.md §exploration), all state on device, no host syncs.

Each env keeps a noise vector eps, a counter c and a target k. At every inference call,
``done | c <= 0 | c >= k`` redraws eps ~ N(0, I) and k ~ truncated zeta and resets c; the
action is ``tanh(mu + sigma * eps)`` and c grows by one. A noise vector therefore lasts k
steps or until the episode ends. Fresh draws happen for all envs and are selected with
``torch.where`` so that the step has a fixed shape and can live in a CUDA graph.
"""

from __future__ import annotations

import torch
from torch import Tensor


def zeta_cdf(mu: float, max_repeat: int, device: torch.device | str = "cpu") -> Tensor:
    """CDF of ``P(k) ∝ k^-mu`` on 1..max_repeat, fp32 ``[max_repeat]``; the last entry is exactly 1."""
    k = torch.arange(1, max_repeat + 1, dtype=torch.float64)
    p = k.pow(-mu)
    cdf = (p / p.sum()).cumsum(0)
    cdf[-1] = 1.0  # U < 1 never passes the last entry, so k <= max_repeat
    return cdf.to(device=device, dtype=torch.float32)


def draw_repeats(uniform: Tensor, cdf: Tensor) -> Tensor:
    """``k = 1 + #{j: cdf_j < U}`` for ``uniform [N]`` in [0, 1) -> int32 ``[N]``."""
    return 1 + (cdf < uniform.unsqueeze(-1)).sum(-1, dtype=torch.int32)


class RepeatedNoise:
    """Per-env repeated Gaussian noise of ``num_envs x action_dim``."""

    def __init__(
        self,
        num_envs: int,
        action_dim: int,
        *,
        zeta_mu: float,
        max_repeat: int,
        device: torch.device | str,
    ) -> None:
        self.device = torch.device(device)
        self.cdf = zeta_cdf(zeta_mu, max_repeat, self.device)
        self.eps = torch.zeros(num_envs, action_dim, device=self.device)
        self.count = torch.zeros(num_envs, dtype=torch.int32, device=self.device)
        self.target = torch.zeros(num_envs, dtype=torch.int32, device=self.device)

    @torch.no_grad()
    def step(self, done: Tensor) -> Tensor:
        """Advance one inference call; returns the ``[N, A]`` noise to use now (a state view)."""
        reset = done.bool() | (self.count <= 0) | (self.count >= self.target)  # [N]
        fresh = torch.randn_like(self.eps)
        repeats = draw_repeats(torch.rand(self.count.shape, device=self.device), self.cdf)
        self.eps.copy_(torch.where(reset.unsqueeze(-1), fresh, self.eps))
        self.target.copy_(torch.where(reset, repeats, self.target))
        self.count.copy_(torch.where(reset, torch.ones_like(self.count), self.count + 1))
        return self.eps

    def tensors(self) -> list[Tensor]:
        """The state tensors (for snapshots around graph warm-up)."""
        return [self.eps, self.count, self.target]

    def state_dict(self) -> dict[str, Tensor]:
        return {"eps": self.eps.clone(), "count": self.count.clone(), "target": self.target.clone()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        for key in ("eps", "count", "target"):
            getattr(self, key).copy_(state[key])
