"""Section configs read from the owner YAML, for code that runs outside a training run.

The owner files are the only place config values live (docs/configuration.md): the section
dataclasses declare types, not defaults. Tests, benchmarks and the asset tools that need "the
usual" values take them from here: the resolved ``flashsac/g1_motion_tracking/mujoco`` owner
(the mjwarp owner differs only in ``algo.replay_buffer_n`` and
``training.collector_metrics_interval``), with keyword overrides of single fields.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from contracts.names import Backend
from trainer.config.loader import LoadedConfig, load_config

if TYPE_CHECKING:
    from trainer.algo.config import FlashSacCfg
    from trainer.config.schema import TrainingCfg
    from trainer.sim.scene import SceneCfg
    from trainer.task.config import G1TrackingCfg

__all__ = [
    "DEFAULT_OWNER",
    "default_algo_cfg",
    "default_scene_cfg",
    "default_task_cfg",
    "default_training_cfg",
    "owner_config",
]

DEFAULT_OWNER: tuple[str, str, str] = ("flashsac", "g1_motion_tracking", Backend.MUJOCO.value)
"""``(algo, task, sim)`` of the owner whose values the ``default_*`` functions return."""


@functools.cache
def owner_config(algo: str, task: str, sim: str) -> LoadedConfig:
    """The resolved owner without overrides (read once per process; the configs are frozen)."""
    return load_config(algo, task, sim)


def _replaced(cfg: Any, overrides: dict[str, Any]) -> Any:
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


def default_algo_cfg(**overrides: Any) -> FlashSacCfg:
    """``algo.*`` of :data:`DEFAULT_OWNER`, with ``overrides`` replacing fields."""
    return _replaced(owner_config(*DEFAULT_OWNER).algo_cfg, overrides)


def default_training_cfg(**overrides: Any) -> TrainingCfg:
    """``training.*`` of :data:`DEFAULT_OWNER`, with ``overrides`` replacing fields."""
    return _replaced(owner_config(*DEFAULT_OWNER).training, overrides)


def default_task_cfg(**overrides: Any) -> G1TrackingCfg:
    """``env.*`` of :data:`DEFAULT_OWNER`, with ``overrides`` replacing fields."""
    return _replaced(owner_config(*DEFAULT_OWNER).task_cfg, overrides)


def default_scene_cfg(**overrides: Any) -> SceneCfg:
    """``env.scene.*`` of :data:`DEFAULT_OWNER`, with ``overrides`` replacing fields."""
    return _replaced(owner_config(*DEFAULT_OWNER).task_cfg.scene, overrides)
