"""GPU memory of the trainer's processes (docs/contracts.md §samples ``gpu``).

NVML (``pynvml`` from nvidia-ml-py) first; where it cannot start, ``nvidia-smi`` with a
2 s timeout. Every failure is recorded in ``errors`` with its reason, never silently an
empty list: a sample with ``source: null`` means "GPU memory unknown", which the trend
analysis reports as ``unavailable`` rather than as zero. Under MPS or a foreign PID
namespace the tree's PIDs may be absent from the driver's list.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

LOG = logging.getLogger(__name__)

NVIDIA_SMI_TIMEOUT_S = 2.0
_MIB = 1024 * 1024


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


@dataclass
class GpuProcess:
    pid: int
    process_name: str
    used_gpu_memory_mib: int | None
    gpu_uuid: str

    def to_json(self) -> dict[str, Any]:
        mib = self.used_gpu_memory_mib
        return {
            "pid": self.pid,
            "process_name": self.process_name,
            "used_gpu_memory": "unknown" if mib is None else f"{mib} MiB",
            "gpu_uuid": self.gpu_uuid,
            "used_gpu_memory_mib": mib,
        }


@dataclass
class GpuSample:
    source: str | None
    processes: list[GpuProcess] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def available(self) -> bool:
        return self.source is not None

    @property
    def used_memory_mib_total(self) -> int:
        return sum(p.used_gpu_memory_mib or 0 for p in self.processes)

    def to_json(self) -> dict[str, Any]:
        return {
            "process_count": len(self.processes),
            "used_memory_mib_total": self.used_memory_mib_total,
            "processes": [p.to_json() for p in self.processes],
            "source": self.source,
            "errors": list(self.errors),
        }


class GpuSampler:
    """Per-sample GPU memory of a set of PIDs.

    Args:
        helper_pids: a set the sampler adds its ``nvidia-smi`` PIDs to while they run, so
            the process-tree sampler can leave the monitor's own helpers out.
    """

    def __init__(self, helper_pids: set[int] | None = None) -> None:
        self.helper_pids = helper_pids if helper_pids is not None else set()
        self._nvml: Any = None
        self.nvml_error: str | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
        except Exception as err:  # noqa: BLE001 - any NVML failure means "use the fallback"
            self.nvml_error = f"nvml unavailable: {type(err).__name__}: {err}"
        self._smi = shutil.which("nvidia-smi")

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception as err:  # noqa: BLE001 - shutdown is best effort
                LOG.debug("nvmlShutdown failed: %s", err)
            self._nvml = None

    def sample(self, pids: Iterable[int]) -> GpuSample:
        wanted = set(pids)
        errors: list[str] = []
        if self._nvml is not None:
            try:
                return GpuSample("nvml", [p for p in self._nvml_processes() if p.pid in wanted])
            except Exception as err:  # noqa: BLE001 - recorded, then the fallback runs
                errors.append(f"nvml query failed: {type(err).__name__}: {err}")
        elif self.nvml_error:
            errors.append(self.nvml_error)
        if self._smi is None:
            errors.append("nvidia-smi not found on PATH")
            return GpuSample(None, [], errors)
        try:
            procs = self._smi_processes()
        except (OSError, subprocess.SubprocessError, ValueError) as err:
            errors.append(f"nvidia-smi failed: {type(err).__name__}: {err}")
            return GpuSample(None, [], errors)
        return GpuSample("nvidia-smi", [p for p in procs if p.pid in wanted], errors)

    def _nvml_processes(self) -> list[GpuProcess]:
        nv = self._nvml
        out: list[GpuProcess] = []
        for index in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nv.nvmlDeviceGetUUID(handle))
            for proc in nv.nvmlDeviceGetComputeRunningProcesses(handle):
                used = getattr(proc, "usedGpuMemory", None)
                mib = None if used is None else int(used) // _MIB
                try:
                    name = _text(nv.nvmlSystemGetProcessName(proc.pid))
                except Exception:  # noqa: BLE001 - the name is cosmetic
                    name = ""
                out.append(GpuProcess(int(proc.pid), name, mib, uuid))
        return out

    def _run_smi(self, query: list[str]) -> str:
        """Run nvidia-smi with a 2 s timeout in its own process group (a timeout kills
        whatever it started, so its pipes close at once); return stdout."""
        assert self._smi is not None
        proc = subprocess.Popen(
            [self._smi, *query],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.helper_pids.add(proc.pid)
        try:
            stdout, stderr = proc.communicate(timeout=NVIDIA_SMI_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        finally:
            self.helper_pids.discard(proc.pid)
        if proc.returncode != 0:
            raise subprocess.SubprocessError(
                f"exit {proc.returncode}: {(stderr or stdout).strip()[:200]}"
            )
        return stdout

    def _smi_processes(self) -> list[GpuProcess]:
        return parse_smi_compute_apps(
            self._run_smi(
                [
                    "--query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid",
                    "--format=csv,noheader,nounits",
                ]
            )
        )

    def devices(self) -> tuple[list[dict[str, str]], list[str]]:
        """``[{index, uuid, name, driver_version}]`` (strings) and the errors met."""
        errors: list[str] = []
        if self._nvml is not None:
            try:
                nv = self._nvml
                driver = _text(nv.nvmlSystemGetDriverVersion())
                out = []
                for index in range(nv.nvmlDeviceGetCount()):
                    handle = nv.nvmlDeviceGetHandleByIndex(index)
                    out.append(
                        {
                            "index": str(index),
                            "uuid": _text(nv.nvmlDeviceGetUUID(handle)),
                            "name": _text(nv.nvmlDeviceGetName(handle)),
                            "driver_version": driver,
                        }
                    )
                return out, errors
            except Exception as err:  # noqa: BLE001
                errors.append(f"nvml query failed: {type(err).__name__}: {err}")
        elif self.nvml_error:
            errors.append(self.nvml_error)
        if self._smi is None:
            errors.append("nvidia-smi not found on PATH")
            return [], errors
        try:
            stdout = self._run_smi(
                ["--query-gpu=index,uuid,name,driver_version", "--format=csv,noheader"]
            )
        except (OSError, subprocess.SubprocessError) as err:
            errors.append(f"nvidia-smi failed: {type(err).__name__}: {err}")
            return [], errors
        out = []
        for line in stdout.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 4:
                out.append(
                    dict(zip(("index", "uuid", "name", "driver_version"), parts, strict=True))
                )
        return out, errors


def parse_smi_compute_apps(text: str) -> list[GpuProcess]:
    """Parse ``nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid``
    CSV (no header, no units). ``[N/A]`` memory becomes None."""
    out: list[GpuProcess] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        head, _, rest = line.partition(",")
        parts = rest.rsplit(",", 2)
        if len(parts) < 3 or not head.strip().isdigit():
            raise ValueError(f"unexpected nvidia-smi line {line!r}")
        pid_text, name, mem_text, uuid = (
            head.strip(),
            parts[0].strip(),
            parts[1].strip(),
            parts[2].strip(),
        )
        mib = int(mem_text) if mem_text.isdigit() else None
        out.append(GpuProcess(int(pid_text), name, mib, uuid))
    return out
