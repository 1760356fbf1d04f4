"""CUDA MPS execution sharing for the trainer (docs/contracts.md §cumps trainer integration, §cuda-process-sharing).

``resolve_cuda_process_sharing`` runs in the learner process during preflight, **before
any ``torch.cuda`` call** (the CUDA driver connects to an MPS control daemon when CUDA is
first initialised, so the pipe variables must already be set). It returns the
``runtime_manifest.cuda_process_sharing`` record.

With ``"mps"`` it (1) rewrites numeric ``CUDA_VISIBLE_DEVICES`` entries to GPU UUIDs,
(2) keeps a caller-set ``CUDA_MPS_PIPE_DIRECTORY`` or else selects the single live
cumps-recorded daemon covering the learner's GPU and sets the pipe/log variables in this
process's environment (children inherit them), (3) validates rank/world size, that learner
and collector devices are the same physical GPU (torch and NVML), that the control pipe is a
readable/writable socket or FIFO and that the daemon reports a server PID, and (4) raises
:class:`MpsPreflightError` naming ``cumps start`` on the first failure; there is no silent
multi-context fallback. With ``null`` it records the ambient host state and never raises.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, MutableMapping
from typing import Any

from contracts.mps.gpus import (
    GpuDiscoveryError,
    GpuInfo,
    canonical_uuid,
    discover_gpus,
    is_mig_uuid,
    resolve_visible_entry,
)
from contracts.mps.probe import (
    PipeSelection,
    SelectionError,
    observe_ambient,
    probe_pipe,
    select_pipe,
)
from contracts.names import Owner, ShutdownPhase
from trainer.rundir.summary import null_cuda_process_sharing

MPS_MODE = "mps"
_HINT = "start a daemon with `cumps start` (check with `cumps doctor`)"

CudaUuidOf = Callable[[int], str]
"""Maps a process-relative CUDA ordinal to the device's UUID (default: torch)."""


class MpsPreflightError(RuntimeError):
    """MPS was requested and cannot be used: a preflight failure (owner learner, exit 1)."""

    owner = Owner.LEARNER
    phase = ShutdownPhase.STARTUP_CUDA_PREFLIGHT


def _fail(message: str) -> MpsPreflightError:
    text = message if "cumps start" in message else f"{message}; {_HINT}"
    return MpsPreflightError(f"training.cuda_process_sharing=mps: {text}")


def _mode_of(training_cfg_or_mode: Any) -> str | None:
    if training_cfg_or_mode is None or isinstance(training_cfg_or_mode, str):
        mode = training_cfg_or_mode
    else:
        mode = training_cfg_or_mode.cuda_process_sharing
    if mode not in (None, MPS_MODE):
        raise ValueError(f"training.cuda_process_sharing={mode!r} must be null or 'mps'")
    return mode


def cuda_index(device: str) -> int | None:
    """``cuda`` -> 0, ``cuda:<i>`` -> i; None for anything that is not a CUDA device."""
    text = str(device).strip()
    if text == "cuda":
        return 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    return None


def _base_record(
    mode: str | None, learner_device: Any, collector_device: Any, rank: Any, world_size: Any
) -> dict:
    def exact_int(value: Any, default: int) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    record = null_cuda_process_sharing(
        str(learner_device), None if collector_device is None else str(collector_device)
    )
    record.update(configured=mode, rank=exact_int(rank, 0), world_size=exact_int(world_size, 1))
    return record


def _torch_uuid_of(index: int) -> str:
    import torch  # only after the MPS variables are in place

    if not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    count = torch.cuda.device_count()
    if index >= count:
        raise RuntimeError(f"cuda:{index} does not exist ({count} visible CUDA device(s))")
    raw = str(torch.cuda.get_device_properties(index).uuid)
    return raw if raw[:4].upper() in ("GPU-", "MIG-") else "GPU-" + raw


def _cuda_initialised() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a half-imported torch: nothing was initialised through it
        return False


def _visible_uuid(
    index: int, environ: MutableMapping[str, str], gpus: list[GpuInfo] | None
) -> str | None:
    """Physical UUID of process-relative CUDA ordinal ``index`` from CUDA_VISIBLE_DEVICES/NVML."""
    raw = environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        if gpus is None:
            return None
        match = next((gpu for gpu in gpus if gpu.index == index), None)
        return None if match is None else match.uuid
    entries = [entry.strip() for entry in raw.split(",")]
    if index >= len(entries):
        return None
    full = canonical_uuid(entries[index])
    if full is not None:
        return full
    match = None if gpus is None else resolve_visible_entry(entries[index], gpus)
    return None if match is None else match.uuid


