"""How far a learner variant moves from the owner's learner, against the owner's own rerun.

A fusion that keeps the maths may still change the last bits of a sum. Whether that matters
is judged against the owner rebuilt from the same seeds on the same rows: on CUDA the captured
cycle does not reproduce itself bit for bit (the C51 projection's ``scatter_add`` adds
atomically), and training carries those bits forward. The tool builds the g1 owner's learner
(as ``train`` builds it), the same again, and each variant (``learner_profile``'s
``VARIANTS``), each from the same seeds on the same synthetic rows; captures its graphs; runs
update cycles; and at each ``--cycles`` checkpoint acts once and compares every actor, critic
and target parameter and the action with the first build's. A variant passes when at every
checkpoint it is bit-equal to the owner or moves it no more than ``--factor`` times the rerun
did. The checkpoints show how a difference grows, from the first cycle on; the H200's
figures are in docs/runtime.md "Learner profile" (see also docs/evaluation.md "Comparing two
configurations").
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

import torch
import typer
from rich.console import Console
from rich.table import Table

from contracts.cli_app import run_app
from trainer.algo.fusion import CycleFusion
from trainer.algo.learner import FlashSacLearner
from trainer.bench.learner_profile import (
    VARIANTS,
    Spec,
    emit_document,
    fill_replay,
    owner_cfg,
    parse_variants,
    refuse_fallbacks,
    resolve_device,
)
from trainer.task.spec import G1_TRACKING_SPEC

SCHEMA = "cycle_drift.v1.json"
REFERENCE = "owner"


@dataclass(frozen=True)
class DriftPlan:
    """What one drift measurement builds and runs."""

    profile: Spec  # sizes, overrides and device (its timing fields are unused)
    checkpoints: tuple[int, ...]  # increasing cycle counts at which the states are compared
    seed: int
    factor: float


@dataclass(frozen=True)
class Drift:
    """One build's state against the owner's first build after ``cycles`` update cycles."""

    cycles: int
    tensors: int
    bit_equal: int
    max_abs_diff: float
    worst_tensor: str
    action_max_abs_diff: float


State = dict[str, torch.Tensor]


def drift(cycles: int, reference: State, other: State) -> Drift:
    """Bit-equal tensors and the largest absolute difference (and where) between two states."""
    diffs = {name: float((reference[name] - other[name]).abs().max()) for name in reference}
    worst = max(diffs, key=diffs.__getitem__)
    return Drift(
        cycles=cycles,
        tensors=len(reference),
        bit_equal=sum(torch.equal(reference[n], other[n]) for n in reference),
        max_abs_diff=diffs[worst],
        worst_tensor=worst,
        action_max_abs_diff=diffs["action"],
    )


def verdict(moved: Drift, rerun: Drift, factor: float) -> str:
    """``bit_equal``, ``within_rerun`` (at most ``factor`` times the rerun's difference) or
    ``beyond_rerun``; on a device that reproduces itself any difference is beyond it."""
    if moved.max_abs_diff == 0.0:
        return "bit_equal"
    if moved.max_abs_diff <= factor * rerun.max_abs_diff:
        return "within_rerun"
    return "beyond_rerun"


_SEVERITY = ("bit_equal", "within_rerun", "beyond_rerun")


def judge(moved: Sequence[Drift], rerun: Sequence[Drift], factor: float) -> list[dict[str, Any]]:
    """Each checkpoint's drift with its ratio to the rerun's and its verdict."""
    rows = []
    for m, r in zip(moved, rerun, strict=True):
        ratio = m.max_abs_diff / r.max_abs_diff if r.max_abs_diff > 0 else None
        rows.append(
            {
                **asdict(m),
                "ratio_to_rerun": None if ratio is None else round(ratio, 4),
                "verdict": verdict(m, r, factor),
            }
        )
    return rows


def worst_verdict(rows: Sequence[dict[str, Any]]) -> str:
    return max((row["verdict"] for row in rows), key=_SEVERITY.index)


def _snapshot(learner: FlashSacLearner, obs: torch.Tensor) -> State:
    """Every actor, critic and target parameter and one action, copied to the CPU."""
    action = learner.act(obs, torch.zeros(learner.num_envs, device=obs.device))
    modules = {"actor": learner.actor, "critic": learner.critic, "target": learner.critic_target}
    state = {
        f"{prefix}.{n}": p.detach().float().cpu().clone()
        for prefix, module in modules.items()
        for n, p in module.named_parameters()
    }
    state["action"] = action.detach().float().cpu().clone()
    return state


def train_states(
    plan: DriftPlan, name: str, fusion: CycleFusion | None
) -> tuple[list[State], dict[str, Any]]:
    """Build one learner from the plan's seeds and run it to each checkpoint, taking a state
    there; return the states and the run record. ``fusion`` None is the owner's, as ``train``
    builds it."""
    spec, dev = plan.profile, plan.profile.device
    t0 = time.perf_counter()
    cfg = owner_cfg(spec)
    torch.manual_seed(plan.seed)
    learner = FlashSacLearner(
        cfg, G1_TRACKING_SPEC, num_envs=cfg.num_envs, device=dev, fusion=fusion
    )
    fill_replay(learner, spec.fill_ticks, seed=plan.seed)
    learner.prepare_iteration()
    learner.capture_graphs()
    refuse_fallbacks(name, learner.cuda_graph_diagnostics())
    gen = torch.Generator(device=dev).manual_seed(plan.seed + 2)
    obs = torch.randn(learner.num_envs, G1_TRACKING_SPEC.obs_dim, device=dev, generator=gen)
    torch.manual_seed(plan.seed + 1)  # the same sample indices and noise in every build
    states, done = [], 0
    for target in plan.checkpoints:
        for _ in range(target - done):
            learner.prepare_iteration()
            metrics = learner.update_cycle()
        done = target
        states.append(_snapshot(learner, obs))
    record = {
        "variant": name,
        "fusion": learner.cuda_graph_diagnostics()["fusion"]["enabled"],
        "critic_loss": float(metrics["Loss/critic"]),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    del learner
    gc.collect()  # the learner and its replay are gone before the next build
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return states, record


def build_document(
    plan: DriftPlan, variants: Sequence[str], progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """Build the owner twice and each variant once, then judge each variant; ``progress``
    hears one line per finished build (a build compiles and captures: a minute on a GPU)."""
    spec, marks = plan.profile, plan.checkpoints
    total, built = 2 + len(variants), 0

    def run(name: str, fusion: CycleFusion | None) -> tuple[list[State], dict[str, Any]]:
        nonlocal built
        states, record = train_states(plan, name, fusion)
        built += 1
        progress(f"cycle_drift: build {built}/{total} ({name}) took {record['seconds']:g} s")
        return states, record

    reference, ref_record = run(REFERENCE, None)
    again, again_record = run(REFERENCE, None)
    rerun = [drift(k, a, b) for k, a, b in zip(marks, reference, again, strict=True)]
    rows = []
    for name in variants:
        states, record = run(name, VARIANTS[name])
        moved = [drift(k, a, b) for k, a, b in zip(marks, reference, states, strict=True)]
        checkpoints = judge(moved, rerun, plan.factor)
        rows.append({**record, "drift": checkpoints, "verdict": worst_verdict(checkpoints)})
    dev = spec.device
    return {
        "tool": "cycle_drift",
        "schema_version": 1,
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "config": {
            "num_envs": spec.num_envs,
            "overrides": list(spec.overrides),
            "cycles": list(marks),
            "fill_ticks": spec.fill_ticks,
            "seed": plan.seed,
            "factor": plan.factor,
        },
        "reference": ref_record,
        "rerun": {**again_record, "drift": [asdict(d) for d in rerun]},
        "variants": rows,
        "passed": all(row["verdict"] != "beyond_rerun" for row in rows),
    }


def render(doc: dict[str, Any], console: Console) -> None:
    cfg = doc["config"]
    table = Table(
        title=(
            f"drift from the owner on {doc['device']} "
            f"(pass: bit-equal or at most {cfg['factor']:g}× the rerun at every checkpoint)"
        ),
        title_justify="left",
    )
    columns = ("build", "cycles", "bit-equal", "largest diff", "in", "action diff", "× rerun")
    for col in (*columns, "verdict"):
        table.add_column(col, justify="left" if col in ("build", "in", "verdict") else "right")
    builds = [("owner again", doc["rerun"]["drift"])]
    builds += [(row["variant"], row["drift"]) for row in doc["variants"]]
    for name, checkpoints in builds:
        for d in checkpoints:
            ratio = d.get("ratio_to_rerun")
            table.add_row(
                name, str(d["cycles"]), f"{d['bit_equal']}/{d['tensors']}",
                f"{d['max_abs_diff']:.3g}", d["worst_tensor"] if d["max_abs_diff"] else "-",
                f"{d['action_max_abs_diff']:.3g}",
                "-" if ratio is None else f"{ratio:.2f}", d.get("verdict", "-"),
            )  # fmt: skip
    console.print(table)


def _parse_checkpoints(text: str) -> tuple[int, ...]:
    try:
        marks = tuple(int(v) for v in text.split(","))
    except ValueError:
        marks = ()
    if not marks or marks[0] < 1 or any(b <= a for a, b in pairwise(marks)):
        raise typer.BadParameter(
            f"{text!r} must be increasing positive cycle counts; use e.g. 1,5,20",
            param_hint="--cycles",
        )
    return marks


app = typer.Typer(add_completion=False)


@app.command()
def main(
    variants: Annotated[
        str, typer.Option(help="Comma list of learner_profile's variants to compare.")
    ] = "no_combo,legacy",
    cycles: Annotated[
        str,
        typer.Option(
            help="Increasing cycle counts at which the states are compared, so that a"
            " variant is judged early and after training has grown the differences."
        ),
    ] = "1,5,20",
    num_envs: Annotated[int, typer.Option(min=1, help="algo.num_envs (the soak's 1024).")] = 1024,
    replay_per_env: Annotated[
        int,
        typer.Option(
            min=1,
            help="algo.replay_buffer_n: the cycle's kernels do not depend on it, and the"
            " owner's 8192 takes 31 GB per build.",
        ),
    ] = 128,
    override: Annotated[
        list[str] | None, typer.Option(help="algo.KEY=VALUE on top of the g1 owner; repeatable.")
    ] = None,
    fill_ticks: Annotated[int, typer.Option(min=1, help="Ticks of synthetic replay rows.")] = 100,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the networks, rows and noise.")] = 0,
    factor: Annotated[
        float,
        typer.Option(
            min=1.0, help="Pass when a variant moves the owner at most this many times the rerun."
        ),
    ] = 2.0,
    device: Annotated[str, typer.Option(help="Torch device (default: cuda if available).")] = "",
    output: Annotated[Path | None, typer.Option(help="Write the JSON document here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print only the JSON document.")] = False,
) -> None:
    """Compare learner variants with the owner's learner, measured against its own rerun.

    Example (H200, combo kernels off and all fusions off against the owner):

        python -m trainer.bench.cycle_drift --variants no_combo,legacy --output /tmp/drift.json

    Exit 0 when every variant is bit-equal or within --factor times the rerun's difference at
    every checkpoint, 1 when one is beyond it (the document is still written) or a build fell
    back, 2 bad input.
    """
    chosen = parse_variants(variants, example="no_combo,legacy")
    if REFERENCE in chosen:
        raise typer.BadParameter(
            f"{REFERENCE!r} is the reference every variant is judged against; drop it",
            param_hint="--variants",
        )
    marks = _parse_checkpoints(cycles)
    dev = resolve_device(device)
    spec = Spec(
        num_envs, (f"algo.replay_buffer_n={replay_per_env}", *(override or ())), dev,
        marks[-1], 0, 0, fill_ticks,
    )  # fmt: skip
    owner_cfg(spec)  # a bad override exits 2 before anything is built
    doc = build_document(
        DriftPlan(spec, marks, seed, factor), chosen, lambda line: typer.echo(line, err=True)
    )
    emit_document(doc, SCHEMA, output, json_out, render)
    _fail_beyond(doc)


def _fail_beyond(doc: dict[str, Any]) -> None:
    """Raise naming the first variant and checkpoint beyond the rerun (the CLI exits 1)."""
    rerun = {d["cycles"]: d for d in doc["rerun"]["drift"]}
    for row in doc["variants"]:
        for d in row["drift"]:
            if d["verdict"] == "beyond_rerun":
                n, factor = d["cycles"], doc["config"]["factor"]
                after = f"after {n} cycle{'' if n == 1 else 's'}"
                raise RuntimeError(
                    f"variant {row['variant']!r} moved the learner {d['max_abs_diff']:.3g} from "
                    f"the owner {after}, beyond {factor:g}x the owner's rerun "
                    f"({rerun[n]['max_abs_diff']:.3g}); its arithmetic differs, so judge it by "
                    "an evaluation over seeds (docs/evaluation.md)"
                )


def cli(argv: Sequence[str] | None = None) -> int:
    return run_app(
        app, argv, prog="python -m trainer.bench.cycle_drift", failures={RuntimeError: str}
    )


if __name__ == "__main__":
    cli()
