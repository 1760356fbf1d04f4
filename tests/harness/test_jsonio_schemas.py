"""Strict JSON io and the strict schema validator."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts.errors import StrictJsonError
from contracts.jsonio import dumps_strict, load_strict, loads_strict, write_json_atomic
from contracts.procfs import live_stat, parse_stat, read_stat
from contracts.schemas import (
    DIALECT,
    SCHEMA_DIR,
    SchemaUnavailable,
    preload,
    schema_store,
    validate,
)

ALL_SCHEMAS = sorted(p.name for p in SCHEMA_DIR.glob("*.json"))


@pytest.mark.parametrize(
    "text", ['{"a": NaN}', '{"a": Infinity}', '{"a": -Infinity}', '{"a": 1, "a": 2}', "{"]
)
def test_loads_strict_rejects_non_strict_json(text: str) -> None:
    with pytest.raises(StrictJsonError):
        loads_strict(text)


def test_dumps_strict_turns_non_finite_into_null() -> None:
    out = dumps_strict({"x": float("nan"), "y": [float("inf"), 1.5]})
    assert json.loads(out) == {"x": None, "y": [None, 1.5]}
    assert out.endswith("\n")


def test_write_json_atomic_leaves_no_temp_files(tmp_path) -> None:
    target = write_json_atomic(tmp_path / "sub" / "a.json", {"k": 1})
    assert load_strict(target) == {"k": 1}
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.json"]


def test_validator_integer_is_exact_int() -> None:
    schema = {"type": "object", "properties": {"v": {"type": "integer"}}}
    assert validate({"v": 1}, "x", schema=schema) == []
    for bad in (1.0, True, "1"):
        violations = validate({"v": bad}, "x", schema=schema)
        assert violations and violations[0].path == "$.v"


def _write(directory: Path, name: str, doc: dict[str, Any]) -> None:
    (directory / name).write_text(json.dumps(doc), encoding="utf-8")


def test_exact_ints_hold_across_a_ref_into_a_file_with_its_own_dialect(schema_dir: Path) -> None:
    """A $ref into another file lands on a root that declares $schema; the descent must keep
    the strict validator (stock Draft 2020-12 would accept 1.0)."""
    _write(schema_dir, "inner.test.json", {"$schema": DIALECT, "$id": "inner.test.json",
           "type": "object", "properties": {"n": {"type": "integer"}}})  # fmt: skip
    _write(schema_dir, "outer.test.json", {"$schema": DIALECT, "$id": "outer.test.json",
           "type": "object", "properties": {"inner": {"$ref": "inner.test.json"}}})  # fmt: skip
    assert validate({"inner": {"n": 1}}, "outer.test.json") == []
    for bad in (1.0, True):
        assert [v.path for v in validate({"inner": {"n": bad}}, "outer.test.json")] == ["$.inner.n"]


def test_a_ref_onto_an_embedded_dialect_switch_is_refused_at_load(schema_dir: Path) -> None:
    _write(schema_dir, "switch.test.json", {"$schema": DIALECT, "$defs": {"n": {
           "$schema": "http://json-schema.org/draft-07/schema#", "type": "integer"}},
           "$ref": "#/$defs/n"})  # fmt: skip
    with pytest.raises(SchemaUnavailable, match="switches the validator to Draft7Validator"):
        preload(["switch.test.json"])


@pytest.mark.parametrize("name", ALL_SCHEMAS)
def test_every_schema_compiles_and_every_ref_keeps_exact_ints(name: str) -> None:
    """preload checks each $ref resolves and lands where the strict validator stays in charge."""
    store = preload([name])
    assert name in store.documents and not store.problems


def test_preloaded_schemas_outlive_their_files(schema_dir: Path) -> None:
    preload(["run_summary.v1.json"])
    for path in schema_dir.iterdir():
        path.unlink()
    schema_dir.rmdir()
    doc = {"status": "failed", "metric_schema_version": 1.0,
           "runtime_manifest": {"schema_version": 1}, "error_type": "E", "error": "x"}  # fmt: skip
    assert [v.path for v in validate(doc, "run_summary.v1.json")] == ["$.metric_schema_version"]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        pytest.param(
            lambda d: (d / "runtime_manifest.v1.json").unlink(),
            "schema 'run_summary.v1.json' in {dir}: $ref 'runtime_manifest.v1.json' does not resolve",
            id="ref-target-missing",
        ),
        pytest.param(
            lambda d: (d / "run_summary.v1.json").unlink(),
            "unknown schema 'run_summary.v1.json': not in {dir} (found: backend_probe.0.3.0.json,",
            id="missing",
        ),
        pytest.param(
            lambda d: (d / "run_summary.v1.json").write_text("{", encoding="utf-8"),
            "schema 'run_summary.v1.json' in {dir} cannot be used: not JSON",
            id="truncated",
        ),
        pytest.param(
            lambda d: (d / "run_summary.v1.json").write_text('{"type": 3}', encoding="utf-8"),
            "schema 'run_summary.v1.json' in {dir} cannot be used: run_summary.v1.json is not a "
            "valid schema at type",
            id="not-a-schema",
        ),
    ],
)
def test_an_unusable_schema_is_a_one_line_error_naming_it_and_the_fix(
    schema_dir: Path, setup: Any, message: str
) -> None:
    setup(schema_dir)
    with pytest.raises(SchemaUnavailable) as caught:
        preload(["run_summary.v1.json"])
    text = str(caught.value)
    assert message.format(dir=schema_dir) in text and "\n" not in text
    assert text.endswith(f"restore {schema_dir} from this checkout (git checkout -- schemas/)")


def _string_nodes(node: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema that requires a non-empty string (minLength >= 1)."""
    if isinstance(node, dict):
        types = node.get("type")
        types = types if isinstance(types, list) else [types]
        if "string" in types and node.get("minLength", 0) >= 1:
            yield where, node
        for key, value in node.items():
            yield from _string_nodes(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _string_nodes(value, f"{where}/{index}")


@pytest.mark.parametrize("name", ALL_SCHEMAS)
def test_every_required_name_or_reason_rejects_blank_strings(name: str) -> None:
    """Wherever a schema asks for a non-empty string, white space alone is not enough."""
    nodes = list(_string_nodes(schema_store().document(name)))
    for where, node in nodes:
        for blank in (" ", "   ", "\t\n"):
            assert validate(blank, name, schema=node), f"{name}{where} accepts {blank!r}"


def test_the_blank_string_audit_sees_the_contract_reasons() -> None:
    nodes = dict(_string_nodes(schema_store().document("runtime_manifest.v1.json")))
    assert {
        "/$defs/non_empty_string",
        "/properties/collector_backend_device",
        "/$defs/backend_diagnostics/else/properties/backend_type",
    } <= set(nodes)


def test_parse_stat_handles_parens_in_comm() -> None:
    text = "123 (a (b) c) S 1 123 123 0 -1 4194560 " + " ".join(["0"] * 12) + " 987654 0 0"
    stat = parse_stat(text)
    assert (stat.pid, stat.comm, stat.state, stat.ppid, stat.pgid, stat.start_time_ticks) == (
        123,
        "a (b) c",
        "S",
        1,
        123,
        987654,
    )


def test_a_process_being_released_reads_as_gone() -> None:
    """A soak sample once recorded such a process with pgid -1, which its schema refuses."""
    tail = " 0 -1 4194560 " + " ".join(["0"] * 12) + " 987654 0 0"
    assert live_stat("123 (python3) Z 0 -1 -1" + tail) is None
    assert live_stat("123 (python3) S 1 123 123" + tail) == parse_stat(
        "123 (python3) S 1 123 123" + tail
    )


def test_read_stat_of_self() -> None:
    import os

    stat = read_stat(os.getpid())
    assert stat is not None and stat.pid == os.getpid() and stat.start_time_ticks > 0
