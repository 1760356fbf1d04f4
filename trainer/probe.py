"""``python -m trainer.probe``: one backend of ``g1-backend-probe`` (CONTRACTS §10).

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

Two drivers, one set of phases; the iteration (the whole step) is bounded by
``torch.cuda.synchronize()`` at both ends:

* staged backends (``mjwarp``): :func:`staged_probe_iteration` runs the env's own
  :meth:`~trainer.task.g1_tracking.G1TrackingEnv.step_phases`, the CUDA graphs (and compiled
  arithmetic) training replays, one phase at a time; only ``select`` is the probe's own
  (scheduled | clip-end rows written into ``env.reset_mask``). The reset is then the masked
  fixed-work update training runs, so it costs the same with any number of rows. Phase
  boundaries are CUDA events on the step stream (``phase_timing: cuda_events``), so the phases
  run back to back as in training.
* ``mujoco``: :func:`probe_iteration` calls the eager step pieces and ``env.reset_rows``
  (which skips an empty mask); every phase boundary is a synchronized host timestamp
  (``phase_timing: host_synchronized``).

The phases:

* ``backend_step_ms``: action history, position targets, ``backend.step`` (on ``mujoco`` this
  includes the packed ctrl d2h copy, the CPU physics and the packed state h2d copy; staged:
  the ``actions`` and ``physics_step`` phases);
* ``state_exchange_ms``: reading the backend views into the tracked robot state and gathering
  the reference frame (``robot_state``/``reference_state``);
* ``update_state_ms``: terminations, rewards, sampler update, frame advance, observations
  (staged: plus the episode clock);
* ``reset_selection_ms``: the scheduled | clip-end device mask;
* ``reset_done_ms``: ``env.reset_rows`` up to the backend call (start frames, reset targets;
  staged: ``stage_reset``);
* ``backend_reset_ms``: ``backend.reset_rows`` (``mujoco``: packed d2h commit, host reset,
  packed h2d publication; staged: ``physics_reset``, the Warp reset graph);
* ``reset_publish_ms``: after the backend call until ``env.reset_rows`` returns (task state and
  observations of the reset rows; staged: ``finish``).

On ``mujoco`` the split of ``reset_rows`` is observed by wrapping the backend instance's
``reset_rows`` method; nothing else of the env is patched.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import click
import numpy as np
import typer

from contracts import gpu_snapshot
from contracts.backend_probe import BACKENDS, PHASES
from contracts.cli_app import error, run_app
from contracts.jsonio import write_json_atomic

__all__ = [
    "PHASES",
    "SEED",
    "PhaseClock",
    "ResetMarks",
    "control_step",
    "main",
    "probe_iteration",
    "reset_stride",
    "run_backend_probe",
    "scheduled_mask",
    "staged_probe_iteration",
    "summarize_ms",
    "transfer_inventory",
]

log = logging.getLogger(__name__)

SEED = 7
ACTION_POOL_MAX = 64
"""At most this many distinct action batches are drawn; iterations cycle through them."""
ALGO, TASK = "flashsac", "g1_motion_tracking"
PHASE_BOUNDARIES = {
    "backend_step_ms": "action history + position targets + backend.step (mujoco: ctrl d2h, CPU physics, state h2d)",
    "state_exchange_ms": "env.robot_state() + env.reference_state(frame): backend views -> task state",
    "update_state_ms": "terminations, rewards, sampler update, frame advance, observations",
    "reset_selection_ms": "scheduled rows | clip-end rows as a device mask",
    "reset_done_ms": "env.reset_rows up to backend.reset_rows (start frames, reset targets)",
    "backend_reset_ms": "backend.reset_rows (mujoco: packed d2h commit, host reset, packed h2d publication)",
    "reset_publish_ms": "after backend.reset_rows until env.reset_rows returns (task state, observations)",
    "iteration_ms": "the whole control step, synchronized at both ends",
}
MOTION_ALIASES = {
    "synthetic": "motions/g1/synthetic_dance.npz",
    "march": "motions/g1/synthetic_march.npz",
    "dance": "motions/g1/dance1_subject2_part.npz",
}


class ProbeFailure(Exception):
    """The probe of this backend cannot run or failed a check; the message is the reason."""


# ----------------------------------------------------------------------------- workload pieces
def reset_stride(num_envs: int) -> int:
    """Scheduled-reset stride: 16 when ``num_envs >= 16``, else ``num_envs``."""
    return min(16, num_envs)


def scheduled_reset_rows(num_envs: int) -> int:
    """Nominal rows reset per iteration by the schedule: ``max(1, num_envs // 16)``."""
    return max(1, num_envs // 16)


def scheduled_mask(num_envs: int, iteration: int) -> np.ndarray:
    """Rows with ``row % stride == iteration % stride``. bool [N]"""
    stride = reset_stride(num_envs)
    return np.arange(num_envs) % stride == iteration % stride


def summarize_ms(values_ms: np.ndarray | list[float]) -> dict[str, Any]:
    """``{mean_ms, std_ms, p50_ms, min_ms, max_ms, iters}`` (population std)."""
    arr = np.asarray(values_ms, dtype=np.float64)
    return {
        "mean_ms": float(arr.mean()),
        "std_ms": float(arr.std()),
        "p50_ms": float(np.median(arr)),
        "min_ms": float(arr.min()),
        "max_ms": float(arr.max()),
        "iters": int(arr.size),
    }


def transfer_inventory() -> list[dict[str, Any]]:
    """The CPU ``mujoco`` backend's packed transfers per control step (CONTRACTS §10)."""
    rows = (
        ("control", "d2h", 1, "MujocoCpuBackend.step: one packed copy of ctrl [N, nu] to the host"),
        ("cpu_physics", "none", 0, "mj_step x substeps per world on host threads (no transfer)"),
        (
            "update_state_full_read",
            "h2d",
            1,
            (
                "MujocoCpuBackend.step: one packed copy of the state rows (qpos, qvel, xpos, "
                "xquat, cvel, subtree_com, sensordata) to the device"
            ),
        ),
        (
            "update_state_manager_compute",
            "none",
            0,
            "terminations, rewards, sampler, observations as torch ops on the device",
        ),
        ("reset_done_selection", "none", 0, "scheduled | clip-end rows as a device mask"),
        (
            "reset_commit",
            "d2h",
            1,
            "MujocoCpuBackend.reset_rows: one packed [mask, qpos, qvel, ctrl] copy to the host",
        ),
        (
            "reset_publication",
            "h2d",
            1,
            "MujocoCpuBackend.reset_rows: one packed state copy to the device (none on an empty mask)",
        ),
        ("replay_publication", "excluded", None, "replay ingestion is excluded from the probe"),
    )
    return [
        {
            "phase": phase,
            "direction": direction,
            "semantic_limit_per_control_step": limit,
            "implementation": implementation,
        }
        for phase, direction, limit, implementation in rows
    ]


class PhaseClock:
    """``now()`` = host time after all queued device work finished (CUDA synchronize)."""

    def __init__(self, device: Any) -> None:
        import torch

        self.cuda = getattr(device, "type", str(device)) == "cuda"
        self._sync: Callable[[], None] = torch.cuda.synchronize if self.cuda else (lambda: None)

    def now(self) -> float:
        self._sync()
        return time.perf_counter()


@dataclass
class ResetMarks:
    """Timestamps taken around ``backend.reset_rows`` by the instance wrapper."""

    clock: PhaseClock
    marks: list[float] = field(default_factory=list)

    def wrap(self, backend: Any) -> None:
        inner = backend.reset_rows

        def timed_reset_rows(mask, qpos, qvel, ctrl=None):
            self.marks.append(self.clock.now())
            inner(mask, qpos, qvel, ctrl)
            self.marks.append(self.clock.now())

        backend.reset_rows = timed_reset_rows


def control_step(env: Any, actions: Any, clock: PhaseClock) -> tuple[dict[str, Any], list[float]]:
    """TASK.md §1 steps 1–7 on ``env`` without the done reset (step 8); returns the termination
    conditions and the timestamps ``[t_step_end, t_exchange_end, t_update_end]``.

    It calls the env's own step pieces (``apply_actions``, ``backend.step``, the episode clock,
    ``robot_state``/``reference_state``, ``update_state``), so the probe's task work equals
    training's except for which rows get reset (a test checks it against ``env.step``).
    """
    # 1.-3. action history, position targets, physics, episode clock.
    env.backend.step(env.apply_actions(actions))
    env.episode_step += 1
    t_step = clock.now()
    # state exchange: backend views -> tracked state, reference at frame k.
    robot = env.robot_state()
    ref = env.reference_state(env.frame)
    t_exchange = clock.now()
    # 4.-7. terminations, rewards, sampler, frame advance, observations.
    conds = env.update_state(robot, ref)
    t_update = clock.now()
    return conds, [t_step, t_exchange, t_update]


def probe_iteration(
    env: Any, actions: Any, scheduled: Any, clock: PhaseClock, reset_marks: ResetMarks
) -> tuple[dict[str, float], Any, Any]:
    """One measured iteration: control step, reset selection, selected-row reset.

    Args:
        env: the G1 env (its backend's ``reset_rows`` wrapped by ``reset_marks``).
        actions: [N, 29] float32 on the env device.
        scheduled: [N] bool, this iteration's scheduled rows.
        clock: synchronizing clock.
        reset_marks: collects the timestamps around ``backend.reset_rows``.

    Returns:
        ``(phase milliseconds, reset mask [N], clip-end rows [N])``. Terminated rows are not
        in the mask unless scheduled; an empty mask makes ``env.reset_rows`` a no-op.
    """
    reset_marks.marks.clear()
    t0 = clock.now()
    conds, (t1, t2, t3) = control_step(env, actions, clock)
    clip_end = conds["motion_clip_end"]  # [N] rows at their clip's last frame
    mask = scheduled | clip_end
    t4 = clock.now()
    env.reset_rows(mask)
    t5 = clock.now()
    b0, b1 = reset_marks.marks if reset_marks.marks else (t5, t5)
    seconds = {
        "backend_step_ms": t1 - t0,
        "state_exchange_ms": t2 - t1,
        "update_state_ms": t3 - t2,
        "reset_selection_ms": t4 - t3,
        "reset_done_ms": b0 - t4,
        "backend_reset_ms": b1 - b0,
        "reset_publish_ms": t5 - b1,
        "iteration_ms": t5 - t0,
    }
    return {name: value * 1000.0 for name, value in seconds.items()}, mask, clip_end


_STAGED_GROUPS = (
    ("backend_step_ms", ("actions", "physics_step")),
    ("state_exchange_ms", ("exchange",)),
    ("update_state_ms", ("update",)),
    ("reset_selection_ms", ("select",)),
    ("reset_done_ms", ("stage_reset",)),
    ("backend_reset_ms", ("physics_reset",)),
    ("reset_publish_ms", ("finish",)),
)
"""Probe phases as groups of the env's step phases (staged backends)."""


def staged_probe_iteration(
    env: Any, actions: Any, scheduled: Any, clock: PhaseClock
) -> tuple[dict[str, float], Any, Any]:
    """One measured iteration on a staged backend: the env's step phases in order, with the
    probe's reset rows (``scheduled | clip_end``) in place of the done rows.

    The iteration is synchronized at both ends (host clock). On CUDA the phase boundaries are
    CUDA events on the step stream, not host syncs, so the phases run back to back as in
    training (CONTRACTS §10: "total_iteration_synchronized; phase_boundaries_may_be_stream_
    ordered"); elsewhere they are host timestamps.

    Returns:
        ``(phase milliseconds, reset mask [N], clip-end rows [N])``; both tensors are the env's
        fixed buffers, valid until the next iteration.
    """
    import torch

    runs = dict(env.step_phases())
    runs["select"] = lambda: torch.bitwise_or(scheduled, env.clip_end, out=env.reset_mask)
    mark = _event_mark if clock.cuda else time.perf_counter
    t0 = clock.now()
    env.stage_actions(actions)
    with env.phase_stream():
        marks = [mark()]
        for _, group in _STAGED_GROUPS:
            for phase in group:
                runs[phase]()
            marks.append(mark())
    t1 = clock.now()
    if clock.cuda:
        spans = [a.elapsed_time(b) for a, b in itertools.pairwise(marks)]
    else:
        spans = [1000.0 * (b - a) for a, b in itertools.pairwise(marks)]
    ms = {name: span for (name, _), span in zip(_STAGED_GROUPS, spans, strict=True)}
    ms["iteration_ms"] = 1000.0 * (t1 - t0)
    return ms, env.reset_mask, env.clip_end


def _event_mark() -> Any:
    import torch

    event = torch.cuda.Event(enable_timing=True)
    event.record()  # on the current (step) stream
    return event


# ----------------------------------------------------------------------------- the probe
def _child_runtime(device: Any) -> dict[str, Any]:
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
    if getattr(device, "type", None) == "cuda":
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


def _select_device(backend: str, training_device: str) -> Any:
    import torch

    if backend == "mjwarp":
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
    import torch

    from trainer.config.errors import ConfigError
    from trainer.config.loader import load_config
    from trainer.cpu_threads import apply_torch_threads, plan_probe_threads
    from trainer.sim.scene import build_g1_model
    from trainer.task.g1_tracking import make_env
    from trainer.task.motion import MotionError, load_motion, resolve_motion

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
    torch.cuda.manual_seed(SEED)  # lazy without CUDA; CONTRACTS §10 seeds
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
    be = env.backend
    clock = PhaseClock(device)
    reset_marks = ResetMarks(clock)
    reset_marks.wrap(be)

    rng = np.random.default_rng(SEED)
    pool_size = min(warmup + iters, ACTION_POOL_MAX)
    pool = torch.as_tensor(
        rng.uniform(-1.0, 1.0, size=(pool_size, num_envs, env.action_dim)).astype(np.float32)
    ).to(device)  # [P, N, 29], uploaded once
    schedule = torch.as_tensor(
        np.stack([scheduled_mask(num_envs, k) for k in range(reset_stride(num_envs))]),
        device=device,
    )  # [stride, N] bool
    stride = reset_stride(num_envs)
    samples = {name: np.zeros(iters) for name in PHASES}
    clip_end_rows = torch.zeros((), dtype=torch.long, device=device)
    reset_rows_total = torch.zeros((), dtype=torch.long, device=device)
    scheduled_total = 0
    empty_resets = 0
    stats_start = None
    wall_start = 0.0
    for it in range(warmup + iters):
        measured = it >= warmup
        if it == warmup:
            stats_start = be.transfer_stats()
            wall_start = time.perf_counter()
        if env.staged:
            ms, mask, clip_end = staged_probe_iteration(
                env, pool[it % pool_size], schedule[it % stride], clock
            )
        else:
            ms, mask, clip_end = probe_iteration(
                env, pool[it % pool_size], schedule[it % stride], clock, reset_marks
            )
        if not measured:
            continue
        j = it - warmup
        if not env.staged and not reset_marks.marks:
            empty_resets += 1
        for name, value in ms.items():
            samples[name][j] = value
        scheduled_total += int(np.count_nonzero(scheduled_mask(num_envs, it)))
        clip_end_rows += clip_end.sum()
        reset_rows_total += mask.sum()
    measured_wall_s = time.perf_counter() - wall_start
    stats_end = be.transfer_stats()
    env.check_health()

    phases = {name: summarize_ms(samples[name]) for name in PHASES}
    steps_per_s = num_envs / (phases["iteration_ms"]["mean_ms"] / 1000.0)
    host_bridge = None
    if stats_start is not None and stats_end is not None:
        host_bridge = {key: int(stats_end[key] - stats_start[key]) for key in stats_end}
    if acceptance and host_bridge is not None:
        limit = 2 * iters
        over = [f"{k}={v}" for k, v in host_bridge.items() if k.endswith("_count") and v > limit]
        if over:
            raise ProbeFailure(
                f"host bridge transfer counts exceed 2 x iters = {limit}: {', '.join(over)}; "
                "the CPU backend made extra host/device copies"
            )
    diagnostics = be.diagnostics()
    return {
        "backend": backend,
        "status": "passed",
        "failure_reason": None,
        "tensor_execution": "device_resident" if backend == "mjwarp" else "host_bridge",
        "step_driver": "env_step_phases" if env.staged else "eager_step_pieces",
        "phase_timing": "cuda_events" if env.staged and clock.cuda else "host_synchronized",
        "device": str(device),
        "num_envs": num_envs,
        "physics_substeps_per_control_step": int(be.decimation),
        "warmup": warmup,
        "iters": iters,
        "scheduled_reset_rows": scheduled_reset_rows(num_envs),
        "reset_policy": {
            "scheduled_selected_rows": True,
            "stride": stride,
            "selection": "row % stride == iteration % stride",
            "clip_end_overflow_reset": True,
            "terminated_reset": False,
            "empty_reset": "no-op",
        },
        "reset_counts": {
            "scheduled_rows": scheduled_total,
            "clip_end_rows": int(clip_end_rows),
            "reset_rows": int(reset_rows_total),
            "empty_reset_iterations": empty_resets,
        },
        "seeds": {"numpy_synthetic_workload": SEED, "torch_cuda": SEED, "env": SEED},
        "motion": {
            "id": task_cfg.motion_file,
            "sha256": resolved.sha256,
            "source": resolved.source,
        },
        "throughput_env_control_steps_per_s": steps_per_s,
        "throughput_physics_substeps_per_s": steps_per_s * int(be.decimation),
        "phases": phases,
        "phase_boundaries": dict(PHASE_BOUNDARIES),
        "backend_diagnostics": diagnostics,
        "transfer_inventory": transfer_inventory() if backend == "mujoco" else None,
        "host_bridge_transfer_stats": host_bridge if backend == "mujoco" else None,
        "gpu_snapshots": {"before": None, "child_before_cuda_init": child_snapshot, "after": None},
        "child_runtime": {
            **_child_runtime(device),
            "torch_threads": torch_threads,
            "physics_threads": getattr(be, "num_threads", None),
        },
        "measured_wall_s": measured_wall_s,
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
