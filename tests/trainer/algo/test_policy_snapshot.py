"""``act()`` reads the policy snapshot each cycle publishes; on CUDA it runs on its own stream
(docs/runtime.md "Inference stream")."""

from __future__ import annotations

import pytest
import torch

from tests.trainer.algo.learner_builders import make_learner
from tests.trainer.algo.test_learner import fill, params, run_cycle
from trainer.algo.learner import FlashSacLearner


def _inputs(learner: FlashSacLearner, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(learner.num_envs, learner.layout.obs_dim, generator=g).to(learner.device)
    return obs, torch.zeros(learner.num_envs, dtype=torch.bool, device=learner.device)


def _act(learner: FlashSacLearner, seed: int = 0) -> torch.Tensor:
    with learner.acting():  # as the tick loop serves it
        return learner.act(*_inputs(learner, seed))


def _act_from(learner: FlashSacLearner, exploration: dict[str, torch.Tensor]) -> torch.Tensor:
    """An act from a fixed exploration state and noise draw."""
    learner.exploration.load_state_dict(exploration)
    torch.manual_seed(123)
    return _act(learner)


def test_each_cycle_publishes_the_actor_it_left_as_the_policy() -> None:
    learner = make_learner(seed=2)
    fill(learner, 3)
    for i in range(2):
        run_cycle(learner, i)
        for key, value in params(learner.actor).items():
            assert torch.equal(params(learner.policy)[key], value), key


def test_act_reads_the_policy_not_the_actor_between_cycles() -> None:
    learner = make_learner(seed=2)
    fill(learner, 3)
    run_cycle(learner, 0)
    exploration = learner.exploration.state_dict()
    before = _act_from(learner, exploration)
    with torch.no_grad():
        for p in learner.actor.parameters():
            p.mul_(-1.0)  # an update in progress: the actor moved, no cycle published it
    assert torch.equal(_act_from(learner, exploration), before)
    run_cycle(learner, 1)
    assert not torch.equal(_act_from(learner, exploration), before)


def test_loading_a_checkpoint_makes_the_restored_actor_the_policy() -> None:
    source = make_learner(seed=2)
    fill(source, 3)
    run_cycle(source, 0)
    fresh = make_learner(seed=9)
    fresh.load_state_dict(source.state_dict())
    for key, value in params(source.actor).items():
        assert torch.equal(params(fresh.policy)[key], value), key


def test_the_policy_is_not_trained_and_on_the_cpu_there_is_no_act_stream() -> None:
    learner = make_learner()
    assert not any(p.requires_grad for p in learner.policy.parameters())
    assert learner.cuda_graph_diagnostics()["act_stream"] == {"enabled": False, "priority": None}


@pytest.mark.gpu
@pytest.mark.parametrize("use_graph", [True, False], ids=["graph", "eager"])
def test_on_cuda_acting_on_the_inference_stream_equals_acting_in_order(use_graph: bool) -> None:
    """Two learners of one seed: one serves every action on its inference stream between
    unsynchronised cycles (as the tick loop does), the other synchronises around each act;
    both act the same."""
    sizes = {"batch_size": 256, "num_envs": 64, "replay_buffer_n": 64, "use_cuda_graph": use_graph}
    streamed, ordered = (make_learner("cuda", seed=4, **sizes) for _ in range(2))
    for learner in (streamed, ordered):
        fill(learner, 8)
    diag = streamed.cuda_graph_diagnostics()["act_stream"]
    assert diag["enabled"] and diag["priority"] == torch.cuda.Stream.priority_range()[1]
    for i in range(6):
        torch.manual_seed(100 + i)
        a = _act(streamed, i)
        torch.manual_seed(100 + i)
        torch.cuda.synchronize()
        b = ordered.act(*_inputs(ordered, i))
        torch.cuda.synchronize()
        torch.testing.assert_close(a, b, atol=0, rtol=0)
        for learner in (streamed, ordered):
            torch.manual_seed(i)
            learner.prepare_iteration()
            learner.update_cycle()  # no sync: the next act must wait for the policy copy
