"""Hand-written corpus of bad run summaries: each is one small mutation of a valid completed
summary, rejected by the docs/contracts.md §verdict judge with the expected classification and a JSON path.

Damaged run directories (the summary's file, the other artifacts, the learning verdict) are
``RUN_DIR_CASES``. ``GATE_ROWS`` ties each row of docs/soak.md "What the gate checks" to the
cases that break it, and the row's classifications and reason forms must be what they give."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from contracts import run_summary as run_summary_contract
from contracts.jsonio import load_strict, write_json_atomic
from contracts.schemas import validate
from harness.soak.learning import LearningCfg
from harness.soak.verdict import judge_run_dir
from tests.harness.schemas.builders import make_completed_summary, make_failed_summary, make_run_dir
from tests.harness.schemas.evaluation_builders import (
    DECLINING_CURVE,
    HEALTHY_CURVE,
    make_evaluation,
    summary_section,
    training_scalars,
    write_evaluation,
    write_training_events,
)

Doc = dict[str, Any]


def _m(doc: Doc) -> Doc:
    return doc["runtime_manifest"]


def _ri(doc: Doc) -> Doc:
    return doc["runtime_manifest"]["replay_ingress"]


def _sd(doc: Doc) -> Doc:
    return doc["runtime_manifest"]["shutdown"]


def _set(getter: Callable[[Doc], Doc], key: str, value: Any) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        getter(doc)[key] = value

    return mutate


def _del(getter: Callable[[Doc], Doc], key: str) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        del getter(doc)[key]

    return mutate


def _many(*mutations: Callable[[Doc], None]) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        for m in mutations:
            m(doc)

    return mutate


def _top(doc: Doc) -> Doc:
    return doc


def _bd(doc: Doc) -> Doc:
    return doc["runtime_manifest"]["backend_diagnostics"]


def _cps(doc: Doc) -> Doc:
    return doc["runtime_manifest"]["cuda_process_sharing"]


def _mps(doc: Doc) -> None:
    _cps(doc).update(
        configured="mps",
        effective="mps",
        validated=True,
        control_pipe="/tmp/mps/control",
        control_pipe_kind="socket",
        server_pid=42,
    )


def _fl(doc: Doc) -> Doc:
    return doc["runtime_manifest"]["inference_flight"]


def _doubled_env_steps(doc: Doc) -> None:
    """Twice the env steps, with the ingress sequences to match: only the
    ``(warm-up + iterations) x num_envs`` rule can see it."""
    doc["total_env_steps"] *= 2
    _ri(doc)["published_sequence"] *= 2
    _ri(doc)["release_sequence"] *= 2


def _short_of_budget(doc: Doc) -> None:
    """20 of the 30 planned iterations, every counter consistent with 20."""
    rows = _ri(doc)["ingress_slot_rows"]
    warmup = _m(doc)["runtime_limits"]["warmup_ticks"]
    doc.update(completed_iterations=20, tail_iteration_count=20)
    doc["total_env_steps"] = (warmup + 20) * rows
    _ri(doc).update(published_sequence=warmup + 20, release_sequence=warmup + 20)


def _env_fallback(doc: Doc) -> None:
    _bd(doc)["diagnostics"]["task_cuda_graph"] = {
        "requested": True,
        "enabled": False,
        "fell_back": True,
        "disable_reason": "torch CUDA graph capture failed: RuntimeError: z",
    }


def _learner_fallback(doc: Doc) -> None:
    _m(doc)["cuda_graph"]["learner"]["fallbacks"] = [
        {"feature": "fusion", "reason": "graph warm-up/capture failed: TypeError('x')"}
    ]


SV, UF, SCV = "schema_violation", "unknown_failure", "shutdown_contract_violation"
RI = "$.runtime_manifest.replay_ingress"
SD = "$.runtime_manifest.shutdown"
FL = "$.runtime_manifest.inference_flight"
CASES: list[tuple[str, Callable[[Doc], None], str, str]] = [
    # (id, mutation, expected classification, JSON path the reason must name)
    ("stamp-float", _set(_top, "metric_schema_version", 1.0), SV, "$.metric_schema_version"),
    ("stamp-bool", _set(_top, "metric_schema_version", True), SV, "$.metric_schema_version"),
    ("stamp-str", _set(_top, "metric_schema_version", "1"), SV, "$.metric_schema_version"),
    ("stamp-missing", _del(_top, "metric_schema_version"), SV, "$.metric_schema_version"),
    ("manifest-array", _set(_top, "runtime_manifest", []), SV, "$.runtime_manifest"),
    ("manifest-version-2", _set(_m, "schema_version", 2), SV, "$.runtime_manifest.schema_version"),
    (
        "manifest-version-true",
        _set(_m, "schema_version", True),
        SV,
        "$.runtime_manifest.schema_version",
    ),
    (
        "manifest-version-1.0",
        _set(_m, "schema_version", 1.0),
        SV,
        "$.runtime_manifest.schema_version",
    ),
    (
        "flight-queue-depth",
        lambda d: _m(d)["inference_flight"].update(queue_depth=1),
        UF,
        "$.runtime_manifest.inference_flight",
    ),
    (
        "flight-publication-lag",
        lambda d: _m(d)["inference_flight"].update(publication_lag=2),
        UF,
        "$.runtime_manifest.inference_flight",
    ),
    (
        "flight-negative-max",
        lambda d: _m(d)["inference_flight"].update(max_in_flight=-1),
        SV,
        "$.runtime_manifest.inference_flight.max_in_flight",
    ),
    # Exact ints hold inside the $ref'd runtime manifest too.
    ("flight-queue-depth-1.0", _set(_fl, "queue_depth", 1.0), SV, f"{FL}.queue_depth"),
    ("flight-queue-depth-0.0", _set(_fl, "queue_depth", 0.0), SV, f"{FL}.queue_depth"),
    ("flight-publication-lag-1.0", _set(_fl, "publication_lag", 1.0), SV, f"{FL}.publication_lag"),
    ("flight-publication-lag-0.0", _set(_fl, "publication_lag", 0.0), SV, f"{FL}.publication_lag"),
    ("flight-max-in-flight-1.0", _set(_fl, "max_in_flight", 1.0), SV, f"{FL}.max_in_flight"),
    ("flight-queue-depth-missing", _del(_fl, "queue_depth"), SV, f"{FL}.queue_depth"),
    (
        "ring-capacity-1.0",
        _set(_m, "inference_ring_capacity", 1.0),
        SV,
        "$.runtime_manifest.inference_ring_capacity",
    ),
    (
        "metrics-interval-100.0",
        _set(_m, "collector_metrics_interval", 100.0),
        SV,
        "$.runtime_manifest.collector_metrics_interval",
    ),
    (
        "ipc-event-count-3.0",
        lambda d: _m(d)["inference_memory_budget"].update(ipc_event_count=3.0),
        SV,
        "$.runtime_manifest.inference_memory_budget.ipc_event_count",
    ),
    (
        "sharing-rank-0.0",
        _set(_cps, "rank", 0.0),
        SV,
        "$.runtime_manifest.cuda_process_sharing.rank",
    ),
    (
        "sharing-server-pid-42.0",
        _many(_mps, _set(_cps, "server_pid", 42.0)),
        SV,
        "$.runtime_manifest.cuda_process_sharing.server_pid",
    ),
    ("shutdown-iteration-30.0", _set(_sd, "iteration", 30.0), SCV, f"{SD}.iteration"),
    (
        "shutdown-ring-capacity-1.0",
        lambda d: _sd(d)["inference_ring"].update(capacity=1.0),
        SCV,
        f"{SD}.inference_ring.capacity",
    ),
    ("ri-null", _set(_m, "replay_ingress", None), SV, RI),
    ("ri-counter-float", _set(_ri, "ingress_depth", 2.0), SV, f"{RI}.ingress_depth"),
    ("ri-counter-missing", _del(_ri, "stop_returns"), SV, f"{RI}.stop_returns"),
    ("ri-wait-negative", _set(_ri, "backpressure_wait_s", -0.5), SV, f"{RI}.backpressure_wait_s"),
    ("ri-wait-str", _set(_ri, "backpressure_wait_s", "0"), SV, f"{RI}.backpressure_wait_s"),
    ("ri-depth-zero", _set(_ri, "ingress_depth", 0), SV, f"{RI}.ingress_depth"),
    ("ri-release-ahead", _set(_ri, "release_sequence", 33), SV, f"{RI}.release_sequence"),
    (
        "ri-occupancy-undrained",
        _many(_set(_ri, "release_sequence", 31), _set(_ri, "occupancy", 1)),
        SV,
        f"{RI}.occupancy",
    ),
    ("ri-occupancy-mismatch", _set(_ri, "occupancy", 1), SV, f"{RI}.occupancy"),
    ("ri-high-water-zero", _set(_ri, "high_water_occupancy", 0), SV, f"{RI}.high_water_occupancy"),
    (
        "ri-high-water-above-depth",
        _set(_ri, "high_water_occupancy", 3),
        SV,
        f"{RI}.high_water_occupancy",
    ),
    ("ri-early-vs-dropped", _set(_ri, "early_returns", 1), SV, f"{RI}.early_returns"),
    (
        "ri-dropped",
        _many(
            _set(_ri, "dropped_batches", 1),
            _set(_ri, "early_returns", 1),
            _set(_ri, "closed_returns", 1),
        ),
        SV,
        f"{RI}.dropped_batches",
    ),
    ("ri-closed-plus-stop", _set(_ri, "closed_returns", 1), SV, f"{RI}.closed_returns"),
    ("steps-not-multiple", _set(_top, "total_env_steps", 2050), SV, "$.total_env_steps"),
    ("steps-zero", _set(_top, "total_env_steps", 0), SV, "$.total_env_steps"),
    ("steps-float", _set(_top, "total_env_steps", 2048.0), SV, "$.total_env_steps"),
    ("steps-vs-chunks", _set(_top, "total_env_steps", 4096), SV, f"{RI}.published_sequence"),
    ("missing-final-mean-reward", _del(_top, "final_mean_reward"), SV, "$.final_mean_reward"),
    (
        "missing-ring-capacity",
        _del(_m, "inference_ring_capacity"),
        SV,
        "$.runtime_manifest.inference_ring_capacity",
    ),
    ("completed-with-error", _set(_top, "error", "boom"), SV, "$.error"),
    ("bad-timestamp", _set(_top, "start_time_utc", "2026-11-29 10:00:00"), SV, "$.start_time_utc"),
    ("tail-window", _set(_top, "tail_window_iterations", 50), SV, "$.tail_window_iterations"),
    ("iterations-negative", _set(_top, "completed_iterations", -1), SV, "$.completed_iterations"),
    (
        "placement-unknown",
        _set(_m, "collector_placement", "fiber"),
        SV,
        "$.runtime_manifest.collector_placement",
    ),
    (
        "device-empty",
        _set(_m, "collector_backend_device", ""),
        SV,
        "$.runtime_manifest.collector_backend_device",
    ),
    (
        "backend-diag-null",
        _set(_m, "backend_diagnostics", None),
        SV,
        "$.runtime_manifest.backend_diagnostics",
    ),
    (
        "backend-mjwarp-missing-graph",
        lambda d: _bd(d)["diagnostics"].pop("cuda_graph"),
        SV,
        "$.runtime_manifest.backend_diagnostics.diagnostics.cuda_graph",
    ),
    (
        "backend-enabled-with-reason",
        lambda d: _bd(d)["diagnostics"]["cuda_graph"].update(disable_reason="x"),
        SV,
        "$.runtime_manifest.backend_diagnostics.diagnostics.cuda_graph.disable_reason",
    ),
    (
        "backend-disabled-empty-reason",
        lambda d: _bd(d)["diagnostics"]["device_reset_randomization"].update(disable_reason=""),
        SV,
        "$.runtime_manifest.backend_diagnostics.diagnostics.device_reset_randomization.disable_reason",
    ),
    (
        "backend-unavailable-no-reason",
        _set(_m, "backend_diagnostics", {"available": False, "backend_type": None}),
        SV,
        "$.runtime_manifest.backend_diagnostics.unavailable_reason",
    ),
    # Names and reasons are non-blank.
    (
        "backend-unavailable-blank-type",
        _set(
            _m,
            "backend_diagnostics",
            {"available": False, "backend_type": "", "unavailable_reason": "probe raised"},
        ),
        SV,
        "$.runtime_manifest.backend_diagnostics.backend_type",
    ),
    (
        "backend-unavailable-blank-reason",
        _set(
            _m,
            "backend_diagnostics",
            {"available": False, "backend_type": "mujoco", "unavailable_reason": "   "},
        ),
        SV,
        "$.runtime_manifest.backend_diagnostics.unavailable_reason",
    ),
    (
        "backend-disabled-blank-reason",
        lambda d: _bd(d)["diagnostics"]["device_reset_randomization"].update(disable_reason="  "),
        SV,
        "$.runtime_manifest.backend_diagnostics.diagnostics.device_reset_randomization.disable_reason",
    ),
    (
        "backend-available-blank-type",
        _set(_bd, "backend_type", " \t"),
        SV,
        "$.runtime_manifest.backend_diagnostics.backend_type",
    ),
    (
        "device-blank",
        _set(_m, "collector_backend_device", "  "),
        SV,
        "$.runtime_manifest.collector_backend_device",
    ),
    ("algo-blank", _set(_top, "algo", " "), SV, "$.algo"),
    ("shutdown-owner-blank", _set(_sd, "owner", "  "), SCV, f"{SD}.owner"),
    ("shutdown-phase-blank", _set(_sd, "phase", "\n"), SCV, f"{SD}.phase"),
    (
        "shutdown-exception-blank-type",
        _set(_sd, "exception", {"type": " ", "message": "boom"}),
        SCV,
        f"{SD}.exception.type",
    ),
    (
        "mps-not-validated",
        _many(_mps, _set(_cps, "validated", False)),
        SV,
        "$.runtime_manifest.cuda_process_sharing.validated",
    ),
    (
        "mps-uuid-mismatch",
        _many(_mps, _set(_cps, "collector_gpu_uuid", "GPU-other")),
        SV,
        "$.runtime_manifest.cuda_process_sharing.collector_gpu_uuid",
    ),
    (
        "mps-configured-not-effective",
        _set(_cps, "configured", "mps"),
        SV,
        "$.runtime_manifest.cuda_process_sharing",
    ),
    (
        "pipe-kind-bogus",
        _set(_cps, "control_pipe_kind", "unixsocket"),
        SV,
        "$.runtime_manifest.cuda_process_sharing.control_pipe_kind",
    ),
    (
        "sharing-missing",
        _del(_m, "cuda_process_sharing"),
        SV,
        "$.runtime_manifest.cuda_process_sharing",
    ),
    (
        "sharing-rank-str",
        _set(_cps, "rank", "0"),
        SV,
        "$.runtime_manifest.cuda_process_sharing.rank",
    ),
    (
        "shutdown-missing",
        _del(_m, "shutdown"),
        SCV,
        "completed runtime_manifest is missing shutdown diagnostics",
    ),
    (
        "shutdown-learner-failure",
        _set(_sd, "classification", "learner_failure"),
        SCV,
        f"{SD}.classification",
    ),
    ("shutdown-bogus-class", _set(_sd, "classification", "crashed"), SCV, f"{SD}.classification"),
    (
        "shutdown-cleanup-errors",
        lambda d: _sd(d)["cleanup"]["errors"].append({"type": "OSError", "message": "unlink"}),
        SCV,
        f"{SD}.cleanup.errors",
    ),
    (
        "shutdown-cleanup-not-list",
        _set(_sd, "cleanup", {"errors": {}}),
        SCV,
        f"{SD}.cleanup.errors",
    ),
    ("shutdown-owner-empty", _set(_sd, "owner", ""), SCV, f"{SD}.owner"),
    ("shutdown-phase-int", _set(_sd, "phase", 3), SCV, f"{SD}.phase"),
    ("shutdown-exception-shape", _set(_sd, "exception", {"type": "E"}), SCV, f"{SD}.exception"),
    (
        "shutdown-exception-long",
        _set(_sd, "exception", {"type": "E", "message": "x" * 16001}),
        SCV,
        f"{SD}.exception",
    ),
    (
        "shutdown-signal-mismatch",
        _set(
            _sd, "collector", {"alive": False, "exitcode": -9, "signal": None, "signal_name": None}
        ),
        SCV,
        f"{SD}.collector.signal",
    ),
    (
        "shutdown-signal-name",
        _set(
            _sd,
            "collector",
            {"alive": False, "exitcode": -9, "signal": 9, "signal_name": "SIGTERM"},
        ),
        SCV,
        f"{SD}.collector.signal_name",
    ),
    ("status-unknown", _set(_top, "status", "weird"), SV, "$.status"),
    # The documented invariants of a completed run (docs/soak.md "What the gate checks").
    (
        "collector-exit-1",
        _set(
            _sd, "collector", {"alive": False, "exitcode": 1, "signal": None, "signal_name": None}
        ),
        SCV,
        f"{SD}.collector.exitcode",
    ),
    (
        "collector-alive",
        _set(
            _sd, "collector", {"alive": True, "exitcode": None, "signal": None, "signal_name": None}
        ),
        SCV,
        f"{SD}.collector.alive",
    ),
    ("phase-not-finalize", _set(_sd, "phase", "training/learner_update"), SCV, f"{SD}.phase"),
    (
        "last-checkpoint-nowhere",
        lambda d: d.update(last_checkpoint=f"{d['log_dir']}/model_999.pt"),
        SV,
        "$.last_checkpoint",
    ),
    (
        "env-steps-doubled",
        _doubled_env_steps,
        SV,
        "(warmup_ticks + completed_iterations) x num_envs",
    ),
    ("max-in-flight-5", _set(_fl, "max_in_flight", 5), UF, f"{FL}.max_in_flight"),
    ("tick-in-flight-at-end", _set(_fl, "in_flight", 1), UF, f"{FL}.in_flight"),
    ("completed-short-of-budget", _short_of_budget, SV, "short of its iteration budget"),
    (
        "end-time-newline",
        lambda d: d.update(end_time_utc=d["end_time_utc"] + "\n"),
        SV,
        "$.end_time_utc",
    ),
    ("end-time-99", _set(_top, "end_time_utc", "2026-11-29T99:99:99Z"), SV, "$.end_time_utc"),
    ("env-fallback", _env_fallback, "acceleration_fallback", "env task_cuda_graph fell back"),
    ("learner-fallback", _learner_fallback, "acceleration_fallback", "learner fusion fell back"),
]


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 25
    assert len({case[0] for case in CASES}) == len(CASES)


def test_valid_completed_run_dir_passes(tmp_path) -> None:
    summary = make_completed_summary(str(tmp_path))
    verdict = judge_run_dir(
        make_run_dir(tmp_path, summary), monitor_reasons=[], monitor_classification=None
    )
    assert (verdict.status, verdict.failure_reason, verdict.failure_classification) == (
        "passed",
        None,
        None,
    )
    assert (
        verdict.run_summary == summary
        and verdict.shutdown == summary["runtime_manifest"]["shutdown"]
    )


@pytest.mark.parametrize(
    ("mutate", "classification", "path"), [pytest.param(*c[1:], id=c[0]) for c in CASES]
)
def test_bad_summary_is_rejected_with_classification_and_path(
    tmp_path, mutate, classification: str, path: str
) -> None:
    summary = make_completed_summary(str(tmp_path))
    mutate(summary)
    verdict = judge_run_dir(
        make_run_dir(tmp_path, summary), monitor_reasons=[], monitor_classification=None
    )
    assert verdict.status == "failed"
    assert verdict.failure_classification == classification, verdict.failure_reason
    assert path in verdict.failure_reason


def test_schema_alone_accepts_the_valid_summary_and_rejects_manifest_version_2() -> None:
    summary = make_completed_summary()
    assert validate(summary, "run_summary.v1.json") == []
    summary["runtime_manifest"]["schema_version"] = 2
    assert [v.path for v in validate(summary, "run_summary.v1.json")] == [
        "$.runtime_manifest.schema_version"
    ]


@pytest.mark.parametrize("value", [0.0, 1.0, "0", None, True, -1])
def test_flight_check_fails_closed_on_its_own(tmp_path, monkeypatch, value: Any) -> None:
    """Step 4.1 rejects a flight counter that is not an exact int >= 0 by itself: with the
    schema step switched off, the run still fails, naming the counter's path."""
    monkeypatch.setattr(run_summary_contract, "validate_run_summary", lambda doc, completed: [])
    summary = make_completed_summary(str(tmp_path))
    summary["runtime_manifest"]["inference_flight"]["publication_lag"] = value
    verdict = judge_run_dir(
        make_run_dir(tmp_path, summary), monitor_reasons=[], monitor_classification=None
    )
    assert verdict.status == "failed"
    assert verdict.failure_classification == SV
    assert verdict.reasons == [
        (
            f"final inference flight counter {FL}.publication_lag must be an exact int >= 0, "
            f"got {json.dumps(value)}"
        )
    ]


