"""docs/flashsac.md §exploration exploration and §replay replay: zeta draws, noise repeats, ring order and sampling."""

from __future__ import annotations

import pytest
import torch

from contracts.env_spec import RowLayout
from trainer.algo.exploration import RepeatedNoise, draw_repeats, zeta_cdf
from trainer.algo.replay import DeviceReplay, pack_transitions


def test_zeta_draws_and_probabilities() -> None:
    cdf = zeta_cdf(2.0, 16)
    assert draw_repeats(torch.tensor([0.5, 0.7, 0.999, 0.0]), cdf).tolist() == [1, 2, 16, 1]
    p = torch.diff(cdf, prepend=torch.zeros(1))
    assert float(p[0]) == pytest.approx(0.6312, abs=1e-4)
    assert float(p[1]) == pytest.approx(0.1578, abs=1e-4)
    assert float(p[15]) == pytest.approx(0.0025, abs=1e-4)
    assert float((p * torch.arange(1, 17)).sum()) == pytest.approx(2.134, abs=1e-3)
    assert int(draw_repeats(torch.tensor([0.99999994]), cdf)[0]) == 16


def test_noise_lasts_exactly_k_steps_or_until_done() -> None:
    torch.manual_seed(0)
    noise = RepeatedNoise(64, 3, zeta_mu=2.0, max_repeat=16, device="cpu")
    not_done = torch.zeros(64, dtype=torch.bool)
    first = noise.step(not_done).clone()
    k = noise.target.clone()
    assert bool((noise.count == 1).all()) and bool(((k >= 1) & (k <= 16)).all())
    for step in range(1, 3):
        eps = noise.step(not_done).clone()
        held = k > step  # still inside its k steps
        assert torch.equal(eps[held], first[held])
        assert not torch.equal(eps[~held], first[~held]) or not bool((~held).any())
    done = torch.ones(64, dtype=torch.bool)
    before = noise.eps.clone()
    after = noise.step(done)
    assert bool((noise.count == 1).all()) and not bool((after == before).all(dim=1).any())


def test_pack_transitions_column_layout() -> None:
    lay = RowLayout(obs_dim=160, critic_obs_dim=289, action_dim=29)  # the G1 task's row
    assert lay.width == 930
    n = 4
    rows = pack_transitions(
        torch.full((n, 160), 1.0),
        torch.full((n, 160), 2.0),
        torch.full((n, 29), 0.5),
        torch.arange(n, dtype=torch.float32),
        torch.tensor([0, 0, 1, 1], dtype=torch.bool),
        torch.tensor([0, 1, 0, 1], dtype=torch.bool),
        torch.full((n, 289), 3.0),
        torch.full((n, 289), 4.0),
    )
    assert rows.shape == (n, 930)
    assert bool((rows[:, 0:160] == 1).all()) and bool((rows[:, 160:320] == 2).all())
    assert bool((rows[:, 320:349] == 0.5).all())
    assert rows[:, 349].tolist() == [0, 1, 2, 3]
    assert rows[:, 350].tolist() == [0, 1, 1, 1] and rows[:, 351].tolist() == [0, 1, 0, 0]
    assert bool((rows[:, 352:641] == 3).all()) and bool((rows[:, 641:930] == 4).all())


def _marked(start: int, n: int, width: int) -> torch.Tensor:
    rows = torch.zeros(n, width)
    rows[:, 0] = torch.arange(start, start + n, dtype=torch.float32) + 1.0  # global index + 1
    return rows


def test_ring_wraps_in_commit_order_and_keeps_the_newest_rows() -> None:
    lay = RowLayout(2, 2, 1)
    replay = DeviceReplay(10, lay, "cpu")
    for start in range(0, 24, 4):
        replay.commit(_marked(start, 4, lay.width))
    assert replay.committed == 24 and replay.size == 10
    # rows 14..23 survive; global row g sits at g % 10
    assert replay.rows[:, 0].tolist() == [21, 22, 23, 24, 15, 16, 17, 18, 19, 20]
    assert replay.column_range(0, 18, 23).tolist() == [19, 20, 21, 22, 23]
    with pytest.raises(ValueError, match="not available"):
        replay.column_range(0, 10, 12)  # overwritten
    with pytest.raises(ValueError, match="not available"):
        replay.column_range(0, 20, 25)  # not committed yet
    with pytest.raises(ValueError, match="expected"):
        replay.commit(torch.zeros(2, lay.width + 1))


def test_sampling_never_returns_uncommitted_rows() -> None:
    lay = RowLayout(2, 2, 1)
    replay = DeviceReplay(64, lay, "cpu")
    out = torch.empty(4096, lay.width)
    with pytest.raises(ValueError, match="empty replay"):
        replay.sample_into(out)
    replay.commit(_marked(0, 5, lay.width))
    torch.manual_seed(0)
    replay.sample_into(out)
    marks = out[:, 0]
    assert bool((marks >= 1).all()) and bool((marks <= 5).all())
    assert set(marks.tolist()) == {1.0, 2.0, 3.0, 4.0, 5.0}  # uniform with replacement
