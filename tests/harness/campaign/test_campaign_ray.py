"""`soak-campaign run` for real on a local Ray cluster (2 CPUs, loopback only), each cell a real
`g1-soak` of the CPU trainer at the README quick start's size, smaller.

- a 2 x 2 matrix (seeds x motions) on a Ray head started with `ray start` (the `--address`
  path): every verdict, the table, campaign.json and the HTML page;
- a campaign interrupted with Ctrl-C while its second cell runs, then `--resume`d: the first
  cell is kept, the second cancelled (its soak wrote an external_cancellation artifact) and run
  again;
- a cell whose Ray worker kills itself at every attempt (local `ray.init()`): retried once, then
  `lost`;
- `soak-campaign regression`: one library clip x 3 seeds, judged over seeds, with the table of
  final vs best per clip and seed. Its learning bounds are loose on purpose: 6 iterations learn
  nothing, and this checks the plumbing (verdicts, points, the olympic score), not the recipe.

Every test but the lost cell's runs on the one Ray head of this module (`cluster`): a head
starts in about 8 s on 2 cores, and the lost cell's worker needs the kill hook in its own
environment, which only a local `ray.init()` started by its driver gives it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.jsonio import load_strict
from contracts.schemas import validate

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
# Loopback only, no usage reports, no token files in HOME, workers in this interpreter.
RAY_TEST_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
}
HEAD_TIMEOUT_S = 180.0
LIBRARY = Path(__file__).parents[3] / ".." / "shared" / "motions" / "g1-moves"
CLIP = "dance/J_Dance18_TikTok.csv"
TINY_CHECK = {
    "schema_version": 1,
    "name": "tiny-regression",
    "directory": "unused",
    "seeds": [1, 2, 3],
    "motions": [f"library:{CLIP}"],
    "sims": {"mujoco": {"num_envs": 4, "iterations": 6}},
    "soak": {
        "min_duration_seconds": 0,
        "sample_interval_seconds": 0.5,
        "post_shutdown_grace_seconds": 0.5,
        "learning_margin": 0.99,
        "learning_tolerance_mm": 10000,
        "extra_overrides": ["algo.batch_size=8", "algo.learning_starts=2", "algo.save_interval=2"],
    },
    "over_seeds": {"window_points": 2},
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _popen_with_default_sigint(argv: list[str], **kwargs: Any) -> subprocess.Popen:
    """Ctrl-C reaches the driver and ``ray.cancel`` (a SIGINT) the workers even when pytest
    runs as a background job: a shell starts those with SIGINT ignored, and a child inherits
    an ignored signal across exec (and rightly keeps it), while a handled one starts at its
    default."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(argv, **kwargs)
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, fixture_processes):
    """A Ray head on 127.0.0.1 with 2 CPUs and no GPU; yields (address, env for drivers).

    The head and every Ray process it starts (raylet, log monitor, workers, some only after a
    test asked for them) share the head's session, which this fixture owns for the module: the
    suite's per-test orphan check leaves them alone, and they must all be gone at teardown."""
    temp = Path(tempfile.mkdtemp(dir="/tmp", prefix="rh"))  # short: Unix socket paths
    env = {
        **os.environ,
        **RAY_TEST_ENV,
        "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("xdg")),
        "RAY_TMPDIR": str(temp),
    }
    env.pop("G1SOAK_ASSET_DIR", None)
    port = _free_port()
    log = open(temp / "head.log", "wb")  # noqa: SIM115 - closed at teardown
    head = _popen_with_default_sigint(
        [
            str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
            f"--port={port}", "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false",
            "--disable-usage-stats", f"--temp-dir={temp}",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    with fixture_processes.owned(head.pid, "the Ray head of test_campaign_ray"):
        try:
            _wait_for(lambda: _port_open(port) or head.poll() is not None, HEAD_TIMEOUT_S, "ray")
            assert head.poll() is None, (temp / "head.log").read_text(errors="replace")
            yield f"127.0.0.1:{port}", env
        finally:
            # The head and every Ray process it started share its process group. SIGKILL, not
            # SIGTERM: the head's graceful stop takes ~33 s on 2 cores, and nothing of this
            # throwaway cluster needs one (fixture_processes.owned checks that all are gone).
            _signal_group(head.pid, signal.SIGKILL)
            head.wait()
            log.close()
            shutil.rmtree(temp, ignore_errors=True)


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    """Signal a process group that may be gone already (a head that died on its own)."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def _campaign(tmp_path: Path, campaign_doc, write_campaign, **changes: Any) -> Path:
    return write_campaign(campaign_doc(directory=str(tmp_path / "campaign"), **changes))


def _soak_campaign(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "soak-campaign"), *args],
        env={**env, "COLUMNS": "200"}, capture_output=True, text=True, timeout=1500, check=False,
    )  # fmt: skip


def _table(stdout: str) -> dict[str, str]:
    rows = [line.split() for line in stdout.splitlines() if line.strip().startswith("base-s")]
    return {cells[0]: cells[1] for cells in rows if not cells[0].endswith(":")}


def test_a_two_by_two_campaign_passes_every_cell(
    cluster, tmp_path, campaign_doc, write_campaign
) -> None:
    address, env = cluster
    path = _campaign(
        tmp_path, campaign_doc, write_campaign, seeds=[1, 2], motions=["synthetic", "march"]
    )
    proc = _soak_campaign("run", str(path), "--address", address, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ids = [
        "base-s1-synthetic-mujoco", "base-s1-march-mujoco",
        "base-s2-synthetic-mujoco", "base-s2-march-mujoco",
    ]  # fmt: skip
    assert _table(proc.stdout) == dict.fromkeys(ids, "passed")
    assert "campaign tiny: finished, verdict passed (4 passed)" in proc.stdout

    directory = tmp_path / "campaign"
    doc = load_strict(directory / "campaign.json")
    assert validate(doc, "campaign_result.v1.json") == []
    assert (doc["status"], doc["verdict"], doc["topology_mode"]) == (
        "finished", "passed", "task_per_gpu",
    )  # fmt: skip
    assert [cell["id"] for cell in doc["cells"]] == ids
    for cell in doc["cells"]:
        assert [a["status"] for a in cell["attempts"]] == ["passed"]
        attempt = cell["attempts"][0]
        assert (attempt["gpu_uuid"], attempt["gpu_ids"]) == (None, [])  # a CPU cell
        assert attempt["residual_process_count"] == 0 and attempt["residual_processes"] == []
        assert attempt["throughput"]["completed_iterations"] == 5
        assert attempt["throughput"]["tail_env_steps_per_sec"] > 0
        assert attempt["throughput"]["steady_env_steps_per_sec"] > 0
        assert attempt["node_id"] and attempt["host"]
        artifact = load_strict(directory / attempt["artifact"])
        assert validate(artifact, "soak_artifact.0.3.0.json") == []
        assert artifact["status"] == "passed"
        assert artifact["context"]["environment"]["CUDA_VISIBLE_DEVICES"] == ""  # pinned
        seed = f"algo.seed={cell['seed']}"
        assert artifact["command"][-1] == seed and cell["g1_soak_args"][-1] == seed
        assert (directory / attempt["report"]).is_file()
    page = (directory / "index.html").read_text(encoding="utf-8")
    for cell in doc["cells"]:
        assert f'href="{cell["attempts"][0]["report"]}"' in page

    status = _soak_campaign("status", str(directory), "--json", env=env)
    assert status.returncode == 0 and json.loads(status.stdout) == doc


def test_an_interrupted_campaign_resumes_only_its_unfinished_cells(
    cluster, tmp_path, campaign_doc, write_campaign
) -> None:
    address, env = cluster
    path = _campaign(
        tmp_path, campaign_doc, write_campaign, seeds=[1, 2], cpus_per_cell=2
    )  # one cell at a time on the 2-CPU head
    directory = tmp_path / "campaign"
    second = directory / "cells" / "base-s2-synthetic-mujoco" / "attempt-1"
    driver = _popen_with_default_sigint(
        [str(BIN / "soak-campaign"), "run", str(path), "--address", address],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for line in driver.stderr:
            if "[1/2] base-s1-synthetic-mujoco passed" in line:
                break
        # Ctrl-C once the second cell's soak has launched its trainer (a driver that ended
        # first fails here at once, not after the whole wait).
        launched = second / "run" / "soak-console.log"
        _wait_for(lambda: launched.exists() or driver.poll() is not None, 600, "cell 2")
        assert driver.poll() is None, f"the driver exited {driver.returncode} before cell 2"
        driver.send_signal(signal.SIGINT)
        _, err = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 1, err[-4000:]
    doc = load_strict(directory / "campaign.json")
    assert (doc["status"], doc["verdict"]) == ("interrupted", None)
    assert [c["status"] for c in doc["cells"]] == ["passed", "interrupted"]
    cancelled = doc["cells"][1]["attempts"][0]
    assert (cancelled["status"], cancelled["classification"]) == (
        "interrupted", "TaskCancelledError",
    )  # fmt: skip
    artifact = load_strict(second / "soak.json")  # the soak stopped its trainer and reported
    assert artifact["failure_classification"] == "external_cancellation"
    assert artifact["post_shutdown"]["residual_processes"] == []

    resumed = _soak_campaign("run", str(path), "--address", address, "--resume", env=env)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "1 cell(s) to run, 1 kept" in resumed.stderr
    final = load_strict(directory / "campaign.json")
    assert (final["status"], final["verdict"]) == ("finished", "passed")
    kept, rerun = final["cells"]
    assert kept["attempts"] == doc["cells"][0]["attempts"]  # untouched
    assert [a["status"] for a in rerun["attempts"]] == ["interrupted", "passed"]
    assert rerun["attempts"][1]["directory"].endswith("attempt-2")
    assert [i["outcome"] for i in final["invocations"]] == ["interrupted", "finished"]


def test_a_cell_whose_worker_dies_is_retried_then_lost(
    tmp_path, campaign_doc, write_campaign
) -> None:
    path = _campaign(tmp_path, campaign_doc, write_campaign, max_retries=1)
    temp = Path(tempfile.mkdtemp(dir="/tmp", prefix="rl"))
    env = {
        **os.environ,
        **RAY_TEST_ENV,
        "RAY_TMPDIR": str(temp),
        "G1SOAK_CAMPAIGN_TEST_KILL_WORKER": "base-s1-synthetic-mujoco",
    }
    try:
        proc = _soak_campaign("run", str(path), "--num-cpus", "1", env=env)  # local ray.init()
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert proc.returncode == 1, proc.stderr[-4000:]
    assert "lost on attempt 1" in proc.stderr and "retrying (1 of 1)" in proc.stderr
    assert _table(proc.stdout) == {"base-s1-synthetic-mujoco": "lost"}
    doc = load_strict(tmp_path / "campaign" / "campaign.json")
    assert validate(doc, "campaign_result.v1.json") == []
    assert (doc["status"], doc["verdict"], doc["counts"]["lost"]) == ("finished", "failed", 1)
    attempts = doc["cells"][0]["attempts"]
    assert [(a["status"], a["classification"]) for a in attempts] == [
        ("lost", "WorkerCrashedError"),
        ("lost", "WorkerCrashedError"),
    ]
    assert "Ray worker or node died" in doc["cells"][0]["reason"]


@pytest.mark.skipif(not (LIBRARY / CLIP).is_file(), reason=f"no motion library at {LIBRARY}")
def test_the_regression_check_runs_three_seeds_and_tables_final_vs_best(cluster, tmp_path) -> None:
    address, env = cluster
    spec = tmp_path / "check.yaml"
    spec.write_text(yaml.safe_dump(TINY_CHECK), encoding="utf-8")
    directory = tmp_path / "check"
    proc = subprocess.run(
        [
            str(BIN / "soak-campaign"), "regression", "--spec", str(spec),
            "--library-root", str(LIBRARY), "--directory", str(directory), "--address", address,
        ],
        env={**env, "COLUMNS": "80"}, capture_output=True, text=True, timeout=1500, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = load_strict(directory / "campaign.json")
    assert validate(doc, "campaign_result.v1.json") == []
    (config,) = doc["over_seeds"]["configurations"]
    assert config["verdict"] == "passed"
    assert [seed["outcome"] for seed in config["seeds"]] == ["passed"] * 3
    for seed in config["seeds"]:
        assert seed["final_r_mpkpe_mm"] is not None and seed["best_iteration"] in (2, 4, 6)
    for cell in doc["cells"]:
        points = cell["attempts"][-1]["learning"]["points"]
        assert [p["iteration"] for p in points] == [2, 4, 6]  # every checkpoint, then the final
    rows = [line.split() for line in proc.stdout.splitlines()]
    seeds = [row[1] for row in rows if row[:1] == ["j-dance18-tiktok"] and row[2] == "passed"]
    assert seeds == ["1", "2", "3"]
    assert "judged over seeds: 1 of 1 configuration(s) passed" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    status = subprocess.run(
        [str(BIN / "soak-campaign"), "status", str(directory), "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert json.loads(status.stdout) == doc
