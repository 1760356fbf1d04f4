"""Strict JSON io and the strict schema validator."""

from __future__ import annotations

import json

import pytest

from harness.errors import StrictJsonError
from harness.jsonio import dumps_strict, load_strict, loads_strict, write_json_atomic
from harness.procfs import parse_stat, read_stat
from harness.schemas import validate


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


def test_read_stat_of_self() -> None:
    import os

    stat = read_stat(os.getpid())
    assert stat is not None and stat.pid == os.getpid() and stat.start_time_ticks > 0
