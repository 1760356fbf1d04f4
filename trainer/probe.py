"""``python -m trainer.probe``: one backend of ``g1-backend-probe`` (docs/contracts.md §backend-probe).

The harness parent runs this module once per backend, in a fresh process, with
``--backends <X> ... --_single-result <tmp> --_quiet``; it writes that backend's result (the
per-backend object of ``schemas/backend_probe.0.3.0.json``) to the ``--_single-result`` path
and exits 0, or writes a failed result with the reason and exits 1 (2 for bad flags).

Workload. The owner config ``flashsac / g1_motion_tracking / <X>`` builds the G1 env
(``make_env``, seed 7) with the owner's physics substeps. Actions are U(−1, 1) float32
``[num_envs, 29]`` from ``numpy.random.default_rng(7)`` (a pool uploaded once, so no per-step
host copy), ``torch.cuda.manual_seed(7)``. With CPU tensors torch runs on one thread and the
physics pool keeps every CPU (``trainer.cpu_threads.plan_probe_threads``). Each iteration is
one control step of the task (docs/task.md steps 1–7, the same calls ``G1TrackingEnv.step``
makes) followed by a selected-row reset of the *scheduled* rows (``row % stride == iter %
stride``, stride 16 if N ≥ 16 else N) plus the rows at their clip end. Terminated rows are
**not** reset (random actions would make the probe reset-bound), and an empty reset is a no-op.

One driver for every backend: :func:`probe_iteration` runs the env's own
:meth:`~trainer.task.g1_tracking.G1TrackingEnv.step_phases` (docs/task.md "Step phases"), the
phases training runs, one at a time; only ``select`` is the probe's own (scheduled | clip-end
rows written into ``env.reset_mask``). The iteration (the whole step) is bounded by
``torch.cuda.synchronize()`` at both ends.

* staged backends (``mjwarp``): the phases are the CUDA graphs (and compiled arithmetic)
  training replays, and the reset is the masked fixed-work update, so it costs the same with
  any number of rows. Phase boundaries are CUDA events on the step stream (``phase_timing:
  cuda_events``), so the phases run back to back as in training.
* ``mujoco``: the physics phases are the backend's host ``step`` and ``reset_rows`` (an empty
  mask skips the reset: no draw, no backend call); every phase boundary is a synchronized host
  timestamp (``phase_timing: host_synchronized``).

The phases (``env phases`` in brackets):

* ``backend_step_ms``: action history, position targets, physics [``actions``,
  ``physics_step``]; on ``mujoco`` this includes the packed ctrl d2h copy, the CPU physics and
  the packed state h2d copy;
* ``state_exchange_ms``: the backend views and the reference frame into the fixed robot and
  reference buffers [``exchange``];
* ``update_state_ms``: episode clock, terminations, rewards, sampler update, frame advance,
  observations [``update``];
* ``reset_selection_ms``: the scheduled | clip-end device mask [the probe's ``select``];
* ``reset_done_ms``: start frames, reset targets, task state of the reset rows
  [``stage_reset``];
* ``backend_reset_ms``: the backend reset [``physics_reset``]; ``mujoco``: packed d2h commit,
  host reset, packed h2d publication;
* ``reset_publish_ms``: observations of the reset rows and the step's obs outputs
  [``finish``].
"""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import numpy as np
import typer

from contracts import gpu_snapshot
from contracts.backend_probe import BACKENDS, PHASES
from contracts.cli_app import error, run_app
from contracts.jsonio import write_json_atomic
from contracts.names import Backend
from trainer.probe_workload import (
    PhaseClock,
    probe_iteration,
    reset_stride,
    scheduled_mask,
    scheduled_reset_rows,
    summarize_ms,
    transfer_inventory,
)

if TYPE_CHECKING:
    import torch

    from trainer.task.config import G1TrackingCfg
    from trainer.task.g1_tracking import G1TrackingEnv
    from trainer.task.motion import ResolvedMotion

__all__ = [
    "PHASES",
    "SEED",
    "PhaseClock",
    "main",
    "probe_iteration",
    "reset_stride",
    "run_backend_probe",
    "scheduled_mask",
    "summarize_ms",
    "transfer_inventory",
]

log = logging.getLogger(__name__)

