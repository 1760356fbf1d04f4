"""GPU snapshots and the acceptance checks of the backend probe (docs/contracts.md §backend-probe).

A snapshot is plain JSON: ``{time_utc, source, gpus[{index, uuid, name, driver_version,
clocks, power, memory_total_mib, memory_used_mib}], compute_apps[{pid, process_name,
used_gpu_memory, gpu_uuid}], notes, errors?}``. It is read through NVML (``pynvml`` from
nvidia-ml-py) and, when NVML cannot start, through ``nvidia-smi`` with a timeout. A source
that was tried and failed is a *note* when the other source answered, and an *error* when
nothing answered: acceptance mode fails on errors, a missing or empty ``gpus`` list, a missing
``compute_apps`` list, or any compute app on the probed GPU's UUID. Apps on other GPUs are
recorded only (improvement on UniLab, which refused any app anywhere).

``G1SOAK_PROBE_GPU_QUERY`` = ``auto`` (default: NVML, then nvidia-smi) | ``nvml`` |
``nvidia-smi`` pins the source, so a host without a working NVML, or a test with a fake
``nvidia-smi`` on PATH, gets the same answer every time.

This module is pure Python (no torch): the harness parent and the trainer's probe child both
use it, the child before it initialises CUDA.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "GPU_QUERY_ENV",
    "PROFILER_ENV_KEYS",
    "QUIESCE_POLL_S",
    "QUIESCE_TIMEOUT_S",
    "active_apps",
    "probed_gpu_uuid",
    "profiler_env_failure",
    "take_snapshot",
    "validate_snapshot",
    "wait_for_idle",
]

GPU_QUERY_ENV = "G1SOAK_PROBE_GPU_QUERY"
GPU_QUERY_SOURCES = ("auto", "nvml", "nvidia-smi")
PROFILER_ENV_KEYS: tuple[str, ...] = (
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_INJECTION64_PATH",
    "G1SOAK_PROFILE_TRACE",
    "G1SOAK_PROFILE_START_COMMAND",
    "G1SOAK_PROFILE_STOP_COMMAND",
)
"""Present (even empty) → acceptance refuses to run: they change what is measured."""
QUIESCE_POLL_S = 0.25
QUIESCE_TIMEOUT_S = 10.0
NVIDIA_SMI_TIMEOUT_S = 10.0
_MIB = 1024 * 1024
_SMI_GPU_FIELDS = (
    "index",
    "uuid",
    "name",
    "driver_version",
    "clocks.gr",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.gr",
    "clocks.max.mem",
    "power.draw",
    "power.limit",
    "memory.total",
    "memory.used",
)
_SMI_APP_FIELDS = ("pid", "process_name", "used_gpu_memory", "gpu_uuid")


class SnapshotSourceError(Exception):
    """One source (NVML or nvidia-smi) could not answer; the message says why."""


def _utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"
    return value


def _int_or_none(text: str) -> int | None:
    value = _number(text)
    return None if value is None else int(value)


# --------------------------------------------------------------------------------- NVML
def _nvml_snapshot() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    try:
        import pynvml
    except ImportError as err:
        raise SnapshotSourceError(f"nvml unavailable: pynvml cannot be imported ({err})") from err
    try:
        pynvml.nvmlInit()
    except Exception as err:
        raise SnapshotSourceError(f"nvml unavailable: {type(err).__name__}: {err}") from err
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus: list[dict[str, Any]] = []
        apps: list[dict[str, Any]] = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
            gpus.append(_nvml_gpu(pynvml, handle, index, uuid, driver))
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                used = getattr(proc, "usedGpuMemory", None)
                try:
                    name = _text(pynvml.nvmlSystemGetProcessName(proc.pid))
                except Exception:  # noqa: BLE001 - the name is cosmetic
                    name = ""
                apps.append(
                    {
                        "pid": int(proc.pid),
                        "process_name": name,
                        "used_gpu_memory": None if used is None else int(used) // _MIB,
                        "gpu_uuid": uuid,
                    }
                )
        return gpus, apps
    except SnapshotSourceError:
        raise
    except Exception as err:
        raise SnapshotSourceError(f"nvml query failed: {type(err).__name__}: {err}") from err
    finally:
        with contextlib.suppress(Exception):  # shutdown is best effort
            pynvml.nvmlShutdown()


def _nvml_optional(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception:  # noqa: BLE001 - an unsupported query is recorded as null
        return None


def _nvml_gpu(nv: Any, handle: Any, index: int, uuid: str, driver: str) -> dict[str, Any]:
    clock = nv.NVML_CLOCK_GRAPHICS if hasattr(nv, "NVML_CLOCK_GRAPHICS") else 0
    sm = nv.NVML_CLOCK_SM if hasattr(nv, "NVML_CLOCK_SM") else 1
    mem = nv.NVML_CLOCK_MEM if hasattr(nv, "NVML_CLOCK_MEM") else 2
    memory = _nvml_optional(lambda: nv.nvmlDeviceGetMemoryInfo(handle))
    draw_mw = _nvml_optional(lambda: nv.nvmlDeviceGetPowerUsage(handle))
    limit_mw = _nvml_optional(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(handle))
    return {
        "index": index,
        "uuid": uuid,
        "name": _text(nv.nvmlDeviceGetName(handle)),
        "driver_version": driver,
        "clocks": {
            "graphics_mhz": _nvml_optional(lambda: int(nv.nvmlDeviceGetClockInfo(handle, clock))),
            "sm_mhz": _nvml_optional(lambda: int(nv.nvmlDeviceGetClockInfo(handle, sm))),
            "memory_mhz": _nvml_optional(lambda: int(nv.nvmlDeviceGetClockInfo(handle, mem))),
            "max_graphics_mhz": _nvml_optional(
                lambda: int(nv.nvmlDeviceGetMaxClockInfo(handle, clock))
            ),
            "max_memory_mhz": _nvml_optional(
                lambda: int(nv.nvmlDeviceGetMaxClockInfo(handle, mem))
            ),
        },
        "power": {
            "draw_w": None if draw_mw is None else float(draw_mw) / 1000.0,
            "limit_w": None if limit_mw is None else float(limit_mw) / 1000.0,
        },
        "memory_total_mib": None if memory is None else int(memory.total) // _MIB,
        "memory_used_mib": None if memory is None else int(memory.used) // _MIB,
    }


# --------------------------------------------------------------------------------- nvidia-smi
def _run_smi(smi: str, query: str) -> str:
    argv = [smi, query, "--format=csv,noheader,nounits"]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as err:
        raise SnapshotSourceError(
            f"nvidia-smi did not answer within {NVIDIA_SMI_TIMEOUT_S:g} s"
        ) from err
    except OSError as err:
        raise SnapshotSourceError(f"nvidia-smi cannot run: {err.strerror or err}") from err
    if proc.returncode != 0:
        detail = " ".join((proc.stderr or proc.stdout).split())[:200]
        raise SnapshotSourceError(f"nvidia-smi failed (exit {proc.returncode}): {detail}")
    return proc.stdout


def parse_smi_gpus(text: str) -> list[dict[str, Any]]:
    """Rows of ``nvidia-smi --query-gpu=<_SMI_GPU_FIELDS> --format=csv,noheader,nounits``."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(_SMI_GPU_FIELDS) or not parts[0].isdigit():
            raise SnapshotSourceError(f"nvidia-smi: unexpected GPU row {line.strip()!r}")
        row = dict(zip(_SMI_GPU_FIELDS, parts, strict=True))
        gpus.append(
            {
                "index": int(row["index"]),
                "uuid": row["uuid"],
                "name": row["name"],
                "driver_version": row["driver_version"],
                "clocks": {
                    "graphics_mhz": _int_or_none(row["clocks.gr"]),
                    "sm_mhz": _int_or_none(row["clocks.sm"]),
                    "memory_mhz": _int_or_none(row["clocks.mem"]),
                    "max_graphics_mhz": _int_or_none(row["clocks.max.gr"]),
                    "max_memory_mhz": _int_or_none(row["clocks.max.mem"]),
                },
                "power": {
                    "draw_w": _number(row["power.draw"]),
                    "limit_w": _number(row["power.limit"]),
                },
                "memory_total_mib": _int_or_none(row["memory.total"]),
                "memory_used_mib": _int_or_none(row["memory.used"]),
            }
        )
    return gpus


