"""Fixtures for the probe tests: a sandboxed environment with a fake ``nvidia-smi`` on PATH,
a fake ``pynvml`` or a crashing child on demand, and a runner for the real parent CLI."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
UUID = "GPU-11111111-2222-3333-4444-555555555555"
OTHER_UUID = "GPU-99999999-8888-7777-6666-555555555555"


def _without_profiler_keys(env: dict[str, str]) -> dict[str, str]:
    from contracts.gpu_snapshot import PROFILER_ENV_KEYS

    return {
        k: v for k, v in env.items() if k not in PROFILER_ENV_KEYS and not k.startswith("FAKE_")
    }


@pytest.fixture
def smi_bin(tmp_path: Path) -> Path:
    """A folder holding an executable ``nvidia-smi`` that runs fake_nvidia_smi.py."""
    folder = tmp_path / "bin"
    folder.mkdir()
    wrapper = folder / "nvidia-smi"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "fake_nvidia_smi.py"}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return folder


@pytest.fixture
def probe_env(tmp_path: Path, smi_bin: Path, isolated_cache: Path) -> dict[str, str]:
    """Environment for a parent run: fake nvidia-smi first on PATH (one idle GPU), NVML pinned
    off, no profiler variables, a private asset cache."""
    env = _without_profiler_keys(dict(os.environ))
    env["PATH"] = f"{smi_bin}{os.pathsep}{env.get('PATH', '')}"
    env["G1SOAK_PROBE_GPU_QUERY"] = "nvidia-smi"
    env["FAKE_SMI_GPUS"] = f"0,{UUID},NVIDIA H200,580.95.05"
    env["FAKE_SMI_APPS"] = ""
    env["PYTHONPATH"] = str(REPO)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["XDG_CACHE_HOME"] = str(isolated_cache)
    env["HF_HUB_OFFLINE"] = "1"
    return env


RunProbe = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_probe(probe_env: dict[str, str], tmp_path: Path) -> RunProbe:
    """``run_probe(*args, env=None)`` runs ``python -m harness.probe.cli`` in ``tmp_path``."""

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness.probe.cli", *args],
            env=probe_env if env is None else env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    return run
