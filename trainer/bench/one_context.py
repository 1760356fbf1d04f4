"""The learner's update cycle and the env in one process, one CUDA context.

``python -m trainer.bench.one_context --num-envs 1024 --output /tmp/one-context.json``

In ``train`` the collector is a process of its own. Without MPS its CUDA context and the
learner's are time-sliced, and the iteration pays the switches between them
(docs/runtime.md, "Learner profile"). This tool measures what a collector inside the
learner's process would give: it builds the learner of the g1 owner (as the learner profile
does) and the collector's env (``make_env``), each on a stream of its own, the env stepped by
a thread, and times

* ``alone``: the cycle with the env idle, and the env with the learner idle;
* ``free``: both running flat out at once (the cycle in CUDA events, the env's steps/s);
* ``pipelined``: one cycle per env step, ordered as ``train``'s tick loop orders them. Env
  step i waits on the GPU for cycle i-1 (its action reads the policy that cycle published),
  and cycle i for env step i-1: the update of tick i commits the transitions of tick i-1, so
  env step i and cycle i may run at once. The iteration is wall time per pair.
* ``paced``: the same, but cycle i waits for env step i: a serial chain, one turn stricter
  than ``train``, whose iteration is what the pair costs when nothing overlaps.
* ``timeline``: pipelined turns again, each side's work between two timing events on its own
  stream, so the document says per turn how long each side ran on the GPU, how much of it
  overlapped and how long neither ran (``trainer/bench/pair_timeline.py``); ``--timeline-plot``
  draws the first turns as two rows.

The env's actions are uniform random, so the physics is the task's but not the policy's.
CUDA only: without a GPU there is one stream and nothing to measure (exit 1).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import torch
import typer
from rich.console import Console
from rich.table import Table

from contracts.cli_app import run_app
from contracts.motions import SYNTHETIC_MOTION_ID
from trainer.bench import pair_timeline
from trainer.bench.env_throughput import EnvFactory
from trainer.bench.learner_profile import (
    Spec,
    build_captured_learner,
    emit_document,
    owner_cfg,
    refuse_fallbacks,
)
from trainer.sim.mjwarp_options import STREAM_PRIORITIES, StreamPriority

SCHEMA = "one_context.v1.json"
HOST_LEAD = 4
"""How many steps (or cycles) a side's host may enqueue ahead of its GPU work."""
ENV_ALONE_S = 3.0
ENV_CHUNK = 10
"""Free-running env steps between two syncs; its step count only moves in these chunks."""
MIN_ENV_CHUNKS = 5
"""Chunks a free window must span, so that the rate is not rounded to a chunk (or to 0)."""
STOP_TIMEOUT_S = 60.0
CYCLE_LAGS = {"paced": 0, "pipelined": 1}
"""Per paced mode, the lag of the env step that cycle i waits for: env step i - lag."""
TIMELINE_TURNS = 200
"""Pipelined turns the timeline reads; timing events cost a little, so the reps run without."""


app = typer.Typer(add_completion=False)


class OneContextError(RuntimeError):
    """The measurement cannot run here, or its env thread failed; the message says why."""


@dataclass(frozen=True)
class Plan:
    num_envs: int
    env_stream_priority: StreamPriority
    cycles: int
    reps: int
    device: torch.device
    timeline_plot: Path | None = None