def parse_smi_apps(text: str) -> list[dict[str, Any]]:
    """Rows of ``nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid``."""
    apps = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0].isdigit():
            raise SnapshotSourceError(f"nvidia-smi: unexpected compute-app row {line.strip()!r}")
        apps.append(
            {
                "pid": int(parts[0]),
                "process_name": ",".join(parts[1:-2]),  # a name may contain commas
                "used_gpu_memory": _int_or_none(parts[-2]),
                "gpu_uuid": parts[-1],
            }
        )
    return apps


def _smi_snapshot() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise SnapshotSourceError("nvidia-smi not found on PATH")
    gpus = parse_smi_gpus(_run_smi(smi, "--query-gpu=" + ",".join(_SMI_GPU_FIELDS)))
    apps = parse_smi_apps(_run_smi(smi, "--query-compute-apps=" + ",".join(_SMI_APP_FIELDS)))
    return gpus, apps


# --------------------------------------------------------------------------------- snapshot
def query_source(environ: Mapping[str, str] | None = None) -> str:
    """The pinned source (``G1SOAK_PROBE_GPU_QUERY``); an unknown value is a usage error."""
    env = os.environ if environ is None else environ
    value = env.get(GPU_QUERY_ENV, "auto").strip() or "auto"
    if value not in GPU_QUERY_SOURCES:
        msg = f"{GPU_QUERY_ENV}={value!r} is not one of {', '.join(GPU_QUERY_SOURCES)}; unset it or use auto"
        raise ValueError(msg)
    return value


