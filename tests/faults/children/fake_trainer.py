"""A well-behaved or subtly wrong trainer: ``fake_trainer.py LOG_DIR CASE [SECONDS]``.

It writes a real run directory, trains (appends progress) for SECONDS (default 0.3), then
writes the run_summary that CASE asks for and exits. Cases are listed in ``CASES``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rundir


def _ri(summary: dict[str, Any]) -> dict[str, Any]:
    return summary["runtime_manifest"]["replay_ingress"]


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(summary: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = summary
        for key in parents:
            node = node[key]
        node[last] = value

    return apply


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def apply(summary: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = summary
        for key in parents:
            node = node[key]
        del node[last]

    return apply


def _occupancy_mismatch(summary: dict[str, Any]) -> None:
    _ri(summary)["release_sequence"] -= 1  # published - release = 1, but occupancy = 0


def _release_exceeds_published(summary: dict[str, Any]) -> None:
    _ri(summary)["release_sequence"] += 1
    _ri(summary)["occupancy"] = 0


def _dropped_batches(summary: dict[str, Any]) -> None:
    _ri(summary).update(dropped_batches=1, early_returns=1, closed_returns=1)


def _returns_unbalanced(summary: dict[str, Any]) -> None:
    _ri(summary).update(closed_returns=1)


def _not_a_multiple(summary: dict[str, Any]) -> None:
    summary["total_env_steps"] += 1


def _sequence_not_total(summary: dict[str, Any]) -> None:
    _ri(summary)["published_sequence"] += 1
    _ri(summary)["release_sequence"] += 1


def _env_steps_doubled(summary: dict[str, Any]) -> None:
    summary["total_env_steps"] *= 2
    _ri(summary)["published_sequence"] *= 2
    _ri(summary)["release_sequence"] *= 2


def _short_of_budget(summary: dict[str, Any]) -> None:
    warmup = summary["runtime_manifest"]["runtime_limits"]["warmup_ticks"]
    summary.update(completed_iterations=20, tail_iteration_count=20)
    summary["total_env_steps"] = (warmup + 20) * _ri(summary)["ingress_slot_rows"]
    _ri(summary).update(published_sequence=warmup + 20, release_sequence=warmup + 20)


def _collector(alive: bool, exitcode: int | None) -> Callable[[dict[str, Any]], None]:
    record = {"alive": alive, "exitcode": exitcode, "signal": None, "signal_name": None}
    return _set("runtime_manifest.shutdown.collector", record)


def _env_fallback(summary: dict[str, Any]) -> None:
    summary["runtime_manifest"]["backend_diagnostics"]["diagnostics"]["task_cuda_graph"] = {
        "requested": True,
        "enabled": False,
        "fell_back": True,
        "disable_reason": "torch CUDA graph capture failed: RuntimeError: z",
    }


def _learner_fallback(summary: dict[str, Any]) -> None:
    summary["runtime_manifest"]["cuda_graph"]["learner"]["fallbacks"] = [
        {"feature": "fusion", "reason": "graph warm-up/capture failed: TypeError('x')"}
    ]


MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "ok": lambda s: None,
    "schema_missing_field": _drop("final_mean_reward"),
    "schema_wrong_type": _set("completed_iterations", "thirty"),
    "stamp_bool": _set("metric_schema_version", True),
    "stamp_float": _set("metric_schema_version", 1.0),
    "stamp_str": _set("metric_schema_version", "1"),
    "manifest_version_2": _set("runtime_manifest.schema_version", 2),
    "manifest_version_float": _set("runtime_manifest.schema_version", 1.0),
    "ri_occupancy_mismatch": _occupancy_mismatch,
    "ri_release_exceeds_published": _release_exceeds_published,
    "ri_dropped_batches": _dropped_batches,
    "ri_returns_unbalanced": _returns_unbalanced,
    "ri_high_water_zero": _set("runtime_manifest.replay_ingress.high_water_occupancy", 0),
    "ri_float_counter": _set("runtime_manifest.replay_ingress.backpressure_waits", 3.0),
    "ri_not_a_multiple": _not_a_multiple,
    "ri_sequence_not_total": _sequence_not_total,
    "ri_missing": _drop("runtime_manifest.replay_ingress"),
    "undrained_inference": _set("runtime_manifest.inference_flight.queue_depth", 1),
    "cleanup_errors": _set(
        "runtime_manifest.shutdown.cleanup",
        {"errors": [{"type": "OSError", "message": "close failed"}]},
    ),
    "completed_without_shutdown": _drop("runtime_manifest.shutdown"),
    "collector_exit_1": _collector(False, 1),
    "collector_alive": _collector(True, None),
    "phase_not_finalize": _set("runtime_manifest.shutdown.phase", "training/learner_update"),
    "env_steps_doubled": _env_steps_doubled,
    "max_in_flight_5": _set("runtime_manifest.inference_flight.max_in_flight", 5),
    "tick_in_flight_at_end": _set("runtime_manifest.inference_flight.in_flight", 1),
    "short_of_budget": _short_of_budget,
    "end_time_newline": _set("end_time_utc", "2026-11-29T10:31:00Z\n"),
    "end_time_99": _set("end_time_utc", "2026-11-29T99:99:99Z"),
    "env_fallback": _env_fallback,
    "learner_fallback": _learner_fallback,
}


def main() -> int:
    log_dir = rundir.log_dir_from_argv()
    case = sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 0.3
    rundir.start_run(log_dir)
    rundir.train_for(log_dir, seconds)
    if case in MUTATIONS:
        summary = rundir.completed(log_dir)
        MUTATIONS[case](summary)
        rundir.write_summary(log_dir, summary)
        return 0
    if case == "recorded_v1_2026_11_29":
        rundir.write_summary(log_dir, rundir.recorded("run_summary.v1.2026-11-29.json"))
        return 0
    if case == "failed_non_utf8_error":
        summary = rundir.failed("learner_failure")
        summary["error"] = "CUDA error in /data/run\udcff: an illegal memory access"
        rundir.write_raw_summary(log_dir, json.dumps(summary))  # ASCII: "\\udcff"
        return 1
    if case == "empty_checkpoint":
        rundir.write_summary(log_dir, rundir.completed(log_dir))
        (log_dir / "model_20.pt").write_bytes(b"")
        return 0
    if case == "last_checkpoint_nowhere":
        summary = rundir.completed(log_dir)
        summary["last_checkpoint"] = str(log_dir / "model_999.pt")
        rundir.write_summary(log_dir, summary)
        return 0
    if case == "evaluation_of_another_checkpoint":
        rundir.write_summary(log_dir, rundir.with_foreign_evaluation(log_dir))
        return 0
    if case == "overflowing_number":
        text = rundir.dumps_strict(rundir.completed(log_dir))
        rundir.write_raw_summary(
            log_dir, text.replace('"wall_time_sec": 1860.5', '"wall_time_sec": 1e400')
        )
        return 0
    if case == "missing_checkpoint":
        rundir.write_summary(log_dir, rundir.completed(log_dir))
        (log_dir / "model_20.pt").unlink()
        return 0
    if case == "no_summary":
        return 0
    if case == "unparseable":
        rundir.write_raw_summary(log_dir, '{"status": "completed", ')
        return 0
    if case == "nan_token":
        rundir.write_raw_summary(log_dir, '{"status": "completed", "wall_time_sec": NaN}')
        return 0
    if case == "non_object":
        rundir.write_raw_summary(log_dir, "[1, 2, 3]\n")
        return 0
    if case == "failed_learner":
        rundir.write_summary(log_dir, rundir.failed("learner_failure"))
        return 1
    if case == "failed_claims_normal":
        rundir.write_summary(log_dir, rundir.failed("normal_completion"))
        return 1
    if case == "failed_without_shutdown":
        summary = rundir.failed("learner_failure")
        del summary["runtime_manifest"]["shutdown"]
        rundir.write_summary(log_dir, summary)
        return 1
    raise SystemExit(f"unknown case {case!r}")


if __name__ == "__main__":
    sys.exit(main())
