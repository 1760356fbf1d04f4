"""cumps end to end against a fake nvidia-cuda-mps-control (real Unix sockets, real daemons).

Every test runs in the ``sandbox`` fixture: fake tools on PATH, a private HOME and XDG
cache, a short temp root; its teardown kills every fake daemon and asserts none survived.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contracts.mps import records
from harness.mps import cli, daemon

GPU0 = "GPU-0a1b2c3d-1111-2222-3333-444455556666"
GPU1 = "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff"
NAME0 = "gpu-0a1b2c3d-1111-2222-3333-444455556666"


@pytest.fixture
def run(capsys):
    def invoke(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def wait_gone(pid: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


def orphan_socket(path: Path) -> None:
    """Leave a Unix socket file behind with nobody listening (what a killed daemon leaves)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()


def hand_started_daemon(sandbox, pipe: Path, log: Path) -> int:
    """Start the fake daemon directly (not through cumps), as a user would by hand."""
    for folder in (pipe, log):
        folder.mkdir(parents=True, mode=0o700)
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(pipe), CUDA_MPS_LOG_DIRECTORY=str(log))
    subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env, check=True, timeout=10)
    deadline = time.monotonic() + 5
    while not (pipe / "control").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return int((pipe / "nvidia-cuda-mps-control.pid").read_text())


def test_start_status_env_doctor_stop_round_trip(sandbox, run):
    code, out, err = run("start")
    assert code == 0, err
    assert f"started {NAME0}" in out
    pipe, log = sandbox.default_dirs(NAME0)
    rec = records.load_record(records.record_path(NAME0))
    assert (
        rec.gpu_uuids == (GPU0,)
        and rec.pipe_directory == str(pipe)
        and rec.log_directory == str(log)
    )
    assert rec.uid == os.getuid() and rec.topology_mode == "single_gpu"
    assert (pipe.stat().st_mode & 0o777, log.stat().st_mode & 0o777) == (0o700, 0o700)
    assert (sandbox.tmp / "cumps").stat().st_mode & 0o777 == 0o700
    assert records.record_path(NAME0).stat().st_mode & 0o777 == 0o600
    assert "CUDA_VISIBLE_DEVICES=" + GPU0 in (log / "control.log").read_text()

    code, out, _ = run("status", "--json")
    doc = json.loads(out)
    assert code == 0
    assert [(r["name"], r["state"], r["control_pipe_kind"]) for r in doc["records"]] == [
        (NAME0, "live", "socket")
    ]
    assert [m["mode"] for m in doc["compatible_topology_modes"]] == [
        "single_gpu",
        "single_task_multi_gpu",
        "task_per_gpu",
    ]
    assert doc["gpus"] == [{"index": 0, "uuid": GPU0, "name": "NVIDIA H200"}]

    code, out, _ = run("env")
    assert code == 0
    assert out.splitlines() == [
        f"export CUDA_VISIBLE_DEVICES={GPU0}",
        f"export CUDA_MPS_PIPE_DIRECTORY={pipe}",
        f"export CUDA_MPS_LOG_DIRECTORY={log}",
    ]
    assert "CUDA_MPS_PIPE_DIRECTORY" not in os.environ  # env never mutates the parent
    code, out, _ = run("env", "--name", NAME0, "--json")
    assert json.loads(out) == {"name": NAME0, "env": rec.environment()}

    code, out, err = run("doctor", "--json")
    doc = json.loads(out)
    assert code == 0, err
    assert doc["valid"] is True and doc["topology"]["mode"] == "single_gpu"
    assert doc["gpus"][0]["matching_records"] == [NAME0]
    assert doc["gpus"][0]["probe"]["server_pid"] == rec.pid  # empty server list -> PID file

    code, out, err = run("stop")
    assert code == 0, err
    assert wait_gone(rec.pid)
    assert sandbox.commands(log)[-1] == "quit"
    assert not records.record_path(NAME0).exists()
    assert (log / "control.log").exists()  # logs are kept
    code, _, err = run("env")
    assert code == 1 and "no live cumps daemon" in err and "cumps start" in err