def take_snapshot() -> dict[str, Any]:
    """One GPU snapshot (see the module docstring); never raises for a GPU problem."""
    snapshot: dict[str, Any] = {"time_utc": _utc_now(), "source": None, "notes": []}
    try:
        mode = query_source()
    except ValueError as err:
        snapshot.update(gpus=[], compute_apps=[], errors=[str(err)])
        return snapshot
    order = {"auto": ("nvml", "nvidia-smi"), "nvml": ("nvml",), "nvidia-smi": ("nvidia-smi",)}[mode]
    failures: list[str] = []
    for source in order:
        try:
            gpus, apps = _nvml_snapshot() if source == "nvml" else _smi_snapshot()
        except SnapshotSourceError as err:
            failures.append(str(err))
            continue
        snapshot.update(source=source, gpus=gpus, compute_apps=apps)
        snapshot["notes"] = failures
        return snapshot
    snapshot.update(gpus=[], compute_apps=[], errors=failures)
    return snapshot


def probed_gpu_uuid(
    snapshot: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> str | None:
    """UUID of the GPU a child's ``cuda:0`` lands on: the first ``CUDA_VISIBLE_DEVICES``
    entry (UUID prefix or index), else the GPU with index 0. None when it cannot be named."""
    env = os.environ if environ is None else environ
    gpus = snapshot.get("gpus") or []
    first = env.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if first:
        if first.upper().startswith("GPU-"):
            matches = [g["uuid"] for g in gpus if str(g["uuid"]).lower().startswith(first.lower())]
            return matches[0] if len(matches) == 1 else None
        if first.isdigit():
            matches = [g["uuid"] for g in gpus if g["index"] == int(first)]
            return matches[0] if matches else None
        return None  # MIG or malformed selectors are not mapped
    matches = [g["uuid"] for g in gpus if g["index"] == 0]
    return matches[0] if matches else None


def active_apps(snapshot: Mapping[str, Any], uuid: str | None) -> list[dict[str, Any]]:
    """Compute apps on ``uuid`` (all apps when the probed GPU is unknown)."""
    apps = snapshot.get("compute_apps") or []
    if uuid is None:
        return list(apps)
    return [a for a in apps if str(a.get("gpu_uuid", "")).lower() == uuid.lower()]


def validate_snapshot(
    snapshot: Mapping[str, Any], stage: str, environ: Mapping[str, str] | None = None
) -> str | None:
    """The acceptance failure message of ``snapshot`` at ``stage`` (e.g. ``before-run``), or None.

    Messages (interface strings): ``requires a queryable GPU <stage>; <why>`` and
    ``requires an idle GPU <stage>; active PIDs: <pid> (<name>), ...``.
    """
    errors = snapshot.get("errors")
    if errors:
        return f"requires a queryable GPU {stage}; {'; '.join(map(str, errors))}"
    if not isinstance(snapshot.get("gpus"), list):
        return f"requires a queryable GPU {stage}; the snapshot has no gpus list"
    if not snapshot["gpus"]:
        return f"requires a queryable GPU {stage}; no GPU was listed (gpus is empty)"
    if not isinstance(snapshot.get("compute_apps"), list):
        return f"requires a queryable GPU {stage}; the snapshot has no compute_apps list"
    env = os.environ if environ is None else environ
    uuid = probed_gpu_uuid(snapshot, env)
    if uuid is None:
        selector = env.get("CUDA_VISIBLE_DEVICES", "")
        return (
            f"requires a queryable GPU {stage}; CUDA_VISIBLE_DEVICES={selector!r} names no listed "
            "GPU; use an index or a GPU UUID from nvidia-smi -L"
        )
    busy = active_apps(snapshot, uuid)
    if busy:
        listed = ", ".join(f"{a['pid']} ({a.get('process_name') or '?'})" for a in busy)
        return f"requires an idle GPU {stage}; active PIDs: {listed} on {uuid}"
    return None


def wait_for_idle(
    environ: Mapping[str, str] | None = None,
    *,
    timeout_s: float = QUIESCE_TIMEOUT_S,
    poll_s: float = QUIESCE_POLL_S,
) -> tuple[dict[str, Any], float]:
    """Poll snapshots every ``poll_s`` until the probed GPU has no compute app, at most
    ``timeout_s``; return the last snapshot and the seconds waited (validate it afterwards)."""
    start = time.monotonic()
    while True:
        snapshot = take_snapshot()
        waited = time.monotonic() - start
        queryable = not snapshot.get("errors") and snapshot.get("gpus")
        uuid = probed_gpu_uuid(snapshot, environ) if queryable else None
        if not queryable or uuid is None or not active_apps(snapshot, uuid):
            return snapshot, round(waited, 3)
        if waited >= timeout_s:
            return snapshot, round(waited, 3)
        time.sleep(poll_s)


def profiler_env_failure(environ: Mapping[str, str] | None = None) -> str | None:
    """The acceptance refusal when a profiler variable is present (even empty), else None."""
    env = os.environ if environ is None else environ
    present = [key for key in PROFILER_ENV_KEYS if key in env]
    if not present:
        return None
    return (
        f"acceptance mode refuses profiler environment variables: {', '.join(present)} "
        "(set, even if empty); unset them or run without --acceptance"
    )


def environment_record(environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """``environment{CUDA_VISIBLE_DEVICES, <profiler keys>}``: value, or None when unset."""
    env = os.environ if environ is None else environ
    keys = ("CUDA_VISIBLE_DEVICES", *PROFILER_ENV_KEYS)
    return {key: env.get(key) for key in keys}