def test_a_missing_flight_counter_is_reported_once(tmp_path) -> None:
    summary = make_completed_summary(str(tmp_path))
    del summary["runtime_manifest"]["inference_flight"]["queue_depth"]
    verdict = judge_run_dir(
        make_run_dir(tmp_path, summary), monitor_reasons=[], monitor_classification=None
    )
    assert verdict.reasons == [
        f"final inference flight counter {FL}.queue_depth must be an exact int >= 0, missing"
    ]


REPO = Path(__file__).resolve().parents[3]
UNILAB_PATTERN = "'^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$'"


@pytest.mark.parametrize("kind", ["socket", "unix_socket", "fifo"])
def test_unilab_spelling_of_the_control_pipe_kind_is_accepted(tmp_path, kind: str) -> None:
    summary = make_completed_summary(str(tmp_path))
    _mps(summary)
    _cps(summary)["control_pipe_kind"] = kind
    verdict = judge_run_dir(
        make_run_dir(tmp_path, summary), monitor_reasons=[], monitor_classification=None
    )
    assert verdict.status == "passed", verdict.failure_reason


def test_rfc3339_offset_timestamps_are_rejected_by_design_with_the_documented_line(
    tmp_path,
) -> None:
    """UniLab writes '+00:00'; we accept only the Z form, and docs/schemas.md shows the line."""
    summary = make_completed_summary(str(tmp_path))
    summary["start_time_utc"] = "2026-11-29T10:00:00+00:00"
    summary["end_time_utc"] = "2026-11-29T10:31:00+00:00"
    verdict = judge_run_dir(
        make_run_dir(tmp_path, summary), monitor_reasons=[], monitor_classification=None
    )
    line = (
        "run_summary schema violation at $.start_time_utc: "
        f"'2026-11-29T10:00:00+00:00' does not match {UNILAB_PATTERN}"
    )
    assert verdict.failure_classification == SV
    assert verdict.reasons == [line.replace("start", "end").replace("10:00:00", "10:31:00"), line]
    assert line in (REPO / "docs" / "schemas.md").read_text(encoding="utf-8")


