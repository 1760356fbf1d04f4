"""Orphans: a child the project starts dies with its parent (docs/soak.md, "Children die with
their parent"), with real processes killed outright (SIGKILL, nothing caught):

- a benchmark's env beside (``EnvBeside``) whose parent dies;
- the real CPU trainer's collector whose learner dies;
- the real CPU trainer whose ``g1-soak`` dies: it gets SIGTERM and still leaves a cancelled
  summary with its checkpoint.

Each scenario then waits for every process of the killed parent's session to be gone. The
suite-wide check in tests/conftest.py fails any test that leaves a process behind, and a
wider-scoped fixture that owns a session (``fixture_processes``) that its teardown leaves
processes in; both checks are tested here on an inner pytest run.

Every scenario runs more than once, each repeat in a directory of its own, and the repeats'
outcomes must be identical (tests/faults/repeat.py): ``--fault-repeats`` times (default 3),
side by side (each repeat's processes are a session, or an inner pytest, of its own); the two
that start the real trainer ``--expensive-fault-repeats`` times (default 1, 20-30 s each),
one after another.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from contracts.jsonio import load_strict, loads_strict
from tests.faults.repeat import Outcome, repeated

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
DEADLINE_S = 300.0
TINY_OVERRIDES = ("algo.batch_size=8", "algo.learning_starts=2", "algo.save_interval=3")

ENV_BESIDE_PARENT = textwrap.dedent(
    """
    import sys, threading
    from trainer.bench.env_beside import EnvBeside, EnvBesideSpec

    spec = EnvBesideSpec(sim="mujoco", num_envs=2, device="cpu", warmup=1)
    with EnvBeside(spec) as env:
        print(env.pid, flush=True)
        threading.Event().wait()
    """
)


def _session(sid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes of session ``sid``."""
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getsid(proc.pid) == sid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (ProcessLookupError, PermissionError):
            continue
    return found