class EnvThread:
    """The env on a stream of its own, stepped by a daemon thread: flat out, or paced."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.ready, self.stop, self.paced = threading.Event(), threading.Event(), threading.Event()
        self.timing = threading.Event()
        self.steps = 0
        self.step_done: list[torch.cuda.Event] = []
        self.cycle_done: list[torch.cuda.Event] = []  # appended by the learner side
        self.step_start: dict[int, torch.cuda.Event] = {}  # turns stepped while timing is set
        self.cycle_start: dict[int, torch.cuda.Event] = {}  # filled by the learner side
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="env-one-context", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self.ready.wait()
        self.raise_if_failed()

    def close(self) -> None:
        self.stop.set()
        self._thread.join(timeout=STOP_TIMEOUT_S)
        if self._thread.is_alive():
            msg = f"the env thread did not stop within {STOP_TIMEOUT_S:g} s of the request"
            raise OneContextError(msg)

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise OneContextError(f"the env thread failed: {self.error}")

    def still_stepping(self) -> bool:
        """The learner side's ``keep_waiting``: wait on, unless the env thread failed."""
        self.raise_if_failed()
        return True

    def _run(self) -> None:
        plan, dev = self.plan, self.plan.device
        try:
            with torch.cuda.stream(torch.cuda.Stream(device=dev)):
                env = EnvFactory.for_motion(SYNTHETIC_MOTION_ID).build(
                    "mjwarp", plan.num_envs, dev, seed=7, compile_task=True,
                    stream_priority=plan.env_stream_priority,
                )  # fmt: skip
                gen = torch.Generator(device=dev).manual_seed(7)
                actions = torch.empty(plan.num_envs, env.spec.action_dim, device=dev)

                def step() -> None:
                    env.step(
                        torch.rand(actions.shape, generator=gen, device=dev, out=actions) * 2 - 1
                    )

                for _ in range(30):
                    step()
                torch.cuda.current_stream().synchronize()
                self.ready.set()
                while not self.stop.is_set():
                    if self.paced.is_set():
                        self._paced_step(step)
                    else:
                        for _ in range(ENV_CHUNK):
                            step()
                        torch.cuda.current_stream().synchronize()
                        self.steps += ENV_CHUNK * plan.num_envs
        except Exception as exc:  # noqa: BLE001 - reported to the main thread, which raises it
            self.error = f"{type(exc).__name__}: {exc}"
            self.ready.set()

    def _paced_step(self, step: Callable[[], None]) -> None:
        # env step i waits for cycle i-1, whose policy its action reads
        starts = self.step_start if self.timing.is_set() else None
        keep_waiting = lambda: not self.stop.is_set()
        if take_turn(self.step_done, self.cycle_done, 1, step, keep_waiting, starts):
            self.steps += self.plan.num_envs


def take_turn(
    own: list[torch.cuda.Event],
    other: list[torch.cuda.Event],
    lag: int,
    work: Callable[[], None],
    keep_waiting: Callable[[], bool],
    starts: dict[int, torch.cuda.Event] | None = None,
) -> bool:
    """One side's turn k = ``len(own)`` of the paced schedule, on the current stream.

    It waits (on the host, spinning with the GIL released) until the other side has enqueued
    its turn k - ``lag``, orders the GPU after it, lets its own host run at most
    :data:`HOST_LEAD` turns ahead of its GPU work, runs ``work`` and records its event.
    With ``starts``, both events time: ``starts[k]`` is recorded after the wait, so the span
    from it to the turn's event is the side's own work on the GPU.
    Returns False, having done nothing, when ``keep_waiting()`` turns false while waiting.
    """
    k, need = len(own), len(own) + 1 - lag
    while len(other) < need:
        if not keep_waiting():
            return False
        time.sleep(0)
    stream = torch.cuda.current_stream()
    if need >= 1:
        stream.wait_event(other[need - 1])
    if k >= HOST_LEAD:
        own[k - HOST_LEAD].synchronize()
    timed = starts is not None
    if timed:
        starts[k] = torch.cuda.Event(enable_timing=True)
        starts[k].record(stream)
    work()
    done = torch.cuda.Event(enable_timing=timed)
    done.record(stream)
    own.append(done)
    return True


def _timed_ms(fn: Callable[[], None], iters: int, stream: torch.cuda.Stream) -> float:
    # learner_profile's timer syncs the whole device, which here would wait for the env too
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    stream.synchronize()
    start.record(stream)
    for _ in range(iters):
        fn()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end) / iters


def _learner_spec(plan: Plan) -> Spec:
    return Spec(
        num_envs=plan.num_envs, overrides=(), device=plan.device, cycles=plan.cycles,
        profile_cycles=1, warmup=20, fill_ticks=64,
    )  # fmt: skip


def fused_learner(spec: Spec) -> Any:
    """The owner's learner with every fusion, captured; one that dropped an acceleration at
    capture (the cycle would be another one's) raises before the env is built."""
    learner, _ = build_captured_learner(spec, owner_cfg(spec), "fused")
    fix = "the compile error is logged above; run the measurement again in a fresh process"
    refuse_fallbacks("fused", learner.cuda_graph_diagnostics(), fix)
    return learner


