"""The GPU side of a cell on CPU: pinning Ray's GPU id to a physical UUID, and the campaign's
cumps daemons (one per GPU) against the fake nvidia-smi and nvidia-cuda-mps-control of the
cumps tests (real Unix sockets, real daemon processes; the sandbox asserts none survive)."""

from __future__ import annotations

import os

import pytest

from contracts import procfs
from contracts.mps import records
from harness.campaign import mps_fleet
from harness.campaign.cell import AttemptRequest, CellSetupError, cell_environment, pin_gpu
from harness.campaign.child import PARENT_PID_ENV
from harness.mps import cli as cumps_cli

GPU0 = "GPU-0a1b2c3d-1111-2222-3333-444455556666"
GPU1 = "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff"
CID = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def two_gpus(sandbox):
    sandbox.set_gpus([(0, GPU0, "NVIDIA H200"), (1, GPU1, "NVIDIA H200")])
    return sandbox


def _request(*, gpus: float, mps: bool) -> AttemptRequest:
    return AttemptRequest(CID, "/unused", "base-s1-synthetic-mjwarp", 1, (), gpus, mps)


def test_ray_gpu_ids_pin_the_physical_gpu_and_cpu_cells_see_none(two_gpus) -> None:
    assert pin_gpu(["1"], 1.0) == (
        {"CUDA_VISIBLE_DEVICES": GPU1, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
        GPU1,
    )
    assert pin_gpu([GPU0], 0.5)[1] == GPU0  # a raylet started with UUIDs hands out UUIDs
    assert pin_gpu([], 0.0) == ({"CUDA_VISIBLE_DEVICES": ""}, None)
    with pytest.raises(CellSetupError, match=r"GPU ids \['0', '1'\].*expected exactly one"):
        pin_gpu(["0", "1"], 1.0)
    with pytest.raises(CellSetupError, match="Ray's GPU id '7' names no GPU NVML lists"):
        pin_gpu(["7"], 1.0)


def test_campaign_runs_one_daemon_per_gpu_and_each_cell_uses_its_own(two_gpus) -> None:
    started = mps_fleet.start_node_daemons(CID)
    names = [record.name for record in started]
    assert names == ["campaign-01234567-gpu0", "campaign-01234567-gpu1"]
    assert [record.gpu_uuids for record in started] == [(GPU0,), (GPU1,)]
    for record in started:  # ownership evidence, as `cumps start` writes it
        assert procfs.is_same_process(record.pid, record.process_start_ticks)
        assert records.record_path(record.name).is_file()

    env, uuid = cell_environment(_request(gpus=1.0, mps=True), ["1"])
    assert uuid == GPU1 and env["CUDA_VISIBLE_DEVICES"] == GPU1
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == started[1].pipe_directory
    assert env["CUDA_MPS_LOG_DIRECTORY"] == started[1].log_directory
    assert env[PARENT_PID_ENV] == str(os.getpid())
    plain, _ = cell_environment(_request(gpus=1.0, mps=False), ["0"])
    assert plain["CUDA_VISIBLE_DEVICES"] == GPU0 and "CUDA_MPS_PIPE_DIRECTORY" not in plain

    results = mps_fleet.stop_daemons(names)
    assert [(name, stopped) for name, stopped, _ in results] == [(n, True) for n in names]
    assert records.live_records() == []
    for record in started:
        assert not procfs.is_same_process(record.pid, record.process_start_ticks)
    with pytest.raises(CellSetupError, match="0 live campaign MPS daemons"):
        cell_environment(_request(gpus=1.0, mps=True), ["1"])


def test_a_foreign_daemon_on_a_gpu_stops_the_campaign_before_any_cell(two_gpus, capsys) -> None:
    assert cumps_cli.main(["start", "--gpus", "1"]) == 0  # the user's own daemon
    capsys.readouterr()
    with pytest.raises(mps_fleet.CampaignMpsError, match=r"'gpu-9f8e7d6c.*' already covers"):
        mps_fleet.start_node_daemons(CID)
    live = records.live_records()
    assert [record.name for record in live] == ["gpu-" + GPU1[4:]]  # gpu0's was stopped again
    assert cumps_cli.main(["stop", "--all"]) == 0


def test_a_resumed_campaign_replaces_the_daemons_its_killed_run_left(two_gpus) -> None:
    left = mps_fleet.start_node_daemons(CID)
    fresh = mps_fleet.start_node_daemons(CID)
    assert [r.name for r in fresh] == [r.name for r in left]
    for old in left:
        assert not procfs.is_same_process(old.pid, old.process_start_ticks)
    assert {r.pid for r in records.live_records()} == {r.pid for r in fresh}
    mps_fleet.stop_daemons([r.name for r in fresh])