SEED = 7
ACTION_POOL_MAX = 64
"""At most this many distinct action batches are drawn; iterations cycle through them."""
ALGO, TASK = "flashsac", "g1_motion_tracking"
PHASE_BOUNDARIES = {
    "backend_step_ms": "env phases actions + physics_step: action history, position targets, physics (mujoco: ctrl d2h, CPU physics, state h2d)",
    "state_exchange_ms": "env phase exchange: backend views + reference frame -> fixed task buffers",
    "update_state_ms": "env phase update: episode clock, terminations, rewards, sampler update, frame advance, observations",
    "reset_selection_ms": "scheduled rows | clip-end rows as a device mask (the probe's select phase)",
    "reset_done_ms": "env phase stage_reset: start frames, reset targets, task state of the reset rows",
    "backend_reset_ms": "env phase physics_reset: the backend reset (mujoco: packed d2h commit, host reset, packed h2d publication)",
    "reset_publish_ms": "env phase finish: observations of the reset rows, step obs outputs",
    "iteration_ms": "the whole control step, synchronized at both ends",
}
MOTION_ALIASES = {
    "synthetic": "motions/g1/synthetic_dance.npz",
    "march": "motions/g1/synthetic_march.npz",
    "dance": "motions/g1/dance1_subject2_part.npz",
}


class ProbeFailure(Exception):
    """The probe of this backend cannot run or failed a check; the message is the reason."""


# ----------------------------------------------------------------------------- the probe
def _child_runtime(device: torch.device) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {
        "torch_version": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_device": None,
        "cuda_device_index": None,
        "gpu_name": None,
        "gpu_capability": None,
        "gpu_total_memory_gib": None,
    }
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        out.update(
            cuda_device=f"cuda:{index}",
            cuda_device_index=int(index),
            gpu_name=props.name,
            gpu_capability=f"{props.major}.{props.minor}",
            gpu_total_memory_gib=round(props.total_memory / 2**30, 3),
        )
    return out


def _select_device(backend: str, training_device: str) -> torch.device:
    import torch

    if backend == Backend.MJWARP:
        if not torch.cuda.is_available():
            raise ProbeFailure(
                "sim backend 'mjwarp' needs CUDA but torch.cuda.is_available() is False; "
                "run on a CUDA machine or probe --backends mujoco"
            )
        if torch.version.hip is not None:
            raise ProbeFailure(
                f"sim backend 'mjwarp' needs NVIDIA CUDA, found ROCm/HIP {torch.version.hip}"
            )
        return torch.device("cuda", 0)
    if training_device == "auto":
        return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    return torch.device(training_device)


@dataclass
class _Setup:
    """The probe's env and what its result reports about how it was built."""

    env: G1TrackingEnv
    device: torch.device
    task_cfg: G1TrackingCfg
    resolved: ResolvedMotion
    torch_threads: int


@dataclass
class _Tally:
    """Per-phase samples and reset counts of the measured iterations."""

    samples: dict[str, np.ndarray]
    scheduled_rows: int = 0
    clip_end_rows: Any = None  # device scalar, read once at the end
    reset_rows: Any = None
    empty_resets: int = 0
    measured_wall_s: float = 0.0
    transfer_delta: dict[str, int] | None = None


def _setup(backend: str, num_envs: int, motion: str) -> _Setup:
    """Load the owner config, plan threads, seed, load the motion and build the env."""
    import torch

    from trainer.config.errors import ConfigError
    from trainer.config.loader import load_config
    from trainer.cpu_threads import apply_torch_threads, plan_probe_threads
    from trainer.motion_import.resolve import install_motion_importer
    from trainer.sim.scene import build_g1_model
    from trainer.task.g1_tracking import make_env
    from trainer.task.motion import MotionError, load_motion, resolve_motion

    install_motion_importer()
    motion_id = MOTION_ALIASES.get(motion, motion)
    try:
        loaded = load_config(ALGO, TASK, backend, [f"env.commands.motion.motion_file={motion_id}"])
    except ConfigError as err:
        raise ProbeFailure(f"owner {ALGO}/{TASK}/{backend}: {err}") from err
    task_cfg = loaded.task_cfg
    device = _select_device(backend, loaded.training.device)
    try:
        torch_threads = apply_torch_threads(plan_probe_threads(device=str(device)))
    except ValueError as err:
        raise ProbeFailure(str(err)) from err
    torch.manual_seed(SEED)
    torch.cuda.manual_seed(SEED)  # lazy without CUDA; docs/contracts.md §backend-probe seeds
    model = build_g1_model(task_cfg.scene)
    try:
        resolved = resolve_motion(task_cfg.motion_file, hub_repo=task_cfg.hub_repo)
        clip = load_motion(resolved.path, model)
    except MotionError as err:
        raise ProbeFailure(str(err)) from err
    log.info("probe %s: building %d envs on %s", backend, num_envs, device)
    env = make_env(
        task_cfg,
        sim_backend=backend,
        num_envs=num_envs,
        device=device,
        seed=SEED,
        motion=clip,
        model=model,
    )
    return _Setup(env, device, task_cfg, resolved, torch_threads)


