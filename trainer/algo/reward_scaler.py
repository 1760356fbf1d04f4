"""Return-based reward scaling (docs/flashsac.md §reward-scaling), on device, fp32.

Per env a discounted return ``G <- gamma (1 - done) G + r`` runs over committed ticks in
commit order; its running mean/variance (Chan's merge of the N values of each tick) and the
largest ``|G|`` seen give the scale ``D = max(sqrt(var + 1e-8), G_max / g_max)``. With a
``horizon`` of H ticks the moments' count stops at H·N, so each new tick weighs at least 1/H
and the moments follow the current policy's returns instead of the whole run's. The replay
keeps raw rewards; the learner divides by D, fixed for a whole update cycle.
"""

from __future__ import annotations

import torch
from torch import Tensor


class RewardScaler:
    """Running return statistics of ``num_envs`` envs (all state 0-dim/1-dim fp32 tensors)."""

    def __init__(
        self,
        num_envs: int,
        *,
        gamma: float,
        g_max: float,
        device: torch.device | str,
        horizon: int | None = None,
    ) -> None:
        self.num_envs = num_envs
        self.gamma = float(gamma)
        self.g_max = float(g_max)
        self.max_count = None if horizon is None else float(horizon * num_envs)
        self.device = torch.device(device)
        f32 = {"dtype": torch.float32, "device": self.device}
        self.returns = torch.zeros(num_envs, **f32)  # [N] G
        self.mean = torch.zeros((), **f32)
        self.var = torch.ones((), **f32)
        self.count = torch.full((), 1e-4, **f32)
        self.max_abs_return = torch.zeros((), **f32)

    @torch.no_grad()
    def fold(self, reward: Tensor, done: Tensor) -> None:
        """Fold complete ticks in commit order.

        Args:
            reward: ``[T, N]`` raw rewards of T ticks (row p of a tick is env p).
            done: ``[T, N]`` done flags (0/1) of the same rows.
        """
        n = float(self.num_envs)
        for t in range(reward.shape[0]):
            keep = (1.0 - done[t].float()) * self.gamma
            self.returns.mul_(keep).add_(reward[t].float())
            torch.maximum(self.max_abs_return, self.returns.abs().amax(), out=self.max_abs_return)
            batch_var, batch_mean = torch.var_mean(self.returns, correction=0)
            delta = batch_mean - self.mean
            new_count = self.count + n
            self.mean.add_(delta * n / new_count)
            self.var.copy_(
                (
                    self.var * self.count
                    + batch_var * n
                    + delta.square() * self.count * n / new_count
                )
                / new_count
            )
            if self.max_count is not None:  # the default (whole run) adds no kernel per tick
                new_count = new_count.clamp(max=self.max_count)
            self.count.copy_(new_count)

    def scale(self) -> Tensor:
        """``D = max(sqrt(var + 1e-8), G_max / g_max)`` as a 0-dim tensor."""
        return torch.maximum((self.var + 1e-8).sqrt(), self.max_abs_return / self.g_max)

    def std(self) -> Tensor:
        """``sigma_G`` (the ``Train/reward_scale_std`` metric)."""
        return self.var.sqrt()

    def state_dict(self) -> dict[str, Tensor]:
        return {
            "returns": self.returns.clone(),
            "mean": self.mean.clone(),
            "var": self.var.clone(),
            "count": self.count.clone(),
            "max_abs_return": self.max_abs_return.clone(),
        }

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        for key in ("returns", "mean", "var", "count", "max_abs_return"):
            dst = getattr(self, key)
            src = state[key]
            if tuple(src.shape) != tuple(dst.shape):
                raise ValueError(
                    f"reward scaler state {key!r} has shape {tuple(src.shape)}, expected {tuple(dst.shape)}"
                )
            dst.copy_(src)