def test_env_output_is_shell_quoted(sandbox, run):
    base = sandbox.root / "my dir"
    code, _, err = run(
        "start", "--name", "q", "--pipe-dir", str(base / "p"), "--log-dir", str(base / "l")
    )
    assert code == 0, err
    code, out, _ = run("env", "--name", "q")
    lines = out.splitlines()
    assert lines[1] == f"export CUDA_MPS_PIPE_DIRECTORY={shlex.quote(str(base / 'p'))}"
    result = subprocess.run(
        ["bash", "-c", out + 'printf %s "$CUDA_MPS_PIPE_DIRECTORY"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == str(base / "p")
    assert run("stop", "--name", "q")[0] == 0


def test_stale_record_is_quarantined_before_the_name_is_reused(sandbox, run):
    assert run("start")[0] == 0
    old = records.load_record(records.record_path(NAME0))
    os.kill(old.pid, signal.SIGKILL)  # dies without cleaning its socket or PID file
    assert wait_gone(old.pid)
    code, out, _ = run("status", "--json")
    assert json.loads(out)["records"][0]["state"] == "stale"
    code, _, err = run("env")
    assert code == 1 and "no live cumps daemon" in err
    code, _, err = run("env", "--name", NAME0)
    assert code == 1 and "stale record" in err

    code, out, err = run("start")
    assert code == 0, err
    assert "quarantined stale record" in err
    stale = list((records.cache_root() / ".stale").iterdir())
    assert len(stale) == 1 and stale[0].name.startswith(NAME0 + "-")
    assert records.load_record(stale[0] / "daemon.json").pid == old.pid
    new = records.load_record(records.record_path(NAME0))
    assert new.pid != old.pid
    assert run("stop")[0] == 0


def test_live_record_blocks_a_second_start(sandbox, run):
    assert run("start")[0] == 0
    code, _, err = run("start")
    assert code == 1 and "already running" in err and "cumps env" in err
    code, _, err = run("start", "--name", "other")
    assert code == 1 and "already covers" in err
    assert run("stop")[0] == 0


@pytest.mark.parametrize(
    "change", [{"uid": os.getuid() + 1}, {"host": "elsewhere"}], ids=["uid", "host"]
)
def test_foreign_record_is_refused_when_named_and_hidden_from_listings(sandbox, run, change):
    foreign = records.DaemonRecord(
        name="foreign",
        uid=os.getuid(),
        host=records.this_host(),
        topology_mode="single_gpu",
        gpu_uuids=(GPU0,),
        pipe_directory="/tmp/nowhere/pipe",
        log_directory="/tmp/nowhere/log",
        pid=os.getpid(),
        process_start_ticks=0,
        created_at=records.utc_now(),
    )
    records.write_record(
        records.DaemonRecord(**{**foreign.to_json(), "gpu_uuids": (GPU0,), **change})
    )
    code, out, _ = run("status", "--json")
    assert json.loads(out)["records"] == []
    for argv in (("env", "--name", "foreign"), ("stop", "--name", "foreign")):
        code, _, err = run(*argv)
        assert code == 1 and "foreign" in err and len(error_lines(err)) == 1
    assert records.record_path("foreign").exists()  # never touched
    code, _, err = run("start", "--name", "foreign")
    assert code == 1 and "foreign" in err


def test_stop_of_stale_record_unlinks_it_and_never_contacts_the_pipe(sandbox, run):
    assert run("start")[0] == 0
    path = records.record_path(NAME0)
    rec = records.load_record(path)
    # Same PID, wrong start time: the recorded process is gone and the PID was reused.
    doc = rec.to_json()
    doc["process_start_ticks"] += 1
    path.write_text(json.dumps(doc))
    code, _, err = run("status", "--json")
    before = sandbox.commands(Path(rec.log_directory))

    code, _, err = run("stop")  # no live record: nothing selected
    assert code == 1 and "no live cumps daemon" in err
    code, _, err = run("stop", "--name", NAME0)
    assert code == 1
    assert "stale record" in err and "no control contacted" in err and "reused" in err
    assert not path.exists()
    assert sandbox.commands(Path(rec.log_directory)) == before
    assert "quit" not in sandbox.commands(Path(rec.log_directory))
    assert not wait_gone(rec.pid, timeout_s=0.2)  # the daemon was not touched


def test_stop_refuses_a_pipe_whose_pid_file_names_another_daemon(sandbox, run):
    assert run("start")[0] == 0
    rec = records.load_record(records.record_path(NAME0))
    (Path(rec.pipe_directory) / "nvidia-cuda-mps-control.pid").write_text("1\n")
    code, _, err = run("stop")
    assert code == 1 and "no control contacted" in err
    assert "quit" not in sandbox.commands(Path(rec.log_directory))
    assert records.record_path(NAME0).exists()


def test_stop_if_running_is_exit_0_when_nothing_runs(sandbox, run):
    code, out, err = run("stop")
    assert code == 1 and "no live cumps daemon" in err  # without the flag: a failure
    code, out, err = run("stop", "--if-running")
    assert (code, out, err) == (0, "", "no cumps daemon is running; nothing to stop\n")
    code, out, err = run("stop", "--if-running", "--name", "gpu-none")
    assert code == 0 and "nothing to stop" in err
    assert run("start")[0] == 0
    pid = records.load_record(records.record_path(NAME0)).pid
    code, out, err = run("stop", "--if-running")
    assert code == 0 and out.startswith(f"stopped {NAME0}")
    assert wait_gone(pid) and not records.record_path(NAME0).exists()


def test_stop_if_running_removes_a_stale_record_and_exits_0(sandbox, run):
    assert run("start")[0] == 0
    path = records.record_path(NAME0)
    doc = records.load_record(path).to_json()
    doc["process_start_ticks"] += 1  # the recorded process is gone
    path.write_text(json.dumps(doc))
    code, _, err = run("stop", "--if-running", "--name", NAME0)
    assert code == 0 and "stale record" in err and "error:" not in err
    assert not path.exists()


def test_relative_pipe_and_log_dirs_are_taken_from_the_cwd(sandbox, run, monkeypatch):
    monkeypatch.chdir(sandbox.tmp)
    code, _, err = run("start", "--pipe-dir", "p", "--log-dir", "l")
    assert code == 0, err
    rec = records.load_record(records.record_path(NAME0))
    assert (rec.pipe_directory, rec.log_directory) == (
        str(sandbox.tmp / "p"),
        str(sandbox.tmp / "l"),
    )
    assert run("stop")[0] == 0


def test_stop_all_stops_live_and_skips_stale(sandbox, run):
    sandbox.set_gpus([(0, GPU0, "H200"), (1, GPU1, "H200")])
    assert run("start", "--gpus", "0")[0] == 0
    assert run("start", "--gpus", GPU1)[0] == 0
    live = records.live_records()
    assert sorted(r.gpu_uuids[0] for r in live) == [GPU0, GPU1]
    code, _, err = run("env")
    assert code == 2 and "pass --name" in err
    os.kill(live[0].pid, signal.SIGKILL)
    assert wait_gone(live[0].pid)
    code, out, err = run("stop", "--all")
    assert code == 0, err
    assert f"skipped stale record {live[0].name!r}" in err
    assert out.count("stopped ") == 1
    assert wait_gone(live[1].pid)


def test_orphan_socket_in_default_root_is_cleaned_when_the_pid_file_is_dead(sandbox, run):
    pipe, log = sandbox.default_dirs(NAME0)
    for folder in (sandbox.tmp / "cumps", pipe.parent, pipe, log):
        folder.mkdir(mode=0o700)
    orphan_socket(pipe / "control")
    orphan_socket(pipe / "control_privileged")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (pipe / "nvidia-cuda-mps-control.pid").write_text(f"{dead.pid}\n")
    (pipe / "control_lock").write_text("")
    code, _, err = run("start")
    assert code == 0, err
    rec = records.load_record(records.record_path(NAME0))
    assert (pipe / "nvidia-cuda-mps-control.pid").read_text().strip() == str(rec.pid)
    assert not (pipe / "control_privileged").exists()
    assert run("stop")[0] == 0


def test_orphan_socket_is_kept_when_the_pid_file_names_a_live_control_daemon(sandbox, run):
    other = hand_started_daemon(sandbox, sandbox.root / "o" / "p", sandbox.root / "o" / "l")
    pipe, log = sandbox.default_dirs(NAME0)
    for folder in (sandbox.tmp / "cumps", pipe.parent, pipe, log):
        folder.mkdir(mode=0o700)
    orphan_socket(pipe / "control")
    (pipe / "nvidia-cuda-mps-control.pid").write_text(f"{other}\n")
    code, _, err = run("start")
    assert code == 1 and f"live nvidia-cuda-mps-control (pid {other})" in err
    assert (pipe / "control").exists()
    assert not records.record_path(NAME0).exists()


def test_existing_control_outside_the_default_root_is_refused(sandbox, run):
    pipe, log = sandbox.root / "cp", sandbox.root / "cl"
    pipe.mkdir(mode=0o700)
    orphan_socket(pipe / "control")
    code, _, err = run("start", "--pipe-dir", str(pipe), "--log-dir", str(log))
    assert code == 1 and "already exists" in err
    assert (pipe / "control").exists()  # never deleted outside the default root


def test_group_or_world_accessible_dirs_are_refused(sandbox, run):
    pipe = sandbox.root / "wide"
    pipe.mkdir()
    pipe.chmod(0o755)
    code, _, err = run("start", "--pipe-dir", str(pipe), "--log-dir", str(sandbox.root / "l"))
    assert code == 1 and "0755" in err and "chmod 700" in err
    shared = sandbox.tmp / "cumps"
    shared.mkdir(mode=0o700)
    shared.chmod(0o777)
    code, _, err = run("start")
    assert code == 1 and f"{shared} has mode 0777" in err


def test_foreign_owned_dir_is_refused(sandbox, monkeypatch):
    folder = sandbox.root / "foreign"
    folder.mkdir(mode=0o700)
    monkeypatch.setattr(daemon.os, "getuid", lambda: os.stat(folder).st_uid + 1)
    with pytest.raises(daemon.HarnessError, match="owned by uid"):
        daemon.check_private_dir(folder)


def test_symlinked_dir_is_refused(sandbox, run):
    real = sandbox.root / "real"
    real.mkdir(mode=0o700)
    (sandbox.root / "link").symlink_to(real)
    code, _, err = run(
        "start", "--pipe-dir", str(sandbox.root / "link"), "--log-dir", str(sandbox.root / "l")
    )
    assert code == 1 and "symlinks are refused" in err


def test_long_pipe_path_is_rejected_before_anything_is_created(sandbox, run):
    long_dir = sandbox.root / ("p" * 90)
    code, _, err = run("start", "--pipe-dir", str(long_dir), "--log-dir", str(sandbox.root / "l"))
    assert code == 2 and "the limit is 95" in err
    assert not long_dir.exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        pytest.param(
            ["--gpus", "0,1"],
            "single-task multi-GPU is not supported yet (multi-GPU gate)",
            id="comma",
        ),
        pytest.param(["--gpus", "all"], "read-only diagnostics", id="all"),
        pytest.param(["--gpus", "MIG-0a1b2c3d-1111-2222-3333-444455556666"], "MIG", id="mig"),
        pytest.param(["--gpus", "5"], "unknown GPU index", id="unknown-index"),
        pytest.param([], "pass --gpus", id="two-gpus-no-selector"),
        pytest.param(["--gpus", "0", "--name", "Bad_Name"], "--name", id="bad-name"),
        pytest.param(
            ["--gpus", "0", "--pipe-dir", "/tmp/same", "--log-dir", "/tmp/same"],
            "must differ",
            id="same",
        ),
    ],
)
def test_bad_start_requests_exit_2_and_start_nothing(sandbox, run, argv, needle):
    sandbox.set_gpus([(0, GPU0, "H200"), (1, GPU1, "H200")])
    code, out, err = run("start", *argv)
    assert code == 2 and needle in err and len(error_lines(err)) == 1
    assert out == ""
    assert sandbox.daemon_pids() == []
    assert not (sandbox.tmp / "cumps").exists()


