"""Preflight of ``train`` (docs/contracts.md §train step 7): can this machine run this config?

Runs after the run directory and ``run_config.json`` exist and before any env, learner or
collector is built or spawned. Checks, in order: every schema the run writes against loads
and compiles (then kept in memory for the run, ``contracts.schemas.preload``); Linux; the
CUDA facts the backend needs (``mjwarp``: a CUDA build that is not ROCm/HIP, exactly one
visible device and the ``mujoco_warp``/``warp`` packages; ``mujoco``: CUDA only if
``training.device`` asks for it); the CUDA MPS probe (docs/mps.md, ``trainer.runtime.mps``); the G1 model and the
scene (``trainer.sim.scene``); the motion clip, resolved and then loaded as the env will
(``trainer.task.motion``, ``trainer.task.motion_check``); and a memory
estimate against 0.8 × the free memory of the learner device. A failure raises
:class:`PreflightError` carrying the shutdown phase; ``train`` turns it into a failed
``run_summary.json`` (``learner_failure``, owner ``learner``) and exit 1.

The device facts recorded in ``run_config.json`` are read without creating a CUDA context
(NVML-based counting), so the MPS probe can still set the MPS environment before the
first context exists.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts import rundir
from contracts.names import ShutdownPhase
from trainer.config.schema import TrainingCfg

if TYPE_CHECKING:
    from contracts.env_spec import EnvSpec
    from trainer.algo.config import FlashSacCfg
    from trainer.config.loader import LoadedConfig
    from trainer.task.motion import ResolvedMotion

logger = logging.getLogger(__name__)

PHASE_BEGIN = ShutdownPhase.STARTUP_BEGIN
PHASE_MEMORY = ShutdownPhase.STARTUP_MEMORY_BUDGET
PHASE_CUDA = ShutdownPhase.STARTUP_CUDA_PREFLIGHT

MEMORY_BUDGET_FRACTION = 0.8
"""The estimate must fit in this fraction of the learner device's free memory."""

CRITIC_ENSEMBLE = 2

GIB = float(1 << 30)


class PreflightError(Exception):
    """This machine cannot run the config: ``learner_failure`` in ``phase``, exit 1.

    Attributes:
        phase: the docs/contracts.md §shutdown startup phase of the failed check.
        error_type: the type recorded in run_summary (the underlying error's type name).
    """

    def __init__(
        self, message: str, *, phase: ShutdownPhase, error_type: str = "PreflightError"
    ) -> None:
        super().__init__(message)
        self.phase = phase
        self.error_type = error_type


@dataclass(frozen=True, kw_only=True)
class CudaFacts:
    """What torch reports about CUDA, read without creating a CUDA context."""

    torch_version: str
    cuda_version: str | None
    """``torch.version.cuda`` (None on a CPU-only build)."""
    hip_version: str | None
    """``torch.version.hip`` (not None on a ROCm build, which mjwarp refuses)."""
    available: bool
    device_count: int
    visible_devices: str | None
    """``CUDA_VISIBLE_DEVICES`` as set (None when unset)."""


@dataclass(frozen=True, kw_only=True)
class PreflightResult:
    """What preflight resolved; ``train`` puts it into the ``RunContext``."""

    scene_xml: Path
    motion: ResolvedMotion
    """The clip, resolved once: the collector loads exactly this path and re-checks its digest."""
    cuda_process_sharing: dict[str, Any]
    memory_estimate_bytes: int
    memory_free_bytes: int


def cuda_facts() -> CudaFacts:
    """Read the CUDA facts with NVML-based counting (no CUDA context is created)."""
    import torch

    key = "PYTORCH_NVML_BASED_CUDA_CHECK"
    previous = os.environ.get(key)
    os.environ[key] = "1"  # torch reads it per call; restored so children do not inherit it
    try:
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    finally:
        if previous is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = previous
    return CudaFacts(
        torch_version=str(torch.__version__),
        cuda_version=torch.version.cuda,
        hip_version=torch.version.hip,
        available=available,
        device_count=count,
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
    )


