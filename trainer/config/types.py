"""Value types of config keys: check a plain value against a dataclass field's annotation.

The section dataclasses are the source of truth for keys and value types; :func:`coerce`
checks one value against an annotation and returns it in the field's Python type,
:func:`build_dataclass` fills a frozen dataclass (every field required, no extras). A type
error is a :class:`TypeMismatch` that the loader words as a one-line ``ConfigError``
(docs/configuration.md, "Types"). A closed set is a ``Literal``: a value outside it fails
naming the allowed values.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainer.config.errors import ConfigError

__all__ = [
    "TypeMismatch",
    "build_dataclass",
    "coerce",
    "describe_type",
    "field_hints",
    "strip_optional",
]


def field_hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of ``cls``'s fields."""
    return typing.get_type_hints(cls)


def strip_optional(annotation: Any) -> Any:
    """``X`` for ``X | None``; any other annotation unchanged."""
    if _is_union(annotation):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def describe_type(annotation: Any) -> str:
    """Readable type name for error messages (``int | None``, ``list[float]``)."""
    if annotation is Any:
        return "any"
    if annotation is type(None):
        return "null"
    if _is_union(annotation):
        return " | ".join(describe_type(a) for a in typing.get_args(annotation))
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(
            "..." if a is Ellipsis else describe_type(a) for a in typing.get_args(annotation)
        )
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if dataclasses.is_dataclass(annotation):
        return "mapping"
    return getattr(annotation, "__name__", str(annotation))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


class TypeMismatch(Exception):
    """``value`` at ``path`` does not fit ``annotation``; :meth:`message` words it."""

    def __init__(self, path: str, value: Any, annotation: Any) -> None:
        super().__init__(path)
        self.path, self.value, self.annotation = path, value, annotation

    def message(self) -> str:
        shown = json.dumps(self.value) if _jsonable(self.value) else repr(self.value)
        choices = _closed_set(self.annotation)
        if choices is not None:
            return f"{self.path}={shown} must be one of {', '.join(choices)}"
        return (
            f"{self.path}={shown} has type {_json_type(self.value)}; "
            f"expected {describe_type(self.annotation)}"
        )


def _closed_set(annotation: Any) -> list[str] | None:
    """The allowed values of a ``Literal`` (optionally ``| None``) as JSON, else None."""
    options = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    allowed: list[str] = []
    for option in options:
        if option is type(None):
            allowed.append("null")
        elif typing.get_origin(option) is typing.Literal:
            allowed.extend(json.dumps(a) for a in typing.get_args(option))
        else:
            return None
    return allowed


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def coerce(value: Any, annotation: Any, path: str) -> Any:
    """Check ``value`` against ``annotation`` and return it in the field's Python type.

    Integers are accepted for float fields (and become floats); ``bool`` is never an int;
    lists become tuples for tuple fields; mappings become nested dataclasses. Unknown and
    missing keys of a dataclass are errors.
    """
    if annotation is Any or annotation is object:
        return value
    if _is_union(annotation):
        for option in typing.get_args(annotation):
            try:
                return coerce(value, option, path)
            except TypeMismatch:
                continue
            except ConfigError:
                if isinstance(value, Mapping):
                    raise
                continue
        raise TypeMismatch(path, value, annotation)
    origin = typing.get_origin(annotation)
    if annotation is type(None):
        if value is None:
            return None
        raise TypeMismatch(path, value, annotation)
    if origin is typing.Literal:
        for option in typing.get_args(annotation):
            if type(option) is type(value) and option == value:
                return value
        raise TypeMismatch(path, value, annotation)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise TypeMismatch(path, value, annotation)
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeMismatch(path, value, annotation)
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise TypeMismatch(path, value, annotation)
    if annotation is str:
        if isinstance(value, str):
            return value
        raise TypeMismatch(path, value, annotation)
    if annotation is Path:
        if isinstance(value, str):
            return Path(value)
        raise TypeMismatch(path, value, annotation)
    if origin in (list, tuple, Sequence) or annotation in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise TypeMismatch(path, value, annotation)
        args = typing.get_args(annotation)
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                raise TypeMismatch(path, value, annotation)
            items = [coerce(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args))]
        else:
            item_type = args[0] if args else Any
            items = [coerce(v, item_type, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if (origin is tuple or annotation is tuple) else items
    if origin in (dict, Mapping) or annotation is dict:
        if not isinstance(value, Mapping):
            raise TypeMismatch(path, value, annotation)
        args = typing.get_args(annotation)
        value_type = args[1] if len(args) == 2 else Any
        return {str(k): coerce(v, value_type, f"{path}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(annotation):
        if not isinstance(value, Mapping):
            raise TypeMismatch(path, value, annotation)
        return build_dataclass(annotation, value, path)
    if isinstance(annotation, type):
        if isinstance(value, annotation):
            return value
        raise TypeMismatch(path, value, annotation)
    return value


def build_dataclass(cls: type, data: Mapping[str, Any], path: str) -> Any:
    """Fill the frozen dataclass ``cls`` from ``data``; every field required, no extras."""
    hints = field_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    unknown = [k for k in data if k not in names]
    if unknown:
        key = f"{path}.{unknown[0]}"
        hint = difflib.get_close_matches(str(unknown[0]), names, n=1)
        fix = f"did you mean '{path}.{hint[0]}'?" if hint else "delete it from the owner file"
        raise ConfigError(f"unknown config key '{key}' in the owner chain; {fix}")
    missing = [n for n in names if n not in data]
    if missing:
        raise ConfigError(
            f"missing config key '{path}.{missing[0]}': the owner files must set "
            f"every key of {cls.__name__}; add it to {path.split('.')[0]} in the owner chain"
        )
    kwargs = {n: coerce(data[n], hints[n], f"{path}.{n}") for n in names}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{path}: {err}") from err