def test_doctor_comma_list_fails_closed_and_all_reports_every_gpu(sandbox, run):
    sandbox.set_gpus([(0, GPU0, "H200"), (1, GPU1, "H200")])
    code, _, err = run("doctor", "--gpus", "0,1")
    assert code == 2 and "multi-GPU gate" in err
    assert run("start", "--gpus", "1")[0] == 0
    code, out, _ = run("doctor", "--gpus", "all", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["topology"]["mode"] == "task_per_gpu"
    assert [g["valid"] for g in doc["gpus"]] == [False, True]
    assert "cumps start" in doc["gpus"][0]["error"]
    assert run("stop")[0] == 0


def test_doctor_without_daemon_fails_naming_cumps_start(sandbox, run):
    code, out, err = run("doctor")
    assert code == 1 and "cumps start" in err and "verdict: invalid" in out


def test_doctor_accepts_a_hand_started_daemon_through_the_environment(sandbox, run, monkeypatch):
    pipe = sandbox.root / "hp"
    pid = hand_started_daemon(sandbox, pipe, sandbox.root / "hl")
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(pipe))
    code, out, err = run("doctor", "--json")
    doc = json.loads(out)
    assert code == 0, err
    assert doc["gpus"][0]["selection"]["source"] == "environment"
    assert doc["gpus"][0]["probe"]["server_pid"] == pid
    assert sandbox.commands(sandbox.root / "hl") == ["get_server_list"]