def rewrite_visible_devices(environ: MutableMapping[str, str], gpus: list[GpuInfo]) -> str | None:
    """Replace numeric ``CUDA_VISIBLE_DEVICES`` entries by UUIDs in place (step 1); return the value.

    Raises:
        MpsPreflightError: an index names no GPU, or an entry is a MIG device.
    """
    raw = environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    out = []
    for token in raw.split(","):
        entry = token.strip()
        if is_mig_uuid(entry):
            raise _fail(
                f"CUDA_VISIBLE_DEVICES entry {entry!r} is a MIG device; MPS here needs a physical GPU"
            )
        if entry.isdigit():
            match = next((gpu for gpu in gpus if gpu.index == int(entry)), None)
            if match is None:
                known = ", ".join(str(gpu.index) for gpu in gpus) or "none"
                raise _fail(f"CUDA_VISIBLE_DEVICES entry {entry} names no GPU (indices: {known})")
            entry = match.uuid
        out.append(entry)
    value = ",".join(out)
    environ["CUDA_VISIBLE_DEVICES"] = value
    return value


def _observe_null(record: dict, environ: MutableMapping[str, str]) -> dict:
    """Ambient observation for ``null`` mode; every fact is best effort, nothing raises."""
    record.update(observe_ambient(environ))  # never raises
    for key, device in (
        ("learner_gpu_uuid", record["learner_device"]),
        ("collector_gpu_uuid", record["collector_device"]),
    ):
        try:
            index = None if device is None else cuda_index(device)
            if index is None:
                continue
            uuid = None
            if _cuda_initialised():
                uuid = canonical_uuid(_torch_uuid_of(index))
            if uuid is None:
                uuid = _visible_uuid(index, environ, None)
            if uuid is None:
                uuid = _visible_uuid(index, environ, discover_gpus(timeout_s=5.0))
            record[key] = uuid
        except Exception:  # noqa: BLE001 - unresolvable facts stay null
            record[key] = None
    return record


def resolve_cuda_process_sharing(
    training_cfg_or_mode: Any,
    learner_device: str,
    *,
    collector_device: str | None = None,
    rank: int = 0,
    world_size: int = 1,
    environ: MutableMapping[str, str] | None = None,
    cuda_uuid_of: CudaUuidOf | None = None,
) -> dict[str, Any]:
    """Apply and validate ``training.cuda_process_sharing``; return the docs/contracts.md §cuda-process-sharing record.

    Call it before any ``torch.cuda`` call in the learner process.

    Args:
        training_cfg_or_mode: a ``TrainingCfg`` (its ``cuda_process_sharing``), ``"mps"`` or None.
        learner_device: ``cuda``, ``cuda:<i>`` or ``cpu``.
        collector_device: the collector's device; defaults to ``learner_device`` (one GPU).
        rank, world_size: this process's rank; MPS supports ``world_size == 1``.
        environ: the environment to read and update (default ``os.environ``).
        cuda_uuid_of: ordinal -> UUID as CUDA sees it (default torch; tests inject one).

    Returns:
        All docs/contracts.md §cuda-process-sharing keys: configured, effective, validated, rank, world_size, learner_device,
        collector_device, learner/collector_gpu_uuid, pipe_directory_env, pipe_directory,
        control_pipe, control_pipe_kind, server_pid, ambient_server, selected_record.

    Raises:
        MpsPreflightError: ``"mps"`` requested and the first unmet condition (names ``cumps start``).
        ValueError: the mode is neither null nor ``"mps"``.
    """
    env = os.environ if environ is None else environ
    mode = _mode_of(training_cfg_or_mode)
    collector = learner_device if collector_device is None else collector_device
    record = _base_record(mode, learner_device, collector, rank, world_size)
    if mode is None:
        return _observe_null(record, env)
    return _resolve_mps(record, env, cuda_uuid_of or _torch_uuid_of, rank, world_size)


def _resolve_mps(
    record: dict,
    env: MutableMapping[str, str],
    cuda_uuid_of: CudaUuidOf,
    rank: Any,
    world_size: Any,
) -> dict:
    learner_index, collector_index = _check_request(record, rank, world_size)
    record["pipe_directory_env"] = env.get("CUDA_MPS_PIPE_DIRECTORY")
    gpus, learner_uuid = _pin_visible_devices(record, env, learner_index, collector_index)
    selection = _select_daemon(record, env, learner_uuid)
    _probe_daemon(record, env, selection)
    _check_cuda_devices(record, gpus, learner_uuid, cuda_uuid_of, (learner_index, collector_index))
    record["effective"] = MPS_MODE
    record["validated"] = True
    return record


