"""Reading what the sweep's steps wrote: the soak's artifact and run summary, the learner
profile's document, the env benchmark's document. Pure functions over files, so fixture
files test them; each returns the figures and the problems that fail the step."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from contracts import rundir
from contracts.jsonio import load_strict

Figures = dict[str, Any]


def _load(path: Path, what: str) -> tuple[Any, list[str]]:
    try:
        return load_strict(path), []
    except (OSError, ValueError) as err:
        return None, [f"cannot read the {what} {path}: {err}"]


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def soak_figures(artifact: Path, run_dir: Path) -> tuple[Figures, list[str]]:
    """The soak's verdict and its run's rates and final learner cycle."""
    doc, problems = _load(artifact, "soak artifact")
    verdict = doc.get("status") if isinstance(doc, dict) else None
    if doc is not None and verdict != "passed":
        problems.append(f"soak {verdict}: {doc.get('failure_reason')}")
    try:  # lenient: the figures of a failed soak's run are still read
        summary = rundir.read(run_dir / rundir.RUN_SUMMARY, lenient=True)
    except rundir.DocumentError as err:
        summary = None
        problems.append(f"cannot read the run summary {err.path}: {err.detail}")
    summary = summary if isinstance(summary, dict) else {}
    figures = {
        "verdict": verdict if isinstance(verdict, str) else None,
        "final_env_steps_per_s": _number(summary.get("final_env_steps_per_sec")),
        "tail_env_steps_per_s": _number(summary.get("tail_env_steps_per_sec")),
        "steady_env_steps_per_s": _number(summary.get("steady_env_steps_per_sec")),
        "cycle_ms": _number(summary.get("final_cycle_wall_ms")),
    }
    return figures, problems


def beside_figures(document: Path, num_envs: int) -> tuple[Figures, list[str]]:
    """The owner's cycle beside the env, and the env's step while it was timed."""
    doc, problems = _load(document, "learner profile")
    runs = doc.get("runs") if isinstance(doc, dict) else None
    run = runs[0] if isinstance(runs, list) and len(runs) == 1 else {}
    if doc is not None and not run:
        problems.append(f"the learner profile {document} holds no single run")
    rate = _number(run.get("beside_env_steps_per_s"))
    if doc is not None and run and rate is None:
        problems.append(f"the learner profile {document} has no rate of the env beside")
    figures = {
        "device": doc.get("device") if isinstance(doc, dict) else None,
        "cycle_ms": _number(run.get("cycle_ms")),
        "env_steps_per_s": rate,
        "env_step_ms": None if not rate else 1000.0 * num_envs / rate,
    }
    return figures, problems


def env_alone_figures(document: Path) -> tuple[Figures, list[str]]:
    """Each size's full-task step alone on the GPU, the GPU and the package versions."""
    doc, problems = _load(document, "env benchmark")
    results = doc.get("results") if isinstance(doc, dict) else None
    sizes = [
        {
            "num_envs": row["num_envs"],
            "step_ms": _number(row.get("full_task_step_ms")),
            "env_steps_per_s": _number(row.get("full_task_steps_per_s")),
        }
        for row in results or []
        if isinstance(row, dict) and isinstance(row.get("num_envs"), int)
    ]
    if doc is not None and not sizes:
        problems.append(f"the env benchmark {document} holds no result")
    gpu = doc.get("gpu") if isinstance(doc, dict) else None
    versions = doc.get("versions") if isinstance(doc, dict) else None
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        versions = None
    return {"gpu": gpu, "versions": versions, "sizes": sizes}, problems