def resolve_learner_device(training: TrainingCfg, sim: str, facts: CudaFacts) -> str:
    """The learner's torch device: ``mjwarp`` always ``cuda:0``; ``mujoco`` follows
    ``training.device`` (``auto`` = ``cuda:0`` when CUDA is available, else ``cpu``)."""
    if sim == "mjwarp" or training.device == "cuda":
        return "cuda:0"
    if training.device == "cpu":
        return "cpu"
    return "cuda:0" if facts.available and facts.hip_version is None else "cpu"


def devices_record(training: TrainingCfg, learner_device: str, facts: CudaFacts) -> dict[str, Any]:
    """``run.devices`` of run_config.json; the collector's env tensors share the learner device."""
    return {
        "requested": training.device,
        "learner": learner_device,
        "collector": learner_device,
        "cuda_available": facts.available,
        "cuda_device_count": facts.device_count,
        "cuda_visible_devices": facts.visible_devices,
    }


# ---------------------------------------------------------------------------------------
# Memory estimate


def _trunk_params(in_dim: int, hidden: int, blocks: int) -> int:
    # BN(in) + Linear(in→d) + blocks × [Lin(d→4d) + BN(4d) + Lin(4d→d) + BN(d)] + RMSNorm(d)
    block = hidden * 4 * hidden + 2 * 4 * hidden + 4 * hidden * hidden + 2 * hidden
    return 2 * in_dim + in_dim * hidden + blocks * block + hidden


def network_param_counts(algo: FlashSacCfg, spec: EnvSpec) -> tuple[int, int]:
    """Trainable parameters of (actor, one critic member) for an env of ``spec``,
    docs/flashsac.md §networks (293,114 and 1,161,953 at the defaults on the G1 task)."""
    actions = spec.action_dim
    actor = _trunk_params(spec.obs_dim, algo.actor_hidden_dim, algo.num_blocks)
    actor += 2 * (algo.actor_hidden_dim * actions + actions)
    member = _trunk_params(spec.critic_obs_dim + actions, algo.critic_hidden_dim, algo.num_blocks)
    member += algo.critic_hidden_dim * algo.num_atoms + algo.num_atoms
    return actor, member


def estimate_memory_bytes(algo: FlashSacCfg, spec: EnvSpec) -> int:
    """Learner-device memory a run on an env of ``spec`` needs, in bytes (an estimate, fp32
    throughout).

    replay ring ``C × W × 4`` (``W = spec.row_width``) + networks (actor, critic and log α
    with gradients and two Adam moments, plus the target critic) + one iteration's sampled
    rows ``U·B × W × 4`` + critic activations (2 members × 2B rows × 4d wide × blocks × ~4
    saved tensors).
    """
    row_floats = spec.row_width
    replay = algo.replay_buffer_n * algo.num_envs * row_floats * 4
    actor, member = network_param_counts(algo, spec)
    critic = CRITIC_ENSEMBLE * member
    networks = 4 * (4 * (actor + critic + 1) + critic)
    batch = algo.updates_per_step * algo.batch_size * row_floats * 4
    hidden = max(algo.critic_hidden_dim, algo.actor_hidden_dim)
    activations = CRITIC_ENSEMBLE * 2 * algo.batch_size * 4 * hidden * algo.num_blocks * 4 * 4
    return replay + networks + batch + activations


def free_memory_bytes(device: str) -> int:
    """Free memory of the learner device: ``torch.cuda.mem_get_info`` or host available."""
    if device.startswith("cuda"):
        import torch

        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    import psutil

    return int(psutil.virtual_memory().available)


# ---------------------------------------------------------------------------------------
# The checks