@pytest.mark.parametrize(
    ("fault", "needle"),
    [
        pytest.param("FAKE_MPS_NOT_READY", "daemon not ready", id="not-ready"),
        pytest.param(
            "FAKE_MPS_NO_PIDFILE", "cannot verify the daemon's identity", id="no-pid-file"
        ),
    ],
)
def test_failed_start_quits_the_daemon_writes_no_record_and_shows_the_log(
    sandbox, run, monkeypatch, fault, needle
):
    monkeypatch.setenv(fault, "1")
    code, _, err = run("start")
    assert code == 1 and needle in err and len(error_lines(err)) == 1
    assert "control.log" in err and "startup pid=" in err  # the log tail is shown
    assert not records.record_path(NAME0).exists()
    assert all(wait_gone(pid) for pid in sandbox.daemon_pids())
    _, log = sandbox.default_dirs(NAME0)
    assert sandbox.commands(log)[-1] == "quit"


def test_control_pipe_that_never_appears_is_cleaned_up(sandbox, run, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_NO_SOCKET", "1")
    monkeypatch.setattr(daemon, "CONTROL_WAIT_S", 1.0)
    code, _, err = run("start")
    assert code == 1 and "did not appear" in err
    assert all(wait_gone(pid) for pid in sandbox.daemon_pids())  # killed: provably ours
    assert not records.record_path(NAME0).exists()


def test_missing_control_binary_is_a_check_failure(sandbox, run):
    (sandbox.bin / "nvidia-cuda-mps-control").unlink()
    code, _, err = run("start")
    assert code == 1 and "nvidia-cuda-mps-control is not on PATH" in err


@pytest.mark.slow  # starts the console script in a subprocess
def test_cumps_console_entry_in_a_subprocess_stays_torch_free(sandbox):
    code = (
        "import sys\nfrom harness.mps.cli import main\nrc = main(sys.argv[1:])\n"
        "bad = [m for m in ('torch', 'mujoco', 'warp', 'trainer') if m in sys.modules]\n"
        "assert not bad, bad\nsys.exit(rc)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    status = subprocess.run(
        [sys.executable, "-c", code, "status", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["records"] == []
    failed = subprocess.run(
        [sys.executable, "-c", code, "stop"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert failed.returncode == 1
    assert len(error_lines(failed.stderr)) == 1 and failed.stdout == ""
