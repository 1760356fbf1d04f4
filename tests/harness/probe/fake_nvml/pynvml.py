"""A fake ``pynvml`` (put its folder first on PYTHONPATH): ``FAKE_NVML=fail`` makes nvmlInit
raise; otherwise one GPU ``FAKE_NVML_UUID`` with the apps of ``FAKE_NVML_PIDS`` (comma list)."""

import os
from types import SimpleNamespace

NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2


class NVMLError(Exception):
    pass


def nvmlInit():
    if os.environ.get("FAKE_NVML") == "fail":
        raise NVMLError("NVML Shared Library Not Found (fake)")


def nvmlShutdown():
    pass


def nvmlSystemGetDriverVersion():
    return "580.95.05"


def nvmlDeviceGetCount():
    return 1


def nvmlDeviceGetHandleByIndex(index):
    return index


def nvmlDeviceGetUUID(handle):
    return os.environ.get("FAKE_NVML_UUID", "GPU-11111111-2222-3333-4444-555555555555")


def nvmlDeviceGetName(handle):
    return b"NVIDIA H200"


def nvmlDeviceGetClockInfo(handle, kind):
    return 1980


def nvmlDeviceGetMaxClockInfo(handle, kind):
    return 1980


def nvmlDeviceGetMemoryInfo(handle):
    return SimpleNamespace(total=150 * 2**30, used=2**20)


def nvmlDeviceGetPowerUsage(handle):
    raise NVMLError("Not Supported")


def nvmlDeviceGetEnforcedPowerLimit(handle):
    return 700000


def nvmlDeviceGetComputeRunningProcesses(handle):
    pids = [p for p in os.environ.get("FAKE_NVML_PIDS", "").split(",") if p]
    return [SimpleNamespace(pid=int(p), usedGpuMemory=512 * 2**20) for p in pids]


def nvmlSystemGetProcessName(pid):
    return b"python3"
