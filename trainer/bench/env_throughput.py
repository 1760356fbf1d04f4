"""Env throughput: full-task control steps/s against the physics-only rate, one process.

``python -m trainer.bench.env_throughput --num-envs 1024,2048,4096 --iters 200 --warmup 50``

For each size the same backend instance is measured twice:

* **full task**: ``G1TrackingEnv.step`` with uniform random actions in (−1, 1) drawn on the
  device: physics, observations, rewards, terminations, sampler, resets of done rows. The
  ``task graph`` column (and ``task_cuda_graph`` in the JSON) says whether the torch part ran
  as CUDA graphs and ``compile`` (``task_compile``) whether its arithmetic was compiled with
  inductor (``--no-compile`` measures the graphs alone); a requested but disabled graph or
  compile prints its reason to stderr.
* **physics only**: ``backend.step(ctrl)`` alone, after restoring the robot state the full-task
  run started from, with the same timestep, substeps and ``ctrl = q_default + 2·a`` of
  pre-drawn random actions.

Each phase is warmed up (kernel compile and graph capture stay out of the numbers) and timed
between two device synchronizations. The table goes to stdout and the numbers to ``--output``
(strict JSON). The target (docs/task.md §throughput-benchmark) on an H200 is >= 350k full-task steps/s at 2048 envs on
mjwarp and a full-task/physics ratio >= 0.70.
"""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import torch
import typer
from tabulate import tabulate
from torch import Tensor

from contracts.cli_app import run_app
from contracts.jsonio import write_json_atomic
from contracts.names import Backend
from trainer.config.defaults import default_task_cfg
from trainer.sim.backend import BACKEND_NAMES, BackendFailure
from trainer.sim.mjwarp_options import MjWarpOptions, StreamPriority
from trainer.sim.scene import build_g1_model
from trainer.task.config import G1TrackingCfg
from trainer.task.g1_tracking import G1TrackingEnv, make_env

if TYPE_CHECKING:
    import mujoco

    from trainer.task.motion import MotionClip

app = typer.Typer(add_completion=False)

TARGET_STEPS_PER_S = 350_000
TARGET_RATIO = 0.70


@dataclass(frozen=True)
class EnvFactory:
    """The task config, compiled model and loaded clip every benchmark env is built from."""

    cfg: G1TrackingCfg
    model: mujoco.MjModel
    motion: MotionClip

    @classmethod
    def for_motion(cls, motion_file: str) -> EnvFactory:
        from trainer.motion_import.resolve import install_motion_importer
        from trainer.task.motion import load_motion, resolve_motion

        install_motion_importer()
        cfg = default_task_cfg(motion_file=motion_file)
        model = build_g1_model(cfg.scene)
        motion = load_motion(resolve_motion(motion_file, hub_repo=cfg.hub_repo).path, model)
        return cls(cfg, model, motion)

    def build(
        self,
        sim: str,
        num_envs: int,
        device: torch.device,
        *,
        seed: int,
        compile_task: bool,
        stream_priority: StreamPriority = "default",
        mjwarp_options: MjWarpOptions | None = None,
    ) -> G1TrackingEnv:
        """The collector's ``make_env`` at ``num_envs`` (inductor-compiled when asked)."""
        options: dict[str, object] = {"stream_priority": stream_priority}
        if mjwarp_options is not None:
            options["mjwarp_options"] = mjwarp_options
        return make_env(
            self.cfg,
            sim_backend=sim,
            num_envs=num_envs,
            device=device,
            seed=seed,
            motion=self.motion,
            model=self.model,
            compile_backend=True if compile_task else None,
            backend_options=options,
        )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not-installed"


def _random_actions(gen: torch.Generator, out: Tensor) -> Tensor:
    """Uniform actions in (-1, 1), drawn into ``out`` on its device."""
    return torch.rand(out.shape, generator=gen, device=out.device, out=out) * 2 - 1