def _measure(env: G1TrackingEnv, device: torch.device, *, warmup: int, iters: int) -> _Tally:
    """Run ``warmup + iters`` iterations over a pool of seeded actions; tally the measured."""
    import torch

    num_envs, be = env.num_envs, env.backend
    clock = PhaseClock(device)
    rng = np.random.default_rng(SEED)
    pool_size = min(warmup + iters, ACTION_POOL_MAX)
    pool = torch.as_tensor(
        rng.uniform(-1.0, 1.0, size=(pool_size, num_envs, env.spec.action_dim)).astype(np.float32)
    ).to(device)  # [P, N, A], uploaded once
    stride = reset_stride(num_envs)
    schedule = torch.as_tensor(
        np.stack([scheduled_mask(num_envs, k) for k in range(stride)]), device=device
    )  # [stride, N] bool
    tally = _Tally(samples={name: np.zeros(iters) for name in PHASES})
    tally.clip_end_rows = torch.zeros((), dtype=torch.long, device=device)
    tally.reset_rows = torch.zeros((), dtype=torch.long, device=device)
    stats_start, wall_start = None, 0.0
    for it in range(warmup + iters):
        if it == warmup:
            stats_start, wall_start = be.transfer_stats(), time.perf_counter()
        ms, mask, clip_end = probe_iteration(
            env, pool[it % pool_size], schedule[it % stride], clock
        )
        if it < warmup:
            continue
        if not env.staged and not bool(mask.any()):
            tally.empty_resets += 1  # the CPU backend skipped the reset
        for name, value in ms.items():
            tally.samples[name][it - warmup] = value
        tally.scheduled_rows += int(np.count_nonzero(scheduled_mask(num_envs, it)))
        tally.clip_end_rows += clip_end.sum()
        tally.reset_rows += mask.sum()
    tally.measured_wall_s = time.perf_counter() - wall_start
    stats_end = be.transfer_stats()
    if stats_start is not None and stats_end is not None:
        tally.transfer_delta = {k: int(stats_end[k] - stats_start[k]) for k in stats_end}
    return tally


def _check_transfers(tally: _Tally, iters: int) -> None:
    """Acceptance: at most 2 host/device copies of each kind per iteration (CPU backend)."""
    if tally.transfer_delta is None:
        return
    limit = 2 * iters
    over = [
        f"{k}={v}" for k, v in tally.transfer_delta.items() if k.endswith("_count") and v > limit
    ]
    if over:
        raise ProbeFailure(
            f"host bridge transfer counts exceed 2 x iters = {limit}: {', '.join(over)}; "
            "the CPU backend made extra host/device copies"
        )


def run_backend_probe(
    backend: str,
    *,
    num_envs: int,
    warmup: int,
    iters: int,
    motion: str,
    acceptance: bool,
    child_snapshot: dict[str, Any] | None,
) -> dict[str, Any]:
    """Build the env, run warmup + measured iterations, return the per-backend result.

    Raises:
        ProbeFailure: the backend cannot run here or an acceptance check failed.
    """
    setup = _setup(backend, num_envs, motion)
    tally = _measure(setup.env, setup.device, warmup=warmup, iters=iters)
    setup.env.check_health()
    if acceptance:
        _check_transfers(tally, iters)
    return _result(backend, setup, tally, warmup=warmup, iters=iters, snapshot=child_snapshot)


def _result(
    backend: str,
    setup: _Setup,
    tally: _Tally,
    *,
    warmup: int,
    iters: int,
    snapshot: dict[str, Any] | None,
) -> dict[str, Any]:
    """The per-backend result object (``schemas/backend_probe.0.3.0.json``)."""
    env, device, be = setup.env, setup.device, setup.env.backend
    num_envs = env.num_envs
    phases = {name: summarize_ms(tally.samples[name]) for name in PHASES}
    steps_per_s = num_envs / (phases["iteration_ms"]["mean_ms"] / 1000.0)
    cpu = backend == Backend.MUJOCO
    return {
        "backend": backend,
        "status": "passed",
        "failure_reason": None,
        "tensor_execution": "host_bridge" if cpu else "device_resident",
        "step_driver": "env_step_phases",
        "phase_timing": "cuda_events"
        if env.staged and device.type == "cuda"
        else "host_synchronized",
        "device": str(device),
        "num_envs": num_envs,
        "physics_substeps_per_control_step": int(be.decimation),
        "warmup": warmup,
        "iters": iters,
        "scheduled_reset_rows": scheduled_reset_rows(num_envs),
        "reset_policy": {
            "scheduled_selected_rows": True,
            "stride": reset_stride(num_envs),
            "selection": "row % stride == iteration % stride",
            "clip_end_overflow_reset": True,
            "terminated_reset": False,
            "empty_reset": "no-op",
        },
        "reset_counts": {
            "scheduled_rows": tally.scheduled_rows,
            "clip_end_rows": int(tally.clip_end_rows),
            "reset_rows": int(tally.reset_rows),
            "empty_reset_iterations": tally.empty_resets,
        },
        "seeds": {"numpy_synthetic_workload": SEED, "torch_cuda": SEED, "env": SEED},
        "motion": {
            "id": setup.task_cfg.motion_file,
            "sha256": setup.resolved.sha256,
            "source": setup.resolved.source,
        },
        "throughput_env_control_steps_per_s": steps_per_s,
        "throughput_physics_substeps_per_s": steps_per_s * int(be.decimation),
        "phases": phases,
        "phase_boundaries": dict(PHASE_BOUNDARIES),
        "backend_diagnostics": be.diagnostics(),
        "transfer_inventory": transfer_inventory() if cpu else None,
        "host_bridge_transfer_stats": tally.transfer_delta if cpu else None,
        "gpu_snapshots": {"before": None, "child_before_cuda_init": snapshot, "after": None},
        "child_runtime": {
            **_child_runtime(device),
            "torch_threads": setup.torch_threads,
            "physics_threads": be.num_threads,
        },
        "measured_wall_s": tally.measured_wall_s,
    }


