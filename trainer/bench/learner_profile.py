"""Profile of the learner's update cycle: its time alone, its kernels and where they go.

Builds the learner exactly as ``train`` does for the g1 owner (``flashsac /
g1_motion_tracking / mjwarp``: batch 2048, 4 critic + 2 actor updates per iteration, the
owner's replay; ``--num-envs`` defaults to the soak's 1024), fills the replay with synthetic
rows of the real layout, captures the cycle as training does (``capture_graphs()``:
compile and CUDA graph as configured), then measures:

* ``cycle_ms``: ``prepare_iteration() + update_cycle()`` as the runtime calls them per tick
  (sampling included), and ``body_ms``: the captured body alone (graph replay), both with
  CUDA events over ``--cycles`` cycles;
* the kernels of one captured cycle: torch.profiler over ``--profile-cycles`` replays of the
  body, their count per cycle, the top 20 by time and the share of each category
  (:func:`category`; docs/runtime.md "Learner profile" says how names are assigned).

On the CPU the same runs eagerly and the "kernels" are leaf aten ops (categories from op
names, optimizer ops by their ``Optimizer.step`` scope). ``--variants
legacy,renorm,losses,networks,combo,multi_kernel,fused`` runs the cycle without the five
update-cycle fusions (``algo.fuse_*``), with each one alone, and with all five, in one
process (``no_combo``: the first three; ``no_multi_kernel``: all but multi-kernel).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import torch
import typer
from rich.console import Console
from rich.table import Table

from contracts.cli_app import run_app
from contracts.errors import UsageError
from contracts.jsonio import dumps_strict, write_json_atomic
from contracts.mps.probe import observe_ambient
from contracts.names import Backend
from contracts.schemas import validate
from trainer.algo.config import FlashSacCfg
from trainer.algo.fusion import CycleFusion
from trainer.algo.learner import FlashSacLearner
from trainer.bench.env_beside import EnvBeside, EnvBesideSpec
from trainer.config.errors import ConfigError
from trainer.config.loader import load_config
from trainer.runtime.mps import MPS_MODE, resolve_cuda_process_sharing
from trainer.sim.backend import BACKEND_NAMES
from trainer.sim.mjwarp_options import STREAM_PRIORITIES
from trainer.task.spec import G1_TRACKING_SPEC

SCHEMA = "learner_profile.v1.json"
OWNER = ("flashsac", "g1_motion_tracking", Backend.MJWARP.value)
CATEGORIES = ("gemm", "norm", "c51_projection", "optimizer", "elementwise", "other")
TOP_KERNELS = 20


def _only(**on: bool) -> CycleFusion:
    """The named fusions and no other."""
    return dataclasses.replace(CycleFusion.none(), **on)


VARIANTS: dict[str, CycleFusion | None] = {
    "owner": None,  # the fusions algo.fuse_<name> switch on, overrides included, as train
    "fused": CycleFusion(),
    "legacy": CycleFusion.none(),
    "renorm": _only(renorm=True),
    "losses": _only(losses=True),
    "networks": _only(networks=True),
    "combo": _only(combo_kernels=True),
    "multi_kernel": _only(multi_kernel=True),
    "no_combo": _only(renorm=True, losses=True, networks=True),
    "no_multi_kernel": CycleFusion(multi_kernel=False),
}

# (category, substrings of a lower-cased kernel or op name), first match wins; see
# docs/runtime.md "Learner profile" for why each rule is where it is.
_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("other", ("normal", "philox", "random", "randint", "distribution", "memcpy", "memset")),
    (
        "optimizer",
        ("adam", "lerp", "optimizer", "binaryop", "unaryopfunctor", "aten::_foreach_copy"),
    ),
    ("c51_projection", ("scatter", "floor")),
    ("gemm", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "bmm", "matmul", "aten::mm", "addmm")),
    ("norm", ("norm", "welford", "rsqrt", "hypot")),
    (
        "elementwise",
        (
            "elementwise",
            "triton_poi",
            "aten::add",
            "aten::sub",
            "aten::mul",
            "aten::div",
            "aten::exp",
            "aten::log",
            "aten::tanh",
            "aten::relu",
            "aten::threshold",
            "aten::clamp",
            "aten::neg",
            "aten::pow",
            "aten::softplus",
            "aten::sqrt",
            "aten::where",
            "aten::fill",
            "aten::zero",
            "aten::isfinite",
            "aten::rsub",
            "aten::square",
            "aten::minimum",
            "aten::maximum",
            "aten::reciprocal",
            "aten::nan_to_num",
            "aten::sigmoid",
        ),
    ),
)  # fmt: skip

# aten ops that only make views or allocate (no kernel on a GPU): not counted on the CPU.
_METADATA_OPS = frozenset(
    f"aten::{name}"
    for name in (
        "as_strided", "view", "reshape", "_reshape_alias", "empty", "empty_strided", "empty_like",
        "transpose", "t", "slice", "select", "expand", "unsqueeze", "squeeze", "narrow", "detach",
        "alias", "resolve_conj", "resolve_neg", "to", "permute", "lift_fresh", "_unsafe_view",
        "unbind", "split", "chunk", "contiguous", "result_type", "item", "_local_scalar_dense",
    )
)  # fmt: skip

app = typer.Typer(add_completion=False)


def category(name: str) -> str:
    """The category of one kernel (CUDA) or leaf op (CPU) name."""
    low = name.lower()
    for cat, needles in _RULES:
        if any(needle in low for needle in needles):
            return cat
    return "other"


@dataclass(frozen=True)
class Spec:
    """What one profile run builds and measures."""

    num_envs: int
    overrides: tuple[str, ...]
    device: torch.device
    cycles: int
    profile_cycles: int
    warmup: int
    fill_ticks: int
    beside: EnvBesideSpec | None = None
    mps: bool = False
    """``--mps``: this process (and the env beside, which inherits its environment) joined
    the cumps daemon of its GPU before CUDA started."""


@dataclass(frozen=True)
class Kernel:
    name: str
    us: float
    optimizer_scope: bool = False


def owner_cfg(spec: Spec) -> FlashSacCfg:
    """The g1 owner's ``algo`` section with ``num_envs`` and the overrides applied."""
    for text in spec.overrides:
        if not text.startswith("algo."):
            raise UsageError(
                f"--override {text!r} is not an algo.* key; use e.g. algo.batch_size=1024"
            )
    try:
        loaded = load_config(*OWNER, [f"algo.num_envs={spec.num_envs}", *spec.overrides])
        return loaded.algo_cfg.validate()
    except ConfigError as err:
        raise UsageError(str(err)) from None


