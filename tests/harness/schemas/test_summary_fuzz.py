"""Property-based fuzz of run summaries: the judge never raises, and it passes only fully
valid documents; every rejection of a summary object names a JSON path."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts.run_summary import validate_run_summary
from harness.soak.verdict import judge_run_dir
from tests.harness.schemas.builders import make_completed_summary, make_failed_summary, make_run_dir

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
# Values that often sit on a boundary of the contract (exact int vs float/bool, zero, negative, empty).
tricky = st.sampled_from(
    [
        0,
        1,
        -1,
        1.0,
        0.0,
        True,
        False,
        "",
        "1",
        None,
        [],
        {},
        2**63,
        16001 * "x",
        "normal_completion",
    ]
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


def _apply(doc: Any, path: tuple, op: str, value: Any) -> Any:
    if not path:
        return value if op != "delete" else {}
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "replace":
        parent[last] = value
    elif op == "add" and isinstance(parent[last], dict):
        parent[last]["fuzz_extra"] = value
    else:
        parent[last] = value
    return doc


mutation = st.tuples(
    st.integers(0, 10**6), st.sampled_from(["delete", "replace", "add"]), tricky | json_values
)
base_docs = st.sampled_from(["completed", "failed"])


def _check(verdict, doc: Any) -> None:
    assert verdict.status in ("passed", "failed")
    if verdict.status == "passed":
        assert verdict.failure_reason is None and verdict.failure_classification is None
        assert isinstance(doc, dict) and doc.get("status") == "completed"
        assert validate_run_summary(doc, completed=True) == []
    else:
        assert verdict.failure_reason and verdict.failure_classification
        assert "$" in verdict.failure_reason, verdict.failure_reason


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(base=base_docs, mutations=st.lists(mutation, min_size=0, max_size=4))
def test_mutated_summaries_never_crash_the_judge(tmp_path_factory, base: str, mutations) -> None:
    run = tmp_path_factory.mktemp("fuzz")
    doc: Any = make_completed_summary(str(run)) if base == "completed" else make_failed_summary()
    for index, op, value in mutations:
        paths = _paths(doc)
        path = paths[index % len(paths)]
        if op == "delete" and not path:
            continue
        doc = _apply(doc, path, op, copy.deepcopy(value))
    make_run_dir(run, raw_summary=json.dumps(doc))
    verdict = judge_run_dir(run, monitor_reasons=[], monitor_classification=None)
    if not isinstance(doc, dict):
        assert verdict.failure_classification == "invalid_run_summary"
    _check(verdict, doc)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    doc=st.dictionaries(
        st.sampled_from(
            [
                "status",
                "metric_schema_version",
                "runtime_manifest",
                "total_env_steps",
                "error",
                "error_type",
            ]
        ),
        tricky | json_values,
        max_size=6,
    )
)
def test_random_objects_never_crash_the_judge(tmp_path_factory, doc: dict) -> None:
    run = make_run_dir(tmp_path_factory.mktemp("rand"), raw_summary=json.dumps(doc))
    _check(judge_run_dir(run, monitor_reasons=[], monitor_classification=None), doc)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=60) | st.binary(max_size=60).map(lambda b: b.decode("latin-1")))
def test_random_text_never_crashes_the_judge(tmp_path_factory, text: str) -> None:
    run = make_run_dir(tmp_path_factory.mktemp("text"), raw_summary=text)
    verdict = judge_run_dir(run, monitor_reasons=[], monitor_classification=None)
    assert verdict.status == "failed"
    assert verdict.failure_classification in ("invalid_run_summary", "schema_violation")


def test_unmutated_completed_summary_passes_the_fuzz_harness(tmp_path) -> None:
    doc = make_completed_summary(str(tmp_path))
    verdict = judge_run_dir(
        make_run_dir(tmp_path, raw_summary=json.dumps(doc)),
        monitor_reasons=[],
        monitor_classification=None,
    )
    assert verdict.status == "passed"


def _path_text(path: tuple) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _with_mps(doc: dict[str, Any]) -> dict[str, Any]:
    doc["runtime_manifest"]["cuda_process_sharing"].update(
        configured="mps", effective="mps", validated=True, control_pipe="/tmp/mps/control",
        control_pipe_kind="socket", server_pid=42,
    )  # fmt: skip
    return doc


def _killed_collector(doc: dict[str, Any]) -> dict[str, Any]:
    doc["runtime_manifest"]["shutdown"]["collector"] = {
        "alive": False, "exitcode": -9, "signal": 9, "signal_name": "SIGKILL",
    }  # fmt: skip
    return doc


def _valid_docs(run: str) -> dict[str, tuple[dict[str, Any], bool]]:
    """Valid summaries (and whether each is completed) whose int leaves together cover every
    integer field the builders know, in the top level, the manifest and the shutdown."""
    return {
        "completed": (make_completed_summary(run), True),
        "completed-mps": (_with_mps(make_completed_summary(run)), True),
        "failed": (make_failed_summary(), False),
        "failed-killed": (_killed_collector(make_failed_summary("collector_failure")), False),
    }


def _int_leaves(node: Any, prefix: tuple = ()) -> list[tuple]:
    # runtime_limits is a free diagnostic: no schema types it (the verdict reads it when exact)
    return [
        p
        for p in _paths(node, prefix)
        if _is_int_at(node, p[len(prefix) :]) and "runtime_limits" not in p
    ]


def _is_int_at(node: Any, path: tuple) -> bool:
    for part in path:
        node = node[part]
    return isinstance(node, int) and not isinstance(node, bool)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    base=st.sampled_from(["completed", "completed-mps", "failed", "failed-killed"]), pick=st.data()
)
def test_any_int_flipped_to_an_equal_float_is_rejected_at_its_path(
    tmp_path_factory, base: str, pick
) -> None:
    run = tmp_path_factory.mktemp("flip")
    doc, completed = _valid_docs(str(run))[base]
    assert validate_run_summary(doc, completed=completed) == []
    path = pick.draw(st.sampled_from(_int_leaves(doc)), label="int field")
    value = doc
    for part in path[:-1]:
        value = value[part]
    value[path[-1]] = float(value[path[-1]])  # 30 -> 30.0: equal, but not an exact int
    where = _path_text(path)

    assert where in [v.path for v in validate_run_summary(doc, completed=completed)]
    verdict = judge_run_dir(
        make_run_dir(run, raw_summary=json.dumps(doc)),
        monitor_reasons=[],
        monitor_classification=None,
    )
    assert verdict.status == "failed"
    assert where in verdict.failure_reason, verdict.failure_reason


def test_the_flip_property_covers_the_manifest_ints_named_in_issue_12(tmp_path) -> None:
    covered = {
        _path_text(p) for doc, _ in _valid_docs(str(tmp_path)).values() for p in _int_leaves(doc)
    }
    manifest = "$.runtime_manifest"
    assert {
        f"{manifest}.inference_flight.queue_depth",
        f"{manifest}.inference_flight.publication_lag",
        f"{manifest}.inference_ring_capacity",
        f"{manifest}.collector_metrics_interval",
        f"{manifest}.inference_memory_budget.ipc_event_count",
        f"{manifest}.shutdown.collector.signal",
        f"{manifest}.cuda_process_sharing.server_pid",
        "$.total_env_steps",
    } <= covered