def measure(env: G1TrackingEnv, iters: int, warmup: int, seed: int) -> dict[str, float]:
    """Time the full task, then physics alone from the same starting state."""
    device, n = env.device, env.num_envs
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    actions = torch.empty(n, env.spec.action_dim, device=device)
    start_qpos = env.backend.qpos.clone()
    start_qvel = env.backend.qvel.clone()

    for _ in range(warmup):
        env.step(_random_actions(gen, actions))
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        env.step(_random_actions(gen, actions))
    _sync(device)
    task_s = time.perf_counter() - t0
    env.check_health()
    solver = _solver_iterations(env, gen, actions, samples=min(iters, SOLVER_SAMPLES))

    backend = env.backend
    # The env's own action -> position-target map (its action history is not used again).
    ctrls = [
        env.apply_actions(torch.rand(actions.shape, generator=gen, device=device) * 2 - 1)
        for _ in range(min(iters, 64))
    ]
    everyone = torch.ones(n, dtype=torch.bool, device=device)
    backend.reset_rows(everyone, start_qpos, start_qvel)
    for i in range(warmup):
        backend.step(ctrls[i % len(ctrls)])
    backend.reset_rows(everyone, start_qpos, start_qvel)
    _sync(device)
    t0 = time.perf_counter()
    for i in range(iters):
        backend.step(ctrls[i % len(ctrls)])
    _sync(device)
    physics_s = time.perf_counter() - t0
    full = n * iters / task_s
    physics = n * iters / physics_s
    return {
        "full_task_steps_per_s": full,
        "physics_only_steps_per_s": physics,
        "ratio": full / physics,
        "full_task_step_ms": 1000.0 * task_s / iters,
        "physics_step_ms": 1000.0 * physics_s / iters,
        "solver_iterations": solver,
    }


SOLVER_SAMPLES = 32
"""Untimed full-task steps after the timed phase whose per-world solver iterations are read."""


def _solver_iterations(
    env: G1TrackingEnv, gen: torch.Generator, actions: Tensor, samples: int
) -> dict[str, float | int] | None:
    """Per-world solver iterations over ``samples`` more steps: mean, p95, max and the limit
    (``opt.iterations``); None when the backend does not expose them."""
    if env.backend.solver_iterations() is None:
        return None
    counts = []
    for _ in range(samples):
        env.step(_random_actions(gen, actions))
        counts.append(env.backend.solver_iterations().float())
    every = torch.cat(counts)
    return {
        "mean": float(every.mean()),
        "p95": float(every.quantile(0.95)),
        "max": int(every.max()),
        "limit": int(env.backend.model.opt.iterations),
        "samples": samples,
    }


_HEADERS = (
    "num_envs",
    "full task steps/s",
    "physics steps/s",
    "ratio",
    "task ms",
    "physics ms",
    "solver it. mean/max",
    "task graph",
    "compile",
)


def _parse_sizes(num_envs: str) -> list[int]:
    try:
        sizes = [int(x) for x in num_envs.split(",") if x.strip()]
    except ValueError as err:
        raise typer.BadParameter(f"--num-envs {num_envs!r} must be a comma list of ints") from err
    if not sizes or min(sizes) < 1:
        raise typer.BadParameter(f"--num-envs {num_envs!r} must list ints >= 1")
    return sizes


def _measure_size(env: G1TrackingEnv, setup_s: float, iters: int, warmup: int, seed: int) -> dict:
    """:func:`measure` plus the env's setup time, graph/compile entries and diagnostics."""
    n = env.num_envs
    res = measure(env, iters, warmup, seed)
    res.update(
        num_envs=n,
        setup_s=setup_s,
        task_cuda_graph=env.task_cuda_graph.to_json(),
        task_compile=env.task_compile.to_json(),
        backend_diagnostics=env.diagnostics(),
    )
    for label, entry in (
        ("task CUDA graph", env.task_cuda_graph),
        ("task compile", env.task_compile),
    ):
        if entry.requested and not entry.enabled:
            print(f"num_envs={n}: {label} off: {entry.disable_reason}", file=sys.stderr)
    stats = env.backend.transfer_stats()
    if stats is not None:
        res["transfer_stats"] = stats
    health = env.backend.health()
    if health is not None:
        res["backend_health"] = health
    return res


def _row(res: dict) -> list:
    """One table row of a :func:`_measure_size` result."""
    return [
        res["num_envs"],
        f"{res['full_task_steps_per_s']:,.0f}",
        f"{res['physics_only_steps_per_s']:,.0f}",
        f"{res['ratio']:.2f}",
        f"{res['full_task_step_ms']:.3f}",
        f"{res['physics_step_ms']:.3f}",
        _solver_cell(res["solver_iterations"]),
        "on" if res["task_cuda_graph"]["enabled"] else "off",
        "on" if res["task_compile"]["enabled"] else "off",
    ]


def _solver_cell(solver: dict | None) -> str:
    if solver is None:
        return "-"
    return f"{solver['mean']:.1f}/{solver['max']} of {solver['limit']}"


