"""docs/contracts.md §verdict pass/fail judgement: load, stamps, failed-run path, precedence, artifacts, §soak-artifact fields."""

from __future__ import annotations

import pytest

from contracts.run_summary import RESOURCE_SUMMARY_KEYS, resource_summary_fields
from harness.soak.verdict import judge_run_dir
from tests.harness.schemas.builders import make_completed_summary, make_failed_summary, make_run_dir


def _judge(run_dir, reasons=(), classification=None):
    return judge_run_dir(
        run_dir, monitor_reasons=list(reasons), monitor_classification=classification
    )


def test_missing_summary_is_missing_run_summary(tmp_path) -> None:
    verdict = _judge(make_run_dir(tmp_path))
    assert verdict.failure_classification == "missing_run_summary"
    assert verdict.failure_reason == "trainer did not write run_summary.json"
    assert verdict.run_summary is None and verdict.run_summary_error == verdict.failure_reason


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        ("", "not JSON"),
        ("{", "not JSON"),
        ('{"status": NaN}', "non-finite number token"),
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ("[1, 2]", "top-level value at $ is an array"),
        ('"completed"', "top-level value at $ is a string"),
        ("null", "top-level value at $ is null"),
        ("3", "top-level value at $ is a number"),
    ],
    ids=["empty", "truncated", "nan", "dup-key", "array", "string", "null", "number"],
)
def test_unparseable_or_non_object_summary_is_invalid_run_summary(
    tmp_path, raw: str, detail: str
) -> None:
    verdict = _judge(make_run_dir(tmp_path, raw_summary=raw))
    assert verdict.failure_classification == "invalid_run_summary"
    assert (
        verdict.failure_reason.startswith("run_summary.json is invalid: ")
        and detail in verdict.failure_reason
    )
    assert verdict.run_summary is None and verdict.run_summary_error


def test_non_utf8_and_directory_summaries_are_invalid(tmp_path) -> None:
    run = make_run_dir(tmp_path / "a")
    (run / "run_summary.json").write_bytes(b'{"s": "\xff"}')
    assert _judge(run).failure_classification == "invalid_run_summary"
    run = make_run_dir(tmp_path / "b")
    (run / "run_summary.json").mkdir()
    assert _judge(run).failure_classification == "invalid_run_summary"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"s": "\xff"}', "not UTF-8 (invalid start byte at byte 7)"),
        (b'{\r\n"a": 1,\r\n"b": x}', "not JSON: Expecting value: line 3 column 6 (char 17)"),
        (b"[" * 100_000, "nesting too deep to parse"),
    ],
    ids=["not-utf8", "crlf-file-positions", "deep"],
)
def test_an_unreadable_summary_names_why(tmp_path, raw: bytes, reason: str) -> None:
    run = make_run_dir(tmp_path)
    (run / "run_summary.json").write_bytes(raw)
    verdict = _judge(run)
    assert verdict.failure_classification == "invalid_run_summary"
    assert verdict.failure_reason == f"run_summary.json is invalid: {reason}"


def test_a_summary_that_is_a_directory_cannot_be_read(tmp_path) -> None:
    run = make_run_dir(tmp_path)
    (run / "run_summary.json").mkdir()
    assert _judge(run).failure_reason == (
        f"run_summary.json is invalid: cannot read {run / 'run_summary.json'}: Is a directory"
    )


def test_stamp_failure_stops_the_checks(tmp_path) -> None:
    summary = make_completed_summary(str(tmp_path))
    summary["metric_schema_version"] = True
    summary["runtime_manifest"]["inference_flight"]["queue_depth"] = 5  # never reached
    verdict = _judge(make_run_dir(tmp_path, summary))
    assert verdict.failure_classification == "schema_violation"
    assert verdict.reasons == [
        "run_summary stamp $.metric_schema_version=true must be the exact int 1"
    ]
    assert verdict.run_summary == summary


