"""What identifies a run: where and from which source it ran, what it trained on.

The soak artifact records it in ``context.source`` / ``context.motion``; ``run_summary.json`` and
``run_config.json``'s ``run`` record its eight document fields (``algo``, ``task``,
``sim_backend``, ``log_dir``, ``start_time_utc``, ``configured_seed``,
``configured_seed_source``, ``effective_seed``; docs/schemas.md), named once here
(:data:`DOCUMENT_FIELDS`). ``SourceTree`` and ``MotionRef`` build the artifact's sections;
``RunIdentity.document_fields`` is what the trainer's writers record, and
``RunIdentity.from_artifact`` reads the whole identity back from an artifact (the run summary
it embeds included).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DOCUMENT_FIELDS", "MotionRef", "RunIdentity", "SourceTree"]


@dataclass(frozen=True, kw_only=True)
class SourceTree:
    """The source checkout a run came from (``context.source``)."""

    path: str
    commit: str | None
    branch: str | None
    dirty_files: int

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "commit": self.commit,
            "branch": self.branch,
            "dirty_files": self.dirty_files,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SourceTree:
        return cls(
            path=doc["path"],
            commit=doc.get("commit"),
            branch=doc.get("branch"),
            dirty_files=doc.get("dirty_files") or 0,
        )

    def describe(self) -> str | None:
        """``<commit> (<branch>, clean)`` or ``..., N uncommitted files)``; None without a commit."""
        if not self.commit:
            return None
        state = f"{self.dirty_files} uncommitted files" if self.dirty_files else "clean"
        return f"{self.commit} ({self.branch}, {state})"


@dataclass(frozen=True, kw_only=True)
class MotionRef:
    """The reference clip a run trained on (``context.motion``).

    ``file_sha256`` hashes the file's bytes where it was found (None when not found); the JSON
    repeats it as ``sha256``, its older name. ``source`` is ``path``, ``package`` or ``cache``.
    """

    id: str | None
    file_sha256: str | None
    source: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "file_sha256": self.file_sha256,
            "sha256": self.file_sha256,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> MotionRef:
        return cls(
            id=doc.get("id"),
            file_sha256=doc.get("file_sha256", doc.get("sha256")),
            source=doc.get("source"),
        )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


DOCUMENT_FIELDS: tuple[tuple[str, str], ...] = (
    ("algo", "algo"),
    ("task", "task"),
    ("sim", "sim_backend"),
    ("run_dir", "log_dir"),
    ("start_time_utc", "start_time_utc"),
    ("configured_seed", "configured_seed"),
    ("configured_seed_source", "configured_seed_source"),
    ("seed", "effective_seed"),
)
"""``(attribute, JSON key)`` of each identity field the run's documents record, in order."""


@dataclass(frozen=True, kw_only=True)
class RunIdentity:
    """One run: its directory, owner (algo/task/sim), start, seed, source tree and motion clip.

    Fields a document does not carry are None (a run that died before its summary has no
    seed; a run outside a git checkout has no commit).
    """

    run_dir: str | None
    algo: str | None
    task: str | None
    sim: str | None
    seed: int | None
    """The effective seed (``effective_seed``)."""
    source: SourceTree | None = None
    motion: MotionRef | None = None
    start_time_utc: str | None = None
    """Launch time, ``YYYY-MM-DDTHH:MM:SSZ``."""
    configured_seed: int | None = None
    """``algo.seed`` as configured (None when the config left it open)."""
    configured_seed_source: str | None = None
    """``config``, ``override`` or ``generated``."""

    def document_fields(self) -> dict[str, Any]:
        """The identity as ``run_summary.json`` and ``run_config.json``'s ``run`` record it
        (:data:`DOCUMENT_FIELDS`)."""
        return {key: getattr(self, attr) for attr, key in DOCUMENT_FIELDS}

    @property
    def owner(self) -> str | None:
        """``<algo>/<task>/<sim>`` when all three are known."""
        if self.algo and self.task and self.sim:
            return f"{self.algo}/{self.task}/{self.sim}"
        return None

    @property
    def commit(self) -> str | None:
        return self.source.commit if self.source else None

    @classmethod
    def from_artifact(
        cls, artifact: Mapping[str, Any], run_config: Mapping[str, Any] | None = None
    ) -> RunIdentity:
        """From a soak artifact; ``run_config.json``'s ``run`` fills the owner and run dir where
        the summary lacks them (the seed is the summary's: the effective one)."""
        summary = _mapping(artifact.get("run_summary"))
        run = _mapping(_mapping(run_config).get("run"))
        context = _mapping(artifact.get("context"))
        source, motion = context.get("source"), context.get("motion")
        seed = summary.get("effective_seed")
        return cls(
            run_dir=_text(summary.get("log_dir") or run.get("log_dir")),
            algo=_text(summary.get("algo") or run.get("algo")),
            task=_text(summary.get("task") or run.get("task")),
            sim=_text(summary.get("sim_backend") or run.get("sim_backend")),
            seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
            source=SourceTree.from_json(source) if isinstance(source, Mapping) else None,
            motion=MotionRef.from_json(motion) if isinstance(motion, Mapping) else None,
        )
