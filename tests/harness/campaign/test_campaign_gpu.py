"""A GPU campaign for real (skipped without CUDA): two mjwarp cells with MPS at a small size on
a local Ray instance. With two or more GPUs each cell gets its own GPU; with one, the cells ask
for half a GPU each (packing) and share it. Both run at the same time, each through the
campaign's cumps daemon of its GPU, and every daemon is stopped at the end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from contracts.jsonio import load_strict
from contracts.mps import records
from contracts.mps.gpus import GpuDiscoveryError, discover_gpus
from contracts.schemas import validate

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

BIN = Path(sys.executable).parent
RAY_TEST_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
}


def _gpu_count() -> int:
    try:
        return len(discover_gpus())
    except GpuDiscoveryError:
        return 0


def _overlap(a: dict, b: dict) -> bool:
    return a["started_at_utc"] < b["ended_at_utc"] and b["started_at_utc"] < a["ended_at_utc"]


def test_two_mps_cells_run_at_once_each_pinned_to_its_gpu(
    tmp_path, write_campaign, campaign_doc, isolated_cache
) -> None:
    if shutil.which("nvidia-cuda-mps-control") is None:
        pytest.skip("nvidia-cuda-mps-control is not on PATH")
    pytest.importorskip("ray", reason="the campaign extra (Ray) is not installed")
    if not (BIN / "soak-campaign").exists():
        pytest.skip(f"soak-campaign is not installed next to {sys.executable}")
    gpus = _gpu_count()
    packed = gpus < 2
    path = write_campaign(
        campaign_doc(
            directory=str(tmp_path / "campaign"),
            seeds=[1, 2],
            sims={"mjwarp": {"num_envs": 256, "iterations": 300}},
            overrides={"mps": ["training.cuda_process_sharing=mps"]},
            soak={"min_duration_seconds": 0, "sample_interval_seconds": 1},
            gpus_per_cell=0.5 if packed else 1,
        )
    )
    temp = Path(tempfile.mkdtemp(dir="/tmp", prefix="rg"))
    env = {**os.environ, **RAY_TEST_ENV, "RAY_TMPDIR": str(temp)}
    try:
        proc = subprocess.run(
            [str(BIN / "soak-campaign"), "run", str(path)],
            env=env, capture_output=True, text=True, timeout=3000, check=False,
        )  # fmt: skip
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-6000:]
    doc = load_strict(tmp_path / "campaign" / "campaign.json")
    assert validate(doc, "campaign_result.v1.json") == []
    first, second = (cell["attempts"][-1] for cell in doc["cells"])
    assert [first["status"], second["status"]] == ["passed", "passed"]
    uuids = {first["gpu_uuid"], second["gpu_uuid"]}
    assert None not in uuids and len(uuids) == (1 if packed else 2)
    assert _overlap(first, second)  # one soak per GPU, at the same time
    prefix = f"campaign-{doc['campaign_id'][:8]}-gpu"
    for attempt in (first, second):
        sharing = attempt["cuda_process_sharing"]
        assert (sharing["effective"], sharing["validated"]) == ("mps", True)
        assert sharing["selected_record"].startswith(prefix)
        assert sharing["learner_gpu_uuid"] == attempt["gpu_uuid"]
    daemons = doc["mps"]["daemons"]
    assert len(daemons) == gpus and all(d["stopped"] for d in daemons)
    assert records.live_records() == []