# -- damaged run directories: the summary's file, the other artifacts, the learning verdict ----
class RunDirCase(NamedTuple):
    id: str
    damage: Callable[[Path], None]
    """Damages the valid completed run directory it is given."""
    classification: str
    reason: str
    learning: LearningCfg | None = None
    """Judge the learning verdict too, with these settings."""


def _summary_text(run: Path, old: str, new: str | bytes) -> None:
    path = run / "run_summary.json"
    text = path.read_text(encoding="utf-8")
    assert old in text
    if isinstance(new, bytes):
        path.write_bytes(text.encode("utf-8").replace(old.encode("utf-8"), new))
    else:
        path.write_text(text.replace(old, new), encoding="utf-8")


def _summary(run: Path, summary: Doc) -> None:
    write_json_atomic(run / "run_summary.json", summary)


def _empty_checkpoint(run: Path) -> None:
    (run / "model_20.pt").write_bytes(b"")


def _evaluation(run: Path, doc: Doc) -> None:
    write_evaluation(run, doc)
    summary = load_strict(run / "run_summary.json")
    summary["evaluation"] = summary_section(doc)
    write_json_atomic(run / "run_summary.json", summary)


def _evaluation_of_another_checkpoint(run: Path) -> None:
    doc = make_evaluation(HEALTHY_CURVE)
    for point in doc["points"]:
        if point["checkpoint"] is not None:
            point["checkpoint_sha256"] = hashlib.sha256(b"another run's weights").hexdigest()
    _evaluation(run, doc)


