"""The run directory: what a trainer writes and the harness judges (docs/contracts.md §run-directory).

This module owns the layout, so every file name is spelled here once: the documents
(``run_config.json``, ``run_summary.json``, ``evaluation.json``), the progress file, the one
TensorBoard event file, the checkpoints ``model_<k>.pt`` and the harness's console log.
Pure Python (no torch): the harness finds a run's files with it, the trainer names what it
writes with it.

The JSON documents are read and written here too: :func:`read` (strict JSON, then the
document's schema and, for ``run_summary.json``, every cross-field rule of
``contracts.run_summary.check``; or, ``lenient``, strict JSON alone for a reader that must
show a partial or broken run) and :func:`write` (the schema first, then an atomic write),
each chosen by the document's file name (:data:`SCHEMAS`), and :func:`set_summary_section` is
the one read-modify-write of ``run_summary.json`` after its run (``play`` records its section).
The writer checks the schema only: a completed run that broke an invariant is recorded as it
ran, and its readers (the soak's verdict first) see the breach.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from contracts import run_summary
from contracts.errors import StrictJsonError
from contracts.jsonio import load_strict, write_json_atomic
from contracts.schemas import SchemaViolation, validate

__all__ = [
    "CHECKPOINT_GLOB",
    "CHECKPOINT_PREFIX",
    "CHECKPOINT_SUFFIX",
    "EVALUATION",
    "EVENT_GLOB",
    "EVENT_PREFIX",
    "PROGRESS",
    "RUN_CONFIG",
    "RUN_SUMMARY",
    "SCHEMAS",
    "SOAK_CONSOLE_LOG",
    "DocumentError",
    "checkpoint_files",
    "checkpoint_iteration",
    "checkpoint_name",
    "event_files",
    "read",
    "set_summary_section",
    "write",
]

RUN_CONFIG = "run_config.json"
"""Written at start, before preflight: the run, the resolved config and the overrides."""
RUN_SUMMARY = "run_summary.json"
"""Written at the end of every run once the directory exists (docs/contracts.md §run-summary)."""
EVALUATION = "evaluation.json"
"""Written after training unless ``eval.enabled`` is false (docs/evaluation.md)."""
PROGRESS = "progress.jsonl"
"""Strict-JSON lines all along the run (docs/contracts.md §progress-file)."""
SOAK_CONSOLE_LOG = "soak-console.log"
"""The trainer's stdout and stderr under ``g1-soak``/``soak-run``; the only file a harness may
put in the run directory before the trainer starts."""
EVENT_PREFIX = "events.out.tfevents."
EVENT_GLOB = f"{EVENT_PREFIX}*"
"""The one TensorBoard event file at the root of the run directory (docs/contracts.md §metric-schema)."""
CHECKPOINT_PREFIX = "model_"
CHECKPOINT_SUFFIX = ".pt"
CHECKPOINT_GLOB = f"{CHECKPOINT_PREFIX}*{CHECKPOINT_SUFFIX}"
_CHECKPOINT_NAME = re.compile(rf"^{CHECKPOINT_PREFIX}([0-9]+){re.escape(CHECKPOINT_SUFFIX)}$")


def checkpoint_name(iteration: int) -> str:
    """``model_<iteration>.pt``."""
    return f"{CHECKPOINT_PREFIX}{iteration}{CHECKPOINT_SUFFIX}"


def checkpoint_iteration(name: str) -> int | None:
    """The iteration ``k`` of a file named ``model_<k>.pt``; None for any other name."""
    match = _CHECKPOINT_NAME.match(name)
    return int(match.group(1)) if match else None


def checkpoint_files(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``(iteration, path)`` of every ``model_<k>.pt`` file in ``run_dir``, by iteration."""
    found = []
    for path in Path(run_dir).iterdir():
        iteration = checkpoint_iteration(path.name)
        if iteration is not None and path.is_file():
            found.append((iteration, path))
    return sorted(found)


def event_files(run_dir: str | Path) -> list[Path]:
    """The ``events.out.tfevents.*`` files at the root of ``run_dir``, by name (a valid run
    has exactly one)."""
    return sorted(Path(run_dir).glob(EVENT_GLOB))


