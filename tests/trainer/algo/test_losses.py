"""docs/flashsac.md §hand-checked-cases hand-checkable cases for the pure loss maths."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.algo import losses
from trainer.algo.config import target_entropy_for
from trainer.algo.replay import stored_done_trunc

SUPPORT = torch.linspace(-2.0, 2.0, 5)
P_NEXT = torch.tensor([0.1, 0.2, 0.4, 0.2, 0.1])

# (r~, m, gamma, e) -> expected target, mean (docs/flashsac.md §hand-checked-cases)
PROJECTION_ROWS = [
    ((0.3, 1.0, 0.9, -0.2), [0.032, 0.152, 0.324, 0.316, 0.176], 0.452),
    ((0.3, 0.0, 0.9, 0.0), [0.0, 0.0, 0.7, 0.3, 0.0], 0.3),
    ((3.0, 0.0, 0.9, 0.0), [0.0, 0.0, 0.0, 0.0, 1.0], 2.0),
    ((-1.0, 0.0, 0.9, 0.0), [0.0, 1.0, 0.0, 0.0, 0.0], -1.0),
    ((-1.0, 1.0, 1.0, 0.0), [0.3, 0.4, 0.2, 0.1, 0.0], -0.9),
]


def _project(r: float, m: float, gamma: float, e: float) -> torch.Tensor:
    return losses.categorical_projection(
        P_NEXT[None], torch.tensor([r]), torch.tensor([m]), gamma, torch.tensor([e]), SUPPORT
    )[0]


@pytest.mark.parametrize(
    ("args", "expected", "mean"), PROJECTION_ROWS, ids=[f"row{i + 1}" for i in range(5)]
)
def test_projection_matches_table(args, expected, mean) -> None:
    target = _project(*args)
    torch.testing.assert_close(target, torch.tensor(expected), atol=1e-6, rtol=0)
    assert float(target.sum()) == pytest.approx(1.0, abs=1e-6)
    assert float((target * SUPPORT).sum()) == pytest.approx(mean, abs=1e-6)


def test_projection_batched_equals_rows_and_cross_entropy_values() -> None:
    r = torch.tensor([a[0][0] for a in PROJECTION_ROWS])
    m = torch.tensor([a[0][1] for a in PROJECTION_ROWS])
    # gamma is a scalar in the API: use rows with gamma 0.9 only (rows 1-4).
    e = torch.tensor([a[0][3] for a in PROJECTION_ROWS])
    target = losses.categorical_projection(P_NEXT.expand(4, 5), r[:4], m[:4], 0.9, e[:4], SUPPORT)
    torch.testing.assert_close(
        target, torch.tensor([row[1] for row in PROJECTION_ROWS[:4]]), atol=1e-6, rtol=0
    )
    row1 = target[:1]
    uniform = torch.full((1, 1, 5), 0.2).log()
    assert float(losses.critic_loss(row1, uniform)) == pytest.approx(math.log(5), abs=1e-6)
    assert float(losses.critic_loss(row1, P_NEXT.log()[None, None])) == pytest.approx(
        1.529033, abs=1e-6
    )


@pytest.mark.parametrize(
    ("flags", "stored", "mask"),
    [((0, 0), (0, 0), 1), ((0, 1), (1, 1), 1), ((1, 0), (1, 0), 0), ((1, 1), (1, 0), 0)],
)
def test_bootstrap_mask_table(flags, stored, mask) -> None:
    term, trunc = flags
    done_s, trunc_s = stored_done_trunc(torch.tensor([bool(term)]), torch.tensor([bool(trunc)]))
    assert (float(done_s[0]), float(trunc_s[0])) == stored
    assert float(losses.bootstrap_mask(done_s, trunc_s)[0]) == mask


def test_min_q_member_selection_takes_whole_member_and_breaks_ties_to_member_zero() -> None:
    support = torch.tensor([-1.0, 0.0, 1.0])
    low = torch.tensor([0.6, 0.3, 0.1])  # Q = -0.5
    high = torch.tensor([0.1, 0.3, 0.6])  # Q = 0.5
    same = torch.tensor([0.2, 0.6, 0.2])  # Q = 0 (tie with its mirror)
    tie = torch.tensor([0.3, 0.4, 0.3])  # Q = 0
    lp = torch.stack([torch.stack([high, low, same]), torch.stack([low, high, tie])]).log()
    chosen = losses.select_min_q_member(lp, support)
    torch.testing.assert_close(chosen, torch.stack([low, low, same]))


def test_scalar_cases() -> None:
    assert target_entropy_for(29, 0.15) == pytest.approx(-13.867262, abs=1e-6)
    _, logp = losses.squashed_gaussian(
        torch.zeros(1, 1), torch.full((1, 1), math.atanh(2 / 3)), torch.zeros(1, 1)
    )
    # rho = atanh(2/3) gives log sigma = -10 + 6 * 5/3 = 0, so sigma = 1 and u = 0.
    assert float(logp[0]) == pytest.approx(-0.918939, abs=1e-6)
    assert float(losses.log_std_from_rho(torch.zeros(()))) == pytest.approx(-4.0)
    assert float(losses.log_std_from_rho(torch.tensor(50.0))) == pytest.approx(2.0)
    assert float(losses.log_std_from_rho(torch.tensor(-50.0))) == pytest.approx(-10.0)


def test_squashed_gaussian_log_prob_matches_torch_distributions() -> None:
    g = torch.Generator().manual_seed(0)
    mu, rho, eps = (torch.randn(64, 7, generator=g) for _ in range(3))
    action, logp = losses.squashed_gaussian(mu, rho, eps)
    std = losses.log_std_from_rho(rho).double().exp()
    u = mu.double() + std * eps.double()
    # float64 reference of the change of variables: log N(u) - log(1 - tanh(u)^2)
    ref = torch.distributions.Normal(mu.double(), std).log_prob(u) - torch.log1p(
        -torch.tanh(u).square()
    )
    torch.testing.assert_close(action, torch.tanh(u).float())
    torch.testing.assert_close(logp.double(), ref.sum(-1), atol=1e-3, rtol=1e-4)


def test_actor_and_temperature_losses() -> None:
    log_alpha = torch.tensor(math.log(0.01), requires_grad=True)
    logp = torch.tensor([1.0, 3.0])
    q = torch.tensor([0.5, -0.5])
    assert float(losses.actor_loss(logp, q, log_alpha.exp())) == pytest.approx(0.01 * 2.0)
    loss, entropy = losses.temperature_loss(log_alpha, logp, -13.867262)
    assert float(entropy) == pytest.approx(-2.0)
    loss.backward()
    assert float(log_alpha.grad) == pytest.approx(0.01 * (-2.0 + 13.867262), rel=1e-6)


def test_projection_of_a_nan_reward_is_nan_not_an_index_error() -> None:
    target = losses.categorical_projection(
        P_NEXT[None], torch.tensor([float("nan")]), torch.ones(1), 0.9, torch.zeros(1), SUPPORT
    )
    assert bool(torch.isnan(target).any())
