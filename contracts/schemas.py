"""JSON Schema validation against the files in ``schemas/`` (the single source of truth).

The validator is draft 2020-12 with two tightenings the contracts need (docs/contracts.md §conventions):
``integer`` means an exact Python ``int`` that is not a ``bool`` (``1.0`` is rejected), and
``format`` is checked. Both hold across every ``$ref``, also into another schema file. Every
error carries the JSON path of the offending value.

A process reads ``schemas/`` once, on first use, and keeps every schema in memory from then
on (:class:`SchemaStore`), so files that move or change while a long run is going (a checkout
during a soak) cannot break the run's last writes. A command calls :func:`preload` with the
schemas it will need before it starts its work: a missing or broken file is then a clear
error up front (:class:`SchemaUnavailable`), never a failure at the end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from contracts.errors import HarnessError, StrictJsonError
from contracts.jsonio import load_strict

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
DIALECT = str(Draft202012Validator.META_SCHEMA["$id"])
"""The ``$schema`` every file in ``schemas/`` declares."""


def _is_exact_int(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


_TYPE_CHECKER = Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_exact_int)
StrictValidator = jsonschema.validators.extend(Draft202012Validator, type_checker=_TYPE_CHECKER)
_FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER


class SchemaUnavailable(HarnessError):
    """A schema is missing, unreadable or not a valid schema (exit 1; the message names the
    file, the directory it was read from and the fix)."""


@dataclass(frozen=True)
class SchemaViolation:
    """One validation error: where (JSON path like ``$.runtime_manifest.shutdown``) and what."""

    path: str
    message: str
    expected: str | None = None
    """The failing subschema's ``description``, when it has one: what the value should be."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def schema_path(name: str) -> Path:
    """Path of ``schemas/<name>`` on disk (for tools that read the files themselves)."""
    path = SCHEMA_DIR / name
    if not path.is_file():
        known = ", ".join(sorted(p.name for p in SCHEMA_DIR.glob("*.json")))
        raise FileNotFoundError(f"unknown schema {name!r} (known: {known})")
    return path


def _pinned(schema: Any) -> Any:
    """``schema`` without its ``$schema`` keyword, as validators and the registry see it.

    jsonschema picks the validator class of every schema it descends into from that schema's
    own ``$schema`` (``Validator.evolve`` calls ``validators.validator_for``). A ``$ref`` to
    another file lands on that file's root, whose ``$schema`` names stock Draft 2020-12: the
    descent would continue with ``Draft202012Validator`` and lose the exact-int checker. The
    files are therefore registered without ``$schema`` and pinned to the 2020-12
    specification explicitly (``DRAFT202012.create_resource``, the referencing library's way
    to say "always this dialect"); the dialect itself is checked at load (:func:`_read`).
    This keeps the tightening local to our validators instead of re-registering the
    2020-12 URI for every jsonschema user in the process (``validators.validates``).
    """
    if isinstance(schema, dict) and "$schema" in schema:
        return {key: value for key, value in schema.items() if key != "$schema"}
    return schema


