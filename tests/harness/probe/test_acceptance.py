"""Acceptance mode of g1-backend-probe through the real parent process, with a fake
``nvidia-smi`` on PATH and a fake or failing NVML: every refusal exits 1, names the reason on
one ``error:`` line and still writes a schema-valid document with ``status: "failed"``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from contracts.gpu_snapshot import PROFILER_ENV_KEYS
from contracts.schemas import validate

UUID = "GPU-11111111-2222-3333-4444-555555555555"
OTHER = "GPU-99999999-8888-7777-6666-555555555555"
FAKE_NVML_DIR = Path(__file__).with_name("fake_nvml")
ARGS = ("--backends", "mujoco", "--num-envs", "4", "--warmup", "1", "--iters", "2", "--acceptance")


def _errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def _failed_document(proc, out: Path, needle: str) -> dict:
    assert proc.returncode == 1, proc.stderr
    errors = _errors(proc.stderr)
    assert len(errors) == 1, proc.stderr
    assert needle in errors[0]
    doc = json.loads(out.read_text())
    assert validate(doc, "backend_probe.0.3.0.json") == []
    assert doc["status"] == "failed" and needle in doc["failure_reason"]
    assert doc["acceptance_mode"] is True
    return doc


@pytest.mark.parametrize("key", PROFILER_ENV_KEYS)
def test_profiler_variable_refuses_before_any_child(run_probe, probe_env, tmp_path, key) -> None:
    out = tmp_path / "p.json"
    env = {**probe_env, key: ""}
    proc = run_probe(*ARGS, "--output", str(out), env=env)
    doc = _failed_document(proc, out, "acceptance mode refuses profiler environment variables")
    assert key in doc["failure_reason"]
    assert doc["results"] == []  # nothing was launched
    assert doc["environment"][key] == ""


def test_busy_probed_gpu_fails_before_run(run_probe, probe_env, tmp_path) -> None:
    out = tmp_path / "p.json"
    env = {**probe_env, "FAKE_SMI_APPS": f"4242,python3,900,{UUID}"}
    proc = run_probe(*ARGS, "--output", str(out), env=env)
    doc = _failed_document(
        proc, out, "requires an idle GPU before-run; active PIDs: 4242 (python3)"
    )
    (result,) = doc["results"]
    assert result["backend"] == "mujoco" and result["status"] == "failed"
    assert result["exit_code"] is None  # the child never started
    assert result["gpu_snapshots"]["before"]["compute_apps"][0]["pid"] == 4242


def test_busy_gpu_stops_the_remaining_backends(run_probe, probe_env, tmp_path) -> None:
    out = tmp_path / "p.json"
    env = {**probe_env, "FAKE_SMI_APPS": f"4242,python3,900,{UUID}"}
    proc = run_probe("--backends", "mujoco,mjwarp", "--acceptance", "--output", str(out), env=env)
    doc = _failed_document(proc, out, "requires an idle GPU before-run")
    assert [r["backend"] for r in doc["results"]] == ["mujoco"]


@pytest.mark.parametrize(
    ("env_update", "needle"),
    [
        pytest.param({"PATH": "/nonexistent"}, "nvidia-smi not found on PATH", id="smi-missing"),
        pytest.param({"FAKE_SMI_FAIL": "1"}, "nvidia-smi failed (exit 9)", id="smi-erroring"),
        pytest.param({"FAKE_SMI_GPUS": ""}, "no GPU was listed (gpus is empty)", id="empty-gpus"),
    ],
)
def test_unqueryable_gpu_fails_before_run(
    run_probe, probe_env, tmp_path, env_update, needle
) -> None:
    out = tmp_path / "p.json"
    env = {**probe_env, **env_update}
    if env_update.get("PATH") == "/nonexistent":
        env["PATH"] = os.pathsep.join(p for p in probe_env["PATH"].split(os.pathsep)[1:])
    proc = run_probe(*ARGS, "--output", str(out), env=env)
    doc = _failed_document(proc, out, "requires a queryable GPU before-run")
    assert needle in doc["failure_reason"]


def test_fake_nvml_reports_the_busy_gpu(run_probe, probe_env, tmp_path) -> None:
    out = tmp_path / "p.json"
    env = {
        **probe_env,
        "G1SOAK_PROBE_GPU_QUERY": "auto",
        "PYTHONPATH": f"{FAKE_NVML_DIR}{os.pathsep}{probe_env['PYTHONPATH']}",
        "FAKE_NVML_PIDS": "777",
    }
    proc = run_probe(*ARGS, "--output", str(out), env=env)
    doc = _failed_document(proc, out, "requires an idle GPU before-run; active PIDs: 777")
    assert doc["results"][0]["gpu_snapshots"]["before"]["source"] == "nvml"
    assert doc["runtime"]["driver_version"] == "580.95.05"


def test_failing_nvml_and_busy_fallback_names_both(run_probe, probe_env, tmp_path) -> None:
    out = tmp_path / "p.json"
    env = {
        **probe_env,
        "G1SOAK_PROBE_GPU_QUERY": "auto",
        "PYTHONPATH": f"{FAKE_NVML_DIR}{os.pathsep}{probe_env['PYTHONPATH']}",
        "FAKE_NVML": "fail",
        "FAKE_SMI_APPS": f"31337,blender,10,{UUID}",
    }
    proc = run_probe(*ARGS, "--output", str(out), env=env)
    doc = _failed_document(proc, out, "active PIDs: 31337 (blender)")
    before = doc["results"][0]["gpu_snapshots"]["before"]
    assert before["source"] == "nvidia-smi" and "nvml unavailable" in before["notes"][0]


@pytest.mark.slow
def test_app_on_another_gpu_does_not_block_but_is_recorded(run_probe, probe_env, tmp_path) -> None:
    # The child fails closed right away (mjwarp needs CUDA), so this stays fast; what matters is
    # that the parent got past the before-run check and recorded the foreign app.
    out = tmp_path / "p.json"
    env = {
        **probe_env,
        "FAKE_SMI_GPUS": f"0,{UUID},NVIDIA H200,580.1;1,{OTHER},NVIDIA H200,580.1",
        "FAKE_SMI_APPS": f"99,other-job,10,{OTHER}",
    }
    proc = run_probe("--backends", "mjwarp", "--acceptance", "--output", str(out), env=env)
    doc = json.loads(out.read_text())
    (result,) = doc["results"]
    assert proc.returncode == 1
    assert "requires an idle GPU" not in doc["failure_reason"]
    assert result["exit_code"] == 1  # the child ran
    assert result["gpu_snapshots"]["before"]["compute_apps"][0]["gpu_uuid"] == OTHER