def _alive(proc: psutil.Process) -> bool:
    """Running and not a zombie (an orphan that died waits, a zombie, for pytest to reap it)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pid_alive(pid: int) -> bool:
    try:
        return _alive(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def _poll(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not {what} within {DEADLINE_S:g} s"
        time.sleep(0.1)


def _kill_and_wait_for_session(proc: subprocess.Popen[str]) -> None:
    """SIGKILL ``proc`` (the leader of its own session) and wait until its session is empty."""
    proc.kill()
    proc.wait(timeout=DEADLINE_S)
    _poll(lambda: not _session(proc.pid), f"every process of session {proc.pid} gone")


def _progress_iteration(run_dir: Path) -> int:
    try:
        text = (run_dir / "progress.jsonl").read_text(encoding="utf-8")
    except FileNotFoundError:
        return -1
    return max(
        (loads_strict(line)["iteration"] for line in text.split("\n")[:-1] if line), default=-1
    )


@repeated("cheap", side_by_side=True)
def test_the_env_beside_dies_with_its_parent(tmp_path: Path) -> Outcome:
    return _env_beside_killed()


def _env_beside_killed() -> Outcome:
    parent = subprocess.Popen(
        [sys.executable, "-c", ENV_BESIDE_PARENT],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert parent.stdout is not None
        child = psutil.Process(int(parent.stdout.readline()))
        assert child.ppid() == parent.pid and child.is_running()
    finally:
        _kill_and_wait_for_session(parent)
    assert not _alive(child)
    return {"child_alive": _alive(child), "session_left": len(_session(parent.pid))}


@pytest.mark.timeout(1800)
@repeated("expensive")
def test_a_killed_learner_takes_its_collector_with_it(tmp_path: Path, isolated_cache) -> Outcome:
    return _learner_killed(tmp_path / "run")


def _learner_killed(run_dir: Path) -> Outcome:
    train = subprocess.Popen(
        [
            sys.executable, "-m", "trainer", "train", "--algo", "flashsac",
            "--task", "g1_motion_tracking", "--sim", "mujoco", "algo.num_envs=4",
            *TINY_OVERRIDES, "algo.max_iterations=100000", "training.no_play=true",
            "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz",
            f"training.log_dir={run_dir}",
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        _poll(lambda: _progress_iteration(run_dir) >= 1 or train.poll() is not None, "training")
        assert train.poll() is None
        collectors = [
            p
            for p in psutil.Process(train.pid).children()
            if "resource_tracker" not in p.cmdline()[-1]
        ]
        assert collectors, "no collector process under the learner"
    finally:
        _kill_and_wait_for_session(train)
    assert not any(_alive(p) for p in collectors)
    return {
        "collectors": len(collectors),
        "collectors_alive": sum(_alive(p) for p in collectors),
        "session_left": len(_session(train.pid)),
    }


@pytest.mark.timeout(1800)
@repeated("expensive")
def test_a_killed_soak_stops_its_trainer_the_normal_way(tmp_path: Path, isolated_cache) -> Outcome:
    return _soak_killed(tmp_path)


def _soak_killed(root: Path) -> Outcome:
    run_dir = root / "run"
    soak = subprocess.Popen(
        [
            str(BIN / "g1-soak"), "--sim", "mujoco", "--motion", "synthetic", "--num-envs", "4",
            "--iterations", "100000", "--min-duration-seconds", "0", "--learning-mode", "report",
            *[arg for o in TINY_OVERRIDES for arg in ("--extra-override", o)],
            "--log-dir", str(run_dir), "--output", str(root / "soak.json"),
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    _poll(lambda: _progress_iteration(run_dir) >= 4 or soak.poll() is not None, "iteration 4")
    assert soak.poll() is None
    (trainer,) = [p for p in psutil.Process(soak.pid).children() if "train" in p.cmdline()]
    trainer_session = trainer.pid  # the soak starts it in a session of its own
    soak.kill()
    soak.wait(timeout=DEADLINE_S)
    _poll(lambda: not _session(trainer_session), "the trainer and its collector gone")
    # the kernel's SIGTERM reached the trainer, which ended its run as a cancellation
    summary = load_strict(run_dir / "run_summary.json")
    assert summary["status"] == "cancelled"
    assert summary["error"] == "received SIGTERM"
    reached = summary["completed_iterations"]
    assert summary["last_checkpoint"] == str(run_dir / f"model_{reached}.pt")
    assert (run_dir / f"model_{reached}.pt").stat().st_size > 0
    assert not (root / "soak.json").exists()  # a SIGKILL'd soak writes nothing
    return {  # the iteration reached is the one thing a repeat may change
        "status": summary["status"],
        "error": summary["error"],
        "shutdown": summary["runtime_manifest"]["shutdown"]["classification"],
        "checkpoint_is_last": (run_dir / f"model_{reached}.pt").stat().st_size > 0,
        "artifact": (root / "soak.json").exists(),
        "session_left": len(_session(trainer_session)),
    }


LEAKING_TEST = textwrap.dedent(
    """
    import subprocess, sys

    def test_leaves_an_orphan(tmp_path):
        # a child that starts a sleeping grandchild and exits: the grandchild is an orphan
        code = (
            "import subprocess as s; "
            "print(s.Popen(['sleep', '600'], stdout=s.DEVNULL, stderr=s.DEVNULL).pid)"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        open(PIDFILE, "w").write(out.stdout.strip())
    """
)


def _inner_suite(tmp_path: Path, name: str, source: str) -> subprocess.CompletedProcess[str]:
    """Run the test file ``name`` holding ``source`` under a copy of the suite's conftest."""
    (tmp_path / "conftest.py").write_text(
        (Path(__file__).parents[1] / "conftest.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tmp_path / name).write_text(source, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
         str(tmp_path), "-c", os.devnull, str(tmp_path / name)],
        check=False, capture_output=True, text=True, timeout=DEADLINE_S, cwd=tmp_path,
        env={**os.environ, "G1_TEST_ORPHAN_DEADLINE_S": "1"},
    )  # fmt: skip


@repeated("cheap", side_by_side=True)
def test_the_suite_fails_a_test_that_leaves_an_orphan(tmp_path: Path) -> Outcome:
    return _leaves_an_orphan(tmp_path)


def _leaves_an_orphan(root: Path) -> Outcome:
    pidfile = root / "orphan.pid"
    inner = _inner_suite(root, "test_leak.py", f"PIDFILE = {str(pidfile)!r}\n{LEAKING_TEST}")
    orphan = int(pidfile.read_text())
    assert inner.returncode == 1, inner.stdout[-3000:]
    caught = f"the test left processes behind (killed now): {orphan} (sleep 600)"
    assert caught in inner.stdout
    assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == "zombie"
    return {"returncode": inner.returncode, "caught": caught.replace(str(orphan), "<pid>")}


# A module-scoped fixture owning a server's session, like the Ray head of the campaign tests:
# the server starts more processes in that session while the tests run (one per line it reads).
SERVER_TESTS = textwrap.dedent(
    """
    import os, signal, subprocess, sys
    import pytest

    SERVER = (
        "import subprocess, sys\\n"
        "for line in sys.stdin:\\n"
        "    print(subprocess.Popen(['sleep', '600']).pid, flush=True)\\n"
    )

    @pytest.fixture(scope="module")
    def server(fixture_processes):
        leader = subprocess.Popen(
            [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, start_new_session=True,
        )
        with fixture_processes.owned(leader.pid, "the server fixture"):
            def spawn():
                leader.stdin.write("\\n")
                leader.stdin.flush()
                pid = int(leader.stdout.readline())
                open(PIDFILE, "a").write(f"{pid}\\n")
                return pid
            yield spawn
            if STOPS_ITS_SESSION:
                os.killpg(leader.pid, signal.SIGKILL)
            leader.stdin.close()  # the server exits; unless killed, its sleeps stay behind
            leader.wait()

    def test_the_server_starts_a_process_that_outlives_the_test(server):
        server()

    def test_a_test_still_may_not_leave_its_own_orphan(server, tmp_path):
        server()
        code = (
            "import subprocess as s; "
            "print(s.Popen(['sleep', '600'], stdout=s.DEVNULL, stderr=s.DEVNULL).pid)"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        open(ORPHAN, "w").write(out.stdout.strip())
    """
)


@pytest.mark.parametrize("stops", [True, False], ids=["stops-its-session", "leaves-it"])
@repeated("cheap", side_by_side=True)
def test_a_wider_fixtures_session_is_its_own_until_its_teardown(
    tmp_path: Path, stops: bool
) -> Outcome:
    return _fixture_session(tmp_path, stops)


def _fixture_session(root: Path, stops: bool) -> Outcome:
    pidfile, orphan_file = root / "server.pids", root / "orphan.pid"
    inner = _inner_suite(
        root,
        "test_server.py",
        f"PIDFILE = {str(pidfile)!r}\nORPHAN = {str(orphan_file)!r}\n"
        f"STOPS_ITS_SESSION = {stops!r}\n{SERVER_TESTS}",
    )
    spawned = [int(line) for line in pidfile.read_text().split()]
    orphan = int(orphan_file.read_text())
    out = inner.stdout
    assert inner.returncode == 1, out[-3000:]
    assert len(spawned) == 2
    # the test's own orphan is caught while the fixture lives; the server's processes are not
    caught = re.findall(r"the test left processes behind \(killed now\): (\d[^\n]*)", out)
    assert caught and set(caught) == {f"{orphan} (sleep 600)"}, out[-3000:]
    assert "2 passed" in out, out[-3000:]
    described = "; ".join(f"{pid} (sleep 600)" for pid in spawned)
    fixture_error = f"the server fixture left processes behind (killed now): {described}"
    assert (fixture_error in out) is not stops, out[-3000:]
    assert not any(_pid_alive(pid) for pid in [orphan, *spawned])
    return {
        "returncode": inner.returncode,
        "caught": len(caught),
        "fixture_error": fixture_error in out,
        "alive": sum(_pid_alive(pid) for pid in [orphan, *spawned]),
    }