def _refs(node: Any) -> Iterator[str]:
    """Every ``$ref`` value in a schema (depth first)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _restore_hint(directory: Path) -> str:
    return f"restore {directory} from this checkout (git checkout -- schemas/)"


@dataclass
class SchemaStore:
    """Every schema of one directory, read once and compiled on first use.

    Attributes:
        directory: where the files were read from.
        documents: file name -> the schema as read (shared; do not mutate).
        problems: file name -> why that file could not be used.
        registry: the pinned resources (by file name and ``$id``) that ``$ref`` resolves in.
    """

    directory: Path
    documents: Mapping[str, dict[str, Any]]
    problems: Mapping[str, str]
    registry: Registry
    _compiled: dict[str, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def read(cls, directory: Path) -> SchemaStore:
        """Read every ``*.json`` file of ``directory`` (a broken file is recorded, not raised)."""
        documents: dict[str, dict[str, Any]] = {}
        problems: dict[str, str] = {}
        for path in sorted(directory.glob("*.json")):
            try:
                documents[path.name] = _read(path)
            except (OSError, StrictJsonError, TypeError, ValueError) as err:
                problems[path.name] = str(err) or type(err).__name__
        resources = []
        for name, doc in documents.items():
            resource = DRAFT202012.create_resource(_pinned(doc))
            resources.append((name, resource))
            if isinstance(doc.get("$id"), str) and doc["$id"] != name:
                resources.append((doc["$id"], resource))
        return cls(directory, documents, problems, Registry().with_resources(resources).crawl())

    def document(self, name: str) -> dict[str, Any]:
        """The schema ``name`` as read; raise SchemaUnavailable when it cannot be used."""
        if name in self.problems:
            raise SchemaUnavailable(
                f"schema {name!r} in {self.directory} cannot be used: {self.problems[name]}; "
                f"{_restore_hint(self.directory)}"
            )
        if name not in self.documents:
            known = ", ".join(sorted([*self.documents, *self.problems])) or "no schema files"
            raise SchemaUnavailable(
                f"unknown schema {name!r}: not in {self.directory} (found: {known}); "
                f"{_restore_hint(self.directory)}"
            )
        return self.documents[name]

    def validator(self, name: str) -> Any:
        """The compiled strict validator of ``name`` (compiled once, then reused)."""
        with self._lock:
            compiled = self._compiled.get(name)
            if compiled is None:
                compiled = self._compiled[name] = self._compile(name)
            return compiled

    def _compile(self, name: str) -> Any:
        doc = self.document(name)
        base = doc["$id"] if isinstance(doc.get("$id"), str) else name
        resolver = self.registry.resolver(base_uri=base)
        for ref in _refs(doc):
            try:
                target = resolver.lookup(ref).contents
            except Unresolvable as err:
                raise SchemaUnavailable(
                    f"schema {name!r} in {self.directory}: $ref {ref!r} does not resolve "
                    f"({type(err).__name__}); {_restore_hint(self.directory)}"
                ) from err
            cls = jsonschema.validators.validator_for(target, default=StrictValidator)
            if cls is not StrictValidator:  # an embedded $schema would drop the exact ints
                raise SchemaUnavailable(
                    f"schema {name!r}: $ref {ref!r} lands on a schema that switches the "
                    f"validator to {cls.__name__}; drop its $schema keyword"
                )
        return StrictValidator(_pinned(doc), registry=self.registry, format_checker=_FORMAT_CHECKER)

    def adhoc(self, schema: dict[str, Any]) -> Any:
        """A strict validator for a schema that is not a file (its ``$ref``s resolve here)."""
        return StrictValidator(
            _pinned(schema), registry=self.registry, format_checker=_FORMAT_CHECKER
        )


def _read(path: Path) -> dict[str, Any]:
    doc = load_strict(path)
    if not isinstance(doc, dict):
        raise TypeError(f"{path.name} is not a JSON object")
    if doc.get("$schema", DIALECT) != DIALECT:
        raise ValueError(f"{path.name} declares $schema {doc['$schema']!r}; expected {DIALECT}")
    try:
        StrictValidator.check_schema(doc)
    except jsonschema.SchemaError as err:
        path_text = "/".join(map(str, err.absolute_path)) or "(root)"
        raise ValueError(
            f"{path.name} is not a valid schema at {path_text}: {err.message}"
        ) from err
    return doc


_STORE: SchemaStore | None = None
_STORE_LOCK = threading.Lock()


def schema_store() -> SchemaStore:
    """The process's schemas: read from :data:`SCHEMA_DIR` on first use, then kept."""
    global _STORE
    with _STORE_LOCK:
        if _STORE is None:
            _STORE = SchemaStore.read(SCHEMA_DIR)
        return _STORE


def preload(names: Iterable[str]) -> SchemaStore:
    """Compile ``names`` now and keep them for the rest of the process.

    Raises:
        SchemaUnavailable: the first of ``names`` that is missing, broken, or ``$ref``s
            something that is.
    """
    store = schema_store()
    for name in names:
        store.validator(name)
    return store


def load_schema(name: str) -> dict[str, Any]:
    """The schema document ``name`` as read (from memory after the first read)."""
    return schema_store().document(name)


def _json_path(parts: Any) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def validate(
    document: Any, name: str, *, schema: dict[str, Any] | None = None
) -> list[SchemaViolation]:
    """Validate ``document`` against ``schemas/<name>`` (or ``schema``, whose ``$ref``s may
    point into ``schemas/``); return violations sorted by path.

    Raises:
        SchemaUnavailable: the schema (or one it refers to) cannot be used.
    """
    store = schema_store()
    validator = store.validator(name) if schema is None else store.adhoc(schema)
    errors = sorted(
        validator.iter_errors(document), key=lambda e: (list(map(str, e.absolute_path)), e.message)
    )
    return [
        SchemaViolation(_json_path(e.absolute_path), e.message, _expected(e.validator, e.schema))
        for e in errors
    ]


VALUE_CHECKS = frozenset(
    {"type", "enum", "const", "pattern", "minLength", "maxLength", "minimum", "maximum",
     "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)  # fmt: skip
"""Validators about the value itself, where the subschema's description says what it should be
(for ``required`` or ``additionalProperties`` the subschema is the enclosing object's)."""


def _expected(validator: Any, subschema: Any) -> str | None:
    if validator not in VALUE_CHECKS or not isinstance(subschema, dict):
        return None
    text = subschema.get("description")
    return text if isinstance(text, str) and text.strip() else None


def require_valid(document: Any, name: str) -> None:
    """Raise ValueError with the first violation (path and message) if ``document`` is invalid."""
    violations = validate(document, name)
    if violations:
        more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
        raise ValueError(f"{name}: {violations[0]}{more}")
