"""cumps ownership records: written once, validated, live only on full identity match."""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
import sys

import pytest

from contracts import procfs
from contracts.mps import records
from contracts.schemas import validate

U0 = "GPU-0a1b2c3d-1111-2222-3333-444455556666"


def make_record(**over) -> records.DaemonRecord:
    pid = over.pop("pid", os.getpid())
    values = {
        "name": "gpu-test",
        "uid": os.getuid(),
        "host": records.this_host(),
        "topology_mode": "single_gpu",
        "gpu_uuids": (U0,),
        "pipe_directory": "/tmp/x/pipe",
        "log_directory": "/tmp/x/log",
        "pid": pid,
        "process_start_ticks": procfs.start_time_ticks(pid),
        "created_at": records.utc_now(),
    }
    values.update(over)
    return records.DaemonRecord(**values)


def test_record_path_follows_xdg_cache_home(isolated_cache):
    assert (
        records.record_path("gpu-a")
        == isolated_cache / "g1soak" / "cumps" / "gpu-a" / "daemon.json"
    )


def test_default_name_is_the_full_uuid():
    assert records.default_name(U0) == "gpu-0a1b2c3d-1111-2222-3333-444455556666"
    assert records.NAME_RE.match(records.default_name(U0))


def test_write_is_0600_schema_valid_and_never_overwrites(isolated_cache):
    path = records.write_record(make_record())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert validate(records.load_record(path).to_json(), records.SCHEMA_NAME) == []
    before = path.read_bytes()
    with pytest.raises(records.RecordError, match="never overwritten"):
        records.write_record(make_record(pid=1, process_start_ticks=0))
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["daemon.json"]  # no temp file left


@pytest.mark.parametrize(
    "doc_change",
    [
        pytest.param({"pid": 1.0}, id="float-pid"),
        pytest.param({"gpu_uuids": ["MIG-0a1b2c3d-1111-2222-3333-444455556666"]}, id="mig-uuid"),
        pytest.param({"topology_mode": "task_per_gpu"}, id="unsupported-mode"),
        pytest.param({"extra": 1}, id="extra-field"),
    ],
)
def test_invalid_record_documents_are_rejected(isolated_cache, doc_change):
    doc = make_record().to_json()
    doc.update(doc_change)
    assert validate(doc, records.SCHEMA_NAME)


def test_live_requires_uid_host_pid_and_start_ticks():
    state, _ = records.classify(make_record())
    assert state == "live"


def test_pid_reuse_is_detected_by_start_ticks():
    rec = make_record()
    state, reason = records.classify(
        dataclasses.replace(rec, process_start_ticks=rec.process_start_ticks + 1)
    )
    assert state == "stale" and "reused" in reason


def test_dead_pid_is_stale():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = procfs.start_time_ticks(child.pid)
    child.wait()
    state, _ = records.classify(make_record(pid=child.pid, process_start_ticks=ticks or 0))
    assert state == "stale"


def test_process_started_after_the_record_is_stale():
    state, reason = records.classify(make_record(created_at="2000-01-01T00:00:00Z"))
    assert state == "stale" and "after the record" in reason


@pytest.mark.parametrize(
    "change", [{"uid": os.getuid() + 1}, {"host": "elsewhere"}], ids=["uid", "host"]
)
def test_foreign_records_are_ignored_in_listings(isolated_cache, change):
    records.write_record(make_record(name="mine"))
    records.write_record(make_record(name="theirs", **change))
    assert [e.name for e in records.list_entries()] == ["mine"]
    assert {e.name: e.state for e in records.list_entries(include_foreign=True)} == {
        "mine": "live",
        "theirs": "foreign",
    }


def test_quarantine_moves_the_folder_under_stale(isolated_cache):
    records.write_record(make_record(name="old"))
    moved = records.quarantine("old")
    assert moved.parent == records.cache_root() / ".stale"
    name, _, epoch_ms = moved.name.rpartition("-")
    assert name == "old" and epoch_ms.isdigit() and len(epoch_ms) >= 13
    assert (moved / "daemon.json").is_file()
    assert not (records.cache_root() / "old").exists()
    assert records.list_entries() == []


def test_bad_names_are_usage_errors():
    from contracts.errors import UsageError

    for bad in ("Upper", "-lead", "a" * 65, "sp ace", "../x"):
        with pytest.raises(UsageError):
            records.check_name(bad)
