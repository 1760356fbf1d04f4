"""FlashSAC networks (docs/flashsac.md §networks): actor, twin distributional critic, shared trunk.

Layout: activations are feature-major, ``[E, features, rows]`` (E ensemble members; the
actor is an ensemble of one). That makes every linear one ``torch.bmm`` of stacked weights
``[E, out, in]`` and lets every BN be one fused ``F.batch_norm`` over a ``[1, E*d, rows]``
view, so each member keeps its own statistics and affine parameters at no extra cost.

BN mode is chosen per call (``training``): True normalises with the biased batch variance
and moves the running statistics (momentum 0.01, unbiased variance), False uses them.
``track=False`` normalises with batch statistics without touching the buffers (the target
critic, whose buffers are never read).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trainer.algo.norms import RenormPlan

BN_MOMENTUM = 0.01
BN_EPS = 1e-5
RMS_EPS = 1e-6
_ALIGN = 8  # bf16 elements per 16 bytes


class EnsembleLinear(nn.Module):
    """``E`` bias-free linears ``[E, out, in]`` (orthogonal gain 1), optional separate bias.

    bf16 tensor-core GEMMs need 16-byte aligned leading dimensions; sizes such as 318 inputs
    or 101 atoms fall back to slow kernels. Such dims are zero-padded to a multiple of 8 at
    call time (the parameters keep their exact shapes; padded rows/columns contribute 0).
    """

    def __init__(self, members: int, in_dim: int, out_dim: int, *, bias: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(members, out_dim, in_dim))
        for member in range(members):
            nn.init.orthogonal_(self.weight.data[member], gain=1.0)
        self.bias = nn.Parameter(torch.zeros(members, out_dim)) if bias else None
        self.out_dim = out_dim
        self.pad_in = -in_dim % _ALIGN
        self.pad_out = -out_dim % _ALIGN

    def forward(self, x: Tensor) -> Tensor:
        """``[E, in, B] -> [E, out, B]``."""
        weight = self.weight
        if self.pad_in:
            weight = F.pad(weight, (0, self.pad_in))
            x = F.pad(x, (0, 0, 0, self.pad_in))
        if self.bias is None:
            return torch.bmm(weight, x)
        return torch.baddbmm(self.bias.unsqueeze(-1), weight, x)

    def forward_rows(self, x: Tensor) -> Tensor:
        """``[E, in, B] -> [E, B, out]`` (row-major output, for heads)."""
        weight, bias = self.weight, self.bias
        if self.pad_out:
            weight = F.pad(weight, (0, 0, 0, self.pad_out))
            bias = None if bias is None else F.pad(bias, (0, self.pad_out))
        w_t = weight.transpose(1, 2)  # [E, in, out]
        if bias is None:
            out = torch.bmm(x.transpose(1, 2), w_t)
        else:
            out = torch.baddbmm(bias.unsqueeze(1), x.transpose(1, 2), w_t)
        return out[..., : self.out_dim] if self.pad_out else out


class EnsembleBatchNorm(nn.Module):
    """Affine BN with per-member statistics over the row axis of ``[E, d, B]``.

    ``affine[0]`` is gamma and ``affine[1]`` beta, ``[E, d]`` each: one tensor so that the
    docs/flashsac.md §norm-control joint renormalisation of ``[gamma; beta]`` is a single reduction.
    """

    def __init__(self, members: int, dim: int) -> None:
        super().__init__()
        self.affine = nn.Parameter(
            torch.stack([torch.ones(members, dim), torch.zeros(members, dim)])
        )
        self.register_buffer("running_mean", torch.zeros(members, dim))
        self.register_buffer("running_var", torch.ones(members, dim))

    def forward(self, x: Tensor, training: bool, track: bool = True) -> Tensor:
        members, dim, rows = x.shape
        use_buffers = track or not training
        y = F.batch_norm(
            x.reshape(1, members * dim, rows),  # per-(member, feature) channel
            self.running_mean.view(-1) if use_buffers else None,
            self.running_var.view(-1) if use_buffers else None,
            self.affine[0].view(-1),
            self.affine[1].view(-1),
            training,
            BN_MOMENTUM,
            BN_EPS,
        )
        return y.view(members, dim, rows)


class EnsembleRmsNorm(nn.Module):
    """``x / sqrt(mean(x^2) + 1e-6) * g`` over the feature axis of ``[E, d, B]`` (fp32)."""

    def __init__(self, members: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(members, dim))

    def forward(self, x: Tensor) -> Tensor:
        x = x.float()
        inv = torch.rsqrt(x.square().mean(1, keepdim=True) + RMS_EPS)  # [E, 1, B]
        return x * inv * self.weight.unsqueeze(-1)


class InvertedResidualBlock(nn.Module):
    """``h + ReLU(BN(Lin(4d->d)(ReLU(BN(Lin(d->4d)(h))))))``."""

    def __init__(self, members: int, dim: int) -> None:
        super().__init__()
        self.up = EnsembleLinear(members, dim, 4 * dim)
        self.up_bn = EnsembleBatchNorm(members, 4 * dim)
        self.down = EnsembleLinear(members, 4 * dim, dim)
        self.down_bn = EnsembleBatchNorm(members, dim)

    def forward(self, h: Tensor, training: bool, track: bool) -> Tensor:
        # Out-of-place ReLU: in place on the BN output view would make autograd copy the
        # whole base tensor (CopySlices) in forward and backward.
        x = F.relu(self.up_bn(self.up(h), training, track))
        x = F.relu(self.down_bn(self.down(x), training, track))
        return h + x  # fp32 residual stream


class Trunk(nn.Module):
    """Input BN, bias-free embedding, ``num_blocks`` inverted residual blocks, final RMSNorm."""

    def __init__(self, members: int, in_dim: int, dim: int, num_blocks: int) -> None:
        super().__init__()
        self.members = members
        self.input_bn = EnsembleBatchNorm(members, in_dim)
        self.embed = EnsembleLinear(members, in_dim, dim)
        self.blocks = nn.ModuleList(InvertedResidualBlock(members, dim) for _ in range(num_blocks))
        self.rms = EnsembleRmsNorm(members, dim)

    def forward(self, x_t: Tensor, training: bool, track: bool = True) -> Tensor:
        """``x_t [in, B]`` (shared by all members) or ``[E, in, B]`` -> ``[E, d, B]`` fp32."""
        if x_t.dim() == 2:
            x_t = x_t.unsqueeze(0).expand(self.members, -1, -1)
        h = self.embed(self.input_bn(x_t, training, track)).float()
        for block in self.blocks:
            h = block(h, training, track)
        return self.rms(h)


def _plan(module: nn.Module) -> RenormPlan:
    plan = RenormPlan()
    for sub in module.modules():
        if isinstance(sub, EnsembleLinear):
            plan.rows.append(sub.weight.data)
        elif isinstance(sub, EnsembleBatchNorm):
            plan.affines.append(sub.affine.data)
        elif isinstance(sub, EnsembleRmsNorm):
            plan.gains.append(sub.weight.data)
    return plan


class Actor(nn.Module):
    """Trunk(obs, d, L) with separate mu and rho heads (``Linear(d->A)`` + zero-init bias)."""

    def __init__(
        self, obs_dim: int, action_dim: int, hidden_dim: int = 128, num_blocks: int = 2
    ) -> None:
        super().__init__()
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.trunk = Trunk(1, obs_dim, hidden_dim, num_blocks)
        self.mu_head = EnsembleLinear(1, hidden_dim, action_dim, bias=True)
        self.rho_head = EnsembleLinear(1, hidden_dim, action_dim, bias=True)
        self.renorm_plan().apply()

    def forward(
        self, obs: Tensor, training: bool, rows: int | None = None
    ) -> tuple[Tensor, Tensor]:
        """``obs [B, obs_dim]`` -> ``(mu, rho)``, each ``[rows, A]`` (matmul precision of the caller).

        ``rows`` keeps only the first rows for the heads: BN statistics still see all B rows.
        """
        h = self.trunk(obs.t(), training)  # [1, d, B]
        if rows is not None:
            h = h[:, :, :rows]
        return self.mu_head.forward_rows(h)[0], self.rho_head.forward_rows(h)[0]

    def deterministic(self, obs: Tensor) -> Tensor:
        """``tanh(mu)`` in BN eval mode (evaluation / export)."""
        mu, _ = self.forward(obs, training=False)
        return torch.tanh(mu.float())

    def renorm_plan(self) -> RenormPlan:
        return _plan(self)


class Critic(nn.Module):
    """Ensemble of ``members`` distributional critics over ``concat(critic_obs, action)``."""

    def __init__(
        self,
        critic_obs_dim: int,
        action_dim: int,
        hidden_dim: int = 256,
        num_blocks: int = 2,
        num_atoms: int = 101,
        members: int = 2,
    ) -> None:
        super().__init__()
        self.in_dim = critic_obs_dim + action_dim
        self.members, self.num_atoms = members, num_atoms
        self.trunk = Trunk(members, self.in_dim, hidden_dim, num_blocks)
        self.head = EnsembleLinear(members, hidden_dim, num_atoms, bias=True)
        self.renorm_plan().apply()

    def forward_t(
        self, x_t: Tensor, training: bool, track: bool = True, rows: slice | None = None
    ) -> Tensor:
        """Feature-major input ``[in, B]`` -> log-probabilities ``[E, B', K]`` (fp32).

        ``rows`` selects the rows that reach the head (BN statistics still see all B rows).
        """
        h = self.trunk(x_t, training, track)  # [E, d, B]
        if rows is not None:
            h = h[:, :, rows]
        return self.head.forward_rows(h).float().log_softmax(-1)

    def forward(
        self, critic_obs: Tensor, action: Tensor, training: bool, track: bool = True
    ) -> Tensor:
        """``[B, Dc]``, ``[B, A]`` -> log-probabilities ``[E, B, K]``."""
        x_t = torch.cat([critic_obs, action.to(critic_obs.dtype)], dim=1).t()
        return self.forward_t(x_t, training, track)

    def renorm_plan(self) -> RenormPlan:
        return _plan(self)


def count_parameters(module: nn.Module) -> int:
    """Trainable parameters (BN affine included, buffers excluded)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