def test_stamps_apply_to_failed_runs_too(tmp_path) -> None:
    summary = make_failed_summary()
    summary["runtime_manifest"]["schema_version"] = "1"
    verdict = _judge(make_run_dir(tmp_path, summary), ["trainer exited with returncode 1"])
    assert verdict.failure_classification == "schema_violation"
    assert "$.runtime_manifest.schema_version" in verdict.failure_reason


def test_failed_run_producer_classification_replaces_the_monitors(tmp_path) -> None:
    verdict = _judge(
        make_run_dir(tmp_path, make_failed_summary("collector_failure", owner="collector")),
        ["training progress did not change for 300 s"],
        "timeout/stale_tick",
    )
    assert verdict.failure_classification == "collector_failure"
    assert verdict.monitor_failure_classification == "timeout/stale_tick"
    assert verdict.reasons == [
        "training progress did not change for 300 s",
        "run_summary status is 'failed', expected 'completed' ($.status)",
        (
            "shutdown classification=collector_failure, owner=collector, phase=training/learner_update, "
            "exception=RuntimeError: CUDA error: an illegal memory access"
        ),
    ]
    assert verdict.shutdown["classification"] == "collector_failure"


@pytest.mark.parametrize("monitor", ["resource_leak", "external_cancellation", None])
def test_producer_classification_replaces_any_monitor_classification(tmp_path, monitor) -> None:
    verdict = _judge(
        make_run_dir(tmp_path, make_failed_summary("external_cancellation", owner="external")),
        ["x"],
        monitor,
    )
    assert verdict.failure_classification == "external_cancellation"
    assert verdict.monitor_failure_classification == monitor


def test_failed_run_message_lists_cleanup_errors_and_omits_null_exception(tmp_path) -> None:
    summary = make_failed_summary(
        "unknown_failure",
        exception=None,
        cleanup={"errors": [{"type": "OSError", "message": "a"}, {"type": "E", "message": "b"}]},
    )
    verdict = _judge(make_run_dir(tmp_path, summary))
    assert (
        verdict.reasons[-1]
        == "shutdown classification=unknown_failure, owner=learner, phase=training/learner_update, cleanup_errors=2"
    )
    assert verdict.failure_classification == "unknown_failure"


def test_failed_run_without_shutdown_is_unknown_failure(tmp_path) -> None:
    summary = make_failed_summary()
    del summary["runtime_manifest"]["shutdown"]
    verdict = _judge(make_run_dir(tmp_path, summary), ["trainer exited with returncode 1"])
    assert verdict.failure_classification == "unknown_failure"
    assert "shutdown diagnostics are unavailable" in verdict.failure_reason
    assert verdict.shutdown is None and verdict.monitor_failure_classification is None


def test_failed_run_without_shutdown_keeps_an_earlier_monitor_classification(tmp_path) -> None:
    summary = make_failed_summary()
    summary["runtime_manifest"]["shutdown"] = None
    verdict = _judge(
        make_run_dir(tmp_path, summary), ["soak cancelled by SIGINT"], "external_cancellation"
    )
    assert verdict.failure_classification == "external_cancellation"


def test_failed_run_claiming_normal_completion_is_a_shutdown_contract_violation(tmp_path) -> None:
    summary = make_failed_summary("normal_completion")
    verdict = _judge(make_run_dir(tmp_path, summary))
    assert verdict.failure_classification == "shutdown_contract_violation"
    assert "$.runtime_manifest.shutdown.classification" in verdict.failure_reason
    assert "shutdown classification=" not in verdict.failure_reason


@pytest.mark.parametrize(
    ("shutdown_over", "path"),
    [
        ({"owner": ""}, ".owner"),
        ({"phase": None}, ".phase"),
        ({"exception": "boom"}, ".exception"),
        ({"cleanup": {"errors": "none"}}, ".cleanup.errors"),
        ({"classification": "oops"}, ".classification"),
    ],
    ids=["owner", "phase", "exception", "cleanup", "classification"],
)
def test_failed_run_shutdown_shape_breaches(tmp_path, shutdown_over, path: str) -> None:
    verdict = _judge(
        make_run_dir(tmp_path, make_failed_summary(**shutdown_over)), [], "timeout/stale_tick"
    )
    assert verdict.failure_classification == "timeout/stale_tick"  # first set wins; no replacement
    assert f"$.runtime_manifest.shutdown{path}" in verdict.failure_reason