def _evaluation_of_a_missing_checkpoint(run: Path) -> None:
    doc = make_evaluation(HEALTHY_CURVE)
    doc["points"][0].update(checkpoint="model_5.pt", checkpoint_sha256="ab" * 32)
    _evaluation(run, doc)


def _declining_learning(run: Path) -> None:
    _evaluation(run, make_evaluation(DECLINING_CURVE))
    write_training_events(run, training_scalars())


W = '"wall_time_sec": 1860.5'
RUN_DIR_CASES = [
    RunDirCase("no-summary", lambda r: (r / "run_summary.json").unlink(), "missing_run_summary",
               "trainer did not write run_summary.json"),
    RunDirCase("nan-token", lambda r: _summary_text(r, W, '"wall_time_sec": NaN'),
               "invalid_run_summary", "non-finite number token"),
    RunDirCase("infinity-token", lambda r: _summary_text(r, W, '"wall_time_sec": Infinity'),
               "invalid_run_summary", "non-finite number token"),
    RunDirCase("1e400", lambda r: _summary_text(r, W, '"wall_time_sec": 1e400'),
               "invalid_run_summary", "number 1e400 is not finite"),
    RunDirCase("duplicate-key", lambda r: _summary_text(r, W, f"{W}, {W}"),
               "invalid_run_summary", "duplicate key 'wall_time_sec'"),
    RunDirCase("not-utf8", lambda r: _summary_text(r, '"flashsac"', b'"flash\xffsac"'),
               "invalid_run_summary", "run_summary.json is invalid"),
    RunDirCase("not-an-object", lambda r: (r / "run_summary.json").write_text("[1, 2]"),
               "invalid_run_summary", "top-level value at $ is an array"),
    RunDirCase("failed-without-shutdown",
               lambda r: _summary(r, {**make_failed_summary(), "runtime_manifest": {"schema_version": 1}}),
               UF, "shutdown diagnostics are unavailable"),
    RunDirCase("failed-claiming-normal",
               lambda r: _summary(r, make_failed_summary("normal_completion")),
               SCV, f"shutdown contract violated at {SD}.classification"),
    RunDirCase("no-run-config", lambda r: (r / "run_config.json").unlink(), SV,
               "run directory is missing required artifacts: run_config.json"),
    RunDirCase("two-event-files",
               lambda r: (r / "events.out.tfevents.1764410401.host.124.0").write_bytes(b""),
               SV, "exactly one events.out.tfevents.* (found 2"),
    RunDirCase("missing-checkpoint", lambda r: (r / "model_20.pt").unlink(), SV,
               "run directory is missing required artifacts: model_20.pt"),
    RunDirCase("zero-byte-checkpoint", _empty_checkpoint, SV, "model_20.pt in"),
    RunDirCase("evaluation-sha256-mismatch", _evaluation_of_another_checkpoint, SV,
               "evaluation.json $.points[0] is the evaluation of another checkpoint"),
    RunDirCase("evaluation-of-a-missing-checkpoint", _evaluation_of_a_missing_checkpoint, SV,
               "evaluation.json $.points[0] evaluated model_5.pt, which is not in"),
    RunDirCase("learning-regression", _declining_learning, "learning_regression",
               "learning regression: final uniform-start R-MPKPE 78.1 mm",
               LearningCfg(mode="enforce")),
    RunDirCase("learning-unverified", lambda r: None, "learning_unverified",
               "learning not verified: run_summary has no evaluation section",
               LearningCfg(mode="enforce")),
]  # fmt: skip