def _load_schemas() -> None:
    """Compile every schema the run writes against, and keep them for the whole run.

    The run's last writes (``run_summary.json`` in ``finalize/logger_finish``, even a failed
    one) then never read ``schemas/``, which may move or change while a long run is going.
    """
    from contracts.run_summary import MANIFEST_SCHEMA
    from contracts.schemas import SchemaUnavailable, preload
    from trainer.rundir.metrics import REGISTRY_SCHEMA

    names = (*rundir.SCHEMAS.values(), MANIFEST_SCHEMA, REGISTRY_SCHEMA)
    try:
        preload(names)
    except SchemaUnavailable as err:
        raise PreflightError(str(err), phase=PHASE_BEGIN, error_type=type(err).__name__) from err


def _check_platform() -> None:
    if not sys.platform.startswith("linux"):
        raise PreflightError(
            f"train runs on Linux only (this is {sys.platform}); run it on a Linux host",
            phase=PHASE_BEGIN,
        )


def _check_cuda(sim: str, learner_device: str, facts: CudaFacts) -> None:
    visible = facts.visible_devices if facts.visible_devices is not None else "unset"
    if sim == "mjwarp":
        if facts.hip_version is not None:
            raise PreflightError(
                f"--sim mjwarp needs NVIDIA CUDA but torch is a ROCm/HIP build "
                f"(torch.version.hip={facts.hip_version}); install a CUDA build of torch",
                phase=PHASE_CUDA,
            )
        if not facts.available:
            raise PreflightError(
                f"--sim mjwarp needs CUDA but torch.cuda.is_available() is False (torch "
                f"{facts.torch_version}, CUDA {facts.cuda_version}, CUDA_VISIBLE_DEVICES="
                f"{visible}); run on an NVIDIA GPU host, or use --sim mujoco for a CPU run",
                phase=PHASE_CUDA,
            )
        if facts.device_count != 1:
            raise PreflightError(
                f"--sim mjwarp needs exactly one visible CUDA device, found "
                f"{facts.device_count} (CUDA_VISIBLE_DEVICES={visible}); select one GPU with "
                "CUDA_VISIBLE_DEVICES=<index>",
                phase=PHASE_CUDA,
            )
        for module in ("warp", "mujoco_warp"):
            if importlib.util.find_spec(module) is None:
                raise PreflightError(
                    f"--sim mjwarp needs the '{module}' package, which is not installed; "
                    "install the mjwarp extra (uv sync --extra mjwarp)",
                    phase=PHASE_CUDA,
                )
        return
    if learner_device.startswith("cuda") and (facts.hip_version is not None or not facts.available):
        raise PreflightError(
            f"training.device=cuda but CUDA is not usable (torch.cuda.is_available()="
            f"{facts.available}, torch.version.hip={facts.hip_version}, "
            f"CUDA_VISIBLE_DEVICES={visible}); use training.device=auto or cpu",
            phase=PHASE_CUDA,
        )


def _resolve_sharing(training: TrainingCfg, learner_device: str) -> dict[str, Any]:
    from trainer.runtime.mps import resolve_cuda_process_sharing

    try:
        return resolve_cuda_process_sharing(
            training, learner_device, collector_device=learner_device
        )
    # any probe failure is a preflight failure (docs/contracts.md §cumps step 4)
    except Exception as err:
        raise PreflightError(
            str(err) or type(err).__name__, phase=PHASE_CUDA, error_type=type(err).__name__
        ) from err


def _resolve_scene(loaded: LoadedConfig) -> Path:
    from trainer.assets import AssetError, cache_root
    from trainer.sim.scene import locate_g1_mjcf, materialize_scene

    scene_cfg = loaded.task_cfg.scene
    try:
        locate_g1_mjcf(scene_cfg)
        return materialize_scene(scene_cfg, cache_root())
    except (AssetError, OSError, ValueError) as err:
        raise PreflightError(
            f"G1 scene {loaded.loader_values.get('env.scene.model_file')} cannot be built: {err}",
            phase=PHASE_BEGIN,
            error_type=type(err).__name__,
        ) from err