def test_failed_run_schema_violation_then_producer_replaces_it(tmp_path) -> None:
    summary = make_failed_summary()
    summary["error"] = "x" * 16001
    verdict = _judge(make_run_dir(tmp_path, summary))
    assert "run_summary schema violation at $.error" in verdict.failure_reason
    assert (verdict.failure_classification, verdict.monitor_failure_classification) == (
        "learner_failure",
        "schema_violation",
    )


def test_collector_died_status_is_reported(tmp_path) -> None:
    summary = make_completed_summary(str(tmp_path))
    summary.update(
        status="collector_died", error_type="CollectorDied", error="collector exited with -9"
    )
    summary["runtime_manifest"]["shutdown"].update(
        classification="collector_failure",
        owner="collector",
        phase="training/wait_for_inference_request",
        collector={"alive": False, "exitcode": -9, "signal": 9, "signal_name": "SIGKILL"},
    )
    verdict = _judge(make_run_dir(tmp_path, summary))
    assert (
        verdict.reasons[0]
        == "run_summary status is 'collector_died', expected 'completed' ($.status)"
    )
    assert verdict.failure_classification == "collector_failure"


def test_undrained_flight_wins_over_later_schema_findings(tmp_path) -> None:
    summary = make_completed_summary(str(tmp_path))
    summary["runtime_manifest"]["inference_flight"]["queue_depth"] = 1
    summary["runtime_manifest"]["replay_ingress"]["occupancy"] = 1
    del summary["runtime_manifest"]["shutdown"]
    verdict = _judge(make_run_dir(tmp_path, summary))
    assert verdict.failure_classification == "unknown_failure"
    assert verdict.reasons[0].startswith(
        "final inference flight is not drained (queue_depth=1, publication_lag=0)"
    )
    assert any("replay_ingress.occupancy" in r for r in verdict.reasons)
    assert verdict.reasons[-1].startswith(
        "completed runtime_manifest is missing shutdown diagnostics"
    )


def test_a_learner_fallback_fails_a_completed_run_and_names_it(tmp_path) -> None:
    summary = make_completed_summary(str(tmp_path))
    summary["runtime_manifest"]["cuda_graph"]["learner"]["fallbacks"] = [
        {"feature": "fusion", "reason": "graph warm-up/capture failed: TypeError('x')"},
        {"feature": "act_graph", "reason": "capture failed: RuntimeError: y"},
    ]
    verdict = _judge(make_run_dir(tmp_path, summary))
    assert (verdict.status, verdict.failure_classification) == ("failed", "acceleration_fallback")
    path = "$.runtime_manifest.cuda_graph.learner.fallbacks"
    tail = "the run's figures are not those of its configuration"
    first = "\"graph warm-up/capture failed: TypeError('x')\""
    assert verdict.reasons == [
        f"learner fusion fell back at run time: {first} ({path}[0]); {tail}",
        f'learner act_graph fell back at run time: "capture failed: RuntimeError: y" ({path}[1]); {tail}',
    ]


def test_an_env_fallback_fails_a_completed_run_before_the_learners(tmp_path) -> None:
    summary = make_completed_summary(str(tmp_path))
    manifest = summary["runtime_manifest"]
    manifest["backend_diagnostics"]["diagnostics"]["task_cuda_graph"] = {
        "requested": True, "enabled": False, "fell_back": True,
        "disable_reason": "torch CUDA graph capture failed: RuntimeError: z",
    }  # fmt: skip
    manifest["cuda_graph"]["learner"]["fallbacks"] = [{"feature": "compile", "reason": "w"}]
    verdict = _judge(make_run_dir(tmp_path, summary))
    assert verdict.failure_classification == "acceleration_fallback"
    assert [r.split(" (")[0] for r in verdict.reasons] == [
        'env task_cuda_graph fell back at run time: "torch CUDA graph capture failed: RuntimeError: z"',
        'learner compile fell back at run time: "w"',
    ]
    assert (
        "$.runtime_manifest.backend_diagnostics.diagnostics.task_cuda_graph)" in verdict.reasons[0]
    )