def measure(plan: Plan) -> dict[str, Any]:
    """Build both sides, then time them alone, free-running, paced and pipelined."""
    stream = torch.cuda.Stream(device=plan.device)
    spec = _learner_spec(plan)
    with torch.cuda.stream(stream):
        learner = fused_learner(spec)

        def cycle() -> None:
            learner.prepare_iteration()
            learner.update_cycle()

        cycle_alone = _timed_ms(cycle, plan.cycles, stream)
        env = EnvThread(plan)
        env.start()
        try:
            _, env_alone = _while_env_steps(env, lambda: _slept(ENV_ALONE_S))
            free = []
            for _ in range(plan.reps):
                cycle_ms, rate = _while_env_steps(
                    env, lambda: _timed_ms(cycle, plan.cycles, stream)
                )
                free.append({"cycle_ms": round(cycle_ms, 4), "env_steps_per_s": round(rate, 1)})
            paced = {mode: _paced(env, cycle, plan, lag) for mode, lag in CYCLE_LAGS.items()}
            env_spans, cycle_spans = _timeline_spans(env, cycle, stream)
        finally:
            env.close()
    if plan.timeline_plot is not None:
        title = (f"{torch.cuda.get_device_name(plan.device)}, {plan.num_envs} envs: "
                 "env step and learner cycle in one context, pipelined as train orders them")  # fmt: skip
        pair_timeline.plot(env_spans, cycle_spans, plan.timeline_plot, title)
    return {
        "alone": {"cycle_ms": round(cycle_alone, 4), "env_steps_per_s": round(env_alone, 1)},
        "free": free,
        **paced,
        "timeline": pair_timeline.summarize(env_spans, cycle_spans),
    }