def _resolve_motion(loaded: LoadedConfig) -> ResolvedMotion:
    from trainer.assets import AssetError
    from trainer.motion_import.resolve import install_motion_importer
    from trainer.task.motion import MotionError, resolve_motion

    install_motion_importer()
    task = loaded.task_cfg
    try:
        return resolve_motion(
            task.motion_file, hub_repo=task.hub_repo, hub=loaded.training.motion_hub
        )
    except (MotionError, AssetError, OSError) as err:
        raise PreflightError(str(err), phase=PHASE_BEGIN, error_type=type(err).__name__) from err


def _check_memory(algo: FlashSacCfg, learner_device: str) -> tuple[int, int]:
    from trainer.task.spec import G1_TRACKING_SPEC  # the env the run will build

    spec = G1_TRACKING_SPEC
    estimate = estimate_memory_bytes(algo, spec)
    try:
        free = free_memory_bytes(learner_device)
    except (RuntimeError, OSError) as err:
        raise PreflightError(
            f"cannot query free memory on {learner_device}: {err}",
            phase=PHASE_CUDA if learner_device.startswith("cuda") else PHASE_MEMORY,
            error_type=type(err).__name__,
        ) from err
    if estimate > MEMORY_BUDGET_FRACTION * free:
        raise PreflightError(
            f"memory estimate {estimate / GIB:.2f} GiB (replay {algo.replay_buffer_n}x"
            f"{algo.num_envs} rows x {spec.row_width} x 4 B + networks) exceeds "
            f"{MEMORY_BUDGET_FRACTION} x free memory {free / GIB:.2f} GiB on {learner_device}; "
            "lower algo.num_envs or algo.replay_buffer_n",
            phase=PHASE_MEMORY,
        )
    return estimate, free


def _check_motion_contents(loaded: LoadedConfig, motion: ResolvedMotion) -> None:
    """Load the clip as the env will, so a bad clip fails here in one line, not in the
    collector (``trainer.task.motion_check``)."""
    from trainer.assets import AssetError
    from trainer.task.motion import MotionError
    from trainer.task.motion_check import check_motion_file

    try:
        check_motion_file(Path(motion.path), loaded.task_cfg.scene)
    except (MotionError, AssetError, OSError) as err:
        raise PreflightError(str(err), phase=PHASE_BEGIN, error_type=type(err).__name__) from err


def run_preflight(
    loaded: LoadedConfig,
    *,
    learner_device: str,
    facts: CudaFacts,
    on_phase: Callable[[ShutdownPhase], None] = lambda phase: None,
) -> PreflightResult:
    """Run every step-7 check in contract order; nothing is spawned.

    Args:
        loaded: the validated config.
        learner_device: from :func:`resolve_learner_device` (already in run_config.json).
        facts: from :func:`cuda_facts`.
        on_phase: told each phase as it starts (for cancellation records).

    Raises:
        PreflightError: the first failed check, with its phase.
    """
    on_phase(PHASE_BEGIN)
    _load_schemas()
    _check_platform()
    on_phase(PHASE_CUDA)
    _check_cuda(loaded.sim, learner_device, facts)
    sharing = _resolve_sharing(loaded.training, learner_device)
    on_phase(PHASE_BEGIN)
    scene_xml = _resolve_scene(loaded)
    motion = _resolve_motion(loaded)
    _check_motion_contents(loaded, motion)
    on_phase(PHASE_MEMORY)
    estimate, free = _check_memory(loaded.algo_cfg, learner_device)
    logger.info(
        "preflight passed: learner %s, scene %s, motion %s (%s), memory %.2f/%.2f GiB",
        learner_device, scene_xml, motion.path, motion.source, estimate / GIB, free / GIB,
    )  # fmt: skip
    return PreflightResult(
        scene_xml=scene_xml,
        motion=motion,
        cuda_process_sharing=sharing,
        memory_estimate_bytes=estimate,
        memory_free_bytes=free,
    )
