"""What ``soak-report`` reads from the run directory next to the artifact.

The run directory is the directory of the artifact's ``console_log`` (the monitor always
writes the console log there). From it: ``run_config.json``, the event file's scalars
(every value, no sampling), ``evaluation.json`` (validated), the checkpoints and the last
lines of the console log. Anything missing or unreadable leaves its field empty and a
one-line note saying why, which the page prints instead of the missing part; nothing here
raises for run-directory content.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import rundir
from harness.metrics.events import EventFileError, ScalarEvent, read_scalars

CONSOLE_TAIL_LINES = 40


@dataclass
class RunData:
    """The run directory's contents the report shows; ``notes`` say what is missing and why."""

    run_dir: Path
    exists: bool
    run_config: dict[str, Any] | None = None
    event_file: Path | None = None
    scalars: dict[str, list[ScalarEvent]] = field(default_factory=dict)
    evaluation: dict[str, Any] | None = None
    evaluation_path: Path | None = None
    checkpoints: list[Path] = field(default_factory=list)
    console_tail: list[str] = field(default_factory=list)
    console_tail_source: str | None = None
    notes: dict[str, str] = field(default_factory=dict)


def _read_json(path: Path) -> tuple[Any, str | None]:
    """A document as the run left it (lenient: the report shows a broken run too)."""
    try:
        return rundir.read(path, lenient=True), None
    except rundir.DocumentError as err:
        if err.problem == "missing":
            return None, f"{path.name} is missing"
        return None, f"{path.name} is unreadable: {err.detail}"


def _scalars(data: RunData) -> None:
    events = rundir.event_files(data.run_dir)
    if len(events) != 1:
        data.notes["training"] = (
            f"the run directory holds {len(events)} {rundir.EVENT_GLOB} files, expected one"
        )
        return
    data.event_file = events[0]
    try:
        data.scalars = read_scalars(events[0])
    except (EventFileError, OSError) as err:
        data.notes["training"] = f"the event file is unreadable: {err}"


def _evaluation(data: RunData) -> None:
    path = data.run_dir / rundir.EVALUATION
    try:
        data.evaluation, data.evaluation_path = rundir.read(path), path
    except rundir.DocumentError as err:
        if err.problem == "missing":
            data.notes["evaluation"] = f"{path.name} is missing"
        elif err.problem == "unreadable":
            data.notes["evaluation"] = f"{path.name} is unreadable: {err.detail}"
        else:
            schema = rundir.SCHEMAS[rundir.EVALUATION]
            data.notes["evaluation"] = f"{path.name} is not a valid {schema}: {err.violations[0]}"


def _checkpoints(run_dir: Path) -> list[Path]:
    return [path for _, path in rundir.checkpoint_files(run_dir)]


def _console_tail(data: RunData, artifact: dict[str, Any]) -> None:
    carried = artifact.get("console_tail")
    if isinstance(carried, list) and all(isinstance(line, str) for line in carried):
        data.console_tail, data.console_tail_source = carried, "the artifact"
        return
    path = Path(artifact["console_log"])
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            data.console_tail = [line.rstrip("\n") for line in deque(handle, CONSOLE_TAIL_LINES)]
    except OSError as err:
        data.notes["console"] = f"the console log {path} is unreadable: {err.strerror or err}"
        return
    data.console_tail_source = str(path)


def read_run_data(artifact: dict[str, Any]) -> RunData:
    """Gather everything the report shows from the artifact's run directory."""
    run_dir = Path(artifact["console_log"]).parent
    data = RunData(run_dir=run_dir, exists=run_dir.is_dir())
    _console_tail(data, artifact)
    if not data.exists:
        data.notes["run_dir"] = (
            f"the run directory {run_dir} is gone, so training curves, evaluation points, "
            "checkpoints and the run's configuration cannot be shown"
        )
        return data
    config, error = _read_json(run_dir / rundir.RUN_CONFIG)
    if isinstance(config, dict):
        data.run_config = config
    else:
        data.notes["run_config"] = error or "run_config.json is not a JSON object"
    _scalars(data)
    _evaluation(data)
    try:
        data.checkpoints = _checkpoints(run_dir)
    except OSError as err:
        data.notes["checkpoints"] = f"cannot list {run_dir}: {err.strerror or err}"
    return data
