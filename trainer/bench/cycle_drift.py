"""How far a learner variant moves from the owner's learner, against the owner's own rerun.

A fusion that keeps the maths may still change the last bits of a sum. Whether that matters
is judged against the owner rebuilt from the same seeds on the same rows: on CUDA the captured
cycle does not reproduce itself bit for bit (the C51 projection's ``scatter_add`` adds
atomically), and training carries those bits forward. The tool builds the g1 owner's learner
(as ``train`` builds it), the same again, and each variant (``learner_profile``'s
``VARIANTS``), each from the same seeds on the same synthetic rows; captures its graphs; runs
``--cycles`` update cycles and one ``act()``; and compares every actor, critic and target
parameter and the action with the first build's. A variant passes when it is bit-equal to
the owner or moves it no more than ``--factor`` times the rerun did (docs/runtime.md
"Learner profile", docs/evaluation.md "Comparing two configurations").
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
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
    refuse_fallbacks,
)
from trainer.task.spec import G1_TRACKING_SPEC

SCHEMA = "cycle_drift.v1.json"
REFERENCE = "owner"


@dataclass(frozen=True)
class DriftPlan:
    """What one drift measurement builds and runs."""

    profile: Spec  # sizes, overrides and device (its timing fields are unused)
    seed: int
    factor: float


@dataclass(frozen=True)
class Drift:
    """One build's state against the owner's first build."""

    tensors: int
    bit_equal: int
    max_abs_diff: float
    worst_tensor: str
    action_max_abs_diff: float


def drift(reference: dict[str, torch.Tensor], other: dict[str, torch.Tensor]) -> Drift:
    """Bit-equal tensors and the largest absolute difference (and where) between two states."""
    diffs = {name: float((reference[name] - other[name]).abs().max()) for name in reference}
    worst = max(diffs, key=diffs.__getitem__)
    return Drift(
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


def train_state(
    plan: DriftPlan, name: str, fusion: CycleFusion | None
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Build one learner from the plan's seeds, run its cycles and one act; return its state
    (on the CPU) and its run record. ``fusion`` None is the owner's, as ``train`` builds it."""
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
    torch.manual_seed(plan.seed + 1)  # the same sample indices and noise in every build
    for _ in range(spec.cycles):
        learner.prepare_iteration()
        metrics = learner.update_cycle()
    gen = torch.Generator(device=dev).manual_seed(plan.seed + 2)
    obs = torch.randn(learner.num_envs, G1_TRACKING_SPEC.obs_dim, device=dev, generator=gen)
    action = learner.act(obs, torch.zeros(learner.num_envs, device=dev))
    modules = {"actor": learner.actor, "critic": learner.critic, "target": learner.critic_target}
    state = {
        f"{prefix}.{n}": p.detach().float().cpu().clone()
        for prefix, module in modules.items()
        for n, p in module.named_parameters()
    }
    state["action"] = action.detach().float().cpu().clone()
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
    return state, record


def build_document(plan: DriftPlan, variants: Sequence[str]) -> dict[str, Any]:
    spec = plan.profile
    reference, ref_record = train_state(plan, REFERENCE, None)
    again, again_record = train_state(plan, REFERENCE, None)
    rerun = drift(reference, again)
    rows = []
    for name in variants:
        state, record = train_state(plan, name, VARIANTS[name])
        moved = drift(reference, state)
        ratio = moved.max_abs_diff / rerun.max_abs_diff if rerun.max_abs_diff > 0 else None
        rows.append(
            {
                **record,
                "drift": asdict(moved),
                "ratio_to_rerun": None if ratio is None else round(ratio, 4),
                "verdict": verdict(moved, rerun, plan.factor),
            }
        )
    dev = spec.device
    return {
        "tool": "cycle_drift",
        "schema_version": 1,
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "config": {
            "num_envs": spec.num_envs,
            "overrides": list(spec.overrides),
            "cycles": spec.cycles,
            "fill_ticks": spec.fill_ticks,
            "seed": plan.seed,
            "factor": plan.factor,
        },
        "reference": ref_record,
        "rerun": {**again_record, "drift": asdict(rerun)},
        "variants": rows,
        "passed": all(row["verdict"] != "beyond_rerun" for row in rows),
    }


