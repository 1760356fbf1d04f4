"""docs/flashsac.md §networks, §norm-control: parameter counts, norm control, BN modes, stacked ensemble layout."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.algo.networks import Actor, Critic, EnsembleBatchNorm, count_parameters


@pytest.mark.slow  # builds the owner-sized networks
def test_parameter_counts_match_the_spec_table() -> None:
    actor, critic = Actor(160, 29), Critic(289, 29)
    assert count_parameters(actor) == 293_114
    assert count_parameters(critic) == 2_323_906
    assert count_parameters(actor) + count_parameters(critic) + 1 == 2_617_021  # + log alpha
    assert critic.trunk.embed.weight.shape == (2, 256, 318)
    assert critic.head.weight.shape == (2, 101, 256)


def _assert_normalised(module: torch.nn.Module) -> None:
    plan = module.renorm_plan()
    for weight in plan.rows:
        torch.testing.assert_close(
            weight.norm(dim=-1), torch.ones(weight.shape[:-1]), atol=1e-5, rtol=0
        )
    for affine in plan.affines:
        d = affine.shape[-1]
        norms = torch.linalg.vector_norm(affine, dim=(0, 2))
        torch.testing.assert_close(
            norms, torch.full_like(norms, math.sqrt(d)), atol=1e-4, rtol=1e-6
        )
    for gain in plan.gains:
        d = gain.shape[-1]
        torch.testing.assert_close(
            gain.norm(dim=-1), torch.full(gain.shape[:-1], math.sqrt(d)), atol=1e-4, rtol=1e-6
        )


def test_construction_renormalises_and_renormalising_again_changes_nothing() -> None:
    actor, critic = Actor(12, 3, 8, 1), Critic(10, 3, 8, 1, 11)
    for module in (actor, critic):
        _assert_normalised(module)
        before = {k: v.clone() for k, v in module.state_dict().items()}
        module.renorm_plan().apply()
        for key, value in module.state_dict().items():
            torch.testing.assert_close(value, before[key], atol=1e-6, rtol=0)
    assert (
        torch.count_nonzero(actor.mu_head.bias) == 0 and torch.count_nonzero(critic.head.bias) == 0
    )


def test_bn_training_mode_uses_biased_var_and_moves_running_stats_with_unbiased_var() -> None:
    bn = EnsembleBatchNorm(2, 3)
    x = torch.randn(2, 3, 16) * 3 + 1
    y = bn(x, training=True)
    mean, var_biased = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    torch.testing.assert_close(y, (x - mean) / torch.sqrt(var_biased + 1e-5), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(bn.running_mean, 0.01 * x.mean(-1))
    torch.testing.assert_close(bn.running_var, 0.99 + 0.01 * x.var(-1, unbiased=True))
    stats = (bn.running_mean.clone(), bn.running_var.clone())
    y_eval = bn(x, training=False)
    expected = (x - stats[0].unsqueeze(-1)) / torch.sqrt(stats[1].unsqueeze(-1) + 1e-5)
    torch.testing.assert_close(y_eval, expected, atol=1e-5, rtol=1e-5)
    bn(x, training=True, track=False)  # the target critic: batch stats, buffers untouched
    assert torch.equal(bn.running_mean, stats[0]) and torch.equal(bn.running_var, stats[1])


def test_stacked_ensemble_equals_separate_members() -> None:
    torch.manual_seed(0)
    twin = Critic(10, 3, 8, 1, 11, members=2)
    with torch.no_grad():
        twin.head.bias.normal_()
    obs, action = torch.randn(32, 10), torch.randn(32, 3)
    joint = twin(obs, action, training=True)  # [2, 32, 11]
    for member in range(2):
        single = Critic(10, 3, 8, 1, 11, members=1)
        # affine is [2, E, d]; every other tensor is [E, ...]
        sliced = {
            k: (v[:, member : member + 1] if k.endswith("affine") else v[member : member + 1])
            for k, v in twin.state_dict().items()
        }
        single.load_state_dict(sliced)
        torch.testing.assert_close(
            single(obs, action, training=True)[0], joint[member], atol=1e-5, rtol=1e-5
        )
    assert not torch.allclose(joint[0], joint[1])


def test_actor_heads_and_log_std_range() -> None:
    actor = Actor(12, 3, 8, 1)
    mu, rho = actor(torch.randn(20, 12), training=True, rows=5)
    assert mu.shape == (5, 3) and rho.shape == (5, 3)
    det = actor.deterministic(torch.randn(4, 12))
    assert det.shape == (4, 3) and bool((det.abs() <= 1).all())


@pytest.mark.parametrize("training", [True, False])
def test_critic_log_probs_are_normalised(training: bool) -> None:
    critic = Critic(10, 3, 8, 1, 11)
    lp = critic(torch.randn(6, 10), torch.randn(6, 3), training=training)
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(2, 6))
