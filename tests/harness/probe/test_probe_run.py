"""Real g1-backend-probe runs at a tiny size on the CPU mujoco backend: a schema-valid 0.3.0
document, the per-backend line and table, acceptance mode end to end with a fake idle GPU,
and process isolation (a crashing or failing backend child is reported, not hidden)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.schemas import validate
from harness.probe.cli import PHASES

UUID = "GPU-11111111-2222-3333-4444-555555555555"
CRASH_DIR = Path(__file__).with_name("crash_child")
TINY = ("--num-envs", "4", "--warmup", "1", "--iters", "3")
LINE_PREFIX = "mujoco: "
LINE_MIDDLE = " env control steps/s; iteration="


def _errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def _check_mujoco_result(result: dict, iters: int) -> None:
    assert result["status"] == "passed" and result["failure_reason"] is None
    assert result["exit_code"] == 0
    assert result["tensor_execution"] == "host_bridge"
    assert result["num_envs"] == 4 and result["iters"] == iters
    assert result["physics_substeps_per_control_step"] == 3
    assert result["scheduled_reset_rows"] == 1
    assert (
        result["reset_policy"]["stride"] == 4
        and result["reset_policy"]["terminated_reset"] is False
    )
    assert result["seeds"]["numpy_synthetic_workload"] == 7 and result["seeds"]["torch_cuda"] == 7
    phases = result["phases"]
    assert set(phases) == set(PHASES)
    assert all(p["iters"] == iters for p in phases.values())
    mean_s = phases["iteration_ms"]["mean_ms"] / 1000.0
    assert result["throughput_env_control_steps_per_s"] == pytest.approx(4 / mean_s)
    assert result["throughput_physics_substeps_per_s"] == pytest.approx(3 * 4 / mean_s)
    inventory = {row["phase"]: row for row in result["transfer_inventory"]}
    assert len(result["transfer_inventory"]) == 8
    assert inventory["control"]["direction"] == "d2h"
    assert inventory["replay_publication"]["semantic_limit_per_control_step"] is None
    stats = result["host_bridge_transfer_stats"]
    # One step (d2h ctrl + h2d state) and one non-empty reset (d2h commit + h2d publish) per
    # iteration: exactly 2 of each per measured iteration.
    assert stats["d2h_count"] == 2 * iters and stats["h2d_count"] == 2 * iters
    assert stats["synchronization_count"] == 2 * iters
    assert result["backend_diagnostics"]["available"] is False


@pytest.mark.slow
def test_mujoco_run_writes_a_schema_valid_document_json_and_plot(
    run_probe, probe_env, tmp_path
) -> None:
    out = tmp_path / "res" / "probe.json"
    png = tmp_path / "phases.png"
    env = {**probe_env, "FAKE_SMI_APPS": f"4242,python3,900,{UUID}"}  # busy: recorded, not fatal
    proc = run_probe(
        "--backends", "mujoco", *TINY, "--output", str(out), "--json", "--plot", str(png), env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert _errors(proc.stderr) == []
    doc = json.loads(proc.stdout)
    assert doc == json.loads(out.read_text())
    assert validate(doc, "backend_probe.0.3.0.json") == []
    assert doc["status"] == "passed" and doc["acceptance_mode"] is False
    assert doc["scope"] == "phase-local" and doc["process_isolation"] == "one_process_per_backend"
    assert doc["versions"]["torch"] != "not-installed"
    assert doc["source"]["commit"] is not None and isinstance(doc["source"]["dirty"], bool)
    assert doc["invocation"]["argv"][-1] == str(png)
    (result,) = doc["results"]
    _check_mujoco_result(result, iters=3)
    assert result["gpu_snapshots"]["before"]["compute_apps"][0]["pid"] == 4242
    assert "after_run_gpu_quiesce_wait_s" not in result
    assert any(
        line.startswith(LINE_PREFIX) and LINE_MIDDLE in line for line in proc.stderr.splitlines()
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_acceptance_run_passes_on_an_idle_gpu(run_probe, tmp_path) -> None:
    out = tmp_path / "probe.json"
    proc = run_probe("--backends", "mujoco", *TINY, "--acceptance", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(LINE_PREFIX) and LINE_MIDDLE in lines[0] and lines[0].endswith(" ms")
    assert any(line.startswith("| mujoco") and "passed" in line for line in lines)
    doc = json.loads(out.read_text())
    assert validate(doc, "backend_probe.0.3.0.json") == []
    (result,) = doc["results"]
    _check_mujoco_result(result, iters=3)
    snaps = result["gpu_snapshots"]
    assert snaps["before"]["source"] == "nvidia-smi"
    assert snaps["child_before_cuda_init"]["gpus"][0]["uuid"] == UUID
    assert snaps["after"]["compute_apps"] == []
    assert isinstance(result["after_run_gpu_quiesce_wait_s"], float)
    assert doc["runtime"]["driver_version"] == "580.95.05" and doc["runtime"]["gpu_uuid"] == UUID


@pytest.mark.slow
def test_crashing_backend_child_is_reported_and_the_json_written(
    run_probe, probe_env, tmp_path
) -> None:
    out = tmp_path / "probe.json"
    env = {
        **probe_env,
        "PYTHONPATH": f"{CRASH_DIR}{os.pathsep}{probe_env['PYTHONPATH']}",
        "FAKE_PROBE_CHILD_CRASH": "1",
    }
    proc = run_probe("--backends", "mujoco", *TINY, "--output", str(out), env=env)
    assert proc.returncode == 1
    errors = _errors(proc.stderr)
    assert len(errors) == 1 and "killed by signal 6" in errors[0]
    doc = json.loads(out.read_text())
    assert validate(doc, "backend_probe.0.3.0.json") == []
    (result,) = doc["results"]
    assert doc["status"] == "failed" and result["status"] == "failed"
    assert result["exit_code"] == -6
    assert "fake backend crash: SIGABRT" in result["failure_reason"]
    assert "fake backend crash: SIGABRT" in result["stderr_tail"]


@pytest.mark.slow
def test_mjwarp_without_cuda_fails_closed_in_the_child(run_probe, tmp_path) -> None:
    out = tmp_path / "probe.json"
    proc = run_probe("--backends", "mjwarp", *TINY, "--output", str(out))
    assert proc.returncode == 1
    doc = json.loads(out.read_text())
    assert validate(doc, "backend_probe.0.3.0.json") == []
    (result,) = doc["results"]
    assert result["exit_code"] == 1
    assert "sim backend 'mjwarp' needs CUDA" in result["failure_reason"]
    assert doc["failure_reason"].startswith("mjwarp: sim backend 'mjwarp' needs CUDA")
    errors = _errors(proc.stderr)
    assert errors[-1].startswith("error: mjwarp: sim backend 'mjwarp' needs CUDA")


def test_harness_commands_never_import_torch_mujoco_or_warp() -> None:
    code = (
        "import sys\n"
        "import harness.probe.cli, harness.probe.result, contracts.gpu_snapshot\n"
        "import harness.support.cli, harness.support.matrix\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'mujoco', 'warp', 'mujoco_warp', 'trainer'))\n"
        "print(','.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""
