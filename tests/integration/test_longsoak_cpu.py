"""The long-soak check without a GPU: ``soak-run`` drives the real CPU trainer for a
20-minute time budget, so the trend detector judges a real 20-minute trace.

Marked ``longsoak`` (and ``slow``): ``pyproject.toml`` deselects it by default, so
``uv run pytest`` (the CI command) never runs it. Run it on purpose with
``uv run pytest -m longsoak`` (about 21 minutes; set ``G1SOAK_LONGSOAK_MINUTES`` for another
length of at least 20, and ``G1SOAK_LONGSOAK_TRACE=/abs/path.json`` to keep the trace in the
fixture format that ``python -m harness.soak.power`` reads). docs/soak.md records a run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.jsonio import load_strict, loads_strict, write_json_atomic
from contracts.schemas import validate

pytestmark = [pytest.mark.slow, pytest.mark.longsoak]

BIN = Path(sys.executable).parent
MINUTES = float(os.environ.get("G1SOAK_LONGSOAK_MINUTES", "20"))
pytestmark.append(pytest.mark.timeout(MINUTES * 60 + 600))  # the budget, then startup and judging
COLUMNS = ["elapsed_s", "rss_kib", "fd_count", "eventfd_fds", "shared_memory_fds",
           "process_count", "bytes_total"]  # fmt: skip


def _trace(doc: dict) -> dict:
    rows = []
    for s in doc["samples"]:
        p, classes = s["process"], s["process"]["fd_classes_total"]
        rows.append([s["elapsed_s"], p["rss_kib_total"], p["fd_count_total"], classes["eventfd"],
                     classes["shared_memory"], p["process_count"], s["progress"]["bytes_total"]])  # fmt: skip
    return {
        "description": f"soak-run of the real CPU trainer for {MINUTES:g} minutes "
        "(tests/integration/test_longsoak_cpu.py). Columns as named.",
        "columns": COLUMNS,
        "rows": rows,
    }


def test_a_20_minute_soak_of_the_real_cpu_trainer_has_bounded_trends(
    tmp_path: Path, isolated_cache
) -> None:
    assert MINUTES >= 20, "the long-soak scenario is at least 20 minutes"
    budget_s = int(MINUTES * 60)
    log_dir, artifact = tmp_path / "run", tmp_path / "soak.json"
    command = [
        sys.executable, "-m", "trainer", "train",
        "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mujoco",
        "algo.num_envs=16", "algo.batch_size=256", "algo.max_iterations=null",
        f"training.duration_seconds={budget_s}", "training.device=cpu", "training.no_play=true",
        "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz",
        f"training.log_dir={log_dir}",  # soak-run's {log_dir} only replaces whole arguments
    ]  # fmt: skip
    soak = subprocess.run(
        [
            str(BIN / "soak-run"), "--json",
            "--min-duration-seconds", str(budget_s), "--sample-interval-seconds", "5",
            "--log-dir", str(log_dir), "--output", str(artifact), "--", *command,
        ],
        check=False, capture_output=True, text=True, timeout=budget_s + 900,
    )  # fmt: skip
    doc = load_strict(artifact)
    trace_path = os.environ.get("G1SOAK_LONGSOAK_TRACE")
    if trace_path:
        write_json_atomic(Path(trace_path), _trace(doc))
    assert soak.returncode == 0, (doc["failure_reason"], soak.stderr[-4000:])
    assert validate(doc, "soak_artifact.0.3.0.json") == []
    assert loads_strict(soak.stdout)["status"] == "passed"
    # soak-run learned the plan from run_config.json: the windows scale to the budget.
    assert doc["budget"]["kind"] == "duration" and doc["budget"]["duration_s"] == budget_s
    assert doc["budget"]["reached"]["stopped_by"] == "duration"
    trends = doc["resource_trends"]
    assert trends["window_rule"] == "scaled" and trends["planned_length_s"] == budget_s
    assert trends["anchor"] == "training_progress"
    verdicts = {name: s["verdict"] for name, s in trends["series"].items()}
    assert verdicts.pop("gpu_memory_mib") == "unavailable"
    assert set(verdicts.values()) == {"bounded"}, verdicts
    ingress = doc["run_summary"]["runtime_manifest"]["replay_ingress"]
    chunks = doc["run_summary"]["total_env_steps"] // ingress["ingress_slot_rows"]
    assert ingress["published_sequence"] == ingress["release_sequence"] == chunks
