"""capture_graph's contract: warm-up calls leave no trace, random draws included."""

from __future__ import annotations

import pytest
import torch

from trainer.cuda_graphs import capture_graph, record_graph


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


@pytest.mark.gpu
def test_record_graph_advances_a_registered_generator_on_every_replay() -> None:
    """What the env's phase graphs rely on: a registered side generator draws fresh numbers
    per replay, the same sequence an eager loop draws from the same seed."""
    gen = torch.Generator(device="cuda")
    out = torch.zeros(1024, device="cuda")

    def body() -> None:
        out.copy_(torch.rand(1024, device="cuda", generator=gen))

    gen.manual_seed(5)
    eager = []
    for _ in range(3):
        body()
        eager.append(out.clone())
    stream = torch.cuda.Stream()
    graph = record_graph(body, stream=stream, generators=(gen,), capture_error_mode="thread_local")
    gen.manual_seed(5)  # as the env does: reseed after capture, then replay
    replays = []
    for _ in range(3):
        graph.replay()
        replays.append(out.clone())
    for got, want in zip(replays, eager, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert not torch.equal(replays[0], replays[1])
