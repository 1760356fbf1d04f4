"""Shared pytest setup: the `gpu` marker skips cleanly without CUDA; private cache and schema
directories; no test may leave a process behind; how many times a fault scenario runs
(``--fault-repeats``, ``--expensive-fault-repeats``: tests/faults/repeat.py, docs/soak.md
"Running the fault suite, and its repetition").

The orphan check: pytest makes itself a child subreaper, so a process whose parent died
(an orphan) is re-parented to pytest instead of init and stays its descendant. After each
test, every descendant that was not there before it must be gone (polled up to
``ORPHAN_DEADLINE_S``); one that is not is killed and the test errors, naming it. The
interpreter's own long-lived helpers (multiprocessing's resource tracker and forkserver,
torch's compile workers) are not the test's. Nor are the processes of a session that a
fixture of wider scope started and registered with ``fixture_processes`` (a Ray head for a
module): they outlive each test by design and are checked when that fixture ends instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
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


_FIXTURE_SESSIONS: dict[int, str] = {}
"""Session id -> the wider-scoped fixture whose processes it holds (``fixture_processes``)."""


def _session_of(proc: psutil.Process) -> int | None:
    try:
        return os.getsid(proc.pid)
    except (ProcessLookupError, PermissionError):
        return None


def _live_descendants() -> dict[int, psutil.Process]:
    live = {}
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                live[proc.pid] = proc
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return live


def _wait_until_gone(
    candidates: Callable[[], list[psutil.Process]], keep: set[int] | None = None
) -> list[psutil.Process]:
    """Poll ``candidates()`` up to ``ORPHAN_DEADLINE_S`` (reaping adopted zombies not in
    ``keep``, none when it is None); return what is still there (empty when all went)."""
    deadline = time.monotonic() + ORPHAN_DEADLINE_S
    while True:
        if keep is not None:
            _reap_adopted_zombies(keep)
        left = candidates()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _kill(procs: list[psutil.Process]) -> None:
    for proc in procs:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            continue


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


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fault suite", "repeating the fault scenarios (tests/faults/repeat.py)")
    group.addoption(
        "--fault-repeats",
        type=int,
        default=3,
        metavar="N",
        help="run each fault scenario N times; the N outcomes must be identical (default 3)",
    )
    group.addoption(
        "--expensive-fault-repeats",
        type=int,
        default=1,
        metavar="N",
        help=(
            "run each real-trainer stop and kill scenario (20-40 s each) N times; the N "
            "outcomes must be identical (default 1; 3 for the full repetition)"
        ),
    )


def pytest_configure(config: pytest.Config) -> None:
    for name in ("--fault-repeats", "--expensive-fault-repeats"):
        if config.getoption(name) < 1:
            raise pytest.UsageError(f"{name} must be at least 1")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


@pytest.fixture(autouse=True)
def _no_orphans() -> Iterator[None]:
    before = set(_live_descendants())
    yield

    def left_by_the_test() -> list[psutil.Process]:
        new = [p for pid, p in _live_descendants().items() if pid not in before]
        return [p for p in new if not _is_helper(p) and _session_of(p) not in _FIXTURE_SESSIONS]

    left = _wait_until_gone(left_by_the_test, before)
    if left:
        described = _describe(left)
        _kill(left)
        pytest.fail(f"the test left processes behind (killed now): {described}", pytrace=False)


class FixtureProcesses:
    """Lets a fixture of module or session scope own the processes of one session."""

    @contextlib.contextmanager
    def owned(self, sid: int, what: str) -> Iterator[None]:
        """While the block runs, the processes of session ``sid`` (e.g. a child started with
        ``start_new_session=True``: its pid) are ``what``'s, not left behind by the tests that
        run meanwhile. The block must end them (the fixture's own teardown); any still alive
        after ``ORPHAN_DEADLINE_S`` are killed and the fixture errors, naming them."""
        if sid in _FIXTURE_SESSIONS:
            raise ValueError(f"session {sid} is already owned by {_FIXTURE_SESSIONS[sid]}")
        _FIXTURE_SESSIONS[sid] = what

        def of_the_session() -> list[psutil.Process]:
            return [p for p in _live_descendants().values() if _session_of(p) == sid]

        try:
            yield
        except BaseException:
            _kill(_wait_until_gone(of_the_session))  # the original error says why
            raise
        else:
            left = _wait_until_gone(of_the_session)
            if left:
                described = _describe(left)
                _kill(left)
                message = f"{what} left processes behind (killed now): {described}"
                pytest.fail(message, pytrace=False)
        finally:
            del _FIXTURE_SESSIONS[sid]


@pytest.fixture(scope="session")
def fixture_processes() -> FixtureProcesses:
    """For fixtures of wider scope that keep processes across tests (``FixtureProcesses``)."""
    return FixtureProcesses()


@dataclasses.dataclass(frozen=True)
class FaultRepeats:
    """How many times a fault scenario runs (``--fault-repeats``, ``--expensive-fault-repeats``)."""

    cheap: int
    expensive: int


@pytest.fixture(scope="session")
def fault_repeats(pytestconfig: pytest.Config) -> FaultRepeats:
    return FaultRepeats(
        cheap=pytestconfig.getoption("--fault-repeats"),
        expensive=pytestconfig.getoption("--expensive-fault-repeats"),
    )


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
