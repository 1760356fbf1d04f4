"""Process-tree membership, identity, RSS and FD classes from /proc (docs/contracts.md §samples)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.procfs import is_same_process, read_stat
from harness.soak.proctree import (
    FD_CLASSES,
    MarkerScanner,
    ProcessTreeSampler,
    classify_fd_target,
    descendants,
    read_command,
    read_fd_classes,
)

# A child that opens one FD of several classes, reports ready, then sleeps.
HOLDER = r"""
import os, socket, sys, tempfile, time
keep = [os.pipe(), os.eventfd(0), socket.socket(), os.memfd_create("g1soak-test")]
shm_dir = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
path = os.path.join(shm_dir, f"g1soak-proctree-{os.getpid()}")
keep.append(open(path, "wb"))
os.unlink(path)
if len(sys.argv) > 2:
    child = os.fork()
    if child == 0:
        os.setsid()
        time.sleep(30)
        os._exit(0)
open(sys.argv[1], "w").close()
time.sleep(30)
"""


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator:
    started: list[subprocess.Popen] = []

    def _spawn(*extra: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        ready = tmp_path / f"ready-{len(started)}"
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(ready), *extra], env=env, start_new_session=True
        )
        started.append(proc)
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert time.monotonic() < deadline, "holder never became ready"
            assert proc.poll() is None, "holder died"
            time.sleep(0.01)
        return proc

    yield _spawn
    survivors = []
    for proc in started:
        family = [(pid, read_stat(pid)) for pid in [*descendants(proc.pid), proc.pid]]
        for pid, _ in family:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
        survivors += [
            pid
            for pid, st in family
            if st is not None and _alive_after_kill(pid, st.start_time_ticks)
        ]
    assert not survivors


def _alive_after_kill(pid: int, ticks: int) -> bool:
    deadline = time.monotonic() + 5
    while is_same_process(pid, ticks) and time.monotonic() < deadline:
        time.sleep(0.01)
    return is_same_process(pid, ticks)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("pipe:[123]", "pipe"),
        ("socket:[9]", "socket"),
        ("/memfd:buf (deleted)", "memfd"),
        ("memfd:buf", "memfd"),
        ("anon_inode:[eventfd]", "eventfd"),
        ("anon_inode:[eventpoll]", "eventpoll"),
        ("anon_inode:[eventfd-x]", "other"),
        ("/dev/nvidia0", "nvidia"),
        ("/dev/nvidiactl", "nvidia"),
        ("/dev/shm/torch_1", "shared_memory"),
        ("/run/shm/x", "shared_memory"),
        ("/dev/shmx", "other"),
        ("/tmp/file", "other"),
    ],
)
def test_fd_targets_are_classified(target: str, expected: str) -> None:
    assert classify_fd_target(target) == expected


def test_real_fds_are_counted_by_class(spawn) -> None:
    proc = spawn()
    total, classes = read_fd_classes(proc.pid)
    assert set(classes) == set(FD_CLASSES)
    assert classes["pipe"] >= 2 and classes["eventfd"] == 1 and classes["socket"] == 1
    assert classes["memfd"] == 1 and classes["shared_memory"] == 1
    assert total == sum(classes.values())


def test_sampler_finds_children_and_escaped_grandchildren(spawn) -> None:
    proc = spawn("escape")
    sampler = ProcessTreeSampler(uuid.uuid4().hex, trainer_pgid=proc.pid)
    sample = sampler.sample()
    mine = [p for p in sample.processes if p.pid == proc.pid]
    assert len(mine) == 1 and mine[0].escaped is False and mine[0].discovered_by == "tree"
    grandchildren = [p for p in sample.processes if p.ppid == proc.pid]
    assert len(grandchildren) == 1 and grandchildren[0].escaped is True
    assert mine[0].start_time_ticks == read_stat(proc.pid).start_time_ticks
    assert mine[0].rss_kib > 0
    doc = sample.to_json()
    assert doc["process_count"] == len(doc["processes"]) >= 2
    assert doc["fd_classes_total"]["eventfd"] >= 1
    assert doc["processes"][0]["start_ticks"] == [doc["processes"][0]["start_time_ticks"]]


def test_marker_scan_finds_a_process_outside_the_tree(spawn) -> None:
    soak_id = uuid.uuid4().hex
    proc = spawn(env={**os.environ, "G1SOAK_RUN_ID": soak_id})
    # Root the tree at a process without children: only the marker can find the holder.
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as lonely:
        try:
            sampler = ProcessTreeSampler(soak_id, trainer_pgid=proc.pid, root_pid=lonely.pid)
            found = {p.pid: p for p in sampler.sample().processes}
        finally:
            lonely.kill()
    assert found[proc.pid].discovered_by == "marker"
    assert MarkerScanner(uuid.uuid4().hex).scan() == []


def test_helpers_are_excluded_from_membership(spawn) -> None:
    proc = spawn()
    assert proc.pid in descendants(os.getpid())
    assert proc.pid not in descendants(os.getpid(), exclude={proc.pid})


def test_command_is_nul_free_and_capped() -> None:
    command = read_command(os.getpid())
    assert "\0" not in command and len(command) <= 512 and command


def test_vanished_process_reads_as_empty() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert read_fd_classes(proc.pid)[0] == 0
    assert read_command(proc.pid) == ""
