"""The averaged policy (``algo.policy_average_rate``): its update, its checkpoint, its use."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import Tensor, nn

from tests.trainer.algo.learner_builders import make_learner
from tests.trainer.algo.test_learner import fill, run_cycle
from trainer.algo.learner_state import POLICY_AVERAGE_KEY, policy_state
from trainer.algo.networks import Actor
from trainer.algo.policy_average import PolicyAverage
from trainer.evaluation.policy import load_policy_point
from trainer.rundir.checkpoint import save_checkpoint


def values(module: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def shifted(actor: Actor, seed: int) -> None:
    """Move every parameter and float buffer of ``actor`` (as an update would)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in list(actor.parameters()) + list(actor.buffers()):
            if tensor.is_floating_point():
                tensor.add_(torch.randn(tensor.shape, generator=g))
            else:
                tensor.add_(3)


def test_an_update_moves_the_average_rate_of_the_way_and_copies_integer_buffers() -> None:
    actor = Actor(6, 3, 16, 2)
    average = PolicyAverage(actor, 0.25)
    before = values(actor)
    shifted(actor, 0)
    after = values(actor)
    average.update()
    got = values(average.module)
    assert got.keys() == after.keys()
    for key, value in got.items():
        if value.is_floating_point():
            torch.testing.assert_close(value, before[key] + 0.25 * (after[key] - before[key]))
            assert not torch.equal(value, after[key]), key
        else:
            assert torch.equal(value, after[key]), key  # BatchNorm's batch counter


def test_rate_one_is_the_actor_and_the_average_never_trains() -> None:
    actor = Actor(6, 3, 16, 2)
    average = PolicyAverage(actor, 1.0)
    shifted(actor, 1)
    average.update()
    assert all(torch.equal(v, values(actor)[k]) for k, v in values(average.module).items())
    assert not any(p.requires_grad for p in average.module.parameters())


@pytest.mark.parametrize("rate", [0.0, -0.5, 1.5])
def test_a_rate_outside_zero_to_one_is_refused(rate: float) -> None:
    with pytest.raises(ValueError, match=f"policy average rate {rate!r}"):
        PolicyAverage(Actor(6, 3, 16, 2), rate)


def test_off_by_default_no_average_and_no_key_in_the_state() -> None:
    learner = make_learner()
    assert learner.policy_average is None
    state = learner.state_dict()
    assert POLICY_AVERAGE_KEY not in state
    assert policy_state(state)[0] == "actor"


def test_the_learner_averages_its_actor_after_every_cycle() -> None:
    learner = make_learner(policy_average_rate=0.5)
    fill(learner, 3)
    actors = [values(learner.actor)]
    for i in range(2):
        run_cycle(learner, i)
        actors.append(values(learner.actor))
    assert learner.policy_average is not None
    got = values(learner.policy_average.module)
    for key, value in got.items():
        if not value.is_floating_point():
            continue
        a0, a1, a2 = (actor[key] for actor in actors)
        expected = (a0 + 0.5 * (a1 - a0)) * 0.5 + 0.5 * a2
        torch.testing.assert_close(value, expected)
    assert any(not torch.equal(got[k], actors[-1][k]) for k in got)  # it lags the actor


def test_checkpoints_carry_the_average_and_evaluation_loads_it(tmp_path: Path) -> None:
    learner = make_learner(policy_average_rate=0.5)
    fill(learner, 3)
    run_cycle(learner, 0)
    state = learner.state_dict()
    assert policy_state(state)[0] == POLICY_AVERAGE_KEY
    path = save_checkpoint(tmp_path, iteration=1, total_env_steps=8, learner_state=state)
    point = load_policy_point(path, "cpu")
    assert learner.policy_average is not None
    for key, value in values(point.actor).items():
        assert torch.equal(value, values(learner.policy_average.module)[key]), key


def test_a_resume_restores_the_average_or_starts_it_from_the_actor() -> None:
    source = make_learner(policy_average_rate=0.5)
    fill(source, 3)
    run_cycle(source, 0)
    state = source.state_dict()
    assert source.policy_average is not None
    restored = make_learner(seed=99, policy_average_rate=0.5)
    restored.load_state_dict(state)
    assert restored.policy_average is not None
    for key, value in values(restored.policy_average.module).items():
        assert torch.equal(value, values(source.policy_average.module)[key]), key
    without = {k: v for k, v in state.items() if k != POLICY_AVERAGE_KEY}  # a run without one
    restored.load_state_dict(without)
    for key, value in values(restored.policy_average.module).items():
        assert torch.equal(value, state["actor"][key]), key


@pytest.mark.gpu
def test_on_cuda_the_average_follows_the_captured_cycle() -> None:
    """The average is updated outside the update's CUDA graph, after each replay."""
    learner = make_learner(device="cuda", policy_average_rate=0.5)
    fill(learner, 3)
    actors = [values(learner.actor)]
    for i in range(2):
        run_cycle(learner, i)
        actors.append(values(learner.actor))
    assert learner.cuda_graph_diagnostics()["enabled"]
    assert learner.policy_average is not None
    for key, value in values(learner.policy_average.module).items():
        if value.is_floating_point():
            a0, a1, a2 = (actor[key] for actor in actors)
            torch.testing.assert_close(value, (a0 + 0.5 * (a1 - a0)) * 0.5 + 0.5 * a2)


def test_the_average_never_feeds_back_into_training() -> None:
    """A run with the average on trains exactly as one without: the default (off) path is the
    recipe as it was, and a run with it on holds the baseline's actor (evaluate --policy actor)."""
    runs = []
    for rate in (0.0, 0.5):
        learner = make_learner(seed=5, policy_average_rate=rate)
        fill(learner, 3)
        metrics = [run_cycle(learner, 20 + i) for i in range(3)]
        runs.append((learner, metrics))
    (off, m_off), (on, m_on) = runs
    assert m_off == m_on
    for module in ("actor", "critic", "critic_target"):
        a, b = values(getattr(off, module)), values(getattr(on, module))
        assert all(torch.equal(a[k], b[k]) for k in a), module
    assert off.policy_average is None and on.policy_average is not None
