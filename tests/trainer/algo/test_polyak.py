"""The one-pass Polyak average: flat target views, exact update, restore in place."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from trainer.algo.networks import Critic
from trainer.algo.polyak import ALIGN_ELEMENTS, PolyakTarget


def _pair() -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    source = Critic(12, 3, hidden_dim=16, num_blocks=1, num_atoms=11)
    target = copy.deepcopy(source).requires_grad_(False)
    with torch.no_grad():
        for p in source.parameters():
            p.add_(torch.randn_like(p))
    return source, target


def test_the_target_keeps_its_parameters_and_values_as_views_of_one_aligned_buffer() -> None:
    source, target = _pair()
    params = list(target.parameters())
    before = {k: v.clone() for k, v in target.state_dict().items()}
    polyak = PolyakTarget(source, target)
    assert list(target.parameters()) == params  # same Parameter objects
    for key, value in target.state_dict().items():
        assert torch.equal(value, before[key]), key
    base = polyak.target_buffer.untyped_storage().data_ptr()
    for p in params:
        assert p.untyped_storage().data_ptr() == base
        assert p.storage_offset() % ALIGN_ELEMENTS == 0
        assert not p.requires_grad


def test_one_update_moves_every_target_value_tau_of_the_way_and_tau_zero_keeps_it() -> None:
    source, target = _pair()
    polyak = PolyakTarget(source, target)
    before = [p.detach().clone() for p in target.parameters()]
    polyak.update(torch.tensor(0.0))
    for b, p in zip(before, target.parameters(), strict=True):
        assert torch.equal(p, b)
    polyak.update(torch.tensor(0.25))
    for b, s, p in zip(before, source.parameters(), target.parameters(), strict=True):
        torch.testing.assert_close(p, b + 0.25 * (s.detach() - b))
        assert not torch.equal(p, b)


def test_the_update_follows_the_source_as_it_changes_in_place() -> None:
    source, target = _pair()
    polyak = PolyakTarget(source, target)
    with torch.no_grad():
        for p in source.parameters():
            p.fill_(3.0)
    polyak.update(torch.tensor(1.0))
    for p in target.parameters():
        assert torch.equal(p, torch.full_like(p, 3.0))


def test_load_state_dict_restores_into_the_flat_buffer() -> None:
    source, target = _pair()
    polyak = PolyakTarget(source, target)
    saved = {k: v.clone() for k, v in target.state_dict().items()}
    polyak.update(torch.tensor(0.5))
    target.load_state_dict(saved)
    for key, value in target.state_dict().items():
        assert torch.equal(value, saved[key]), key
    views = list(target.parameters())
    assert all(p.untyped_storage().data_ptr() == polyak.target_buffer.data_ptr() for p in views)


def test_a_target_of_another_shape_is_refused() -> None:
    source, _ = _pair()
    other = Critic(12, 3, hidden_dim=8, num_blocks=1, num_atoms=11)
    with pytest.raises(ValueError, match="parameter shapes"):
        PolyakTarget(source, other)