def _judge_damaged(tmp_path: Path, case: RunDirCase):
    run = make_run_dir(tmp_path, make_completed_summary(str(tmp_path)))
    case.damage(run)
    return judge_run_dir(
        run, monitor_reasons=[], monitor_classification=None, learning=case.learning
    )


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in RUN_DIR_CASES])
def test_damaged_run_dir_is_rejected_naming_the_cause(tmp_path, case: RunDirCase) -> None:
    verdict = _judge_damaged(tmp_path, case)
    assert verdict.status == "failed"
    assert verdict.failure_classification == case.classification, verdict.failure_reason
    assert case.reason in verdict.failure_reason
    if case.damage is _empty_checkpoint:
        assert "is empty (0 bytes)" in verdict.failure_reason


# -- docs/soak.md "What the gate checks" and this suite --------------------------------------
SOAK_MD = REPO / "docs" / "soak.md"
GATE_ROWS = {
    # the table's invariant (the start of its first cell) -> the cases above that break it
    "`run_summary.json` exists": ["no-summary"],
    "it is UTF-8, strict JSON": [
        "not-utf8", "nan-token", "infinity-token", "1e400", "duplicate-key", "not-an-object",
    ],
    "the stamps": [
        "stamp-float", "stamp-bool", "stamp-str", "stamp-missing", "manifest-version-2",
        "manifest-version-true", "manifest-version-1.0",
    ],
    "a run that did not complete": ["failed-without-shutdown", "failed-claiming-normal"],
    "the final inference flight is drained": [
        "flight-queue-depth", "flight-publication-lag", "flight-queue-depth-1.0",
        "flight-publication-lag-0.0", "flight-queue-depth-missing",
    ],
    "every replay-ingress": [
        "ri-null", "ri-counter-float", "ri-depth-zero", "ri-release-ahead",
        "ri-occupancy-mismatch", "ri-high-water-zero", "ri-dropped", "ri-closed-plus-stop",
        "steps-vs-chunks",
    ],
    "the completed run's schema": [
        "missing-final-mean-reward", "bad-timestamp", "end-time-newline", "end-time-99",
        "tail-window", "mps-not-validated", "placement-unknown", "iterations-negative",
    ],
    "`run_config.json`, exactly one event file": [
        "no-run-config", "two-event-files", "missing-checkpoint",
    ],
    "at most one tick in flight": ["max-in-flight-5", "tick-in-flight-at-end"],
    "`total_env_steps = (warmup_ticks": ["env-steps-doubled"],
    "a run sized in iterations": ["completed-short-of-budget"],
    "no checkpoint `model_*.pt` is empty": ["zero-byte-checkpoint"],
    "`last_checkpoint` names a file": ["last-checkpoint-nowhere"],
    "every evaluation point that names a checkpoint": [
        "evaluation-sha256-mismatch", "evaluation-of-a-missing-checkpoint",
    ],
    "no acceleration fell back": ["env-fallback", "learner-fallback"],
    "the shutdown record is present": [
        "shutdown-missing", "shutdown-learner-failure", "phase-not-finalize",
        "collector-exit-1", "collector-alive", "shutdown-signal-mismatch",
        "shutdown-cleanup-errors",
    ],
    "the learning verdict": ["learning-regression", "learning-unverified"],
}  # fmt: skip


