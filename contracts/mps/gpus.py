"""Physical GPU discovery and ``--gpus`` selector parsing for cumps (docs/contracts.md §cumps).

GPUs are listed through NVML (``pynvml``, from nvidia-ml-py) and, when NVML cannot be
loaded, through ``nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader`` with a
timeout. Every selector resolves to canonical physical UUIDs ``GPU-<lowercase dashed hex>``.

Topology modes (all three names are always reported so later support stays additive):
``single_gpu`` (no selector on a one-GPU host, an index or a UUID) is implemented;
``single_task_multi_gpu`` (a comma list) parses and then fails closed at the multi-GPU gate;
``task_per_gpu`` is implemented for campaigns (``soak-campaign``: one soak per GPU, one cumps
daemon per GPU); for cumps itself ``all`` is allowed for read-only diagnostics only, since
every daemon serves one GPU. MIG UUIDs are rejected.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from typing import Literal

from contracts.errors import HarnessError, UsageError

TopologyMode = Literal["single_gpu", "single_task_multi_gpu", "task_per_gpu"]
TOPOLOGY_MODES: tuple[TopologyMode, ...] = ("single_gpu", "single_task_multi_gpu", "task_per_gpu")
MULTI_GPU_GATE = "single-task multi-GPU is not supported yet (multi-GPU gate)"

_UUID_RE = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_SMI_TIMEOUT_S = 10.0
# auto (NVML, then nvidia-smi) | nvml | nvidia-smi; lets a host without a working NVML (or a
# test with a fake nvidia-smi on PATH) pin the source.
GPU_QUERY_ENV = "G1SOAK_CUMPS_GPU_QUERY"


class GpuDiscoveryError(HarnessError):
    """Neither NVML nor nvidia-smi could list the GPUs."""


@dataclass(frozen=True)
class GpuInfo:
    """One physical GPU: NVML index (PCI bus order), canonical UUID and product name."""

    index: int
    uuid: str
    name: str


@dataclass(frozen=True)
class Topology:
    """A resolved selector: the mode and the physical GPUs it names."""

    mode: TopologyMode
    gpus: tuple[GpuInfo, ...]
    selector: str | None

    @property
    def uuids(self) -> list[str]:
        return [gpu.uuid for gpu in self.gpus]


def is_mig_uuid(text: str) -> bool:
    """True for MIG device identifiers (``MIG-<uuid>`` and the older ``MIG-GPU-<uuid>/g/c``)."""
    return text.strip().upper().startswith("MIG-")


def canonical_uuid(text: str) -> str | None:
    """Return ``GPU-<lowercase dashed hex>`` for a full GPU UUID, else None (MIG included)."""
    value = text.strip()
    if value[:4].upper() != "GPU-":
        return None
    value = "GPU-" + value[4:].lower()
    return value if _UUID_RE.match(value) else None


def _decode(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _nvml_gpus() -> list[GpuInfo]:
    import pynvml  # nvidia-ml-py; pure Python, loads libnvidia-ml lazily in nvmlInit

    pynvml.nvmlInit()
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            raw_uuid = _decode(pynvml.nvmlDeviceGetUUID(handle))
            uuid = canonical_uuid(raw_uuid)
            if uuid is None:
                raise GpuDiscoveryError(
                    f"NVML returned a non-GPU UUID {raw_uuid!r} for index {index}"
                )
            gpus.append(
                GpuInfo(index=index, uuid=uuid, name=_decode(pynvml.nvmlDeviceGetName(handle)))
            )
        return gpus
    finally:
        pynvml.nvmlShutdown()


def parse_nvidia_smi_csv(text: str) -> list[GpuInfo]:
    """Parse ``index, uuid, name`` rows from ``nvidia-smi --format=csv,noheader``."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split(",", 2)]
        if len(parts) != 3 or not parts[0].isdigit():
            raise GpuDiscoveryError(f"unexpected nvidia-smi row {line.strip()!r}")
        uuid = canonical_uuid(parts[1])
        if uuid is None:
            raise GpuDiscoveryError(f"nvidia-smi returned a non-GPU UUID {parts[1]!r}")
        gpus.append(GpuInfo(index=int(parts[0]), uuid=uuid, name=parts[2]))
    return gpus


