"""Strict JSON in and out (docs/contracts.md §conventions).

Reading rejects ``NaN``/``Infinity`` tokens, numbers too large to be finite (``1e400``)
and duplicate keys; writing never emits non-finite numbers (they become ``null``) nor a
string UTF-8 cannot hold (a byte that is not UTF-8 is written ``\\xff``), and replaces the
target atomically: temp file in the same directory, fsync, rename, fsync of the directory.
A reader never sees a half-written file.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from contracts.errors import StrictJsonError


def _reject_constant(token: str) -> Any:
    raise StrictJsonError(f"non-finite number token {token!r} is not strict JSON")


def _finite_float(text: str) -> float:
    # float("1e400") is inf, which a writer would turn into null: the value must not pass.
    value = float(text)
    if not math.isfinite(value):
        raise StrictJsonError(
            f"number {text} is not finite as a double; strict JSON needs finite numbers"
        )
    return value


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise StrictJsonError(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def loads_strict(text: str) -> Any:
    """Parse strict JSON; raise StrictJsonError naming the problem."""
    try:
        return json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            object_pairs_hook=_reject_duplicates,
        )
    except json.JSONDecodeError as err:
        raise StrictJsonError(f"not JSON: {err}") from err


def load_strict(path: str | os.PathLike[str]) -> Any:
    """Read and parse a strict JSON file (UTF-8). The bytes are decoded as they are, without
    text mode's newline translation, so an error's line, column and char are the file's."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise StrictJsonError(f"not UTF-8: {err}") from err
    return loads_strict(text)


def is_exact_int(value: Any) -> bool:
    """True for a Python int that is not a bool (docs/contracts.md §conventions exact int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """True for an int or float (not bool) with a finite value."""
    return (is_exact_int(value) or isinstance(value, float)) and math.isfinite(value)


def show(value: Any, limit: int = 80) -> str:
    """Render a JSON value for a one-line message (JSON spelling: true, null, 1.0)."""
    try:
        text = json.dumps(value, allow_nan=True, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def sanitize(value: Any) -> Any:
    """Return a copy with every non-finite float replaced by None (tuples become lists)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [sanitize(v) for v in value]
    return value


def escape_non_utf8(value: Any, path: str = "$") -> tuple[Any, list[str]]:
    """A copy in which every string that cannot be UTF-8 (an undecodable byte carried as a
    surrogate, as Python decodes paths and argv, or a lone surrogate) is spelled with
    backslash escapes (``\\xff``), and the JSON paths of the strings it changed."""
    if isinstance(value, str):
        text = _escaped_text(value)
        return text, [] if text is value else [path]
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        changed: list[str] = []
        for key, item in value.items():
            name = _escaped_text(key) if isinstance(key, str) else key
            if name is not key:
                changed.append(f"{path}.{name} (key)")
            out[name], inner = escape_non_utf8(item, f"{path}.{name}")
            changed += inner
        return out, changed
    if isinstance(value, (list, tuple)):
        pairs = [escape_non_utf8(item, f"{path}[{i}]") for i, item in enumerate(value)]
        return [item for item, _ in pairs], [p for _, inner in pairs for p in inner]
    return value, []


def _escaped_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return text
    try:  # a byte Python decoded with surrogateescape: show the byte
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate of another origin: show the code point
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def dumps_strict(value: Any, *, indent: int | None = 2) -> str:
    """Serialise as strict JSON (non-finite numbers become null, a string that is not UTF-8
    is backslash-escaped: :func:`escape_non_utf8`) with a trailing newline."""
    text, _ = escape_non_utf8(sanitize(value))
    return json.dumps(text, indent=indent, allow_nan=False, ensure_ascii=False) + "\n"


def write_atomic_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically (temp file + fsync + rename + dir fsync)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return target


def write_json_atomic(path: str | os.PathLike[str], value: Any) -> Path:
    """Write ``value`` as strict, indented JSON atomically."""
    return write_atomic_text(path, dumps_strict(value))
