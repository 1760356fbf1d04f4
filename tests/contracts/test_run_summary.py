"""contracts/run_summary.py: check() is the whole definition of a valid run_summary.json, by
group, and contracts.rundir.read applies it (the verdict's mutation suite covers each rule's
message; these tests pin which group a rule lands in and that the reader refuses the same)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contracts import rundir
from contracts.jsonio import write_json_atomic
from contracts.run_summary import check
from tests.harness.schemas.builders import make_completed_summary, make_failed_summary

Doc = dict[str, Any]


def _manifest(doc: Doc) -> Doc:
    return doc["runtime_manifest"]


def _undrained(doc: Doc) -> None:
    _manifest(doc)["inference_flight"]["queue_depth"] = 1


def _bad_counter(doc: Doc) -> None:
    _manifest(doc)["inference_flight"]["publication_lag"] = 1.0


def _ingress_left_occupied(doc: Doc) -> None:
    _manifest(doc)["replay_ingress"]["occupancy"] = 1


def _two_ticks_in_flight(doc: Doc) -> None:
    _manifest(doc)["inference_flight"]["max_in_flight"] = 2


def _env_steps_off(doc: Doc) -> None:
    _manifest(doc)["runtime_limits"]["num_envs"] = 32


def _end_before_start(doc: Doc) -> None:
    doc["end_time_utc"] = "2026-11-29T09:00:00Z"


def _cleanup_error(doc: Doc) -> None:
    _manifest(doc)["shutdown"]["cleanup"]["errors"] = [{"type": "OSError", "message": "x"}]


GROUPS: list[tuple[str, Callable[[Doc], None], str, str]] = [
    ("undrained", _undrained, "undrained", "$.runtime_manifest.inference_flight"),
    ("bad-counter", _bad_counter, "flight_counters", "$.runtime_manifest.inference_flight"),
    ("ingress", _ingress_left_occupied, "replay_ingress", "$.runtime_manifest.replay_ingress"),
    ("in-flight", _two_ticks_in_flight, "in_flight", "$.runtime_manifest.inference_flight"),
    ("env-steps", _env_steps_off, "env_steps", "$.total_env_steps"),
    ("timestamps", _end_before_start, "schema", "$.end_time_utc"),
    ("shutdown", _cleanup_error, "shutdown", "$.runtime_manifest.shutdown"),
]


def test_a_valid_summary_breaks_no_rule() -> None:
    for doc in (make_completed_summary(), make_failed_summary()):
        assert check(doc).violations == []


@pytest.mark.parametrize(("group", "mutate", "where", "path"), GROUPS, ids=[g[0] for g in GROUPS])
def test_each_rule_lands_in_its_group_and_the_reader_refuses_it(
    tmp_path: Path, group: str, mutate: Callable[[Doc], None], where: str, path: str
) -> None:
    doc = make_completed_summary(str(tmp_path))
    mutate(doc)
    found = check(doc)
    broken = getattr(found, where)
    assert broken and all(v.path.startswith(path) for v in broken), found
    assert found.violations == list(broken)  # one fault, one violation, in one group
    write_json_atomic(tmp_path / rundir.RUN_SUMMARY, doc)
    with pytest.raises(rundir.DocumentError) as info:
        rundir.read(tmp_path / rundir.RUN_SUMMARY)
    assert info.value.problem == "invalid" and list(info.value.violations) == list(broken)


def test_the_completed_run_rules_do_not_apply_to_a_failed_run() -> None:
    doc = make_failed_summary()
    flight = {"queue_depth": 3, "publication_lag": 1, "max_in_flight": 2, "max_publication_lag": 1}
    _manifest(doc)["inference_flight"] = flight
    assert check(doc).violations == []
    assert check(doc).completed is False


def test_a_summary_without_a_shutdown_record_is_a_valid_document() -> None:
    """The soak requires the record (its verdict says so); the document does not."""
    doc = make_failed_summary()
    del _manifest(doc)["shutdown"]
    found = check(doc)
    assert found.shutdown is None and found.violations == []


def test_broken_stamps_stop_the_other_rules_and_still_make_the_summary_invalid() -> None:
    doc = make_completed_summary()
    doc["metric_schema_version"] = 2
    _undrained(doc)
    found = check(doc)
    assert found.stamps == ("run_summary stamp $.metric_schema_version=2 must be the exact int 1",)
    assert found.undrained == ()
    assert [v.path for v in found.violations] == ["$.metric_schema_version"]


def test_the_writer_checks_the_schema_only(tmp_path: Path) -> None:
    """A completed run that broke an invariant is recorded as it ran, for its readers to judge."""
    doc = make_completed_summary(str(tmp_path))
    _ingress_left_occupied(doc)
    path = rundir.write(tmp_path / rundir.RUN_SUMMARY, doc)
    with pytest.raises(rundir.DocumentError, match=r"replay_ingress\.occupancy"):
        rundir.read(path)