SCHEMAS: dict[str, str] = {
    RUN_CONFIG: "run_config.v1.json",
    RUN_SUMMARY: run_summary.RUN_SUMMARY_SCHEMA,
    EVALUATION: "evaluation.v1.json",
}
"""The schema of each JSON document of the run directory, by file name (the summary's is
``contracts.run_summary``'s, which checks it)."""

DocumentProblem = Literal["missing", "unreadable", "invalid"]


class DocumentError(ValueError):
    """A run-directory document that cannot be used: ``problem`` says why (``missing``;
    ``unreadable``: I/O, not UTF-8 or not strict JSON; ``invalid``: it breaks its schema, the
    ``violations``), ``detail`` says how, and the message is ``<path>: <detail>``."""

    def __init__(
        self,
        path: Path,
        problem: DocumentProblem,
        detail: str,
        violations: Sequence[SchemaViolation] = (),
    ) -> None:
        super().__init__(f"{path}: {detail}")
        self.path, self.problem, self.detail = path, problem, detail
        self.violations = tuple(violations)


def _schema(path: Path, document: str | None) -> str:
    name = path.name if document is None else document
    if name not in SCHEMAS:
        msg = f"{name!r} is no JSON document of the run directory; one of {', '.join(SCHEMAS)}"
        raise ValueError(msg)
    return SCHEMAS[name]


def _first(schema: str, violations: Sequence[SchemaViolation]) -> str:
    more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
    return f"{schema}: {violations[0]}{more}"


def read(path: str | Path, document: str | None = None, *, lenient: bool = False) -> Any:
    """One JSON document of a run directory, strict JSON and valid: its schema, and for
    ``run_summary.json`` every cross-field rule too (``contracts.run_summary.check``).

    Args:
        path: the file.
        document: which document it is (:data:`RUN_SUMMARY`, ...); default: its file name.
        lenient: strict JSON only, any JSON value, no schema or rule: for a reader that must
            show what a partial or broken run left (a report, a table, the soak monitor) and
            checks what it uses itself.

    Raises:
        DocumentError: the file is missing, unreadable or (unless lenient) invalid.
    """
    path = Path(path)
    schema = _schema(path, document)
    try:
        doc = load_strict(path)
    except FileNotFoundError:
        raise DocumentError(path, "missing", "does not exist") from None
    except (OSError, StrictJsonError, ValueError, RecursionError) as err:
        raise DocumentError(path, "unreadable", str(err)) from err
    if lenient:
        return doc
    if schema == SCHEMAS[RUN_SUMMARY]:
        violations = run_summary.check(doc).violations
    else:
        violations = validate(doc, schema)
    if violations:
        raise DocumentError(path, "invalid", _first(schema, violations), violations)
    return doc


def write(path: str | Path, doc: Any, document: str | None = None) -> Path:
    """Validate ``doc`` against its document's schema, then write it atomically to ``path``.

    Raises:
        ValueError: the document breaks its schema (nothing is written).
    """
    path = Path(path)
    schema = _schema(path, document)
    violations = validate(doc, schema)
    if violations:
        raise ValueError(_first(schema, violations))
    return write_json_atomic(path, doc)


def set_summary_section(run_dir: str | Path, key: str, section: Any) -> Path | None:
    """Set the top-level ``key`` of ``<run_dir>/run_summary.json`` to ``section``: read it
    (strict JSON), validate the updated summary, write it atomically.

    Returns:
        The summary's path, or None when the run has written no summary (yet).

    Raises:
        ValueError: the updated summary would break its schema (nothing is written).
        OSError, StrictJsonError: the summary cannot be read, is not an object, or cannot be
            written.
    """
    path = Path(run_dir) / RUN_SUMMARY
    try:
        doc = load_strict(path)
    except FileNotFoundError:
        return None
    if not isinstance(doc, dict):
        raise StrictJsonError(f"{path} is not a JSON object")
    doc[key] = section
    schema = SCHEMAS[RUN_SUMMARY]
    violations = validate(doc, schema)
    if violations:
        detail = "; ".join(str(v) for v in violations[:3])
        raise ValueError(f"{path} with the {key} section violates {schema}: {detail}")
    return write_json_atomic(path, doc)