def _failed(backend: str, reason: str, snapshot: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "backend": backend,
        "status": "failed",
        "failure_reason": reason,
        "exit_code": None,
        "gpu_snapshots": {"before": None, "child_before_cuda_init": snapshot, "after": None},
    }


# ----------------------------------------------------------------------------- CLI
app = typer.Typer(name="trainer.probe", add_completion=False, pretty_exceptions_enable=False)


@app.command()
def probe_child(
    backends: Annotated[
        str, typer.Option("--backends", help="Exactly one backend: mjwarp or mujoco.")
    ],
    single_result: Annotated[
        Path | None,
        typer.Option("--_single-result", help="Where to write this backend's result JSON."),
    ] = None,
    num_envs: Annotated[int, typer.Option("--num-envs", min=1)] = 2048,
    warmup: Annotated[int, typer.Option("--warmup", min=0)] = 20,
    iters: Annotated[int, typer.Option("--iters", min=1)] = 100,
    motion: Annotated[str, typer.Option("--motion")] = "synthetic",
    acceptance: Annotated[bool, typer.Option("--acceptance")] = False,
    quiet: Annotated[bool, typer.Option("--_quiet")] = False,
) -> None:
    """One backend of g1-backend-probe (run by the harness parent, one process per backend)."""
    if single_result is None:
        raise click.UsageError(
            "python -m trainer.probe is the per-backend child of g1-backend-probe and needs "
            "--_single-result PATH; run g1-backend-probe --backends ... --output PATH instead"
        )
    backend = backends.strip()
    if backend not in BACKENDS:
        raise click.UsageError(
            f"--backends {backends!r} must name exactly one backend of {', '.join(BACKENDS)}"
        )
    snapshot: dict[str, Any] | None = None
    try:
        if acceptance:
            problem = gpu_snapshot.profiler_env_failure()
            if problem:
                raise ProbeFailure(problem)
        # Before CUDA init: torch is imported lazily below, and importing it starts no context.
        snapshot = gpu_snapshot.take_snapshot()
        if acceptance:
            problem = gpu_snapshot.validate_snapshot(snapshot, "before-cuda-init")
            if problem:
                raise ProbeFailure(problem)
        result = run_backend_probe(
            backend,
            num_envs=num_envs,
            warmup=warmup,
            iters=iters,
            motion=motion,
            acceptance=acceptance,
            child_snapshot=snapshot,
        )
    except ProbeFailure as err:
        write_json_atomic(single_result, _failed(backend, str(err), snapshot))
        raise typer.Exit(code=error(str(err))) from None
    except Exception as err:  # noqa: BLE001 - isolation: record any backend crash, keep the traceback
        traceback.print_exc(file=sys.stderr)
        reason = f"{type(err).__name__}: {' '.join(str(err).split())}"
        write_json_atomic(single_result, _failed(backend, reason, snapshot))
        raise typer.Exit(code=error(reason)) from None
    write_json_atomic(single_result, result)
    if not quiet:
        sys.stdout.write(
            f"{backend}: {result['throughput_env_control_steps_per_s']:.0f} env control steps/s; "
            f"iteration={result['phases']['iteration_ms']['mean_ms']:.3f} ms\n"
        )


def main(argv: list[str] | None = None) -> int:
    """Entry point of the child: exit 0 passed, 1 failed (result written), 2 bad flags."""
    logging.basicConfig(
        level=os.environ.get("G1SOAK_LOG_LEVEL", "WARNING"),
        stream=sys.stderr,
        format=f"probe[{os.getpid()}] %(levelname)s %(name)s: %(message)s",
    )
    return run_app(app, argv, prog="python -m trainer.probe")


if __name__ == "__main__":
    sys.exit(main())
