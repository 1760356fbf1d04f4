"""``g1-soak rejudge``: an artifact's samples judged again with other trend settings, into a
new artifact, the old one untouched."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from contracts.jsonio import load_strict, write_json_atomic
from contracts.schemas import validate
from harness.soak.cli import g1_soak_main
from harness.soak.monitor import MonitorCfg, run_soak
from harness.soak.rejudge import replay, swap_trend_finding

CHILDREN = Path(__file__).resolve().parents[2] / "faults" / "children"


def _f(check: str, reason: str, classification: str | None = None) -> dict:
    return {"check": check, "reason": reason, "classification": classification}


def _r(reason: str, classification: str | None = None) -> dict:
    return {"reason": reason, "classification": classification}


def test_replay_is_first_set_wins_with_the_trainers_classification_last() -> None:
    assert replay([], [], None).status == "passed"
    got = replay([_f("min_duration", "short")], [_r("bad", "schema_violation")], None)
    assert (got.failure_reason, got.failure_classification) == ("short; bad", "schema_violation")
    got = replay([_f("trends", "grow", "resource_leak")], [_r("bad", "schema_violation")], None)
    assert got.failure_classification == "resource_leak"
    got = replay([_f("trends", "grow", "resource_leak")], [_r("status")], "collector_failure")
    assert (got.failure_classification, got.monitor_failure_classification) == (
        "collector_failure",
        "resource_leak",
    )
    assert replay([_f("returncode", "rc 1")], [], None).failure_classification == "unknown_failure"


def test_the_trend_finding_is_swapped_in_place_or_inserted_before_residuals() -> None:
    findings = [_f("min_duration", "short"), _f("residuals", "left", "resource_leak")]
    swapped = swap_trend_finding(findings, "sustained resource growth: x")
    assert [f["check"] for f in swapped] == ["min_duration", "trends", "residuals"]
    assert [f["check"] for f in swap_trend_finding(swapped, None)] == ["min_duration", "residuals"]
    assert swap_trend_finding(swapped, "y")[1]["reason"] == "y"


@pytest.fixture(scope="module")
def leaking_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A soak of a trainer that completes but leaks an eventfd per step, in report mode:
    passed, with a growing eventfd trend."""
    root = tmp_path_factory.mktemp("rejudge")
    cfg = MonitorCfg(
        sample_interval_s=0.1,
        startup_timeout_s=5,
        stale_progress_s=5,
        post_shutdown_grace_s=0,
        min_duration_s=0,
        trend_mode="report",
        trend_warmup_s=0,
        trend_min_window_s=1,
    )
    output = root / "soak.json"
    result = run_soak(
        [sys.executable, str(CHILDREN / "leak.py"), str(root / "run"), "eventfd", "2.0"],
        log_dir=root / "run",
        output=output,
        cfg=cfg,
        status_stream=None,
    )
    assert result.written and result.artifact["status"] == "passed"
    assert result.artifact["resource_trends"]["series"]["eventfd_fds"]["verdict"] == "growing"
    return output


def _rejudge(source: Path, output: Path, *flags: str) -> int:
    return g1_soak_main(["rejudge", str(source), "--output", str(output), "--json", *flags])


def test_rejudge_in_enforce_mode_fails_the_leak_and_leaves_the_old_artifact_alone(
    leaking_artifact: Path, tmp_path: Path, capsys
) -> None:
    before = leaking_artifact.read_bytes()
    out = tmp_path / "enforced.json"
    assert _rejudge(leaking_artifact, out, "--trend-mode", "enforce") == 1
    assert leaking_artifact.read_bytes() == before
    new = load_strict(out)
    assert validate(new, "soak_artifact.0.3.0.json") == []
    assert new["status"] == "failed" and new["failure_classification"] == "resource_leak"
    assert new["failure_reason"].startswith("sustained resource growth: fd_count ")
    assert "eventfd_fds " in new["failure_reason"]  # an eventfd is an FD too
    assert new["rejudged_from"]["artifact"] == str(leaking_artifact)
    assert new["rejudged_from"]["sha256"] == hashlib.sha256(before).hexdigest()
    assert new["rejudged_from"]["trend_mode"] == "enforce"
    assert new["samples"] == json.loads(before)["samples"]
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"] == "failed" and printed["artifact"] == str(out)


def test_rejudge_with_a_tolerant_threshold_passes_and_records_it(
    leaking_artifact: Path, tmp_path: Path
) -> None:
    enforced = tmp_path / "enforced.json"
    assert _rejudge(leaking_artifact, enforced, "--trend-mode", "enforce") == 1
    relaxed = tmp_path / "relaxed.json"
    flags = ("--trend-threshold", "eventfd_fds=100000000:1000", "--trend-threshold", "fd_count=1e8")
    assert _rejudge(enforced, relaxed, *flags) == 0  # mode carried over from `enforced`
    new = load_strict(relaxed)
    assert new["status"] == "passed" and new["failure_reason"] is None
    assert new["resource_trends"]["mode"] == "enforce"
    assert new["resource_trends"]["thresholds"]["eventfd_fds"] == {
        "max_slope_per_hour": 100000000,
        "min_growth": 1000,
    }
    assert new["rejudged_from"]["trend_thresholds"] == [
        "eventfd_fds=100000000:1000",
        "fd_count=1e8",
    ]


def test_rejudge_with_the_original_settings_reproduces_the_verdict(
    leaking_artifact: Path, tmp_path: Path
) -> None:
    out = tmp_path / "same.json"
    assert _rejudge(leaking_artifact, out) == 0
    old, new = load_strict(leaking_artifact), load_strict(out)
    for key in ("status", "failure_reason", "failure_classification", "resource_trends"):
        assert new[key] == old[key], key


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("exists", "already exists; pass a new artifact path"),
        ("same", "is ARTIFACT itself; rejudge never touches the old one"),
        ("relative", "must be an absolute path"),
        ("no-judgement", "has no judgement record"),
        ("bad-threshold", "unknown series 'vram'"),
        ("not-json", "is not strict JSON"),
    ],
)
def test_rejudge_usage_errors_exit_2_and_write_nothing(
    leaking_artifact: Path, tmp_path: Path, capsys, case: str, message: str
) -> None:
    source, out, flags = leaking_artifact, tmp_path / "new.json", []
    if case == "exists":
        out.write_text("{}")
    elif case == "same":
        out = source
    elif case == "relative":
        out = Path("new.json")
    elif case == "no-judgement":
        doc = load_strict(leaking_artifact)
        del doc["judgement"]
        source = tmp_path / "old.json"
        write_json_atomic(source, doc)
    elif case == "bad-threshold":
        flags = ["--trend-threshold", "vram=1"]
    elif case == "not-json":
        source = tmp_path / "broken.json"
        source.write_text("{")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert _rejudge(source, out, *flags) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