def test_an_unavailable_env_feature_is_not_a_fallback(tmp_path) -> None:
    summary = make_completed_summary(str(tmp_path))
    entries = summary["runtime_manifest"]["backend_diagnostics"]["diagnostics"]
    assert entries["device_reset_randomization"]["enabled"] is False  # off by design, no key
    entries["task_cuda_graph"] = {  # asked for, never attempted: no fell_back key
        "requested": True, "enabled": False, "disable_reason": "torch device is cpu; CUDA graphs need CUDA",
    }  # fmt: skip
    assert _judge(make_run_dir(tmp_path, summary)).status == "passed"


@pytest.mark.parametrize(
    "entry",
    [
        {"requested": True, "enabled": True, "disable_reason": None, "fell_back": True},
        {"requested": False, "enabled": False, "disable_reason": "off", "fell_back": True},
        {"requested": True, "enabled": False, "disable_reason": "x", "fell_back": False},
    ],
)
def test_a_fell_back_mark_off_its_contract_is_a_schema_violation(tmp_path, entry) -> None:
    summary = make_completed_summary(str(tmp_path))
    summary["runtime_manifest"]["backend_diagnostics"]["diagnostics"]["task_compile"] = entry
    verdict = _judge(make_run_dir(tmp_path, summary))
    assert verdict.failure_classification == "schema_violation", verdict.reasons
    assert all("diagnostics.task_compile" in r for r in verdict.reasons if "schema" in r)


def test_a_v1_summary_written_before_the_fallbacks_record_is_not_failed_for_lacking_it(
    tmp_path,
) -> None:
    # optional within v1 (docs/schemas.md, Schema evolution); a recorded fallback still fails
    summary = make_completed_summary(str(tmp_path))
    del summary["runtime_manifest"]["cuda_graph"]["learner"]["fallbacks"]
    del summary["runtime_manifest"]["collector_placement"]
    assert _judge(make_run_dir(tmp_path, summary)).status == "passed"


def test_monitor_classification_wins_over_summary_findings(tmp_path) -> None:
    summary = make_completed_summary(str(tmp_path))
    summary["runtime_manifest"]["replay_ingress"]["dropped_batches"] = 1
    verdict = _judge(
        make_run_dir(tmp_path, summary),
        ["residual child processes after shutdown: 123"],
        "resource_leak",
    )
    assert (
        verdict.failure_classification == "resource_leak"
        and verdict.monitor_failure_classification is None
    )
    assert verdict.reasons[0] == "residual child processes after shutdown: 123"


def test_monitor_reason_without_class_on_a_valid_run_is_unknown_failure(tmp_path) -> None:
    run = make_run_dir(tmp_path, make_completed_summary(str(tmp_path)))
    verdict = _judge(run, ["trainer exited with returncode 3"])
    assert (verdict.status, verdict.failure_classification) == ("failed", "unknown_failure")
    assert verdict.failure_reason == "trainer exited with returncode 3"


def test_a_valid_run_that_only_ended_too_soon_is_too_short(tmp_path) -> None:
    run = make_run_dir(tmp_path, make_completed_summary(str(tmp_path)))
    verdict = _judge(run, ["soak completed before min_duration_seconds=1800"])
    assert (verdict.status, verdict.failure_classification) == ("failed", "too_short")
    assert verdict.failure_reason == "soak completed before min_duration_seconds=1800"


