"""Shared pytest setup: the `gpu` marker skips cleanly without CUDA; private cache and schema
directories; no test may leave a process behind.

The orphan check: pytest makes itself a child subreaper, so a process whose parent died
(an orphan) is re-parented to pytest instead of init and stays its descendant. After each
test, every descendant that was not there before it must be gone (polled up to
``ORPHAN_DEADLINE_S``); one that is not is killed and the test errors, naming it. The
interpreter's own long-lived helpers (multiprocessing's resource tracker and forkserver,
torch's compile workers) are not the test's.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

PR_SET_CHILD_SUBREAPER = 36
ORPHAN_DEADLINE_S = float(os.environ.get("G1_TEST_ORPHAN_DEADLINE_S", "15"))
"""How long a test's processes may take to exit after it (the suite's own check lowers it)."""
HELPER_MARKS = (
    "multiprocessing.resource_tracker",
    "multiprocessing.forkserver",
    "torch._inductor",
    "compile_worker",
)


def _is_helper(proc: psutil.Process) -> bool:
    try:
        cmdline = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return True  # gone already
    return any(mark in cmdline for mark in HELPER_MARKS)


def _live_descendants() -> dict[int, psutil.Process]:
    live = {}
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                live[proc.pid] = proc
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return live


def _reap_adopted_zombies(keep: set[int]) -> None:
    for proc in psutil.Process().children():
        try:
            if proc.pid not in keep and proc.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(proc.pid, os.WNOHANG)
        except (psutil.NoSuchProcess, ChildProcessError):
            continue


def _describe(procs: list[psutil.Process]) -> str:
    parts = []
    for proc in procs:
        try:
            parts.append(f"{proc.pid} ({' '.join(proc.cmdline())[:160]})")
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            parts.append(str(proc.pid))
    return "; ".join(parts)


def pytest_configure(config: pytest.Config) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


@pytest.fixture(autouse=True)
def _no_orphans() -> Iterator[None]:
    before = set(_live_descendants())
    yield
    deadline = time.monotonic() + ORPHAN_DEADLINE_S
    while True:
        _reap_adopted_zombies(before)
        left = [p for pid, p in _live_descendants().items() if pid not in before]
        left = [p for p in left if not _is_helper(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if left:
        described = _describe(left)
        for proc in left:
            try:
                proc.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                continue
        pytest.fail(f"the test left processes behind (killed now): {described}", pytrace=False)


@pytest.fixture(autouse=True)
def _stable_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    # Help-text and table tests must not depend on the caller's terminal.
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    import torch  # only when a GPU test was collected

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """A private XDG cache and asset root so tests never touch the user's cache."""
    cache = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv("G1SOAK_ASSET_DIR", raising=False)
    return cache


@pytest.fixture
def schema_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of schemas/ that this test reads afresh: ``contracts.schemas`` keeps the
    first directory it reads for the rest of the process, so the fixture points it at the copy
    and forgets the kept store (both are restored after the test)."""
    from contracts import schemas

    copy = tmp_path / "schemas"
    shutil.copytree(schemas.SCHEMA_DIR, copy)
    monkeypatch.setattr(schemas, "SCHEMA_DIR", copy)
    monkeypatch.setattr(schemas, "_STORE", None)
    return copy


os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