def fill_replay(learner: FlashSacLearner, ticks: int, seed: int = 0) -> int:
    """Commit ``ticks`` ticks of synthetic rows (layout of the real env); returns rows."""
    lay, n, dev = learner.layout, learner.num_envs, learner.device
    g = torch.Generator(device=dev).manual_seed(seed)
    ticks = max(ticks, -(-max(learner.batch_size, learner.cfg.learning_starts * n) // n))
    ticks = min(ticks, learner.replay.capacity // n)
    per_chunk = max(1, (1 << 20) // n)  # ~1M rows per commit
    for start in range(0, ticks, per_chunk):
        rows = torch.randn(min(per_chunk, ticks - start) * n, lay.width, device=dev, generator=g)
        rows[:, lay.action] = rows[:, lay.action].tanh()
        rows[:, lay.done] = (torch.rand(rows.shape[0], device=dev, generator=g) < 0.01).float()
        rows[:, lay.trunc] = 0.0
        learner.replay.commit(rows)
    return ticks * n


def _timed_ms(fn: Callable[[], None], iters: int, device: torch.device) -> float:
    if device.type != "cuda":
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) * 1000.0 / iters
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(device)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize(device)
    return start.elapsed_time(end) / iters


def _cuda_kernels(prof: torch.profiler.profile) -> list[Kernel]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text(encoding="utf-8")).get("traceEvents", [])
    return [
        Kernel(e["name"], float(e.get("dur", 0.0)))
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]


def _computes(evt: Any) -> bool:
    return evt.name.startswith("aten::") and evt.name not in _METADATA_OPS


def _cpu_leaf_ops(prof: torch.profiler.profile) -> list[Kernel]:
    """The lowest computing aten ops (what would be one kernel each on a GPU)."""
    out = []
    for evt in prof.events():
        if not _computes(evt) or any(_computes(child) for child in evt.cpu_children):
            continue
        parent, in_opt = evt.cpu_parent, False
        while parent is not None and not in_opt:
            in_opt = parent.name.startswith("Optimizer.step")
            parent = parent.cpu_parent
        out.append(Kernel(evt.name, float(evt.cpu_time_total), in_opt))
    return out


def profile_body(learner: FlashSacLearner, cycles: int) -> list[Kernel]:
    """Kernels (CUDA) or leaf ops (CPU) of ``cycles`` runs of the captured cycle body."""
    from torch.profiler import ProfilerActivity, profile

    cuda = learner.device.type == "cuda"
    activities = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    if cuda:
        torch.cuda.synchronize(learner.device)
    with profile(activities=activities) as prof:
        for _ in range(cycles):
            learner.run_cycle_body()
        if cuda:
            torch.cuda.synchronize(learner.device)
    return _cuda_kernels(prof) if cuda else _cpu_leaf_ops(prof)


def summarize(kernels: Sequence[Kernel], cycles: int) -> dict[str, Any]:
    """Per-cycle kernel count, category shares and the top kernels by time."""
    total_us = sum(k.us for k in kernels) or 1.0
    by_cat: dict[str, list[float]] = {c: [0, 0.0] for c in CATEGORIES}
    by_name: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    names: dict[str, str] = {}
    for k in kernels:
        cat = "optimizer" if k.optimizer_scope else category(k.name)
        names[k.name] = cat
        by_cat[cat][0] += 1
        by_cat[cat][1] += k.us
        by_name[k.name][0] += 1
        by_name[k.name][1] += k.us
    top = sorted(by_name.items(), key=lambda item: -item[1][1])[:TOP_KERNELS]
    return {
        "kernels_per_cycle": round(len(kernels) / cycles, 2),
        "kernel_time_ms_per_cycle": round(total_us / 1000.0 / cycles, 4),
        "categories": [
            {
                "category": cat,
                "kernels_per_cycle": round(count / cycles, 2),
                "time_ms_per_cycle": round(us / 1000.0 / cycles, 4),
                "share": round(us / total_us, 4),
            }
            for cat, (count, us) in by_cat.items()
        ],
        "top_kernels": [
            {
                "name": name[:300],
                "category": names[name],
                "calls_per_cycle": round(count / cycles, 2),
                "time_ms_per_cycle": round(us / 1000.0 / cycles, 4),
                "share": round(us / total_us, 4),
            }
            for name, (count, us) in top
        ],
    }


def build_captured_learner(
    spec: Spec, cfg: FlashSacCfg, variant: str
) -> tuple[FlashSacLearner, int]:
    """The learner of ``variant`` with synthetic replay rows, its graphs captured and
    ``spec.warmup`` cycles run (no device sync); returns it and its replay rows."""
    learner = FlashSacLearner(
        cfg, G1_TRACKING_SPEC, num_envs=cfg.num_envs, device=spec.device, fusion=VARIANTS[variant]
    )
    rows = fill_replay(learner, spec.fill_ticks)
    learner.prepare_iteration()  # folds the synthetic rows' reward statistics once
    learner.capture_graphs()
    for _ in range(spec.warmup):
        learner.prepare_iteration()
        learner.update_cycle()
    return learner, rows


def refuse_fallbacks(variant: str, diagnostics: dict[str, Any], fix: str | None = None) -> None:
    """A variant whose learner dropped an acceleration would be timed as another cycle:
    raise instead (the CLI exits 1 and writes nothing); ``fix`` ends the message."""
    fallbacks = diagnostics["fallbacks"]
    if fallbacks:
        first = fallbacks[0]
        fix = fix or f"run it in a process of its own: --variants {variant}"
        raise RuntimeError(
            f"variant {variant!r}: the learner's {first['feature']} fell back at capture "
            f"({first['reason']}), so its figures would be another cycle's; {fix}"
        )


def run_variant(
    spec: Spec, cfg: FlashSacCfg, variant: str, beside: EnvBeside | None = None
) -> dict[str, Any]:
    """Build, fill, capture, time and profile one learner (``beside`` stepping meanwhile)."""
    t0 = time.perf_counter()
    learner, rows = build_captured_learner(spec, cfg, variant)
    refuse_fallbacks(variant, learner.cuda_graph_diagnostics())
    if spec.device.type == "cuda":
        torch.cuda.synchronize(spec.device)
    setup_s = time.perf_counter() - t0

    def cycle() -> None:
        learner.prepare_iteration()
        learner.update_cycle()

    env_rate = None
    if beside is None:
        cycle_ms = _timed_ms(cycle, spec.cycles, spec.device)
    else:
        window = beside.mark()
        cycle_ms = _timed_ms(cycle, spec.cycles, spec.device)
        env_rate = beside.rate(window)
    result = {
        "variant": variant,
        "setup_s": round(setup_s, 2),
        "replay_rows": rows,
        "cycle_ms": round(cycle_ms, 4),
        "body_ms": round(_timed_ms(learner.run_cycle_body, spec.cycles, spec.device), 4),
        "beside_env_steps_per_s": None if env_rate is None else round(env_rate, 1),
        "diagnostics": learner.cuda_graph_diagnostics(),
        **summarize(profile_body(learner, spec.profile_cycles), spec.profile_cycles),
    }
    return result


def build_document(spec: Spec, variants: Sequence[str]) -> dict[str, Any]:
    cfg = owner_cfg(spec)
    cuda = spec.device.type == "cuda"
    return {
        "tool": "learner_profile",
        "schema_version": 1,
        "device": torch.cuda.get_device_name(spec.device) if cuda else "cpu",
        "torch": torch.__version__,
        "kernel_source": "cuda_kernels" if cuda else "cpu_leaf_ops",
        "config": {
            "num_envs": cfg.num_envs,
            "batch_size": cfg.batch_size,
            "updates_per_step": cfg.updates_per_step,
            "policy_frequency": cfg.policy_frequency,
            "replay_capacity": cfg.replay_capacity,
            "use_compile": cfg.use_compile,
            "use_cuda_graph": cfg.use_cuda_graph,
            "overrides": list(spec.overrides),
            "beside_env": _beside_record(spec),
            "cuda_process_sharing": MPS_MODE if spec.mps else None,
        },
        "cycles": spec.cycles,
        "profile_cycles": spec.profile_cycles,
        "runs": _runs(spec, cfg, variants),
    }


def _beside_record(spec: Spec) -> dict[str, Any] | None:
    if spec.beside is None:
        return None
    # a daemon on the pipe both processes join (CUDA_MPS_PIPE_DIRECTORY or the default)
    mps = observe_ambient()["ambient_server"] if spec.device.type == "cuda" else None
    return {
        "sim": spec.beside.sim,
        "num_envs": spec.beside.num_envs,
        "stream_priority": spec.beside.stream_priority,
        "mps_daemon": mps,
    }


def _runs(spec: Spec, cfg: FlashSacCfg, variants: Sequence[str]) -> list[dict[str, Any]]:
    """Every variant, all beside one neighbour env when ``spec.beside`` asks for it."""
    neighbour = EnvBeside(spec.beside) if spec.beside is not None else None
    with neighbour if neighbour is not None else contextlib.nullcontext():
        return [_run_and_free(spec, cfg, v, neighbour) for v in variants]


def _run_and_free(
    spec: Spec, cfg: FlashSacCfg, variant: str, beside: EnvBeside | None
) -> dict[str, Any]:
    result = run_variant(spec, cfg, variant, beside)
    gc.collect()  # the learner (and its replay) is gone before the next variant builds
    if spec.device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def render(doc: dict[str, Any], console: Console) -> None:
    for run in doc["runs"]:
        diag = run["diagnostics"]
        title = (
            f"{run['variant']}: cycle {run['cycle_ms']:.3f} ms, body {run['body_ms']:.3f} ms, "
            f"{run['kernels_per_cycle']:g} kernels/cycle (graph {diag['enabled']}, "
            f"compile {diag['compile']['enabled']}, fusion {diag['fusion']['enabled']})"
        )
        cats = Table(title=title, title_justify="left")
        for col in ("category", "kernels/cycle", "ms/cycle", "share"):
            cats.add_column(col, justify="left" if col == "category" else "right")
        for c in run["categories"]:
            cats.add_row(
                c["category"], f"{c['kernels_per_cycle']:g}", f"{c['time_ms_per_cycle']:.4f}",
                f"{c['share']:.1%}",
            )  # fmt: skip
        console.print(cats)
        top = Table(title=f"{run['variant']}: top {TOP_KERNELS} kernels", title_justify="left")
        for col in ("kernel", "category", "calls/cycle", "ms/cycle", "share"):
            top.add_column(col, justify="left" if col in ("kernel", "category") else "right")
        for k in run["top_kernels"]:
            top.add_row(
                k["name"][:90], k["category"], f"{k['calls_per_cycle']:g}",
                f"{k['time_ms_per_cycle']:.4f}", f"{k['share']:.1%}",
            )  # fmt: skip
        console.print(top)
    console.print(summary_table(doc))


def summary_table(doc: dict[str, Any]) -> Table:
    """One row per variant: the cycle, its kernels and the env beside's rate."""
    beside = doc["config"]["beside_env"]
    where = "alone" if beside is None else (
        f"beside {beside['num_envs']} {beside['sim']} envs"
        + ("" if beside["mps_daemon"] is None else f", MPS {'on' if beside['mps_daemon'] else 'off'}")
    )  # fmt: skip
    if doc["config"]["cuda_process_sharing"] == MPS_MODE:
        where += " (--mps)"
    table = Table(title=f"learner cycle, {where}", title_justify="left")
    for col in (
        "variant",
        "cycle ms",
        "body ms",
        "kernels/cycle",
        "kernel ms",
        "env beside steps/s",
    ):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for run in doc["runs"]:
        rate = run["beside_env_steps_per_s"]
        table.add_row(
            run["variant"], f"{run['cycle_ms']:.3f}", f"{run['body_ms']:.3f}",
            f"{run['kernels_per_cycle']:g}", f"{run['kernel_time_ms_per_cycle']:.3f}",
            "-" if rate is None else f"{rate:,.0f}",
        )  # fmt: skip
    return table


def join_mps(dev: torch.device) -> None:
    """Point this process at its GPU's cumps daemon, as ``train``'s MPS preflight does.

    Raises ``MpsPreflightError`` (exit 1) naming the unmet condition, e.g. no daemon.
    """
    if dev.type != "cuda":
        raise typer.BadParameter(
            f"MPS needs a CUDA device, not {str(dev)!r}; use --device cuda or drop --mps",
            param_hint="--mps",
        )
    resolve_cuda_process_sharing(MPS_MODE, str(dev))


def _parse_device(text: str) -> torch.device:
    try:
        return torch.device(text)  # parsing starts no CUDA
    except RuntimeError:
        raise typer.BadParameter(
            f"{text!r} is not a torch device; use cpu or cuda", param_hint="--device"
        ) from None


def resolve_device(text: str) -> torch.device:
    """``--device`` of a bench tool: the named device, else cuda where available, else cpu;
    a cuda device without CUDA is a usage error."""
    dev = _parse_device(text or ("cuda" if torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise typer.BadParameter(
            "cuda requested but torch.cuda.is_available() is False; use --device cpu",
            param_hint="--device",
        )
    return dev


def _beside_spec(
    num_envs: int, sim: str, device: torch.device, stream_priority: str
) -> EnvBesideSpec | None:
    if num_envs == 0:
        return None
    if stream_priority not in STREAM_PRIORITIES:
        raise typer.BadParameter(
            f"{stream_priority!r} must be one of {', '.join(STREAM_PRIORITIES)}",
            param_hint="--beside-stream-priority",
        )
    if stream_priority != "default" and sim != Backend.MJWARP.value:
        raise typer.BadParameter(
            f"{stream_priority!r} applies to --beside-sim mjwarp only; use default",
            param_hint="--beside-stream-priority",
        )
    if sim not in BACKEND_NAMES:
        raise typer.BadParameter(
            f"{sim!r} must be one of {', '.join(BACKEND_NAMES)}", param_hint="--beside-sim"
        )
    if sim == Backend.MJWARP.value and device.type != "cuda":
        raise typer.BadParameter(
            f"mjwarp needs a CUDA device, not {device}; use --beside-sim mujoco",
            param_hint="--beside-sim",
        )
    return EnvBesideSpec(
        sim=sim, num_envs=num_envs, device=str(device), stream_priority=stream_priority
    )


def parse_variants(text: str, example: str = "fused,legacy") -> list[str]:
    """``--variants`` of a bench tool: names of ``VARIANTS``, comma-separated."""
    names = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in names if v not in VARIANTS]
    if not names or bad:
        raise typer.BadParameter(
            f"{text!r} must be a comma list of {sorted(VARIANTS)}; use e.g. {example}",
            param_hint="--variants",
        )
    return names


@app.command()
def main(
    num_envs: Annotated[int, typer.Option(min=1, help="algo.num_envs (the soak's 1024).")] = 1024,
    override: Annotated[
        list[str] | None, typer.Option(help="algo.KEY=VALUE on top of the g1 owner; repeatable.")
    ] = None,
    variants: Annotated[
        str,
        typer.Option(
            help="Comma list of owner (the fusions algo.fuse_* switch on, as train), legacy (no"
            " algo.fuse_* fusion), renorm, losses, networks, combo, multi_kernel (each alone), fused"
            " (all five), no_combo (the first three), no_multi_kernel (fused without"
            " multi_kernel)."
        ),
    ] = "legacy,fused",
    cycles: Annotated[int, typer.Option(min=1, help="Timed cycles (CUDA events).")] = 200,
    profile_cycles: Annotated[int, typer.Option(min=1, help="Profiled cycles.")] = 10,
    warmup: Annotated[int, typer.Option(min=0, help="Cycles after capture, untimed.")] = 5,
    fill_ticks: Annotated[int, typer.Option(min=1, help="Ticks of synthetic replay rows.")] = 1024,
    device: Annotated[str, typer.Option(help="Torch device (default: cuda if available).")] = "",
    beside_env: Annotated[
        int,
        typer.Option(
            min=0, help="Step this many envs in a process of their own meanwhile (0: alone)."
        ),
    ] = 0,
    beside_sim: Annotated[
        str, typer.Option(help="Backend of the env beside: mjwarp (CUDA) or mujoco.")
    ] = Backend.MJWARP.value,
    beside_stream_priority: Annotated[
        str,
        typer.Option(
            help="Stream of the env beside's mjwarp physics: default, or high (the device's"
            " highest priority), as training.collector_stream_priority."
        ),
    ] = "default",
    mps: Annotated[
        bool,
        typer.Option(
            "--mps",
            help="Join this GPU's cumps daemon (learner and env beside), as train does with"
            " training.cuda_process_sharing=mps; exit 1 if none answers.",
        ),
    ] = False,
    output: Annotated[Path | None, typer.Option(help="Write the JSON document here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print only the JSON document.")] = False,
) -> None:
    """Profile the learner's update cycle: time alone, kernels per cycle, top kernels, shares.

    Example (H200, the soak's shape, each fusion alone and all of them):

        python -m trainer.bench.learner_profile --variants legacy,renorm,losses,networks,combo,fused --output /tmp/lp.json

    Beside a collector-sized env, as in train, both under MPS (after `cumps start`):

        python -m trainer.bench.learner_profile --beside-env 1024 --mps --output /tmp/lp-mps.json
    """
    chosen = parse_variants(variants)
    if mps:  # before any CUDA call, or the pipe variables would not take effect
        join_mps(_parse_device(device or "cuda"))
    dev = resolve_device(device)
    beside = _beside_spec(beside_env, beside_sim, dev, beside_stream_priority)
    spec = Spec(
        num_envs, tuple(override or ()), dev, cycles, profile_cycles, warmup, fill_ticks,
        beside=beside, mps=mps,
    )  # fmt: skip
    emit_document(build_document(spec, chosen), SCHEMA, output, json_out, render)


def emit_document(
    doc: dict[str, Any],
    schema: str,
    output: Path | None,
    json_out: bool,
    render_fn: Callable[[dict[str, Any], Console], None],
) -> None:
    """Validate a bench document, write it to ``output`` (atomically) when given, then print
    it as JSON (``--json``) or as its tables; a document off its schema raises RuntimeError."""
    violations = validate(doc, schema)
    if violations:
        raise RuntimeError(f"the document violates {schema}: {violations[0]}")
    if output is not None:
        write_json_atomic(output, doc)
    if json_out:
        typer.echo(dumps_strict(doc))
    else:
        render_fn(doc, Console())


def cli(argv: Sequence[str] | None = None) -> int:
    return run_app(
        app,
        argv,
        prog="python -m trainer.bench.learner_profile",
        failures={RuntimeError: str},
    )


if __name__ == "__main__":
    cli()
