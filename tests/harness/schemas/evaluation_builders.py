"""Builders of valid evaluation.json documents and run_summary.evaluation sections.

``make_evaluation(curve)`` turns a list of ``(iteration, success_rate, r_mpkpe_mm)`` into a
document that validates against schemas/evaluation.v1.json, with ``best`` chosen by the
schema's criterion; ``summary_section(doc)`` is the matching run_summary.evaluation. The
learning-verdict tests, the fault children and the report fixtures share them.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contracts.jsonio import write_json_atomic

EPISODES = 64
NUM_FRAMES = 500
STEPS_PER_ITERATION = 64  # env steps per iteration, as builders.NUM_ENVS
Curve = Sequence[tuple[int, float | None, float | None]]


def make_metrics(success_rate: float | None = 1.0, r_mpkpe_mm: float | None = 12.0, **over: Any):
    """One mode's metrics; MPKPE tracks R-MPKPE at +40 % unless given."""
    metrics: dict[str, Any] = {
        "episodes": EPISODES,
        "success_rate": success_rate,
        "completed_fraction": None if success_rate is None else min(1.0, success_rate + 0.01),
        "mpkpe_mm": None if r_mpkpe_mm is None else round(r_mpkpe_mm * 1.4, 3),
        "r_mpkpe_mm": r_mpkpe_mm,
        "joint_pos_error_rad": 0.05,
        "anchor_pos_error_mm": 20.0,
        "anchor_ori_error_rad": 0.04,
        "end_effector_pos_error_mm": 25.0,
        "mean_step_reward": 1.5,
        "mean_episode_steps": 120.0,
    }
    metrics.update(over)
    return metrics


def make_point(
    iteration: int,
    success_rate: float | None = 1.0,
    r_mpkpe_mm: float | None = 12.0,
    *,
    source: str = "checkpoint",
    frame0: dict[str, Any] | None = None,
) -> dict[str, Any]:
    uniform = make_metrics(success_rate, r_mpkpe_mm)
    return {
        "iteration": iteration,
        "env_steps": iteration * STEPS_PER_ITERATION,
        "source": source,
        "checkpoint": None if source == "final" else f"model_{iteration}.pt",
        "eval_wall_time_s": 0.5,
        "modes": {
            "frame0": frame0 if frame0 is not None else copy.deepcopy(uniform),
            "uniform": uniform,
        },
    }


def _best_iteration(points: Sequence[dict[str, Any]]) -> int | None:
    """Highest uniform success rate, ties to the lowest R-MPKPE; points with nulls excluded."""
    finite = [
        p
        for p in points
        if all(v is not None for mode in p["modes"].values() for v in mode.values())
    ]
    if not finite:
        return None
    best = min(
        finite,
        key=lambda p: (-p["modes"]["uniform"]["success_rate"], p["modes"]["uniform"]["r_mpkpe_mm"]),
    )
    return best["iteration"]


def make_evaluation(curve: Curve, *, final: bool = True) -> dict[str, Any]:
    """evaluation.json for ``curve``; its last point is the final policy when ``final``."""
    points = [make_point(it, s, r) for it, s, r in curve]
    if final and points:
        points[-1]["source"] = "final"
        points[-1]["checkpoint"] = None
    best = _best_iteration(points)
    return {
        "schema_version": 1,
        "protocol": {
            "policy": "deterministic_mean_action",
            "start_modes": ["frame0", "uniform"],
            "uniform_episodes": EPISODES,
            "frame0_episodes": EPISODES,
            "max_episode_steps": NUM_FRAMES,
            "sim_backend": "mujoco",
            "device": "cpu",
        },
        "motion": {
            "motion_id": "motions/g1/synthetic_dance.npz",
            "sha256": "ab" * 32,
            "num_frames": NUM_FRAMES,
            "fps": 50.0,
        },
        "points": points,
        "final_iteration": points[-1]["iteration"] if final and points else None,
        "best": None
        if best is None
        else {"iteration": best, "criterion": "uniform_success_rate_then_r_mpkpe"},
    }


def make_clip_evaluation(
    curves: dict[str, Curve], per_clip_episodes: int = 16, *, final: bool = True
) -> dict[str, Any]:
    """evaluation.json of a clip set: ``curves`` maps each clip to its curve (same iterations);
    the aggregate of a point is the clips' mean; its last point is the final policy when
    ``final``."""
    names = list(curves)
    rows = list(zip(*curves.values(), strict=True))
    overall = [
        (row[0][0], sum(r[1] for r in row) / len(row), sum(r[2] for r in row) / len(row))
        for row in rows
    ]
    doc = make_evaluation(overall, final=final)
    for point, row in zip(doc["points"], rows, strict=True):
        point["clips"] = [
            {
                "clip": name,
                "modes": {
                    mode: make_metrics(success, r_mpkpe, episodes=per_clip_episodes)
                    for mode in ("frame0", "uniform")
                },
            }
            for name, (_, success, r_mpkpe) in zip(names, row, strict=True)
        ]
    return doc