def render(doc: dict[str, Any], console: Console) -> None:
    cfg = doc["config"]
    table = Table(
        title=(
            f"drift from the owner after {cfg['cycles']} cycles on {doc['device']} "
            f"(pass: at most {cfg['factor']:g}× the rerun)"
        ),
        title_justify="left",
    )
    for col in ("build", "bit-equal", "largest diff", "in", "action diff", "× rerun", "verdict"):
        table.add_column(col, justify="left" if col in ("build", "in", "verdict") else "right")
    rerun = doc["rerun"]["drift"]
    rows = [("owner again", rerun, None, "-")] + [
        (r["variant"], r["drift"], r["ratio_to_rerun"], r["verdict"]) for r in doc["variants"]
    ]
    for name, d, ratio, word in rows:
        table.add_row(
            name, f"{d['bit_equal']}/{d['tensors']}", f"{d['max_abs_diff']:.3g}",
            d["worst_tensor"], f"{d['action_max_abs_diff']:.3g}",
            "-" if ratio is None else f"{ratio:.2f}", word,
        )  # fmt: skip
    console.print(table)


def _parse_variants(text: str) -> list[str]:
    names = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in names if v not in VARIANTS]
    if not names or bad:
        raise typer.BadParameter(
            f"{text!r} must be a comma list of {sorted(VARIANTS)}; use e.g. no_combo,legacy",
            param_hint="--variants",
        )
    return names


def _device(text: str) -> torch.device:
    try:
        dev = torch.device(text or ("cuda" if torch.cuda.is_available() else "cpu"))
    except RuntimeError:
        raise typer.BadParameter(f"{text!r} is not a torch device; use cuda or cpu") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise typer.BadParameter(
            "cuda requested but torch.cuda.is_available() is False; use --device cpu",
            param_hint="--device",
        )
    return dev


app = typer.Typer(add_completion=False)


@app.command()
def main(
    variants: Annotated[
        str, typer.Option(help="Comma list of learner_profile's variants to compare.")
    ] = "no_combo,legacy",
    cycles: Annotated[int, typer.Option(min=1, help="Update cycles per build.")] = 20,
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

    Exit 0 when every variant is bit-equal or within --factor times the rerun's difference,
    1 when one is beyond it (the document is still written) or a build fell back, 2 bad input.
    """
    chosen = _parse_variants(variants)
    dev = _device(device)
    spec = Spec(
        num_envs, (f"algo.replay_buffer_n={replay_per_env}", *(override or ())), dev,
        cycles, 0, 0, fill_ticks,
    )  # fmt: skip
    owner_cfg(spec)  # a bad override exits 2 before anything is built
    doc = build_document(DriftPlan(spec, seed, factor), chosen)
    emit_document(doc, SCHEMA, output, json_out, render)
    beyond = [row for row in doc["variants"] if row["verdict"] == "beyond_rerun"]
    if beyond:
        row = beyond[0]
        raise RuntimeError(
            f"variant {row['variant']!r} moved the learner {row['drift']['max_abs_diff']:.3g} "
            f"from the owner, beyond {factor:g}x the owner's rerun "
            f"({doc['rerun']['drift']['max_abs_diff']:.3g}); its maths differs, so judge it by "
            "an evaluation over seeds (docs/evaluation.md)"
        )


def cli(argv: Sequence[str] | None = None) -> int:
    return run_app(
        app, argv, prog="python -m trainer.bench.cycle_drift", failures={RuntimeError: str}
    )


if __name__ == "__main__":
    cli()
