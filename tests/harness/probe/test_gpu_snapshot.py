"""GPU snapshot parsing, source selection and the acceptance messages (docs/contracts.md §backend-probe)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from contracts import gpu_snapshot as gs

UUID = "GPU-11111111-2222-3333-4444-555555555555"
OTHER = "GPU-99999999-8888-7777-6666-555555555555"
FAKE_NVML = Path(__file__).with_name("fake_nvml") / "pynvml.py"


def _snapshot(apps: list[dict] | None = None, **extra) -> dict:
    gpus = [
        {"index": 0, "uuid": UUID, "name": "H200", "driver_version": "580", "clocks": {}},
        {"index": 1, "uuid": OTHER, "name": "H200", "driver_version": "580", "clocks": {}},
    ]
    snap = {
        "time_utc": "2026-11-29T00:00:00Z",
        "source": "nvml",
        "gpus": gpus,
        "compute_apps": apps or [],
    }
    snap.update(extra)
    return snap


def _app(pid: int, uuid: str, name: str = "python3") -> dict:
    return {"pid": pid, "process_name": name, "used_gpu_memory": 100, "gpu_uuid": uuid}


def test_parse_smi_gpus_turns_na_into_null() -> None:
    text = f"0, {UUID}, NVIDIA H200, 580.95.05, 1980, 1980, 3201, 1980, 3201, [N/A], 700.00, 143771, 1\n"
    (gpu,) = gs.parse_smi_gpus(text)
    assert gpu["index"] == 0 and gpu["uuid"] == UUID and gpu["driver_version"] == "580.95.05"
    assert gpu["clocks"]["sm_mhz"] == 1980 and gpu["power"] == {"draw_w": None, "limit_w": 700.0}
    assert gpu["memory_total_mib"] == 143771


def test_parse_smi_apps_keeps_commas_in_names_and_unknown_memory() -> None:
    apps = gs.parse_smi_apps(f"4242, my,proc, [N/A], {UUID}\n\n17, python3, 512, {OTHER}\n")
    assert apps == [
        {"pid": 4242, "process_name": "my,proc", "used_gpu_memory": None, "gpu_uuid": UUID},
        {"pid": 17, "process_name": "python3", "used_gpu_memory": 512, "gpu_uuid": OTHER},
    ]


def test_parse_smi_rejects_garbage_rows() -> None:
    with pytest.raises(gs.SnapshotSourceError, match="unexpected GPU row"):
        gs.parse_smi_gpus("No devices were found\n")
    with pytest.raises(gs.SnapshotSourceError, match="unexpected compute-app row"):
        gs.parse_smi_apps("pid, name\n")


def test_idle_snapshot_passes() -> None:
    assert gs.validate_snapshot(_snapshot(), "before-run", environ={}) is None


def test_app_on_the_probed_gpu_fails_with_its_pid() -> None:
    msg = gs.validate_snapshot(_snapshot([_app(4242, UUID)]), "before-run", environ={})
    assert msg is not None
    assert msg.startswith("requires an idle GPU before-run; active PIDs: 4242 (python3)")


def test_app_on_another_gpu_is_only_recorded() -> None:
    snap = _snapshot([_app(4242, OTHER)])
    assert gs.validate_snapshot(snap, "after-run", environ={}) is None
    msg = gs.validate_snapshot(snap, "after-run", environ={"CUDA_VISIBLE_DEVICES": "1"})
    assert msg is not None and "requires an idle GPU after-run; active PIDs: 4242" in msg


def test_cuda_visible_devices_uuid_prefix_selects_the_probed_gpu() -> None:
    snap = _snapshot([_app(7, OTHER)])
    assert gs.probed_gpu_uuid(snap, {"CUDA_VISIBLE_DEVICES": "GPU-99999999"}) == OTHER
    assert (
        gs.validate_snapshot(snap, "before-run", environ={"CUDA_VISIBLE_DEVICES": "GPU-9999"})
        is not None
    )
    msg = gs.validate_snapshot(snap, "before-run", environ={"CUDA_VISIBLE_DEVICES": "MIG-abc"})
    assert msg is not None and "names no listed GPU" in msg


@pytest.mark.parametrize(
    ("snap", "needle"),
    [
        pytest.param(
            _snapshot(errors=["nvidia-smi not found on PATH"]), "nvidia-smi not found", id="errors"
        ),
        pytest.param({**_snapshot(), "gpus": []}, "gpus is empty", id="empty-gpus"),
        pytest.param(
            {k: v for k, v in _snapshot().items() if k != "gpus"}, "no gpus list", id="missing-gpus"
        ),
        pytest.param(
            {k: v for k, v in _snapshot().items() if k != "compute_apps"},
            "no compute_apps",
            id="missing-apps",
        ),
    ],
)
def test_unqueryable_snapshots_fail(snap: dict, needle: str) -> None:
    msg = gs.validate_snapshot(snap, "before-run", environ={})
    assert msg is not None
    assert msg.startswith("requires a queryable GPU before-run; ") and needle in msg


@pytest.mark.parametrize("key", gs.PROFILER_ENV_KEYS)
@pytest.mark.parametrize("value", ["", "1"])
def test_each_profiler_variable_is_refused_even_empty(key: str, value: str) -> None:
    msg = gs.profiler_env_failure({key: value, "PATH": "/bin"})
    assert msg is not None and key in msg
    assert gs.profiler_env_failure({"PATH": "/bin"}) is None


def test_wait_for_idle_polls_until_the_gpu_is_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    snaps = iter([_snapshot([_app(1, UUID)]), _snapshot([_app(1, UUID)]), _snapshot()])
    monkeypatch.setattr(gs, "take_snapshot", lambda: next(snaps))
    snap, waited = gs.wait_for_idle({}, timeout_s=5.0, poll_s=0.0)
    assert snap["compute_apps"] == [] and waited >= 0.0
    assert gs.validate_snapshot(snap, "after-run", environ={}) is None


def test_wait_for_idle_gives_up_after_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(gs, "take_snapshot", lambda: calls.append(1) or _snapshot([_app(9, UUID)]))
    snap, waited = gs.wait_for_idle({}, timeout_s=0.05, poll_s=0.01)
    assert len(calls) >= 2 and waited >= 0.05
    assert "active PIDs: 9" in gs.validate_snapshot(snap, "after-run", environ={})


def test_quiesce_defaults_match_the_contract() -> None:
    assert gs.QUIESCE_POLL_S == 0.25 and gs.QUIESCE_TIMEOUT_S == 10.0


def _use_smi(monkeypatch: pytest.MonkeyPatch, smi_bin: Path | None, **fake: str) -> None:
    monkeypatch.setenv("PATH", str(smi_bin) if smi_bin else "/nonexistent")
    monkeypatch.setenv("G1SOAK_PROBE_GPU_QUERY", "nvidia-smi")
    for key in ("FAKE_SMI_GPUS", "FAKE_SMI_APPS", "FAKE_SMI_FAIL"):
        monkeypatch.delenv(key, raising=False)
    for key, value in fake.items():
        monkeypatch.setenv(key, value)


def test_snapshot_through_fake_nvidia_smi(monkeypatch: pytest.MonkeyPatch, smi_bin: Path) -> None:
    _use_smi(
        monkeypatch,
        smi_bin,
        FAKE_SMI_GPUS=f"0,{UUID},NVIDIA H200,580.1",
        FAKE_SMI_APPS=f"55,python3,100,{UUID}",
    )
    snap = gs.take_snapshot()
    assert snap["source"] == "nvidia-smi" and "errors" not in snap
    assert [g["uuid"] for g in snap["gpus"]] == [UUID]
    assert snap["compute_apps"][0]["pid"] == 55


def test_missing_nvidia_smi_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _use_smi(monkeypatch, None)
    snap = gs.take_snapshot()
    assert snap["source"] is None and snap["errors"] == ["nvidia-smi not found on PATH"]


def test_failing_nvidia_smi_is_an_error(monkeypatch: pytest.MonkeyPatch, smi_bin: Path) -> None:
    _use_smi(monkeypatch, smi_bin, FAKE_SMI_FAIL="1")
    snap = gs.take_snapshot()
    assert snap["errors"] and "nvidia-smi failed (exit 9)" in snap["errors"][0]


def _fake_pynvml(monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location("pynvml", FAKE_NVML)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)


def test_nvml_snapshot_reports_busy_apps_and_clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_pynvml(monkeypatch)
    monkeypatch.setenv("G1SOAK_PROBE_GPU_QUERY", "auto")
    monkeypatch.setenv("FAKE_NVML_PIDS", "321")
    monkeypatch.delenv("FAKE_NVML", raising=False)
    snap = gs.take_snapshot()
    assert snap["source"] == "nvml"
    (gpu,) = snap["gpus"]
    assert gpu["name"] == "NVIDIA H200" and gpu["clocks"]["graphics_mhz"] == 1980
    assert gpu["power"] == {"draw_w": None, "limit_w": 700.0}  # unsupported query -> null
    assert snap["compute_apps"] == [
        {"pid": 321, "process_name": "python3", "used_gpu_memory": 512, "gpu_uuid": UUID}
    ]
    assert "active PIDs: 321" in gs.validate_snapshot(snap, "before-run", environ={})


def test_failing_nvml_falls_back_to_nvidia_smi_with_a_note(
    monkeypatch: pytest.MonkeyPatch, smi_bin: Path
) -> None:
    _fake_pynvml(monkeypatch)
    _use_smi(monkeypatch, smi_bin, FAKE_SMI_GPUS=f"0,{UUID},NVIDIA H200,580.1", FAKE_NVML="fail")
    monkeypatch.setenv("G1SOAK_PROBE_GPU_QUERY", "auto")
    snap = gs.take_snapshot()
    assert snap["source"] == "nvidia-smi" and "errors" not in snap
    assert "nvml unavailable" in snap["notes"][0]
    assert gs.validate_snapshot(snap, "before-run", environ={}) is None


def test_pinned_nvml_without_nvml_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_pynvml(monkeypatch)
    monkeypatch.setenv("FAKE_NVML", "fail")
    monkeypatch.setenv("G1SOAK_PROBE_GPU_QUERY", "nvml")
    snap = gs.take_snapshot()
    assert snap["source"] is None and "NVML Shared Library Not Found" in snap["errors"][0]


def test_environment_record_lists_unset_keys_as_null() -> None:
    rec = gs.environment_record({"CUDA_VISIBLE_DEVICES": "0", "CUDA_LAUNCH_BLOCKING": ""})
    assert rec["CUDA_VISIBLE_DEVICES"] == "0" and rec["CUDA_LAUNCH_BLOCKING"] == ""
    assert rec["G1SOAK_PROFILE_TRACE"] is None
    assert set(rec) == {"CUDA_VISIBLE_DEVICES", *gs.PROFILER_ENV_KEYS}
    assert os.environ is not rec
