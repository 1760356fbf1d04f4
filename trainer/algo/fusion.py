"""Fewer kernels per update cycle: the learner's compiled fusions.

The update cycle is bound by kernel count, not arithmetic (docs/runtime.md "Learner
profile"). Each fusion below is behind its own switch of :class:`CycleFusion`, on top of the
compiled TD target:

* ``renorm``: the docs/flashsac.md §norm-control norm control after every optimizer step (a norm, a clamp or hypot and
  one or two divisions per weight, ~45 launches per network) becomes one compiled function
  per network, in which inductor fuses each tensor's reduction with its division.
* ``losses``: the pure loss maths around the networks (squashed-Gaussian sampling with its
  casts, the critic cross-entropy, min-Q + actor loss, the temperature loss) become compiled
  functions whose forward and backward are a few fused kernels each.
* ``networks``: each network's whole forward is compiled (trunk, heads, the critic's
  log-softmax, the actor-update critic's input concatenation) instead of its trunk alone,
  so inductor fuses the heads' weight padding, bf16 casts, bias adds and the log-softmax
  with the trunk's last norm, forward and backward.
* ``combo_kernels``: every compile above (and the TD target) runs with inductor's combo
  kernels, which launch independent kernels of one graph as one kernel: the BatchNorm
  reductions of the twin critic's members and of forward and backward, the per-tensor
  reductions of the norm control. Same kernels' maths, fewer launches (on the H200 the
  cycle's norm kernels fell from 250 to 120 and the cycle from 4.21 to 3.92 ms,
  docs/journal/benchmarks-2026.md "Fourteenth H200 session").
* ``multi_kernel``: the same compiles also run with inductor's multi-kernel, which generates
  a persistent and a looped version of each reduction and keeps the faster, benchmarked at
  its first call (before any capture). Same maths; on the H200 the cycle's norm kernels fell
  from 0.75 to 0.51 ms beside combo kernels, docs/journal/benchmarks-2026.md "Fifteenth H200 session".

The maths is the same functions of ``trainer.algo.losses`` and ``trainer.algo.norms``, so
the results equal the eager path up to floating-point reassociation inside the fused
reductions (tests/trainer/algo/test_fusion.py compares both on random inputs). Each
compiled loss is its own autograd function, so the separate ``backward()`` of the actor and
temperature losses stays as it is. They run only where the learner compiles (CUDA with
``algo.use_compile``); a capture that fails with them drops them first, then compile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from trainer.algo import losses
from trainer.algo.config import FlashSacCfg
from trainer.algo.norms import RenormPlan

CompileOptions = dict[str, bool | int]
"""Inductor config keys and values for one ``torch.compile`` call."""


@dataclass(frozen=True)
class CycleFusion:
    """Which fusions the learner compiles (``CycleFusion()``: all five; the learner's
    default comes from ``algo.fuse_<name>``, :meth:`from_cfg`).

    Attributes:
        renorm: compile each network's norm-control plan into one function.
        losses: compile the loss maths around the networks.
        networks: compile each network's whole forward, not only its trunk.
        combo_kernels: compile with inductor's combo (horizontally fused) kernels.
        multi_kernel: compile with inductor's multi-kernel (the faster of a persistent and a
            looped version of each reduction).
    """

    renorm: bool = True
    losses: bool = True
    networks: bool = True
    combo_kernels: bool = True
    multi_kernel: bool = True

    @classmethod
    def none(cls) -> CycleFusion:
        """No fusion: the update cycle as it ran before the fusions (the profile's ``legacy``)."""
        return cls(**dict.fromkeys(cls.names(), False))

    @classmethod
    def from_cfg(cls, cfg: FlashSacCfg) -> CycleFusion:
        """The fusions that ``algo.fuse_<name>`` switch on."""
        return cls(**{name: getattr(cfg, f"fuse_{name}") for name in cls.names()})

    @classmethod
    def names(cls) -> list[str]:
        return [field.name for field in dataclasses.fields(cls)]

    def as_dict(self) -> dict[str, bool]:
        return dataclasses.asdict(self)

    def compile_options(self, backend: str) -> CompileOptions | None:
        """``torch.compile(options=...)`` for ``backend``: inductor's config for these
        compiles only (forward and backward), so an env compiled in the same process keeps
        inductor's defaults. Other backends take no inductor options."""
        if backend != "inductor":
            return None
        options: CompileOptions = {}
        if self.combo_kernels:
            options["combo_kernels"] = True
        if self.multi_kernel:
            options["triton.multi_kernel"] = 1  # 1: benchmark both, keep the faster
        return options or None


def sample_action(mu: Tensor, rho: Tensor, eps: Tensor) -> tuple[Tensor, Tensor]:
    """``squashed_gaussian`` of the heads' outputs cast to fp32 (the casts fuse with it)."""
    return losses.squashed_gaussian(mu.float(), rho.float(), eps)


def actor_objective(log_probs: Tensor, support: Tensor, log_prob: Tensor, alpha: Tensor) -> Tensor:
    """``L_pi`` with ``q = min_j Q_j`` of the critic's ``[E, B, K]`` log-probabilities."""
    q = losses.expected_q(log_probs, support).amin(0)
    return losses.actor_loss(log_prob, q, alpha)


@dataclass
class LossFns:
    """The loss maths the learner calls; eager by default, compiled by :func:`compile_losses`."""

    sample: Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]] = sample_action
    critic: Callable[[Tensor, Tensor], Tensor] = losses.critic_loss
    actor: Callable[[Tensor, Tensor, Tensor, Tensor], Tensor] = actor_objective
    temperature: Callable[[Tensor, Tensor, float], tuple[Tensor, Tensor]] = losses.temperature_loss


def compile_losses(backend: str = "inductor", options: CompileOptions | None = None) -> LossFns:
    """Every :class:`LossFns` member compiled (static shapes, one graph each)."""

    def compiled(fn: Callable) -> Callable:
        return torch.compile(fn, fullgraph=True, dynamic=False, backend=backend, options=options)

    return LossFns(
        sample=compiled(sample_action),
        critic=compiled(losses.critic_loss),
        actor=compiled(actor_objective),
        temperature=compiled(losses.temperature_loss),
    )


def compile_renorm(
    plan: RenormPlan, backend: str = "inductor", options: CompileOptions | None = None
) -> Callable[[], None]:
    """``plan.apply`` as one compiled function (in place on the same tensors)."""
    return torch.compile(
        plan.apply, fullgraph=True, dynamic=False, backend=backend, options=options
    )
