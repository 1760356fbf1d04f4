"""capture_graph's contract: warm-up calls leave no trace, random draws included."""

from __future__ import annotations

import pytest
import torch

from trainer.cuda_graphs import capture_graph


@pytest.mark.gpu
def test_first_replay_draws_what_an_eager_first_call_draws() -> None:
    noise = torch.zeros(4096, device="cuda")
    counter = torch.zeros((), device="cuda")

    def body() -> None:
        noise.copy_(torch.randn(4096, device="cuda"))
        counter.add_(1)

    torch.manual_seed(3)
    body()
    eager = noise.clone()
    counter.zero_()
    torch.manual_seed(3)
    graph = capture_graph(body, [noise, counter], warmup_calls=3)
    assert counter.item() == 0, "warm-up calls leaked into the state"
    graph.replay()
    torch.testing.assert_close(noise, eager, rtol=0, atol=0)
    assert counter.item() == 1
