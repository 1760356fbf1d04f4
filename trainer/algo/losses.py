"""Pure FlashSAC loss maths (docs/flashsac.md §networks, §losses): no modules, no optimizers, no host syncs.

Layouts: ``E`` ensemble members, ``B`` rows, ``K`` atoms, ``A`` action dims. Everything is
computed in float32; callers cast network outputs up before calling.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

LOG_STD_MIN = -10.0
LOG_STD_MAX = 2.0
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LN2 = math.log(2.0)


def bootstrap_mask(done: Tensor, trunc: Tensor) -> Tensor:
    """``m = clamp(1 - done + trunc, 0, 1)`` = 1 - terminated for the stored (done, trunc)."""
    return (1.0 - done + trunc).clamp(0.0, 1.0)


def log_std_from_rho(rho: Tensor) -> Tensor:
    """``log sigma = -10 + 6 (1 + tanh rho)``, inside [-10, 2]."""
    return LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (1.0 + torch.tanh(rho))


def squashed_gaussian(mu: Tensor, rho: Tensor, eps: Tensor) -> tuple[Tensor, Tensor]:
    """Sample ``a = tanh(mu + sigma * eps)`` and its log-density.

    Args:
        mu, rho, eps: ``[B, A]`` head outputs and standard-normal noise.

    Returns:
        ``(action [B, A], log_prob [B])`` with
        ``log pi = sum_i[log N(u_i; mu_i, sigma_i) - 2 (ln 2 - u_i - softplus(-2 u_i))]``.
    """
    log_std = log_std_from_rho(rho)
    u = mu + log_std.exp() * eps  # [B, A]
    gauss = -0.5 * eps.square() - log_std - _HALF_LOG_2PI
    squash = 2.0 * (_LN2 - u - F.softplus(-2.0 * u))
    return torch.tanh(u), (gauss - squash).sum(-1)


def expected_q(log_probs: Tensor, support: Tensor) -> Tensor:
    """``Q = sum_j softmax_j z_j`` for log-probabilities ``[..., K]`` -> ``[...]``."""
    return (log_probs.exp() * support).sum(-1)


def select_min_q_member(log_probs: Tensor, support: Tensor) -> Tensor:
    """Probabilities of the member with the lowest Q per row, taken whole (tie -> member 0).

    Args:
        log_probs: ``[E, B, K]`` target-critic log-probabilities.

    Returns:
        ``[B, K]`` probabilities of member ``argmin_j Q_j`` for each row.
    """
    probs = log_probs.exp()  # [E, B, K]
    q = (probs * support).sum(-1)  # [E, B]
    member = q.argmin(0)  # [B]; argmin returns the first minimum
    index = member.view(1, -1, 1).expand(1, probs.shape[1], probs.shape[2])
    return probs.gather(0, index).squeeze(0)  # [B, K]


def categorical_projection(
    next_probs: Tensor,
    reward: Tensor,
    mask: Tensor,
    gamma: float,
    entropy_term: Tensor,
    support: Tensor,
) -> Tensor:
    """C51 projection of ``T_j = clip(r + m gamma (z_j - e), z_0, z_{K-1})`` onto the support.

    Args:
        next_probs: ``[B, K]`` p' of the selected target member.
        reward: ``[B]`` scaled reward r~.
        mask: ``[B]`` bootstrap mask m.
        gamma: discount.
        entropy_term: ``[B]`` e = alpha * log pi'.
        support: ``[K]`` evenly spaced atoms z.

    Returns:
        ``[B, K]`` target distribution; each row sums to the mass of ``next_probs``.
    """
    num_atoms = support.shape[0]
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (num_atoms - 1)
    discount = (mask * gamma).unsqueeze(-1)  # [B, 1]
    atoms = reward.unsqueeze(-1) + discount * (support - entropy_term.unsqueeze(-1))  # [B, K]
    atoms = torch.minimum(torch.maximum(atoms, v_min), v_max)
    b = ((atoms - v_min) / delta).clamp(0.0, num_atoms - 1.0)
    # Indices from a NaN-free copy (a NaN index would be out of bounds, a device assert on
    # CUDA); the weights keep the NaN so that the loss turns non-finite and the step is skipped.
    lower = torch.nan_to_num(b, nan=0.0).floor()
    frac = b - lower  # an integer b puts all the mass on the lower atom
    upper = (lower + 1.0).clamp(max=num_atoms - 1.0)
    target = torch.zeros_like(next_probs)
    target.scatter_add_(-1, lower.long(), next_probs * (1.0 - frac))
    target.scatter_add_(-1, upper.long(), next_probs * frac)
    return target


def critic_loss(target: Tensor, log_probs: Tensor) -> Tensor:
    """``L_Q`` = mean over members and rows of ``-sum_j target_j log p_j``.

    Args:
        target: ``[B, K]`` projected target (no grad).
        log_probs: ``[E, B, K]`` online-critic log-probabilities.
    """
    return -(target * log_probs).sum(-1).mean()


def actor_loss(log_prob: Tensor, q: Tensor, alpha: Tensor) -> Tensor:
    """``L_pi = mean(alpha_detached * log pi - q)`` with ``q = min_j Q_j`` (``[B]`` each)."""
    return (alpha.detach() * log_prob - q).mean()


def temperature_loss(
    log_alpha: Tensor, log_prob: Tensor, target_entropy: float
) -> tuple[Tensor, Tensor]:
    """``L_alpha = alpha (H - H_bar)`` with ``H = -mean(log pi)`` detached.

    Returns:
        ``(loss, entropy)``; the gradient reaches ``log_alpha`` only.
    """
    entropy = -log_prob.detach().mean()
    return log_alpha.exp() * (entropy - target_entropy), entropy
