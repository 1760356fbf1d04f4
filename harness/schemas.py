"""JSON Schema validation against the files in ``schemas/`` (the single source of truth).

The validator is draft 2020-12 with two tightenings the contracts need (CONTRACTS §0):
``integer`` means an exact Python ``int`` that is not a ``bool`` (``1.0`` is rejected), and
``format`` is checked. Every error carries the JSON path of the offending value.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from harness.jsonio import load_strict

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"


def _is_exact_int(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


_TYPE_CHECKER = Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_exact_int)
StrictValidator = jsonschema.validators.extend(Draft202012Validator, type_checker=_TYPE_CHECKER)


@dataclass(frozen=True)
class SchemaViolation:
    """One validation error: where (JSON path like ``$.runtime_manifest.shutdown``) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def schema_path(name: str) -> Path:
    """Path of ``schemas/<name>``; raise FileNotFoundError naming the known schemas."""
    path = SCHEMA_DIR / name
    if not path.is_file():
        known = ", ".join(sorted(p.name for p in SCHEMA_DIR.glob("*.json")))
        raise FileNotFoundError(f"unknown schema {name!r} (known: {known})")
    return path


@functools.cache
def _registry() -> Registry:
    resources = []
    for path in sorted(SCHEMA_DIR.glob("*.json")):
        doc = load_strict(path)
        resource = Resource.from_contents(doc)
        resources.append((path.name, resource))
        if "$id" in doc:
            resources.append((doc["$id"], resource))
    return Registry().with_resources(resources)


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    """Load and check a schema file once."""
    schema = load_strict(schema_path(name))
    StrictValidator.check_schema(schema)
    return schema


def _json_path(parts: Any) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def validate(
    document: Any, name: str, *, schema: dict[str, Any] | None = None
) -> list[SchemaViolation]:
    """Validate ``document`` against ``schemas/<name>``; return violations sorted by path."""
    validator = StrictValidator(
        schema if schema is not None else load_schema(name),
        registry=_registry(),
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )
    errors = sorted(
        validator.iter_errors(document), key=lambda e: (list(map(str, e.absolute_path)), e.message)
    )
    return [SchemaViolation(_json_path(e.absolute_path), e.message) for e in errors]


def require_valid(document: Any, name: str) -> None:
    """Raise ValueError with the first violation (path and message) if ``document`` is invalid."""
    violations = validate(document, name)
    if violations:
        more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
        raise ValueError(f"{name}: {violations[0]}{more}")