def _smi_gpus(timeout_s: float) -> list[GpuInfo]:
    argv = ["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError as err:
        raise GpuDiscoveryError("nvidia-smi is not on PATH") from err
    except subprocess.TimeoutExpired as err:
        raise GpuDiscoveryError(f"nvidia-smi did not answer within {timeout_s:g} s") from err
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise GpuDiscoveryError(
            f"nvidia-smi exited {proc.returncode}: {detail[-1] if detail else 'no output'}"
        )
    return parse_nvidia_smi_csv(proc.stdout)


def discover_gpus(*, timeout_s: float = _SMI_TIMEOUT_S) -> list[GpuInfo]:
    """List physical GPUs (NVML first, then nvidia-smi), sorted by index.

    Raises:
        GpuDiscoveryError: neither source answered; the message names both causes.
    """
    source = os.environ.get(GPU_QUERY_ENV, "auto").strip() or "auto"
    if source not in ("auto", "nvml", "nvidia-smi"):
        raise GpuDiscoveryError(f"{GPU_QUERY_ENV}={source!r} must be auto, nvml or nvidia-smi")
    nvml_error = ""
    if source in ("auto", "nvml"):
        try:
            return sorted(_nvml_gpus(), key=lambda gpu: gpu.index)
        except Exception as err:  # pynvml raises its own NVMLError family (and ImportError)
            nvml_error = f"NVML: {type(err).__name__}: {err}"
            if source == "nvml":
                raise GpuDiscoveryError(nvml_error) from err
    try:
        return sorted(_smi_gpus(timeout_s), key=lambda gpu: gpu.index)
    except GpuDiscoveryError as err:
        cause = f"{nvml_error}; {err}" if nvml_error else str(err)
        raise GpuDiscoveryError(f"cannot list GPUs ({cause})") from err


def _resolve_one(token: str, gpus: list[GpuInfo], selector: str) -> GpuInfo:
    value = token.strip()
    if not value:
        raise UsageError(f"--gpus {selector!r} has an empty entry; pass a GPU index or UUID")
    if is_mig_uuid(value):
        raise UsageError(
            f"--gpus {value!r} is a MIG device; MIG UUIDs are not supported, pass a physical GPU index or UUID"
        )
    if value.isdigit():
        for gpu in gpus:
            if gpu.index == int(value):
                return gpu
        known = ", ".join(str(gpu.index) for gpu in gpus) or "none"
        raise UsageError(f"--gpus {value}: unknown GPU index (visible indices: {known})")
    uuid = canonical_uuid(value)
    if uuid is None:
        raise UsageError(
            f"--gpus {value!r} is neither a GPU index nor a full GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"
        )
    for gpu in gpus:
        if gpu.uuid == uuid:
            return gpu
    known = ", ".join(gpu.uuid for gpu in gpus) or "none"
    raise UsageError(f"--gpus {value}: no such GPU (visible UUIDs: {known})")


def resolve_topology(selector: str | None, gpus: list[GpuInfo], *, allow_all: bool) -> Topology:
    """Resolve a ``--gpus`` selector against the physical GPUs.

    Args:
        selector: None (the single GPU), an index, a UUID, a comma list or ``all``.
        gpus: physical GPUs from :func:`discover_gpus`.
        allow_all: True only for read-only diagnostics (``doctor``); ``start`` refuses ``all``.

    Raises:
        UsageError: bad selector, MIG UUID, comma list (multi-GPU gate), ``all`` where a
            daemon would be started, or several GPUs visible without a selector.
        HarnessError: no GPU at all.
    """
    if selector is None or not selector.strip():
        if not gpus:
            raise HarnessError("no NVIDIA GPU is visible; cumps needs one physical GPU")
        if len(gpus) > 1:
            listing = ", ".join(f"{gpu.index}={gpu.uuid}" for gpu in gpus)
            raise UsageError(
                f"{len(gpus)} GPUs are visible ({listing}); pass --gpus <index-or-uuid>"
            )
        return Topology(mode="single_gpu", gpus=(gpus[0],), selector=None)
    text = selector.strip()
    if text.lower() == "all":
        if not allow_all:
            raise UsageError(
                "--gpus all (task_per_gpu) is for read-only diagnostics (status, doctor); "
                "start one daemon per GPU with --gpus <index-or-uuid>"
            )
        if not gpus:
            raise HarnessError("no NVIDIA GPU is visible; cumps needs one physical GPU")
        return Topology(mode="task_per_gpu", gpus=tuple(gpus), selector=text)
    if "," in text:
        resolved = tuple(_resolve_one(token, gpus, text) for token in text.split(","))
        names = ",".join(gpu.uuid for gpu in resolved)
        raise UsageError(f"--gpus {text} ({names}): {MULTI_GPU_GATE}; pass one GPU index or UUID")
    return Topology(mode="single_gpu", gpus=(_resolve_one(text, gpus, text),), selector=text)


TOPOLOGY_MODE_STATES: tuple[tuple[TopologyMode, str, str], ...] = (
    ("single_gpu", "none (one GPU visible), an index or a UUID", "implemented"),
    (
        "single_task_multi_gpu",
        "comma list; a campaign's gpus_per_cell > 1",
        "fails closed: " + MULTI_GPU_GATE,
    ),
    (
        "task_per_gpu",
        "all (cumps diagnostics); a campaign's cells (soak-campaign)",
        (
            "implemented for campaigns: one soak and one cumps daemon per GPU; "
            "cumps start refuses all (each daemon serves one GPU)"
        ),
    ),
)
"""``(mode, selector, state)`` of each topology mode, for status/doctor and the support matrix."""


def topology_modes_report(gpu_count: int) -> list[dict[str, object]]:
    """The three topology modes with what this build does with each (for status/doctor)."""
    available = {
        "single_gpu": gpu_count >= 1,
        "single_task_multi_gpu": False,
        "task_per_gpu": gpu_count >= 1,
    }
    return [
        {"mode": mode, "selector": selector, "state": state, "available": available[mode]}
        for mode, selector, state in TOPOLOGY_MODE_STATES
    ]


def visible_device_uuids(value: str | None, gpus: list[GpuInfo]) -> list[str] | None:
    """Map a ``CUDA_VISIBLE_DEVICES`` value to physical UUIDs, CUDA-style.

    Entries are indices or (prefixes of) GPU UUIDs; like CUDA, parsing stops at the first
    entry that names no GPU. Returns None when the variable is unset (all GPUs visible).
    Numeric entries follow NVML/PCI order (set ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` on multi-GPU
    hosts so CUDA agrees).
    """
    if value is None:
        return None
    uuids: list[str] = []
    for token in value.split(","):
        entry = token.strip()
        match = resolve_visible_entry(entry, gpus)
        if match is None:
            break
        uuids.append(match.uuid)
    return uuids


def resolve_visible_entry(entry: str, gpus: list[GpuInfo]) -> GpuInfo | None:
    """One ``CUDA_VISIBLE_DEVICES`` entry (index, UUID or unique UUID prefix) -> GPU, or None."""
    if not entry or is_mig_uuid(entry):
        return None
    if entry.isdigit():
        return next((gpu for gpu in gpus if gpu.index == int(entry)), None)
    if entry[:4].upper() != "GPU-":
        return None
    prefix = "GPU-" + entry[4:].lower()
    matches = [gpu for gpu in gpus if gpu.uuid.startswith(prefix)]
    return matches[0] if len(matches) == 1 else None