def summary_section(doc: dict[str, Any], path: str = "evaluation.json") -> dict[str, Any]:
    """run_summary.evaluation for an evaluation.json with a final point."""
    by_iteration = {p["iteration"]: p for p in doc["points"]}
    best = doc["best"]
    return {
        "status": "evaluated",
        "path": path,
        "points": len(doc["points"]),
        "final": copy.deepcopy(by_iteration[doc["final_iteration"]]),
        # a run whose every point diverged has no best; the final point stands in for it
        "best": copy.deepcopy(by_iteration[best["iteration"] if best else doc["final_iteration"]]),
    }


def unevaluated_section(status: str, reason: str) -> dict[str, Any]:
    """run_summary.evaluation when evaluation was skipped or failed."""
    return {
        "status": status,
        "reason": reason,
        "path": None,
        "points": 0,
        "final": None,
        "best": None,
    }


def write_evaluation(log_dir: Path, doc: dict[str, Any]) -> Path:
    return write_json_atomic(log_dir / "evaluation.json", doc)


# The table of the issue that motivated the verdict (iteration, success, R-MPKPE mm).
HEALTHY_CURVE: Curve = [(10, 0.9, 30.0), (20, 1.0, 14.0), (30, 1.0, 13.5)]
DECLINING_CURVE: Curve = [(10, 1.0, 12.1), (20, 1.0, 24.0), (30, 0.991, 78.1)]


def training_scalars(
    iterations: int = 30, *, nan_loss_at: int | None = None
) -> dict[int, dict[str, float]]:
    """``{env_step: {tag: value}}``: one TensorBoard write per iteration, as the trainer logs."""
    out: dict[int, dict[str, float]] = {}
    for it in range(1, iterations + 1):
        critic = float("nan") if nan_loss_at is not None and it >= nan_loss_at else 1.0 + it / 30
        out[it * STEPS_PER_ITERATION] = {
            "Train/iteration": float(it),
            "Train/mean_reward": 5.0 + it / 2,
            "Train/mean_episode_length": 100.0 + it,
            "Loss/critic": critic,
            "Loss/actor": -2.0 - it / 60,
            "Loss/entropy": 0.5,
            "Loss/temperature": 0.01,
            "Perf/total_fps": 1000.0 + 10 * (it % 3),
        }
    return out


def write_training_events(log_dir: Path, scalars: dict[int, dict[str, float]]) -> Path:
    """Replace the run directory's event file with one holding ``scalars``."""
    from tests.harness.metrics.event_files import scalar_event, write_event_file

    for old in log_dir.glob("events.out.tfevents.*"):
        old.unlink()
    payloads = [
        scalar_event(step, values, wall_time=1_764_410_400.0 + k * 0.5)
        for k, (step, values) in enumerate(sorted(scalars.items()))
    ]
    return write_event_file(log_dir, payloads)


def diagnostic_scalars(*, scale_after_20: float) -> dict[int, dict[str, float]]:
    """The trainer's scalars plus the diagnostics; the reward scale D steps to
    ``scale_after_20`` after iteration 20 (a late mover), everything else flat."""
    scalars = training_scalars(30)
    for step, values in scalars.items():
        it = step // STEPS_PER_ITERATION
        values.update({
            "Critic/q_mean": 3.0, "Critic/q_target_mean": 3.0, "Critic/return_estimate": 1.5,
            "Critic/batch_reward_scaled": 0.03, "Policy/temperature": 2e-4,
            "Train/lr_actor": 3e-4, "Train/lr_critic": 3e-4, "Train/lr_temperature": 3e-4,
            "Train/replay_sample_age": 4096.0, "Train/replay_fill": 1.0,
            "Train/reward_scale": 2.0 if it <= 20 else scale_after_20,
            "Policy/obs_bn_mean_shift": 2e-4, "Policy/obs_bn_var_shift": 5e-4, "Train/bf16": 1.0,
        })  # fmt: skip
    return scalars


def write_diagnostic_run(root: Path, name: str, curve, *, scale_after_20: float = 3.0) -> Path:
    """A trainer run directory NAME/run: events with the diagnostics, an evaluation of ``curve``."""
    run_dir = root / name / "run"
    run_dir.mkdir(parents=True)
    write_training_events(run_dir, diagnostic_scalars(scale_after_20=scale_after_20))
    write_evaluation(run_dir, make_evaluation(curve))
    return run_dir
