"""Test sandbox for cumps: fake ``nvidia-cuda-mps-control`` and ``nvidia-smi`` on PATH, a
private HOME/XDG cache, a short temp root (Unix socket paths stay short) and a teardown
that kills every fake daemon and asserts none survived.

Loaded by path (tests use ``--import-mode=importlib``) from tests/harness/mps/conftest.py
and tests/trainer/runtime/test_mps.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
GPU0 = "GPU-0a1b2c3d-1111-2222-3333-444455556666"
GPU1 = "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


class MpsSandbox:
    """Everything a cumps test needs; ``close()`` kills the fake daemons and removes files."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = Path(tempfile.mkdtemp(dir="/tmp", prefix="cm"))
        self.tmp = self.root / "t"
        self.home = self.root / "h"
        self.bin = self.root / "b"
        for folder in (self.tmp, self.home, self.bin):
            folder.mkdir(mode=0o700)
        self.cache = self.home / ".cache"
        self.registry = self.root / "daemons.txt"
        self.registry.touch()
        self._install("nvidia-cuda-mps-control", HERE / "fake_mps_control.py")
        self._install("nvidia-smi", HERE / "fake_nvidia_smi.py")
        monkeypatch.setenv("PATH", f"{self.bin}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
        monkeypatch.setenv("HOME", str(self.home))
        monkeypatch.setenv("XDG_CACHE_HOME", str(self.cache))
        monkeypatch.setenv("TMPDIR", str(self.tmp))
        monkeypatch.setattr(tempfile, "tempdir", str(self.tmp))
        monkeypatch.setenv("G1SOAK_CUMPS_GPU_QUERY", "nvidia-smi")
        monkeypatch.setenv("FAKE_MPS_REGISTRY", str(self.registry))
        for key in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY", "CUDA_VISIBLE_DEVICES"):
            monkeypatch.delenv(key, raising=False)
        for key in (
            "FAKE_MPS_NO_SOCKET",
            "FAKE_MPS_NOT_READY",
            "FAKE_MPS_NO_PIDFILE",
            "FAKE_MPS_SERVER_LIST",
        ):
            monkeypatch.delenv(key, raising=False)
        self.set_gpus([(0, GPU0, "NVIDIA H200")], monkeypatch)
        self.monkeypatch = monkeypatch

    def _install(self, name: str, source: Path) -> None:
        target = self.bin / name
        # A direct interpreter shebang keeps the script name as the process comm
        # ("nvidia-cuda-mps"), as for the real binary.
        target.write_text(
            f"#!{sys.executable}\n" + source.read_text(encoding="utf-8"), encoding="utf-8"
        )
        target.chmod(0o755)

    def set_gpus(
        self, gpus: list[tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch | None = None
    ) -> None:
        (monkeypatch or self.monkeypatch).setenv(
            "FAKE_GPUS", ";".join(f"{i},{u},{n}" for i, u, n in gpus)
        )

    def default_dirs(self, name: str) -> tuple[Path, Path]:
        return self.tmp / "cumps" / name / "pipe", self.tmp / "cumps" / name / "log"

    def record_dir(self, name: str) -> Path:
        return self.cache / "g1soak" / "cumps" / name

    def daemon_pids(self) -> list[int]:
        return [int(x) for x in self.registry.read_text().split()]

    def commands(self, log_dir: Path) -> list[str]:
        try:
            text = (log_dir / "control.log").read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return [line.split("command: ", 1)[1] for line in text.splitlines() if "command: " in line]

    def close(self) -> None:
        pids = self.daemon_pids()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        survivors = [pid for pid in pids if _alive(pid)]
        for path in sorted(self.root.rglob("*"), reverse=True):
            # A test may leave a 0700 tree behind; make it removable.
            if path.is_dir() and not path.is_symlink():
                path.chmod(stat.S_IRWXU)
        shutil.rmtree(self.root, ignore_errors=True)
        assert not survivors, f"fake MPS daemons survived the test: {survivors}"
