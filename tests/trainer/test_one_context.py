"""``python -m trainer.bench.one_context``: its refusals, its document and its table."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from rich.console import Console

from contracts.schemas import validate
from trainer.bench import one_context

DOC = {
    "tool": "one_context",
    "schema_version": 1,
    "device": "NVIDIA H200",
    "torch": "2.11.0",
    "config": {"num_envs": 1024, "env_stream_priority": "default", "cycles": 500, "reps": 1},
    "alone": {"cycle_ms": 4.19, "env_steps_per_s": 218444.8},
    "free": [{"cycle_ms": 5.38, "env_steps_per_s": 107899.2}],
    "paced": [{"iteration_ms": 8.897, "env_steps_per_s": 115097.3}],
    "pipelined": [{"iteration_ms": 7.412, "env_steps_per_s": 138154.3}],
    "timeline": {
        "turns": 200, "iteration_ms": 7.3, "env_step_ms": 5.9, "cycle_ms": 5.1,
        "overlap_ms": 3.8, "idle_ms": 0.1,
    },
}  # fmt: skip


def test_an_unknown_stream_priority_is_a_usage_error(capsys) -> None:
    assert one_context.cli(["--env-stream-priority", "urgent"]) == 2
    assert "'urgent' must be one of default, high" in capsys.readouterr().err


def test_a_timeline_plot_that_is_not_a_png_is_a_usage_error(tmp_path, capsys) -> None:
    plot = tmp_path / "timeline.svg"
    assert one_context.cli(["--timeline-plot", str(plot)]) == 2
    assert f"'{plot}' must end in .png" in capsys.readouterr().err
    assert not plot.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_without_cuda_it_refuses_in_one_line_and_writes_nothing(tmp_path, capsys) -> None:
    out = tmp_path / "oc.json"
    assert one_context.cli(["--output", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "needs a CUDA device" in err
    assert not out.exists()


def test_the_schema_takes_the_document_and_refuses_a_float_count() -> None:
    assert validate(DOC, one_context.SCHEMA) == []
    bad = copy.deepcopy(DOC)
    bad["config"]["num_envs"] = 1024.0
    assert validate(bad, one_context.SCHEMA) != []
    bad = copy.deepcopy(DOC)
    bad["paced"] = []
    assert validate(bad, one_context.SCHEMA) != []
    bad = copy.deepcopy(DOC)
    bad["pipelined"][0]["iteration_ms"] = 0
    assert validate(bad, one_context.SCHEMA) != []
    bad = copy.deepcopy(DOC)
    bad["timeline"]["turns"] = 200.0
    assert validate(bad, one_context.SCHEMA) != []
    bad = copy.deepcopy(DOC)
    del bad["timeline"]["overlap_ms"]
    assert validate(bad, one_context.SCHEMA) != []


def test_a_document_written_before_the_pipelined_mode_still_validates_and_renders() -> None:
    old = {k: v for k, v in DOC.items() if k not in ("pipelined", "timeline")}
    assert validate(old, one_context.SCHEMA) == []
    console = Console(width=160, record=True)
    one_context.render(old, console)
    assert "pipelined" not in console.export_text()
    assert "timeline" not in console.export_text()


def test_the_table_has_a_row_per_mode_and_repetition() -> None:
    console = Console(width=160, record=True)
    one_context.render(DOC, console)
    text = console.export_text()
    assert "learner + 1024 mjwarp envs in one CUDA context (env stream default)" in text
    cells = [line.strip("│┃ ").split() for line in text.splitlines()]
    rows = [c[0] for c in cells if c[:1] in (["alone"], ["free"], ["paced,"], ["pipelined,"])]
    assert rows == ["alone", "free", "paced,", "pipelined,"]
    assert "115,097" in text and "8.897" in text
    assert "138,154" in text and "7.412" in text
    assert (
        "pipelined timeline (200 turns, CUDA events), per iteration of 7.300 ms: env step "
        "5.900 ms, learner cycle 5.100 ms, both running 3.800 ms, neither 0.100 ms"
    ) in " ".join(text.split())


class FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        self.recorded_on = None
        self.timing = enable_timing

    def record(self, stream) -> None:
        self.recorded_on = stream
        stream.ops.append(("record", self))

    def synchronize(self) -> None:
        pass


class FakeStream:
    def __init__(self) -> None:
        self.waited: list[FakeEvent] = []
        self.ops: list[tuple[str, object]] = []

    def wait_event(self, event: FakeEvent) -> None:
        self.waited.append(event)
        self.ops.append(("wait", event))


@pytest.fixture
def fake_cuda(monkeypatch) -> FakeStream:
    """take_turn's CUDA calls on the host: one stream that records what it was told to wait for."""
    stream = FakeStream()
    monkeypatch.setattr(one_context.torch.cuda, "current_stream", lambda: stream)
    monkeypatch.setattr(one_context.torch.cuda, "Event", FakeEvent)
    return stream


