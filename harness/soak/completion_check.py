"""A completed run's summary held against its run directory and its run config
(docs/soak.md "What the gate checks"; the verdict's step 4.4).

The summary's agreement with itself (the inference flight within one tick, the env steps
``(warm-up + iterations) x num_envs``) is the document's own rule, in
``contracts.run_summary.check``; these checks need more than the document: the run reached
its iteration budget, every checkpoint has bytes, the ``last_checkpoint`` exists, and every
evaluated checkpoint is the file the run directory holds (its sha256). Each problem is
``(reason, classification)``; a field that is missing or of the wrong type is left to the
schema step, so one fault gives one reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from contracts import rundir
from contracts.jsonio import is_exact_int, show
from contracts.names import Classification

__all__ = ["completion_problems"]

Problem = tuple[str, str]
SV = Classification.SCHEMA_VIOLATION


def completion_problems(summary: Mapping[str, Any], log_dir: Path) -> list[Problem]:
    """Every disagreement of a completed summary with its run directory or run config."""
    manifest = summary.get("runtime_manifest")
    manifest = manifest if isinstance(manifest, Mapping) else {}
    run_config = _run_config(log_dir)
    return [
        *_budget_problems(summary, _limits(manifest), run_config),
        *_checkpoint_problems(summary, log_dir),
        *_evaluation_problems(summary, log_dir),
    ]


def _limits(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    limits = manifest.get("runtime_limits")
    return limits if isinstance(limits, Mapping) else {}


def _run_config(log_dir: Path) -> Mapping[str, Any]:
    try:
        doc = rundir.read(log_dir / rundir.RUN_CONFIG, lenient=True)
    except rundir.DocumentError:
        return {}  # reported by the run-directory step
    config = doc.get("config") if isinstance(doc, dict) else None
    return config if isinstance(config, dict) else {}


def _budget_problems(
    summary: Mapping[str, Any], limits: Mapping[str, Any], config: Mapping[str, Any]
) -> list[Problem]:
    """A run sized in iterations ends at exactly its last iteration."""
    budget = summary.get("time_budget")
    if isinstance(budget, Mapping) and budget.get("stopped_by") == "duration":
        return []
    training = config.get("training")
    if isinstance(training, Mapping) and training.get("duration_seconds") is not None:
        return []  # a time budget without its summary record: the schema step says so
    algo = config.get("algo")
    planned = algo.get("max_iterations") if isinstance(algo, Mapping) else None
    if not is_exact_int(planned):
        planned = limits.get("max_iterations")
    start, done = limits.get("start_iteration", 0), summary.get("completed_iterations")
    if not all(is_exact_int(v) for v in (planned, start, done)) or start + done == planned:
        return []
    short = "short of" if start + done < planned else "beyond"
    return [
        (
            (
                f"run_summary $.completed_iterations={done} (from start_iteration={start}) ends {short} its "
                f"iteration budget max_iterations={planned}"
            ),
            SV,
        )
    ]


def _checkpoint_problems(summary: Mapping[str, Any], log_dir: Path) -> list[Problem]:
    out = [
        (f"checkpoint {path.name} in {log_dir} is empty (0 bytes)", SV)
        for path in sorted(log_dir.glob(rundir.CHECKPOINT_GLOB))
        if path.is_file() and path.stat().st_size == 0
    ]
    last = summary.get("last_checkpoint")
    if isinstance(last, str):
        path = _in_run_dir(last, summary, log_dir)
        if not path.is_file():
            out.append(
                (f"run_summary $.last_checkpoint={show(last)} points to no file ({path})", SV)
            )
    return out


def _in_run_dir(recorded: str, summary: Mapping[str, Any], log_dir: Path) -> Path:
    """``recorded`` in this run directory: a path under the summary's own ``log_dir`` is
    taken relative to it, so a run directory judged after a move still finds its files."""
    path = Path(recorded)
    if not path.is_absolute():
        return log_dir / path
    written_in = summary.get("log_dir")
    if isinstance(written_in, str) and path.is_relative_to(written_in):
        return log_dir / path.relative_to(written_in)
    return path


def _evaluation_problems(summary: Mapping[str, Any], log_dir: Path) -> list[Problem]:
    digests: dict[Path, str | None] = {}
    out: list[Problem] = []
    for where, point in _evaluated_checkpoints(summary, log_dir):
        path = _in_run_dir(point["checkpoint"], summary, log_dir)
        if path not in digests:
            digests[path] = _file_sha256(path)
        actual, claimed = digests[path], point["checkpoint_sha256"]
        if actual is None:
            out.append((f"{where} evaluated {point['checkpoint']}, which is not in {log_dir}", SV))
        elif actual != claimed:
            out.append(
                (
                    (
                        f"{where} is the evaluation of another checkpoint: its checkpoint_sha256 "
                        f"{claimed[:12]}... differs from {path.name}'s sha256 {actual[:12]}..."
                    ),
                    SV,
                )
            )
    return out


def _evaluated_checkpoints(
    summary: Mapping[str, Any], log_dir: Path
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(where, point)`` of every evaluation point naming a checkpoint and its sha256."""
    section = summary.get("evaluation")
    if not isinstance(section, Mapping):
        return
    for key in ("final", "best"):
        yield from _hashed([(f"$.evaluation.{key}", section.get(key))])
    relative = section.get("path")
    if not isinstance(relative, str):
        return
    try:
        doc = rundir.read(log_dir / relative, rundir.EVALUATION, lenient=True)
    except rundir.DocumentError:
        return  # the learning verdict reports an unreadable evaluation.json
    points = doc.get("points") if isinstance(doc, dict) else None
    if isinstance(points, list):
        yield from _hashed([(f"{relative} $.points[{i}]", p) for i, p in enumerate(points)])


def _hashed(candidates: list[tuple[str, Any]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for where, point in candidates:
        if (
            isinstance(point, Mapping)
            and isinstance(point.get("checkpoint"), str)
            and isinstance(point.get("checkpoint_sha256"), str)
        ):
            yield where, point


def _file_sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()