def test_reasons_join_with_semicolons(tmp_path) -> None:
    verdict = _judge(make_run_dir(tmp_path), ["a", "b"], "timeout/startup")
    assert verdict.failure_reason == "a; b; trainer did not write run_summary.json"
    assert verdict.failure_classification == "timeout/startup"


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda d: (d / "run_config.json").unlink(), "run_config.json"),
        (lambda d: (d / "run_config.json").write_text("[]"), "run_config.json as a JSON object"),
        (lambda d: (d / "model_20.pt").unlink(), "model_20.pt"),
        (lambda d: (d / "model_30.pt").unlink(), "model_30.pt"),
        (
            lambda d: next(d.glob("events.out.tfevents.*")).unlink(),
            "exactly one events.out.tfevents.* (found none)",
        ),
        (
            lambda d: (d / "events.out.tfevents.2.other").write_bytes(b""),
            "exactly one events.out.tfevents.* (found 2",
        ),
    ],
    ids=[
        "no-config",
        "config-array",
        "mid-checkpoint",
        "final-checkpoint",
        "no-events",
        "two-events",
    ],
)
def test_missing_run_dir_artifacts_are_schema_violations(tmp_path, damage, expected: str) -> None:
    run = make_run_dir(tmp_path, make_completed_summary(str(tmp_path)))
    damage(run)
    verdict = _judge(run)
    assert verdict.failure_classification == "schema_violation"
    assert verdict.failure_reason.startswith("run directory is missing required artifacts: ")
    assert expected in verdict.failure_reason


def test_final_checkpoint_off_the_interval_is_required(tmp_path) -> None:
    from contracts.jsonio import write_json_atomic

    run = make_run_dir(tmp_path, make_completed_summary(str(tmp_path)))
    write_json_atomic(
        run / "run_config.json", {"config": {"algo": {"save_interval": 20, "max_iterations": 30}}}
    )
    assert _judge(run).status == "passed"  # model_20 and model_30 exist
    write_json_atomic(
        run / "run_config.json", {"config": {"algo": {"save_interval": 7, "max_iterations": 30}}}
    )
    reason = _judge(run).failure_reason
    assert (
        "model_7.pt, model_14.pt, model_21.pt, model_28.pt" in reason
        and "model_30.pt" not in reason
    )


def test_checkpoint_check_is_skipped_without_save_interval(tmp_path) -> None:
    from contracts.jsonio import write_json_atomic

    summary = make_completed_summary(str(tmp_path))
    summary["last_checkpoint"] = None  # a named last checkpoint must exist
    run = make_run_dir(tmp_path, summary)
    for model in run.glob("model_*.pt"):
        model.unlink()
    write_json_atomic(
        run / "run_config.json",
        {"run": {}, "config": {"algo": {"max_iterations": 30}}, "overrides": []},
    )
    assert _judge(run).status == "passed"


def test_resource_summary_fields_from_a_completed_summary() -> None:
    fields = resource_summary_fields(make_completed_summary())
    assert list(fields) == list(RESOURCE_SUMMARY_KEYS)
    assert fields == {
        "ipc_event_count": 3,
        "max_in_flight": 1,
        "max_publication_lag": 1,
        "replay_ingress_depth": 2,
        "replay_ingress_slot_rows": 64,
        "replay_ingress_high_water_occupancy": 2,
        "replay_ingress_final_occupancy": 0,
        "replay_ingress_backpressure_waits": 3,
        "replay_ingress_backpressure_wait_s": 0.25,
        "replay_ingress_early_returns": 0,
        "replay_ingress_dropped_batches": 0,
    }


@pytest.mark.parametrize(
    "summary", [None, [], {"runtime_manifest": 3}, {"runtime_manifest": {"replay_ingress": None}}]
)
def test_resource_summary_fields_are_null_when_missing(summary) -> None:
    assert set(resource_summary_fields(summary).values()) == {None}


def test_resource_summary_fields_null_bools_and_keep_partial_sections() -> None:
    summary = make_completed_summary()
    summary["runtime_manifest"]["inference_flight"]["max_in_flight"] = True
    del summary["runtime_manifest"]["inference_memory_budget"]
    fields = resource_summary_fields(summary)
    assert (
        fields["max_in_flight"] is None
        and fields["ipc_event_count"] is None
        and fields["max_publication_lag"] == 1
    )
