"""The owner YAML is the single source of config values: no duplicated defaults, and the
closed sets agree wherever they are spelled."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from contracts.names import Backend
from trainer.config.defaults import (
    DEFAULT_OWNER,
    default_algo_cfg,
    default_scene_cfg,
    default_task_cfg,
    owner_config,
)
from trainer.config.loader import list_owners, section_types
from trainer.config.schema import SimBackendName, TrainingCfg
from trainer.sim.backend import BACKEND_NAMES, BackendName
from trainer.sim.scene import SceneCfg
from trainer.task.config import G1TrackingCfg

NO_DEFAULTS = ("FlashSacCfg", "G1TrackingCfg", "SceneCfg", "TrainingCfg")
"""Section dataclasses whose every field must come from the YAML."""


def _dataclasses_under(cls: type, seen: dict[str, type] | None = None) -> dict[str, type]:
    seen = {} if seen is None else seen
    seen[cls.__name__] = cls
    for hint in typing.get_type_hints(cls).values():
        for arg in (hint, *typing.get_args(hint)):
            if dataclasses.is_dataclass(arg) and arg.__name__ not in seen:
                _dataclasses_under(arg, seen)
    return seen


def _all_section_dataclasses() -> dict[str, type]:
    found: dict[str, type] = {}
    for cls in section_types().values():
        _dataclasses_under(cls, found)
    return found


def _default(f: dataclasses.Field) -> object:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


@pytest.mark.parametrize("name", NO_DEFAULTS)
def test_these_sections_declare_no_defaults(name: str) -> None:
    cls = _all_section_dataclasses()[name]
    with_default = [
        f.name for f in dataclasses.fields(cls) if _default(f) is not dataclasses.MISSING
    ]
    assert with_default == [], f"{name} repeats YAML values as defaults: {with_default}"


def test_every_remaining_default_equals_the_owner_yaml_value() -> None:
    """A dataclass default that survives (another section's) must not drift from the YAML."""
    loaded = owner_config(*DEFAULT_OWNER)
    built = {"algo": loaded.algo_cfg, "env": loaded.task_cfg, "training": loaded.training}
    built["eval"] = loaded.eval_cfg
    drift = []

    def walk(obj: object, path: str) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            default = _default(f)
            if default is not dataclasses.MISSING and default != value:
                drift.append(f"{path}.{f.name}: default {default!r} != YAML {value!r}")
            if dataclasses.is_dataclass(value):
                walk(value, f"{path}.{f.name}")

    for section, cfg in built.items():
        walk(cfg, section)
    assert drift == []


def test_the_defaults_are_the_resolved_owner_with_field_overrides() -> None:
    loaded = owner_config(*DEFAULT_OWNER)
    assert default_algo_cfg() == loaded.algo_cfg
    assert default_task_cfg() == loaded.task_cfg
    assert default_scene_cfg() == loaded.task_cfg.scene
    assert default_scene_cfg(njmax=700).njmax == 700
    assert default_algo_cfg(num_envs=8).num_envs == 8
    with pytest.raises(TypeError, match="unexpected keyword"):
        default_algo_cfg(no_such_key=1)


@pytest.mark.parametrize("cls", [SceneCfg, TrainingCfg, G1TrackingCfg])
def test_sections_cannot_be_built_without_the_yaml_values(cls: type) -> None:
    with pytest.raises(TypeError, match="missing"):
        cls()


def test_the_backend_name_sets_agree() -> None:
    assert BACKEND_NAMES == tuple(b.value for b in Backend)
    assert typing.get_args(SimBackendName) == typing.get_args(BackendName) == BACKEND_NAMES
    sims = {owner.split("/")[-1] for owner in list_owners()}
    assert sims == set(BACKEND_NAMES)
