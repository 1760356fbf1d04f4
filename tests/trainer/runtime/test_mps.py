"""Trainer MPS preflight (docs/contracts.md §cumps steps 1-4) and the §cuda-process-sharing record, against fake MPS tools.

CUDA is not needed: the torch UUID lookup is injected (``cuda_uuid_of``); everything else
(records, fake control daemon on a real Unix socket, fake nvidia-smi) is real.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from contracts.mps import records
from contracts.schemas import validate
from harness.mps import cli
from trainer.runtime.mps import MpsPreflightError, resolve_cuda_process_sharing

_SANDBOX_PATH = Path(__file__).resolve().parents[2] / "harness" / "mps" / "mps_sandbox.py"
_spec = importlib.util.spec_from_file_location("mps_sandbox_for_trainer", _SANDBOX_PATH)
mps_sandbox = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mps_sandbox)

GPU0 = mps_sandbox.GPU0
GPU1 = mps_sandbox.GPU1
KEYS = {
    "configured", "effective", "validated", "rank", "world_size", "learner_device", "collector_device",
    "learner_gpu_uuid", "collector_gpu_uuid", "pipe_directory_env", "pipe_directory", "control_pipe",
    "control_pipe_kind", "server_pid", "ambient_server", "selected_record",
}  # fmt: skip
SECTION = {"$ref": "runtime_manifest.v1.json#/$defs/cuda_process_sharing"}


@pytest.fixture
def sandbox(monkeypatch):
    box = mps_sandbox.MpsSandbox(monkeypatch)
    try:
        yield box
    finally:
        box.close()


def cumps(*argv: str) -> None:
    assert cli.main(list(argv)) == 0


def on(uuid: str):
    return lambda index: uuid


def hand_started(box, name: str) -> tuple[Path, int]:
    pipe, log = box.root / f"{name}p", box.root / f"{name}l"
    for folder in (pipe, log):
        folder.mkdir(mode=0o700)
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(pipe), CUDA_MPS_LOG_DIRECTORY=str(log))
    subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env, check=True, timeout=10)
    deadline = time.monotonic() + 5
    while not (pipe / "control").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return pipe, int((pipe / "nvidia-cuda-mps-control.pid").read_text())


def test_mps_selects_the_single_live_record_and_exports_its_pipe(sandbox):
    cumps("start")
    rec = records.live_records()[0]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0")
    out = resolve_cuda_process_sharing("mps", "cuda:0", environ=env, cuda_uuid_of=on(GPU0))
    assert set(out) == KEYS
    assert validate(out, "runtime_manifest.v1.json", schema=SECTION) == []
    assert out["effective"] == "mps" and out["validated"] is True and out["configured"] == "mps"
    assert out["learner_gpu_uuid"] == out["collector_gpu_uuid"] == GPU0
    assert out["selected_record"] == rec.name
    assert out["pipe_directory_env"] is None
    assert out["pipe_directory"] == rec.pipe_directory
    assert (
        out["control_pipe"] == rec.pipe_directory + "/control"
        and out["control_pipe_kind"] == "socket"
    )
    assert out["server_pid"] == rec.pid  # empty server list -> PID file
    assert env["CUDA_VISIBLE_DEVICES"] == GPU0  # step 1: numeric entry -> UUID
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == rec.pipe_directory
    assert env["CUDA_MPS_LOG_DIRECTORY"] == rec.log_directory
    cumps("stop")


def test_mps_sets_the_process_environment_by_default(sandbox, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_SERVER_LIST", "4242")
    cumps("start")

    class TrainingCfg:
        cuda_process_sharing = "mps"

    out = resolve_cuda_process_sharing(TrainingCfg(), "cuda", cuda_uuid_of=on(GPU0))
    assert out["server_pid"] == 4242  # get_server_list answer wins over the PID file
    assert os.environ["CUDA_MPS_PIPE_DIRECTORY"] == out["pipe_directory"]
    cumps("stop")


def test_explicit_pipe_directory_wins_over_records(sandbox):
    cumps("start")
    pipe, pid = hand_started(sandbox, "h")
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(pipe))
    out = resolve_cuda_process_sharing("mps", "cuda:0", environ=env, cuda_uuid_of=on(GPU0))
    assert out["pipe_directory_env"] == out["pipe_directory"] == str(pipe)
    assert out["selected_record"] is None and out["server_pid"] == pid and out["validated"] is True
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == str(pipe)
    cumps("stop")


def test_no_live_record_fails_naming_cumps_start(sandbox):
    env = dict(os.environ)
    with pytest.raises(MpsPreflightError, match="cumps start") as info:
        resolve_cuda_process_sharing("mps", "cuda:0", environ=env, cuda_uuid_of=on(GPU0))
    assert GPU0 in str(info.value)
    assert "CUDA_MPS_PIPE_DIRECTORY" not in env
    assert info.value.phase == "startup/cuda_preflight"


def test_record_on_another_gpu_does_not_match(sandbox):
    sandbox.set_gpus([(0, GPU0, "H200"), (1, GPU1, "H200")])
    cumps("start", "--gpus", "1")
    with pytest.raises(MpsPreflightError, match="cumps start"):
        resolve_cuda_process_sharing(
            "mps", "cuda:0", environ=dict(os.environ), cuda_uuid_of=on(GPU0)
        )
    cumps("stop")


def test_several_live_records_fail_naming_them_and_cumps_start(sandbox):
    cumps("start")
    rec = records.live_records()[0]
    twin = records.DaemonRecord(**{**rec.to_json(), "name": "twin", "gpu_uuids": rec.gpu_uuids})
    records.write_record(twin)
    with pytest.raises(MpsPreflightError, match="cumps start") as info:
        resolve_cuda_process_sharing(
            "mps", "cuda:0", environ=dict(os.environ), cuda_uuid_of=on(GPU0)
        )
    assert rec.name in str(info.value) and "twin" in str(info.value)
    records.remove_record("twin")
    cumps("stop")


def test_stale_record_is_not_selected(sandbox):
    cumps("start")
    rec = records.live_records()[0]
    path = records.record_path(rec.name)
    doc = rec.to_json()
    doc["process_start_ticks"] += 7
    path.write_text(json.dumps(doc))
    with pytest.raises(MpsPreflightError, match="no live cumps daemon"):
        resolve_cuda_process_sharing(
            "mps", "cuda:0", environ=dict(os.environ), cuda_uuid_of=on(GPU0)
        )


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        pytest.param({"learner_device": "cpu"}, "must both be CUDA devices", id="cpu-learner"),
        pytest.param(
            {"learner_device": "cuda:0", "world_size": 2}, "multi-GPU gate", id="world-size"
        ),
        pytest.param({"learner_device": "cuda:0", "rank": 1}, "0 <= rank < world_size", id="rank"),
        pytest.param(
            {"learner_device": "cuda:0", "cuda_uuid_of": on(GPU1)}, "CUDA maps", id="uuid-mismatch"
        ),
        pytest.param(
            {
                "learner_device": "cuda:0",
                "cuda_uuid_of": lambda i: [GPU0, GPU1][i],
                "collector_device": "cuda:1",
            },
            "different GPUs",
            id="collector-elsewhere",
        ),
    ],
)
def test_probe_failures_fail_closed_naming_cumps_start(sandbox, kwargs, needle):
    cumps("start")
    kwargs = {"cuda_uuid_of": on(GPU0), **kwargs}
    device = kwargs.pop("learner_device")
    with pytest.raises(MpsPreflightError) as info:
        resolve_cuda_process_sharing("mps", device, environ=dict(os.environ), **kwargs)
    assert needle in str(info.value) and "cumps start" in str(info.value)
    cumps("stop")


def test_dead_explicit_pipe_fails_closed(sandbox):
    pipe = sandbox.root / "empty"
    pipe.mkdir()
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(pipe))
    with pytest.raises(MpsPreflightError, match="control pipe .* is missing.*cumps start"):
        resolve_cuda_process_sharing("mps", "cuda:0", environ=env, cuda_uuid_of=on(GPU0))


def test_unknown_visible_index_fails_before_selection(sandbox):
    with pytest.raises(MpsPreflightError, match="CUDA_VISIBLE_DEVICES entry 3 names no GPU"):
        resolve_cuda_process_sharing(
            "mps",
            "cuda:0",
            environ=dict(os.environ, CUDA_VISIBLE_DEVICES="3"),
            cuda_uuid_of=on(GPU0),
        )


def test_bad_mode_is_a_value_error():
    with pytest.raises(ValueError, match="must be null or 'mps'"):
        resolve_cuda_process_sharing("MPS", "cuda:0")


def test_null_mode_records_the_ambient_daemon(sandbox):
    pipe, pid = hand_started(sandbox, "a")
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(pipe), CUDA_VISIBLE_DEVICES="0")
    out = resolve_cuda_process_sharing(None, "cuda:0", environ=env)
    assert set(out) == KEYS
    assert validate(out, "runtime_manifest.v1.json", schema=SECTION) == []
    assert (out["configured"], out["effective"], out["validated"]) == (None, None, False)
    assert out["ambient_server"] is True and out["server_pid"] == pid
    assert out["pipe_directory_env"] == out["pipe_directory"] == str(pipe)
    assert out["control_pipe_kind"] == "socket"
    assert (
        out["learner_gpu_uuid"] == out["collector_gpu_uuid"] == GPU0
    )  # best effort via nvidia-smi
    assert env["CUDA_VISIBLE_DEVICES"] == "0"  # null mode changes nothing


def test_null_mode_without_daemon_uses_the_default_pipe(sandbox):
    out = resolve_cuda_process_sharing(None, "cpu", environ={})
    assert out["pipe_directory_env"] is None and out["pipe_directory"] == "/tmp/nvidia-mps"
    assert out["ambient_server"] is False and out["server_pid"] is None
    assert out["learner_gpu_uuid"] is None
    assert validate(out, "runtime_manifest.v1.json", schema=SECTION) == []


@pytest.mark.parametrize(
    "environ",
    [
        pytest.param(
            {"CUDA_MPS_PIPE_DIRECTORY": "bad\0dir", "CUDA_VISIBLE_DEVICES": "MIG-x,zz"},
            id="nul-and-mig",
        ),
        pytest.param(
            {"CUDA_MPS_PIPE_DIRECTORY": 17, "CUDA_VISIBLE_DEVICES": None}, id="non-string-values"
        ),
        pytest.param({"CUDA_VISIBLE_DEVICES": "99", "PATH": ""}, id="unknown-index-no-tools"),
    ],
)
def test_null_mode_never_raises_on_garbage(sandbox, environ, monkeypatch):
    monkeypatch.setenv("FAKE_SMI_FAIL", "1")
    out = resolve_cuda_process_sharing(
        None, "cuda:7", environ=environ, collector_device=object(), rank="x"
    )
    assert set(out) == KEYS
    assert out["validated"] is False and out["effective"] is None
    assert out["rank"] == 0 and isinstance(out["collector_device"], str)
    assert out["learner_gpu_uuid"] is None


_REAL_CLIENT = """
import json, sys
from trainer.runtime.mps import resolve_cuda_process_sharing
from contracts.mps.probe import probe_pipe
out = resolve_cuda_process_sharing("mps", "cuda:0")
import torch
x = torch.randn(2048, 2048, device="cuda")
float((x @ x).sum())
after = probe_pipe(out["pipe_directory"])
out["server_pids_after_cuda_init"] = after.server_pids
print(json.dumps(out))
"""


@pytest.mark.gpu
def test_real_daemon_serves_a_torch_client_and_stops(monkeypatch):
    """On a CUDA host with nvidia-cuda-mps-control: start, a real MPS client, doctor, stop."""
    import shutil
    import sys
    import tempfile

    if shutil.which("nvidia-cuda-mps-control") is None:
        pytest.skip("needs nvidia-cuda-mps-control on PATH")
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="cmg"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(root / "c"))
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    for key in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"):
        monkeypatch.delenv(key, raising=False)
    try:
        assert cli.main(["start"]) == 0
        (rec,) = records.live_records()
        print("pipe dir:", sorted(p.name for p in Path(rec.pipe_directory).iterdir()))
        repo = Path(__file__).resolve().parents[3]
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])
        )
        client = subprocess.run(
            [sys.executable, "-c", _REAL_CLIENT],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
        assert client.returncode == 0, client.stderr[-4000:]
        out = json.loads(client.stdout.strip().splitlines()[-1])
        print("client record:", out)
        assert out["effective"] == "mps" and out["validated"] is True
        assert out["selected_record"] == rec.name and out["learner_gpu_uuid"] == rec.gpu_uuids[0]
        assert isinstance(out["server_pid"], int)
        assert cli.main(["doctor"]) == 0
        print("log dir:", sorted(p.name for p in Path(rec.log_directory).iterdir()))
    finally:
        cli.main(["stop", "--all"])
        assert records.live_records() == []
        shutil.rmtree(root, ignore_errors=True)
