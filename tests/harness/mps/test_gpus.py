"""Selector parsing and GPU discovery for cumps (docs/contracts.md §cumps topology modes)."""

from __future__ import annotations

import os

import pytest

from contracts.errors import HarnessError, UsageError
from contracts.mps.gpus import (
    MULTI_GPU_GATE,
    GpuDiscoveryError,
    GpuInfo,
    canonical_uuid,
    discover_gpus,
    parse_nvidia_smi_csv,
    resolve_topology,
    topology_modes_report,
    visible_device_uuids,
)

U0 = "GPU-0a1b2c3d-1111-2222-3333-444455556666"
U1 = "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff"
ONE = [GpuInfo(0, U0, "H200")]
TWO = [GpuInfo(0, U0, "H200"), GpuInfo(1, U1, "H200")]


def test_canonical_uuid_lowercases_and_rejects_mig_and_garbage():
    assert canonical_uuid("gpu-0A1B2C3D-1111-2222-3333-444455556666") == U0
    assert canonical_uuid("MIG-0a1b2c3d-1111-2222-3333-444455556666") is None
    assert canonical_uuid("GPU-1234") is None


def test_no_selector_on_one_gpu_host_is_single_gpu():
    topo = resolve_topology(None, ONE, allow_all=False)
    assert (topo.mode, topo.uuids) == ("single_gpu", [U0])


def test_index_and_uuid_selectors_resolve_to_the_physical_uuid():
    assert resolve_topology("1", TWO, allow_all=False).uuids == [U1]
    assert resolve_topology(U1.upper().replace("GPU-", "gpu-"), TWO, allow_all=False).uuids == [U1]


@pytest.mark.parametrize(
    ("selector", "gpus", "needle"),
    [
        pytest.param(None, TWO, "pass --gpus", id="two-gpus-need-selector"),
        pytest.param("0,1", TWO, MULTI_GPU_GATE, id="comma-list-multi-gpu-gate"),
        pytest.param(f"{U0},{U1}", TWO, MULTI_GPU_GATE, id="comma-list-of-uuids"),
        pytest.param("0,7", TWO, "unknown GPU index", id="comma-list-with-unknown-entry"),
        pytest.param("MIG-0a1b2c3d-1111-2222-3333-444455556666", ONE, "MIG", id="mig-uuid"),
        pytest.param(
            "MIG-GPU-0a1b2c3d-1111-2222-3333-444455556666/1/0", ONE, "MIG", id="old-mig-format"
        ),
        pytest.param("3", ONE, "unknown GPU index", id="unknown-index"),
        pytest.param(U1, ONE, "no such GPU", id="unknown-uuid"),
        pytest.param("GPU-12", ONE, "neither a GPU index nor a full GPU UUID", id="malformed"),
        pytest.param("all", ONE, "read-only diagnostics", id="all-on-start"),
        pytest.param("0,", TWO, "empty entry", id="trailing-comma"),
    ],
)
def test_bad_selectors_fail_closed_with_usage_errors(selector, gpus, needle):
    with pytest.raises(UsageError) as info:
        resolve_topology(selector, gpus, allow_all=False)
    assert needle in str(info.value)


def test_all_is_task_per_gpu_for_diagnostics_only():
    topo = resolve_topology("all", TWO, allow_all=True)
    assert (topo.mode, topo.uuids) == ("task_per_gpu", [U0, U1])


def test_no_gpu_is_a_check_failure_not_usage():
    with pytest.raises(HarnessError) as info:
        resolve_topology(None, [], allow_all=False)
    assert not isinstance(info.value, UsageError)


def test_all_three_topology_modes_are_always_reported():
    assert [m["mode"] for m in topology_modes_report(0)] == [
        "single_gpu",
        "single_task_multi_gpu",
        "task_per_gpu",
    ]


def test_nvidia_smi_csv_parsing():
    gpus = parse_nvidia_smi_csv(
        f"0, {U0.upper().replace('GPU-', 'GPU-')}, NVIDIA H200\n\n1, {U1}, NVIDIA H200, SXM\n"
    )
    assert [(g.index, g.uuid, g.name) for g in gpus] == [
        (0, U0, "NVIDIA H200"),
        (1, U1, "NVIDIA H200, SXM"),
    ]
    with pytest.raises(GpuDiscoveryError):
        parse_nvidia_smi_csv("0, MIG-abc, x\n")


def test_discovery_falls_back_to_nvidia_smi(sandbox):
    assert [g.uuid for g in discover_gpus()] == [os.environ["FAKE_GPUS"].split(",")[1]]


def test_discovery_failure_names_the_cause(sandbox, monkeypatch):
    monkeypatch.setenv("FAKE_SMI_FAIL", "1")
    with pytest.raises(GpuDiscoveryError, match="nvidia-smi exited 9"):
        discover_gpus()


def test_cuda_visible_devices_maps_like_cuda():
    assert visible_device_uuids(None, TWO) is None
    assert visible_device_uuids("1,0", TWO) == [U1, U0]
    assert visible_device_uuids("GPU-9f8e,7", TWO) == [U1]  # stops at the first unknown entry
    assert visible_device_uuids("", TWO) == []