def test_pipelined_cycle_i_waits_for_env_step_i_minus_1_as_trains_tick_loop(fake_cuda) -> None:
    steps: list[FakeEvent] = []
    cycles: list[FakeEvent] = []
    ran: list[str] = []
    never_wait = lambda: False  # a turn that would have to wait gives up instead
    lag = one_context.CYCLE_LAGS["pipelined"]
    # cycle 0 needs no env step: it may start while env step 0 has not been enqueued
    assert one_context.take_turn(cycles, steps, lag, lambda: ran.append("c0"), never_wait)
    for i in range(3):
        assert one_context.take_turn(steps, cycles, 1, lambda i=i: ran.append(f"e{i}"), never_wait)
        if i + 1 < 3:
            work = lambda i=i: ran.append(f"c{i + 1}")
            assert one_context.take_turn(cycles, steps, lag, work, never_wait)
    assert ran == ["c0", "e0", "c1", "e1", "c2", "e2"]
    # in turn order c1, e1, c2, e2: cycle i waited for env step i-1 and env step i for cycle
    # i-1, never a side for the other's turn of its own index
    assert fake_cuda.waited == [steps[0], cycles[0], steps[1], cycles[1]]


def test_paced_cycle_i_waits_for_env_step_i_the_serial_chain(fake_cuda) -> None:
    steps: list[FakeEvent] = []
    cycles: list[FakeEvent] = []
    never_wait = lambda: False
    lag = one_context.CYCLE_LAGS["paced"]
    assert not one_context.take_turn(cycles, steps, lag, lambda: None, never_wait)
    assert one_context.take_turn(steps, cycles, 1, lambda: None, never_wait)
    assert not one_context.take_turn(steps, cycles, 1, lambda: None, never_wait)
    assert one_context.take_turn(cycles, steps, lag, lambda: None, never_wait)
    assert fake_cuda.waited == [steps[0]]


def test_a_timed_turn_brackets_only_its_own_work_after_the_wait(fake_cuda) -> None:
    steps: list[FakeEvent] = [FakeEvent()]
    steps[0].record(fake_cuda)
    cycles: list[FakeEvent] = []
    starts: dict[int, FakeEvent] = {}
    never_wait = lambda: False
    lag = one_context.CYCLE_LAGS["pipelined"]
    untimed = lambda: fake_cuda.ops.append(("work", "c0"))
    assert one_context.take_turn(cycles, steps, lag, untimed, never_wait)
    assert not cycles[0].timing and starts == {}
    fake_cuda.ops.clear()
    timed = lambda: fake_cuda.ops.append(("work", "c1"))
    assert one_context.take_turn(cycles, steps, lag, timed, never_wait, starts)
    # the span runs from after the wait for env step 0 to after the cycle's own work
    assert list(starts) == [1] and starts[1].timing and cycles[1].timing
    assert fake_cuda.ops == [
        ("wait", steps[0]), ("record", starts[1]), ("work", "c1"), ("record", cycles[1]),
    ]  # fmt: skip


class ChunkedEnv:
    """Stands in for the env thread: its step count moves one chunk on every ``during()``."""

    def __init__(self) -> None:
        self.plan = SimpleNamespace(num_envs=64)
        self.steps = 0
        self.calls = 0

    def raise_if_failed(self) -> None:
        pass

    def during(self) -> float:
        self.calls += 1
        if self.calls > 2:  # the first two windows end before the env finishes a chunk
            self.steps += one_context.ENV_CHUNK * self.plan.num_envs
        return float(self.calls)


def test_a_window_too_short_for_a_chunk_repeats_instead_of_reading_zero_steps() -> None:
    env = ChunkedEnv()
    mean, rate = one_context._while_env_steps(env, env.during)
    assert env.calls == 2 + one_context.MIN_ENV_CHUNKS
    assert mean == sum(range(1, env.calls + 1)) / env.calls
    assert rate > 0


@pytest.mark.gpu
def test_a_small_measurement_writes_a_valid_document(tmp_path) -> None:
    pytest.importorskip("mujoco_warp")
    out = tmp_path / "oc.json"
    plot = tmp_path / "timeline.png"
    args = ["--num-envs", "64", "--cycles", "5", "--reps", "1", "--output", str(out), "--json",
            "--timeline-plot", str(plot)]  # fmt: skip
    assert one_context.cli(args) == 0
    import json

    doc = json.loads(out.read_text())
    assert validate(doc, one_context.SCHEMA) == []
    assert doc["paced"][0]["iteration_ms"] > 0 and doc["pipelined"][0]["iteration_ms"] > 0
    tl = doc["timeline"]
    assert 1 <= tl["turns"] <= one_context.TIMELINE_TURNS
    assert tl["overlap_ms"] <= min(tl["env_step_ms"], tl["cycle_ms"])
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_a_learner_whose_fusion_fell_back_is_refused_before_the_env(monkeypatch) -> None:
    # as on an H100 on 2026-12-07: inductor failed in a warm process, the learner went unfused
    # and the bench timed a 5.82 ms cycle as the fused one's
    diagnostics = {"fallbacks": [{"feature": "fusion", "reason": "graph warm-up/capture failed"}]}
    learner = SimpleNamespace(cuda_graph_diagnostics=lambda: diagnostics)
    monkeypatch.setattr(one_context, "build_captured_learner", lambda *a: (learner, None))
    monkeypatch.setattr(one_context, "owner_cfg", lambda spec: None)

    with pytest.raises(RuntimeError, match="the learner's fusion fell back at capture"):
        one_context.fused_learner(SimpleNamespace())

    diagnostics["fallbacks"] = []
    assert one_context.fused_learner(SimpleNamespace()) is learner