def _document(
    sim: str,
    device: torch.device,
    cfg: G1TrackingCfg,
    motion_source: str,
    iters: int,
    warmup: int,
    results: list[dict],
    mjwarp_options: MjWarpOptions | None,
) -> dict:
    """The ``--output`` JSON document."""
    return {
        "benchmark": "env_throughput",
        "time_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sim_backend": sim,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "physics_substeps_per_control_step": cfg.scene.decimation,
        "sim_dt": cfg.scene.sim_dt,
        "mjwarp_options": None if mjwarp_options is None else mjwarp_options.to_json(),
        "iters": iters,
        "warmup": warmup,
        "motion": motion_source,
        "targets": {"full_task_steps_per_s_at_2048": TARGET_STEPS_PER_S, "ratio": TARGET_RATIO},
        "versions": {k: _version(k) for k in ("torch", "mujoco", "mujoco-warp", "warp-lang")},
        "python": platform.python_version(),
        "results": results,
    }


@app.command()
def run(
    num_envs: Annotated[str, typer.Option(help="Comma list of env counts.")] = "1024,2048,4096",
    iters: Annotated[int, typer.Option(min=1, help="Timed control steps per phase.")] = 200,
    warmup: Annotated[int, typer.Option(min=0, help="Untimed steps before each phase.")] = 50,
    sim: Annotated[str, typer.Option(help="Backend: mjwarp or mujoco.")] = Backend.MJWARP.value,
    device: Annotated[str, typer.Option(help="Torch device (mjwarp needs cuda).")] = "cuda",
    motion_file: Annotated[
        str, typer.Option(help="Motion id or path.")
    ] = "motions/g1/synthetic_dance.npz",
    seed: Annotated[int, typer.Option(help="Task and action seed.")] = 7,
    compile_task: Annotated[
        bool,
        typer.Option(
            "--compile/--no-compile", help="Compile the step phases with inductor (CUDA)."
        ),
    ] = True,
    mjwarp_option: Annotated[
        list[str] | None,
        typer.Option(
            help="MJWarp option KEY=VALUE, repeatable: broadphase=nxn|sap_tile|sap_segmented,"
            " qacc_smooth=true|false (defaults: MJWarp's; mjwarp only)."
        ),
    ] = None,
    output: Annotated[Path, typer.Option(help="JSON result path.")] = Path(
        "artifacts/env_throughput.json"
    ),
) -> None:
    """Measure full-task and physics-only env control steps/s for each size.

    Example: ``python -m trainer.bench.env_throughput --num-envs 1024 --mjwarp-option
    broadphase=sap_tile --output /tmp/et-sap.json``
    """
    if sim not in BACKEND_NAMES:
        raise typer.BadParameter(f"--sim {sim!r} must be one of {list(BACKEND_NAMES)}")
    options = _mjwarp_options(mjwarp_option or [], sim)
    sizes = _parse_sizes(num_envs)
    factory = EnvFactory.for_motion(motion_file)
    torch_device = torch.device(device)
    results = []
    for n in sizes:
        t0 = time.perf_counter()
        env = factory.build(
            sim, n, torch_device, seed=seed, compile_task=compile_task, mjwarp_options=options
        )
        setup_s = time.perf_counter() - t0
        results.append(_measure_size(env, setup_s, iters, warmup, seed))
        print(f"num_envs={n} done ({setup_s:.1f} s setup)", file=sys.stderr)
        del env
    doc = _document(
        sim,
        torch_device,
        factory.cfg,
        str(factory.motion.source),
        iters,
        warmup,
        results,
        options,
    )
    write_json_atomic(output, doc)
    print(tabulate([_row(res) for res in results], headers=list(_HEADERS)))


def _mjwarp_options(items: list[str], sim: str) -> MjWarpOptions | None:
    """``--mjwarp-option`` parsed (None when none was given); a bad one is a usage error."""
    if not items:
        return None
    if sim != Backend.MJWARP:
        raise typer.BadParameter(
            f"applies to --sim mjwarp only, not {sim!r}; drop it", param_hint="--mjwarp-option"
        )
    try:
        return MjWarpOptions.parse(items)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--mjwarp-option") from exc


def main(argv: list[str] | None = None) -> int:
    """Entry point: usage errors exit 2, backend failures exit 1."""
    return run_app(
        app,
        sys.argv[1:] if argv is None else argv,
        prog="python -m trainer.bench.env_throughput",
        failures={BackendFailure: str},
    )


if __name__ == "__main__":
    sys.exit(main())