def _check_request(record: dict, rank: Any, world_size: Any) -> tuple[int, int]:
    """Linux, one rank, two CUDA devices, CUDA not yet initialised; the two CUDA ordinals."""
    if not sys.platform.startswith("linux"):
        raise _fail(f"CUDA MPS needs Linux (this is {sys.platform})")
    for name, value in (("rank", rank), ("world_size", world_size)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise _fail(f"{name}={value!r} must be an int")
    if not 0 <= rank < world_size:
        raise _fail(f"rank={rank} must satisfy 0 <= rank < world_size={world_size}")
    if world_size != 1:
        raise _fail(
            f"world_size={world_size}: MPS sharing supports one rank on one GPU (multi-GPU gate)"
        )
    learner_index = cuda_index(record["learner_device"])
    collector_index = cuda_index(record["collector_device"])
    if learner_index is None or collector_index is None:
        raise _fail(
            f"learner_device={record['learner_device']!r} and collector_device={record['collector_device']!r} "
            "must both be CUDA devices (use --sim mjwarp on a GPU)"
        )
    if _cuda_initialised():
        raise _fail(
            "CUDA was initialised before the MPS preflight; the pipe variables would not take effect"
        )
    return learner_index, collector_index


def _pin_visible_devices(
    record: dict, env: MutableMapping[str, str], learner_index: int, collector_index: int
) -> tuple[list[GpuInfo], str | None]:
    """Step 1: numeric CUDA_VISIBLE_DEVICES entries -> UUIDs, before CUDA init; the GPUs
    NVML lists and the learner's UUID (None when the environment does not say)."""
    try:
        gpus = discover_gpus(timeout_s=5.0)
    except GpuDiscoveryError as err:
        raise _fail(f"cannot list GPUs through NVML or nvidia-smi ({err})") from err
    rewrite_visible_devices(env, gpus)
    learner_uuid = _visible_uuid(learner_index, env, gpus)
    collector_uuid = _visible_uuid(collector_index, env, gpus)
    if learner_uuid is not None and collector_uuid is not None and learner_uuid != collector_uuid:
        raise _fail(
            f"learner {record['learner_device']} ({learner_uuid}) and collector "
            f"{record['collector_device']} ({collector_uuid}) are different GPUs"
        )
    return gpus, learner_uuid


def _select_daemon(
    record: dict, env: MutableMapping[str, str], learner_uuid: str | None
) -> PipeSelection:
    """Step 2: an explicit pipe wins; else the single live record covering the learner's GPU."""
    try:
        selection = select_pipe(learner_uuid, env)
    except SelectionError as err:
        raise _fail(str(err)) from err
    if (
        selection.record is not None
        and learner_uuid is not None
        and learner_uuid not in selection.record.gpu_uuids
    ):
        raise _fail(
            f"CUDA_MPS_PIPE_DIRECTORY={selection.pipe_directory} belongs to cumps daemon "
            f"{selection.record.name!r} on {','.join(selection.record.gpu_uuids)}, not {learner_uuid}"
        )
    if selection.source == "record":
        env["CUDA_MPS_PIPE_DIRECTORY"] = selection.pipe_directory
        if selection.log_directory is not None:
            env["CUDA_MPS_LOG_DIRECTORY"] = selection.log_directory
    record["pipe_directory"] = selection.pipe_directory
    record["selected_record"] = None if selection.record is None else selection.record.name
    return selection


def _probe_daemon(record: dict, env: MutableMapping[str, str], selection: PipeSelection) -> None:
    """Step 3a: the control pipe and the daemon (no CUDA yet)."""
    probe = probe_pipe(selection.pipe_directory, selection.log_directory, base_env=env)
    record["control_pipe"] = probe.control_pipe
    record["control_pipe_kind"] = probe.control_pipe_kind
    record["ambient_server"] = probe.answered
    record["server_pid"] = probe.server_pid
    if probe.error is not None:
        raise _fail(probe.error)


def _check_cuda_devices(
    record: dict,
    gpus: list[GpuInfo],
    learner_uuid: str | None,
    cuda_uuid_of: CudaUuidOf,
    indices: tuple[int, int],
) -> None:
    """Step 3b: the learner and collector devices as CUDA sees them: one physical GPU, the one
    NVML and CUDA_VISIBLE_DEVICES name."""
    try:
        torch_learner = canonical_uuid(cuda_uuid_of(indices[0]))
        torch_collector = canonical_uuid(cuda_uuid_of(indices[1]))
    except Exception as err:
        raise _fail(f"cannot read the CUDA device UUIDs ({type(err).__name__}: {err})") from err
    record["learner_gpu_uuid"] = torch_learner
    record["collector_gpu_uuid"] = torch_collector
    if torch_learner is None or torch_collector is None:
        raise _fail("CUDA reported a non-physical (MIG or malformed) device UUID")
    if torch_learner != torch_collector:
        raise _fail(
            f"learner {record['learner_device']} ({torch_learner}) and collector "
            f"{record['collector_device']} ({torch_collector}) are different GPUs"
        )
    if learner_uuid is not None and torch_learner != learner_uuid:
        raise _fail(
            f"CUDA maps {record['learner_device']} to {torch_learner}, but NVML/CUDA_VISIBLE_DEVICES say {learner_uuid}"
        )
    if torch_learner not in {gpu.uuid for gpu in gpus}:
        raise _fail(f"NVML does not list {torch_learner} as a physical GPU")
