"""docs/flashsac.md §hand-checked-cases renormalisation, §hand-checked-cases reward scaler and §update-schedule cosine schedule cases."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.algo import norms
from trainer.algo.reward_scaler import RewardScaler
from trainer.algo.schedule import cosine_lr, cosine_lr_tensor


def test_row_renormalisation_values_and_idempotence() -> None:
    w = torch.tensor([[3.0, 4.0], [0.0, 0.5]])
    norms.renormalize_rows_(w)
    torch.testing.assert_close(w, torch.tensor([[0.6, 0.8], [0.0, 1.0]]))
    once = w.clone()
    norms.renormalize_rows_(w)
    torch.testing.assert_close(w, once, atol=1e-7, rtol=0)
    zero = torch.zeros(1, 3)
    norms.renormalize_rows_(zero)  # a zero row stays finite (max with 1e-8)
    assert torch.equal(zero, torch.zeros(1, 3))


def test_bn_and_rms_renormalisation_values() -> None:
    affine = torch.ones(2, 2)  # [gamma; beta] of a BN with d = 2
    norms.renormalize_affine_(affine)
    torch.testing.assert_close(affine, torch.full((2, 2), 0.707107), atol=1e-6, rtol=0)
    gain = torch.full((4,), 3.0)
    norms.renormalize_gain_(gain)
    torch.testing.assert_close(gain, torch.ones(4))


def test_per_member_affine_renormalisation_is_independent() -> None:
    gamma = torch.tensor([[1.0, 1.0], [2.0, 0.0]])  # [E=2, d=2]
    beta = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    affine = torch.stack([gamma, beta])  # [2, E, d]
    norms.renormalize_affine_(affine)
    joint = torch.cat([affine[0], affine[1]], -1).norm(dim=-1)
    torch.testing.assert_close(joint, torch.full((2,), math.sqrt(2)))
    torch.testing.assert_close(affine[0, 1], torch.tensor([math.sqrt(2), 0.0]))


# N = 2, gamma = 0.5, g_max = 5 (docs/flashsac.md §hand-checked-cases): r, done, G, G_max, mu, var, D, r~
SCALER_TICKS = [
    ([1, 1], [0, 0], [1, 1], 1, 0.99995, 1.0e-4, 0.2, [5, 5]),
    ([1, 3], [0, 1], [1.5, 3], 3, 1.624959, 0.671949, 0.819725, [1.219921, 3.659764]),
    ([0, 0], [0, 0], [0.75, 1.5], 3, 1.458309, 0.550390, 0.741883, [0, 0]),
]


def test_reward_scaler_table() -> None:
    scaler = RewardScaler(2, gamma=0.5, g_max=5.0, device="cpu")
    for r, done, g, g_max, mu, var, d, r_scaled in SCALER_TICKS:
        reward = torch.tensor([r], dtype=torch.float32)
        scaler.fold(reward, torch.tensor([done], dtype=torch.float32))
        torch.testing.assert_close(scaler.returns, torch.tensor(g, dtype=torch.float32))
        assert float(scaler.max_abs_return) == pytest.approx(g_max)
        assert float(scaler.mean) == pytest.approx(mu, abs=2e-6)
        assert float(scaler.var) == pytest.approx(var, abs=2e-6, rel=1e-3)
        assert float(scaler.scale()) == pytest.approx(d, abs=2e-6)
        torch.testing.assert_close(
            reward[0] / scaler.scale(),
            torch.tensor(r_scaled, dtype=torch.float32),
            atol=2e-6,
            rtol=0,
        )
    assert float(scaler.std()) == pytest.approx(math.sqrt(0.550390), abs=2e-6)


def test_reward_scaler_multi_tick_fold_equals_tick_by_tick_and_round_trips() -> None:
    one = RewardScaler(2, gamma=0.5, g_max=5.0, device="cpu")
    many = RewardScaler(2, gamma=0.5, g_max=5.0, device="cpu")
    rewards = torch.tensor([t[0] for t in SCALER_TICKS], dtype=torch.float32)
    dones = torch.tensor([t[1] for t in SCALER_TICKS], dtype=torch.float32)
    for t in range(3):
        one.fold(rewards[t : t + 1], dones[t : t + 1])
    many.fold(rewards, dones)
    for key, value in one.state_dict().items():
        torch.testing.assert_close(many.state_dict()[key], value)
    restored = RewardScaler(2, gamma=0.5, g_max=5.0, device="cpu")
    restored.load_state_dict(many.state_dict())
    assert float(restored.scale()) == float(many.scale())


def test_a_reward_scale_horizon_weighs_each_new_tick_at_least_one_over_h() -> None:
    def scaler(horizon: int | None) -> RewardScaler:
        return RewardScaler(1, gamma=0.0, g_max=1e9, device="cpu", horizon=horizon)

    whole, recent, long_horizon = scaler(None), scaler(4), scaler(1000)
    ones, zero = torch.ones(1, 1), torch.zeros(1, 1)
    for _ in range(100):  # a long past of returns 1
        for s in (whole, recent, long_horizon):
            s.fold(ones, zero)
    # A horizon longer than the run so far changes nothing.
    for key, value in whole.state_dict().items():
        torch.testing.assert_close(long_horizon.state_dict()[key], value)
    for _ in range(12):  # then the policy's returns become 3
        whole.fold(3 * ones, zero)
        recent.fold(3 * ones, zero)
    assert float(recent.count) == 4.0 and float(whole.count) == pytest.approx(112.0, abs=1e-3)
    # The capped count weighs each new tick n / (H*N + n) = 1/5: 3 - 2 * (4/5)^12 after twelve.
    assert float(recent.mean) == pytest.approx(3 - 2 * 0.8**12, abs=1e-5)
    assert float(whole.mean) == pytest.approx((100 + 36) / 112, abs=1e-3)


def test_cosine_schedule_broadcasts_a_period_per_optimizer() -> None:
    steps = torch.tensor([[50.0], [100.0], [200.0]])
    periods = torch.tensor([[100.0], [200.0], [100.0]])
    lr = cosine_lr_tensor(steps, peak=3e-4, end=1.5e-4, decay_steps=periods)
    expected = [cosine_lr(50, peak=3e-4, end=1.5e-4, decay_steps=100),
                cosine_lr(100, peak=3e-4, end=1.5e-4, decay_steps=200), 1.5e-4]  # fmt: skip
    torch.testing.assert_close(lr[:, 0], torch.tensor(expected), atol=1e-9, rtol=0)


def test_cosine_schedule_reference_values() -> None:
    kw = {"peak": 3e-4, "end": 1.5e-4, "decay_steps": 500_000}
    assert cosine_lr(0, **kw) == pytest.approx(3e-4)
    assert cosine_lr(100_000, **kw) == pytest.approx(2.8568e-4, abs=5e-9)
    assert cosine_lr(250_000, **kw) == pytest.approx(2.25e-4)
    assert cosine_lr(500_000, **kw) == pytest.approx(1.5e-4)
    assert cosine_lr(900_000, **kw) == pytest.approx(1.5e-4)
    steps = torch.tensor([0.0, 100_000.0, 250_000.0, 600_000.0])
    torch.testing.assert_close(
        cosine_lr_tensor(steps, **kw),
        torch.tensor([3e-4, 2.8568e-4, 2.25e-4, 1.5e-4]),
        atol=5e-9,
        rtol=0,
    )