def _slept(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _while_env_steps(env: EnvThread, during: Callable[[], float]) -> tuple[float, float]:
    """The mean of ``during()``'s results and the env's steps/s while it ran.

    ``during()`` repeats until the window spans :data:`MIN_ENV_CHUNKS` of the env's chunks:
    a few short cycles can end before the env finishes one, which would read as 0 steps/s.
    """
    steps, start = env.steps, time.perf_counter()
    results, need = [], MIN_ENV_CHUNKS * ENV_CHUNK * env.plan.num_envs
    while not results or env.steps - steps < need:
        results.append(during())
        env.raise_if_failed()
    return sum(results) / len(results), (env.steps - steps) / (time.perf_counter() - start)


def _paced(
    env: EnvThread, cycle: Callable[[], None], plan: Plan, lag: int
) -> list[dict[str, float]]:
    """Repetitions of one cycle per env step, cycle i after env step i - ``lag``."""
    env.paced.set()

    def run(count: int) -> None:
        for _ in range(count):
            take_turn(env.cycle_done, env.step_done, lag, cycle, env.still_stepping)

    run(100)  # into the steady state
    reps = []
    for _ in range(plan.reps):
        start = time.perf_counter()
        run(plan.cycles)
        env.cycle_done[-1].synchronize()
        iteration_s = (time.perf_counter() - start) / plan.cycles
        reps.append({
            "iteration_ms": round(iteration_s * 1e3, 4),
            "env_steps_per_s": round(plan.num_envs / iteration_s, 1),
        })  # fmt: skip
    return reps


def _timeline_spans(
    env: EnvThread, cycle: Callable[[], None], stream: torch.cuda.Stream
) -> tuple[list[pair_timeline.Span], list[pair_timeline.Span]]:
    """:data:`TIMELINE_TURNS` pipelined turns with timing events: each side's spans in ms.

    Runs after the paced modes, continuing their turn count (the env thread is still paced).
    Only turns that both sides timed count; the times are read against a reference event
    that completed before the first of them.
    """
    reference = torch.cuda.Event(enable_timing=True)
    reference.record(stream)
    reference.synchronize()
    env.timing.set()
    lag = CYCLE_LAGS["pipelined"]
    for _ in range(TIMELINE_TURNS):
        take_turn(env.cycle_done, env.step_done, lag, cycle, env.still_stepping, env.cycle_start)
    last = len(env.cycle_done) - 1
    while len(env.step_done) <= last:  # env step `last` follows cycle last-1, already enqueued
        env.still_stepping()
        time.sleep(0)
    env.timing.clear()
    env.step_done[last].synchronize()
    env.cycle_done[last].synchronize()
    turns = sorted(k for k in env.cycle_start if k in env.step_start)
    if not turns:
        raise OneContextError("the env thread timed none of the learner's timeline turns")

    def span(
        starts: dict[int, torch.cuda.Event], done: list[torch.cuda.Event], k: int
    ) -> pair_timeline.Span:
        return (reference.elapsed_time(starts[k]), reference.elapsed_time(done[k]))

    env_spans = [span(env.step_start, env.step_done, k) for k in turns]
    cycle_spans = [span(env.cycle_start, env.cycle_done, k) for k in turns]
    return env_spans, cycle_spans


def build_document(plan: Plan) -> dict[str, Any]:
    return {
        "tool": "one_context",
        "schema_version": 1,
        "device": torch.cuda.get_device_name(plan.device),
        "torch": torch.__version__,
        "config": {
            "num_envs": plan.num_envs,
            "env_stream_priority": plan.env_stream_priority,
            "cycles": plan.cycles,
            "reps": plan.reps,
        },
        **measure(plan),
    }


def render(doc: dict[str, Any], console: Console) -> None:
    n = doc["config"]["num_envs"]
    table = Table(
        title=f"learner + {n} mjwarp envs in one CUDA context "
        f"(env stream {doc['config']['env_stream_priority']})",
        title_justify="left",
    )
    for col in ("mode", "learner cycle ms", "env steps/s", "env step ms", "iteration ms"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    alone = doc["alone"]
    table.add_row("alone", f"{alone['cycle_ms']:.3f}", f"{alone['env_steps_per_s']:,.0f}",
                  f"{n / alone['env_steps_per_s'] * 1e3:.3f}", "-")  # fmt: skip
    for rep in doc["free"]:
        table.add_row("free", f"{rep['cycle_ms']:.3f}", f"{rep['env_steps_per_s']:,.0f}",
                      f"{n / rep['env_steps_per_s'] * 1e3:.3f}", "-")  # fmt: skip
    labels = {"paced": "paced, serial", "pipelined": "pipelined, as train"}
    for mode, label in labels.items():
        for rep in doc.get(mode, ()):  # documents before 2026-12-07 have no pipelined
            table.add_row(label, "-", f"{rep['env_steps_per_s']:,.0f}", "-",
                          f"{rep['iteration_ms']:.3f}")  # fmt: skip
    console.print(table)
    tl = doc.get("timeline")  # documents before 2026-12-07 have none
    if tl is not None:
        console.print(
            f"pipelined timeline ({tl['turns']} turns, CUDA events), per iteration of "
            f"{tl['iteration_ms']:.3f} ms: env step {tl['env_step_ms']:.3f} ms, learner cycle "
            f"{tl['cycle_ms']:.3f} ms, both running {tl['overlap_ms']:.3f} ms, neither "
            f"{tl['idle_ms']:.3f} ms"
        )


@app.command()
def main(
    num_envs: Annotated[int, typer.Option(min=1, help="Envs and algo.num_envs.")] = 1024,
    env_stream_priority: Annotated[
        str, typer.Option(help="The env's mjwarp stream: default, or high (the device's highest).")
    ] = "default",
    cycles: Annotated[int, typer.Option(min=1, help="Cycles per timed repetition.")] = 500,
    reps: Annotated[int, typer.Option(min=1, help="Repetitions of free, paced and pipelined.")] = 3,
    output: Annotated[Path | None, typer.Option(help="Write the JSON document here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print only the JSON document.")] = False,
    timeline_plot: Annotated[
        Path | None,
        typer.Option(help="Also draw the first pipelined turns' GPU timelines here (PNG)."),
    ] = None,
) -> None:
    """Time the learner's cycle and the env in one process: alone, together, paced, pipelined.

    Example: ``python -m trainer.bench.one_context --num-envs 1024 --output /tmp/oc.json
    --timeline-plot /tmp/oc-timeline.png``
    """
    if env_stream_priority not in STREAM_PRIORITIES:
        raise typer.BadParameter(
            f"{env_stream_priority!r} must be one of {', '.join(STREAM_PRIORITIES)}",
            param_hint="--env-stream-priority",
        )
    if timeline_plot is not None and timeline_plot.suffix.lower() != ".png":
        raise typer.BadParameter(
            f"{str(timeline_plot)!r} must end in .png (the plot is a PNG)",
            param_hint="--timeline-plot",
        )
    if not torch.cuda.is_available():
        raise OneContextError(
            "one_context needs a CUDA device (two streams of one context); run it on the GPU "
            "machine, or use learner_profile --beside-env for the two-process case"
        )
    device = torch.device("cuda", 0)
    plan = Plan(num_envs, env_stream_priority, cycles, reps, device, timeline_plot)  # type: ignore[arg-type]
    emit_document(build_document(plan), SCHEMA, output, json_out, render)


def cli(argv: list[str] | None = None) -> int:
    """Entry point: usage errors exit 2, a failed measurement exits 1."""
    return run_app(
        app,
        sys.argv[1:] if argv is None else argv,
        prog="python -m trainer.bench.one_context",
        failures={RuntimeError: str},  # OneContextError, or a document off its schema
    )


if __name__ == "__main__":
    raise SystemExit(cli())