def _gate_table() -> list[tuple[str, str, str]]:
    """(invariant, reason names, classification) of each row of the table in soak.md."""
    section = SOAK_MD.read_text(encoding="utf-8").split("\n## What the gate checks\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| Invariant | Reason names | Classification |")
    cells = [[c.strip() for c in row.strip("|").split(" | ")] for row in rows[1:]]
    assert all(len(c) == 3 for c in cells), [c for c in cells if len(c) != 3]
    return [(c[0], c[1], c[2]) for c in cells]


def _row_key(invariant: str) -> str:
    keys = [key for key in GATE_ROWS if invariant.startswith(key)]
    assert len(keys) == 1, f"soak.md row {invariant!r} matches {keys or 'no'} GATE_ROWS key"
    return keys[0]


def _reason_pattern(text: str) -> re.Pattern[str]:
    """A table's reason text as a pattern: ``...`` and ``<name>`` stand for any text."""
    parts = re.split(r"\.\.\.|<[^>]+>", text)
    return re.compile(".*?".join(re.escape(part) for part in parts), re.DOTALL)


def _judge_case(case_id: str, tmp_path: Path):
    for case in CASES:
        if case[0] == case_id:
            summary = make_completed_summary(str(tmp_path))
            case[1](summary)
            return judge_run_dir(
                make_run_dir(tmp_path, summary), monitor_reasons=[], monitor_classification=None
            )
    (case,) = [c for c in RUN_DIR_CASES if c.id == case_id]
    return _judge_damaged(tmp_path, case)


