"""Typed configuration of one training run: ``TrainingCfg`` and the resolved ``RunContext``.

The owner YAML files (``trainer/conf``) own every value; these frozen, keyword-only
dataclasses only give the keys their types and meaning. ``config/loader.py`` fills them
from the merged owner chain (``training.*`` → ``TrainingCfg``, ``algo.*`` → ``FlashSacCfg``,
``env.*`` → ``G1TrackingCfg``), and ``train`` wraps the pieces in a ``RunContext`` once the
run directory exists and preflight passed. Downstream code takes the piece it needs and
never sees OmegaConf.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from contracts.identity import RunIdentity
from trainer.sim.mjwarp_options import StreamPriority

if TYPE_CHECKING:
    from trainer.algo.config import FlashSacCfg
    from trainer.config.evaluation import EvalCfg
    from trainer.task.config import G1TrackingCfg

SimBackendName = Literal["mjwarp", "mujoco"]
"""The simulator backends an owner may declare in ``training.sim_backend``: the values of
``contracts.names.Backend``, spelled as a ``Literal`` so this module stays light to import
(tests/trainer/config/test_defaults.py checks the two agree)."""

DeviceRequest = Literal["auto", "cpu", "cuda"]
"""Accepted ``training.device`` values (``auto`` = CUDA when available, else CPU)."""

CudaProcessSharing = Literal["mps"]
"""The one ``training.cuda_process_sharing`` mode besides null (docs/contracts.md §cumps)."""

CollectorPlacement = Literal["process", "thread"]
"""Accepted ``training.collector_placement`` values (docs/runtime.md §collector-placement)."""

MotionHubMode = Literal["auto", "skip", "require"]
"""Accepted ``training.motion_hub`` values (as ``g1-pull-assets --hub``)."""

DEVICE_REQUESTS: tuple[str, ...] = typing.get_args(DeviceRequest)
CUDA_PROCESS_SHARING_MODES: tuple[str | None, ...] = (None, *typing.get_args(CudaProcessSharing))
MOTION_HUB_MODES: tuple[str, ...] = typing.get_args(MotionHubMode)
COLLECTOR_PLACEMENTS: tuple[str, ...] = typing.get_args(CollectorPlacement)


@dataclass(frozen=True, kw_only=True)
class TrainingCfg:
    """``training.*``: how the run is executed (docs/contracts.md §owner-routing), not what is learned."""

    task_name: str
    """Semantic task name recorded in the run (``G1MotionTracking``)."""

    sim_backend: SimBackendName
    """Declared by the owner file and equal to ``--sim`` (``mjwarp`` or ``mujoco``); CLI-owned."""

    play_only: bool
    """Playback of a trained policy instead of training; CLI-owned and always false for ``train``."""

    no_play: bool
    """Skip the post-training playback video and ONNX export (the soak sets it true)."""

    log_dir: str | None
    """Run directory; must be missing or hold only ``soak-console.log``. null = ``logs/<algo>/<task>/<UTC stamp>_<sim>``."""

    device: DeviceRequest
    """Learner device request: ``auto`` (CUDA when available, else CPU), ``cpu`` or ``cuda``."""

    inference_slot_capacity: int
    """Inference ring slots between collector and learner, 1..16 (legal max in flight is 1)."""

    replay_ingress_depth: int
    """Bounded replay-ingress slots, 1..16."""

    replay_ingress_slot_rows: int | None
    """Rows per replay-ingress slot; null means ``algo.num_envs``; must divide ``algo.num_envs``."""

    collector_metrics_interval: int
    """Collector ticks between collector metric reports, 1..10000 (mjwarp 100, mujoco 1)."""

    cuda_process_sharing: CudaProcessSharing | None
    """null (separate CUDA contexts) or ``"mps"`` (CUDA MPS execution sharing, docs/contracts.md §cumps)."""

    collector_stream_priority: StreamPriority
    """The stream the collector's mjwarp physics runs on: ``default`` (Warp's) or ``high``
    (the device's highest priority; no gain under MPS, docs/runtime.md §collector-stream)."""

    collector_placement: CollectorPlacement
    """Where the collector runs: ``process`` (a spawned child with its own CUDA context; the
    ring and ingress are CUDA IPC) or ``thread`` (a thread of ``train``, one CUDA context, no
    IPC; not with MPS, docs/runtime.md §collector-placement)."""

    env_steps_per_sync: int
    """Env steps per collector/learner synchronisation; the lock-step runtime supports 1."""

    log_interval: int
    """Iterations between TensorBoard writes (the final iteration is always written), >= 1."""

    motion_hub: MotionHubMode
    """How ``train`` may use the Hugging Face hub for the motion clip: ``auto``, ``skip`` or ``require``."""

    resume_from: str | None
    """A ``model_<iter>.pt`` to continue from (null = a fresh start). The learner state is
    restored before the first update into a NEW run directory; the replay refills with the
    usual warm-up ticks and ``algo.max_iterations`` stays the total target."""

    duration_seconds: float | None
    """Time budget (> 0 s of training, from ``training/startup_complete``), or null. With a
    budget the run trains until it is spent, then finalizes normally; ``algo.max_iterations``
    is then a cap, and may be null (no cap). Without one the run is sized in iterations."""


@dataclass(frozen=True, kw_only=True)
class SeedInfo:
    """Where the run's seed came from (recorded in ``run_summary.json``)."""

    configured_seed: int | None
    """``algo.seed`` as configured (null when the config leaves it open)."""

    configured_seed_source: str
    """``config`` (owner file), ``override`` (a CLI ``algo.seed=`` override) or ``generated``."""

    effective_seed: int
    """The seed actually used: the configured one, or one derived from the clock."""

    @classmethod
    def resolve(cls, configured: int | None, *, overridden: bool, now_ns: int) -> SeedInfo:
        """Seed facts for ``algo.seed``: the configured value, or one derived from ``now_ns``.

        Args:
            configured: ``algo.seed`` after overrides (None = open).
            overridden: a CLI override set ``algo.seed``.
            now_ns: wall clock in ns (``time.time_ns()``), used only when ``configured`` is None.
        """
        if configured is None:
            # 31 bits: valid for torch, numpy and warp seeds alike.
            return cls(
                configured_seed=None,
                configured_seed_source="generated",
                effective_seed=(now_ns // 1000) % (2**31 - 1),
            )
        return cls(
            configured_seed=configured,
            configured_seed_source="override" if overridden else "config",
            effective_seed=configured,
        )

    def identity(
        self, *, run_dir: Path, algo: str, task: str, sim: str, start_time_utc: str
    ) -> RunIdentity:
        """The identity of the run started at ``start_time_utc`` in ``run_dir`` with this seed."""
        return RunIdentity(
            run_dir=str(run_dir),
            algo=algo,
            task=task,
            sim=sim,
            start_time_utc=start_time_utc,
            seed=self.effective_seed,
            configured_seed=self.configured_seed,
            configured_seed_source=self.configured_seed_source,
        )


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """Everything a training run needs, fully resolved and validated (after preflight).

    Built by ``train`` only after the run directory exists, ``run_config.json`` is written
    and preflight passed; handed to ``trainer.runtime.learner_loop.run_training``.
    """

    run_dir: Path
    """Absolute run directory (fresh, holds ``run_config.json``)."""

    algo: str
    task: str
    sim_backend: SimBackendName
    """``--algo, ``--task`` and the owner-declared backend (== ``--sim``)."""

    training: TrainingCfg
    algo_cfg: FlashSacCfg
    task_cfg: G1TrackingCfg

    learner_device: str
    """Torch device string of the learner (``cuda:0`` or ``cpu``)."""

    collector_device: str
    """Torch device of the collector's env tensors (same physical device as the learner)."""

    seed: SeedInfo

    start_time_utc: str
    """Launch time, ``YYYY-MM-DDTHH:MM:SSZ``."""

    motion_id: str
    """``env.commands.motion.motion_file`` as configured."""

    motion_path: Path
    motion_source: str
    motion_sha256: str
    """The resolved motion clip (docs/contracts.md §assets-and-motion): local file, its origin and content hash."""

    scene_xml: Path
    """The materialised scene (``robots/g1/scene_flat.xml``) the backends load."""

    config: dict[str, Any]
    """The resolved config as written to ``run_config.json`` (plain JSON types)."""

    overrides: tuple[str, ...]
    """The CLI overrides as given, in order."""

    cuda_process_sharing: dict[str, Any]
    """The docs/contracts.md §cuda-process-sharing diagnostic from the MPS probe; attached to every runtime manifest."""

    memory_estimate_bytes: int
    """Preflight's estimate of replay + network memory on the learner device."""

    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form preflight facts (device counts, free memory) for diagnostics."""

    eval_cfg: EvalCfg | None = None
    """``EvalCfg``: the evaluation after training (None skips it; docs/evaluation.md)."""

    @property
    def identity(self) -> RunIdentity:
        """The run as its documents record it."""
        return self.seed.identity(
            run_dir=self.run_dir,
            algo=self.algo,
            task=self.task,
            sim=self.sim_backend,
            start_time_utc=self.start_time_utc,
        )

    @property
    def configured_seed(self) -> int | None:
        return self.seed.configured_seed

    @property
    def configured_seed_source(self) -> str:
        return self.seed.configured_seed_source

    @property
    def effective_seed(self) -> int:
        return self.seed.effective_seed

    @property
    def replay_ingress_slot_rows(self) -> int:
        """Effective rows per replay-ingress slot (null in the config means ``algo.num_envs``)."""
        rows = self.training.replay_ingress_slot_rows
        return self.algo_cfg.num_envs if rows is None else rows
