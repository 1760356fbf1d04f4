"""Run-dir progress (docs/contracts.md §run-directory) and GPU sampling fallbacks (§samples)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import psutil
import pytest

from harness.soak import gpu as gpu_mod
from harness.soak.gpu import GpuSampler, parse_smi_compute_apps
from harness.soak.progress import read_last_progress_line, sample_progress


def test_progress_sums_bytes_recursively_without_the_console_log(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"x" * 10)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.bin").write_bytes(b"y" * 5)
    (tmp_path / "soak-console.log").write_bytes(b"z" * 1000)
    (tmp_path / "sub" / "soak-console.log").write_bytes(b"w" * 3)  # only the root log is excluded
    os.symlink(tmp_path / "a.bin", tmp_path / "link")
    sample = sample_progress(tmp_path)
    assert (sample.file_count, sample.bytes_total) == (3, 18)
    assert sample.max_mtime is not None


def test_missing_run_dir_is_empty_progress(tmp_path: Path) -> None:
    sample = sample_progress(tmp_path / "absent")
    assert (sample.file_count, sample.bytes_total, sample.max_mtime, sample.last) == (
        0,
        0,
        None,
        None,
    )


def test_last_progress_line_skips_a_partial_line(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    path.write_text('{"iteration": 1}\n{"iteration": 2}\n{"iterat')
    assert read_last_progress_line(path) == {"iteration": 2}
    path.write_text('{"iteration": NaN}\n')
    assert read_last_progress_line(path) is None
    path.write_text("[1]\n")
    assert read_last_progress_line(path) is None


def test_nvidia_smi_csv_is_parsed_with_unknown_memory() -> None:
    text = "123, python, 2048, GPU-abc\n456, my, app, [N/A], GPU-def\n\n"
    procs = parse_smi_compute_apps(text)
    assert [(p.pid, p.process_name, p.used_gpu_memory_mib, p.gpu_uuid) for p in procs] == [
        (123, "python", 2048, "GPU-abc"),
        (456, "my, app", None, "GPU-def"),
    ]
    assert procs[0].to_json()["used_gpu_memory"] == "2048 MiB"
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        parse_smi_compute_apps("garbage\n")


def _fake_smi(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_without_nvml_the_sampler_falls_back_to_nvidia_smi(tmp_path: Path, monkeypatch) -> None:
    smi = _fake_smi(
        tmp_path, 'echo "$G1SOAK_TEST_PID, python, 512, GPU-x"\necho "1, other, 9, GPU-x"\n'
    )
    monkeypatch.setenv("G1SOAK_TEST_PID", str(os.getpid()))
    sampler = GpuSampler()
    sampler._nvml, sampler.nvml_error, sampler._smi = None, "nvml unavailable: test", str(smi)
    sample = sampler.sample([os.getpid()])
    assert sample.source == "nvidia-smi"
    assert [p.pid for p in sample.processes] == [os.getpid()]
    assert sample.used_memory_mib_total == 512
    assert sample.errors == ["nvml unavailable: test"]
    assert sampler.helper_pids == set()


def test_gpu_unavailable_records_every_reason(tmp_path: Path, monkeypatch) -> None:
    sampler = GpuSampler()
    sampler._nvml, sampler.nvml_error, sampler._smi = None, "nvml unavailable: test", None
    sample = sampler.sample([1])
    doc = sample.to_json()
    assert doc["source"] is None and doc["processes"] == []
    assert doc["errors"] == ["nvml unavailable: test", "nvidia-smi not found on PATH"]
    failing = _fake_smi(tmp_path, "echo boom >&2\nexit 3\n")
    sampler._smi = str(failing)
    assert "nvidia-smi failed" in sampler.sample([1]).errors[-1]
    hanging = _fake_smi(tmp_path, "sleep 31.25\n")
    sampler._smi = str(hanging)
    monkeypatch.setattr(gpu_mod, "NVIDIA_SMI_TIMEOUT_S", 0.2)
    assert "TimeoutExpired" in sampler.sample([1]).errors[-1]
    devices, errors = sampler.devices()
    assert devices == [] and errors
    # A timed-out nvidia-smi must not leave what it started behind (its whole group is killed).
    assert not [
        p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "31.25"]
    ]