def test_every_invariant_soak_md_lists_has_mutation_cases() -> None:
    table = _gate_table()
    keys = [_row_key(invariant) for invariant, _, _ in table]
    assert sorted(keys) == sorted(GATE_ROWS), "a GATE_ROWS key names no soak.md row"
    known = {c[0] for c in CASES} | {c.id for c in RUN_DIR_CASES}
    assert all(GATE_ROWS[key] for key in keys)
    assert {i for ids in GATE_ROWS.values() for i in ids} <= known


@pytest.mark.parametrize(
    ("invariant", "reasons", "classifications"),
    [pytest.param(*row, id=_row_key(row[0])) for row in _gate_table()],
)
def test_each_documented_invariant_fails_as_soak_md_says(
    tmp_path: Path, invariant: str, reasons: str, classifications: str
) -> None:
    """Every case of a row fails with one of the row's classifications and a reason of the
    row's form; together they give every classification and every reason form it names."""
    allowed = set(re.findall(r"`([a-z_]+)`", classifications))
    forms = re.findall(r"`([^`]+)`", reasons) or re.findall(r"`([^`]+)`", invariant)
    patterns = [_reason_pattern(form) for form in forms]
    seen_classes, seen_forms = set(), set()
    for index, case_id in enumerate(GATE_ROWS[_row_key(invariant)]):
        verdict = _judge_case(case_id, tmp_path / str(index))
        assert verdict.status == "failed", case_id
        assert verdict.failure_classification in allowed, (case_id, verdict.failure_reason)
        seen_classes.add(verdict.failure_classification)
        matched = {i for i, p in enumerate(patterns) if p.search(verdict.failure_reason)}
        assert matched, f"{case_id}: {verdict.failure_reason!r} matches none of {forms}"
        seen_forms |= matched
    assert seen_classes == allowed, f"no case gives {allowed - seen_classes}"
    assert seen_forms == set(range(len(forms))), (
        f"no case gives {[forms[i] for i in set(range(len(forms))) - seen_forms]}"
    )
