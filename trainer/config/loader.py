"""Owner-file loading: the OmegaConf owner chain, dotted CLI overrides, removed keys.

``--algo/--task/--sim`` select ``conf/<algo>/task/<task>/<sim>.yaml`` (docs/contracts.md §owner-routing).
Layers, later wins: ``conf/<algo>/config.yaml`` → ``task/<task>/base.yaml`` → the owner's
``inherits`` chain (oldest first) → CLI overrides. Mappings merge deeply; scalars and lists
are replaced. The owner chain itself is ``contracts.owners`` (shared with the support
matrix); this module and that one are the only ones importing OmegaConf. The merged tree is turned
into plain containers (``resolve=True, throw_on_missing=True``) and then into the frozen
dataclasses ``TrainingCfg``, ``FlashSacCfg`` and ``G1TrackingCfg``, checking every key and
value type against the dataclass fields (:mod:`trainer.config.types`). Every problem is a
``ConfigError`` (exit 2).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from contracts.config_keys import moved_key_message
from contracts.owners import (  # the owner chain; re-exported (see __all__)
    INHERITS_KEY,
    REMOVED_KEYS,
    list_owners,
    owner_chain,
    owner_file,
    removed_key_message,
)
from contracts.owners import merge_chain as _merge_chain
from contracts.owners import removed_key_in as _removed_key_in
from trainer.config.errors import ConfigError
from trainer.config.schema import TrainingCfg
from trainer.config.types import (
    TypeMismatch,
    coerce,
    field_hints,
    strip_optional,
)

__all__ = [
    "CLI_OWNED_KEYS",
    "DEFAULT_CONF_ROOT",
    "INHERITS_KEY",
    "KEY_ALIASES",
    "LOADER_KEYS",
    "REMOVED_KEYS",
    "ConfigError",
    "LoadedConfig",
    "Override",
    "active_aliases",
    "active_loader_keys",
    "annotation_at",
    "cli_owned_message",
    "coerce",
    "list_owners",
    "load_config",
    "owner_chain",
    "owner_file",
    "parse_override",
    "parse_value",
    "removed_key_message",
    "section_types",
    "typed_sections",
]

DEFAULT_CONF_ROOT = Path(__file__).resolve().parent.parent / "conf"
"""Package conf root; tests pass ``conf_root=`` (or patch this) to use a temporary tree."""

CLI_OWNED_KEYS: tuple[str, ...] = ("algo", "task", "training.sim_backend", "training.play_only")
"""Keys selected by ``--algo/--task/--sim`` and declared by the owner (docs/contracts.md §train step 4)."""

_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def cli_owned_message(key: str) -> str:
    """The exact docs/contracts.md §train message for an override of a CLI-owned key."""
    return (
        f"'{key}' is selected by --algo/--task/--sim and declared by the owner; "
        "it cannot be overridden"
    )


KEY_ALIASES: dict[str, dict[tuple[str, ...], tuple[str, ...]]] = {
    "env": {
        ("commands", "motion", "motion_file"): ("motion_file",),
        ("commands", "motion", "hub_repo"): ("hub_repo",),
    }
}
"""Contract key paths (docs/contracts.md §owner-routing/§assets-and-motion spelling) → dataclass field paths, per section.

The YAML and the command line use the contract spelling (``env.commands.motion.motion_file``);
``G1TrackingCfg`` keeps the motion fields flat. An alias applies only while the dataclass
lacks the contract path's first component, so a nested dataclass works unchanged.
"""

LOADER_KEYS: dict[str, dict[tuple[str, ...], Any]] = {
    "env": {("scene", "model_file"): str},
}
"""Contract keys consumed by ``train`` itself rather than a dataclass field (the scene
asset id), with their types; used only while the dataclass has no such field."""


def section_types() -> dict[str, type]:
    """Top-level config sections and the dataclass each one fills."""
    from trainer.algo.config import FlashSacCfg
    from trainer.config.evaluation import EvalCfg
    from trainer.task.config import G1TrackingCfg

    return {"algo": FlashSacCfg, "env": G1TrackingCfg, "training": TrainingCfg, "eval": EvalCfg}


@dataclass(frozen=True)
class Override:
    """One parsed ``KEY=VALUE`` command-line override."""

    key: str
    value: Any
    text: str
    """The argument exactly as given (recorded in ``run_config.json``)."""


@dataclass(frozen=True, kw_only=True)
class LoadedConfig:
    """The validated result of the owner chain plus overrides (docs/contracts.md §train steps 2–4)."""

    algo: str
    task: str
    sim: str
    owner_files: tuple[Path, ...]
    """Every file merged, in merge order."""
    training: TrainingCfg
    algo_cfg: Any
    """``FlashSacCfg``."""
    task_cfg: Any
    """``G1TrackingCfg``."""
    eval_cfg: Any
    """``EvalCfg`` (the ``eval`` section; None with a custom ``sections`` map lacking it)."""
    overrides: tuple[Override, ...]
    config: dict[str, Any]
    """The resolved config in contract spelling (plain JSON types, ``inherits`` removed)."""
    loader_values: dict[str, Any]
    """Contract keys with no dataclass field, by dotted key (``env.scene.model_file``)."""

    @property
    def seed_overridden(self) -> bool:
        """True when a CLI override set ``algo.seed``."""
        return any(o.key == "algo.seed" for o in self.overrides)


# ---------------------------------------------------------------------------------------
# Owner discovery and the file chain: contracts.owners (imported above, re-exported here)


# ---------------------------------------------------------------------------------------
# Overrides


def parse_value(text: str) -> Any:
    """A JSON literal when ``text`` parses as one (``null``, ``true``, ``17``, ``"s"``,
    ``[..]``); otherwise the raw string. Non-finite tokens (``NaN``) stay raw strings."""

    def _reject(token: str) -> Any:
        raise ValueError(token)

    try:
        return json.loads(text, parse_constant=_reject)
    except ValueError:
        return text


def parse_override(text: str) -> Override:
    """Parse one ``KEY=VALUE`` argument (syntax only; docs/contracts.md §train step 4)."""
    stripped = text.strip()
    if stripped[:1] in ("+", "~"):
        raise ConfigError(
            f"override {text!r}: a leading '{stripped[0]}' (add/delete a key) is not supported; "
            "set an existing key as KEY=VALUE"
        )
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep:
        raise ConfigError(f"override {text!r} is not KEY=VALUE; write e.g. algo.num_envs=1024")
    if not _KEY_RE.match(key):
        raise ConfigError(
            f"override {text!r}: {key!r} is not a dotted config key; "
            "write e.g. training.log_interval=10"
        )
    return Override(key=key, value=parse_value(raw), text=text)


def _escape_interpolation(value: Any) -> Any:
    # CLI strings are literal: never let OmegaConf read "${...}" in them as interpolation.
    if isinstance(value, str):
        return value.replace("${", "\\${")
    if isinstance(value, list):
        return [_escape_interpolation(v) for v in value]
    if isinstance(value, dict):
        return {k: _escape_interpolation(v) for k, v in value.items()}
    return value


def _check_override_key(
    override: Override, merged: DictConfig, sections: Mapping[str, type]
) -> Any:
    """Step-4 key checks in contract order; returns the annotation of the target key."""
    key = override.key
    if key in CLI_OWNED_KEYS:
        raise ConfigError(cli_owned_message(key))
    removed = _removed_key_in([key])
    if removed:
        raise ConfigError(f"{removed_key_message(removed)} (override {override.text!r})")
    moved = moved_key_message(key)
    if moved:
        raise ConfigError(f"{moved} (override {override.text!r})")
    parts = key.split(".")
    node: Any = OmegaConf.to_container(merged, resolve=False)
    for depth, part in enumerate(parts):
        if not isinstance(node, Mapping) or part not in node:
            parent = ".".join(parts[:depth])
            known = (
                [f"{parent}.{k}" if parent else str(k) for k in node]
                if isinstance(node, Mapping)
                else []
            )
            hint = difflib.get_close_matches(".".join(parts[: depth + 1]), known, n=1)
            if hint:
                fix = f"did you mean '{hint[0]}'?"
            elif parent and known:
                fix = f"known keys under '{parent}': {', '.join(known)}"
            else:
                fix = f"top-level sections: {', '.join(sections)}"
            raise ConfigError(f"unknown config key '{key}' (override {override.text!r}); {fix}")
        node = node[part]
    annotation = annotation_at(sections, parts)
    leaf_mapping = typing.get_origin(strip_optional(annotation)) in (dict, Mapping)
    if isinstance(node, Mapping) and node and not leaf_mapping:
        raise ConfigError(
            f"'{key}' is a config section; override one of its keys instead "
            f"(e.g. '{key}.{next(iter(node))}=...')"
        )
    return annotation


_NO_FIELD = object()


def _field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if f.init}


def active_aliases(section: str, cls: type) -> dict[tuple[str, ...], tuple[str, ...]]:
    """The :data:`KEY_ALIASES` of ``section`` that apply to ``cls`` as it is defined now."""
    names = _field_names(cls)
    return {
        yaml_path: field_path
        for yaml_path, field_path in KEY_ALIASES.get(section, {}).items()
        if yaml_path[0] not in names and field_path[0] in names
    }


def active_loader_keys(section: str, cls: type) -> dict[tuple[str, ...], Any]:
    """The :data:`LOADER_KEYS` of ``section`` that ``cls`` has no field for."""
    return {
        path: kind
        for path, kind in LOADER_KEYS.get(section, {}).items()
        if _walk_fields(cls, path) is _NO_FIELD
    }


def _walk_fields(cls: Any, parts: Sequence[str]) -> Any:
    annotation: Any = cls
    for part in parts:
        annotation = strip_optional(annotation)
        if dataclasses.is_dataclass(annotation):
            hints = field_hints(annotation)
            if part not in hints:
                return _NO_FIELD
            annotation = hints[part]
        elif typing.get_origin(annotation) in (dict, Mapping):
            args = typing.get_args(annotation)
            annotation = args[1] if len(args) == 2 else Any
        else:
            return Any
    return annotation


def annotation_at(sections: Mapping[str, type], parts: Sequence[str]) -> Any:
    """The declared type of a dotted key (contract spelling), walking the section dataclasses."""
    cls = sections.get(parts[0])
    if cls is None:
        return Any
    rest = tuple(parts[1:])
    for yaml_path, field_path in active_aliases(parts[0], cls).items():
        if rest[: len(yaml_path)] == yaml_path:
            rest = field_path + rest[len(yaml_path) :]
            break
    loader_keys = active_loader_keys(parts[0], cls)
    if rest in loader_keys:
        return loader_keys[rest]
    found = _walk_fields(cls, rest)
    return Any if found is _NO_FIELD else found


def _pop_path(tree: dict[str, Any], path: Sequence[str]) -> tuple[bool, Any]:
    node: Any = tree
    for part in path[:-1]:
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    if not isinstance(node, dict) or path[-1] not in node:
        return False, None
    value = node.pop(path[-1])
    for depth in range(len(path) - 1, 0, -1):  # prune parents the pop left empty
        parent: Any = tree
        for part in path[: depth - 1]:
            parent = parent[part]
        if parent.get(path[depth - 1]) == {}:
            del parent[path[depth - 1]]
    return True, value


def _to_field_layout(section: str, cls: type, data: Any) -> tuple[Any, dict[str, Any]]:
    """Move contract-spelled keys of one section onto the dataclass layout.

    Returns the re-laid section and the loader-consumed values (by full dotted key).
    """
    if not isinstance(data, dict):
        return data, {}
    data = copy.deepcopy(data)
    for yaml_path, field_path in active_aliases(section, cls).items():
        dotted = ".".join((section, *yaml_path))
        if field_path[0] in data:
            raise ConfigError(
                f"unknown config key '{section}.{'.'.join(field_path)}' in the "
                f"owner chain; spell it '{dotted}'"
            )
        found, value = _pop_path(data, yaml_path)
        if not found:
            raise ConfigError(f"missing config key '{dotted}': add it to the owner chain")
        node = data
        for part in field_path[:-1]:
            node = node.setdefault(part, {})
        node[field_path[-1]] = value
    extras: dict[str, Any] = {}
    for path, kind in active_loader_keys(section, cls).items():
        dotted = ".".join((section, *path))
        found, value = _pop_path(data, path)
        if not found:
            raise ConfigError(f"missing config key '{dotted}': add it to the owner chain")
        extras[dotted] = coerce(value, kind, dotted)
    return data, extras


def typed_sections(
    container: Mapping[str, Any],
    sections: Mapping[str, type] | None = None,
    *,
    source: str = "the config",
    fix: str = "fix the owner file",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fill each section's dataclass from a resolved config in contract spelling.

    ``load_config`` uses it on the merged owner chain; ``play`` on the ``config`` recorded in
    a run's ``run_config.json``, so a run is replayed with exactly the values it trained with.

    Returns:
        ``(dataclass by section name, loader-consumed values by dotted key)``.

    Raises:
        ConfigError: a section is missing or unknown, or a value has the wrong type.
    """
    section_map = dict(sections) if sections is not None else section_types()
    unknown = [k for k in container if k not in section_map]
    if unknown:
        raise ConfigError(
            f"unknown config key '{unknown[0]}' in {source}; top-level "
            f"sections are {', '.join(section_map)}"
        )
    built: dict[str, Any] = {}
    loader_values: dict[str, Any] = {}
    for name, cls in section_map.items():
        if name not in container:
            raise ConfigError(f"missing config section '{name}' in {source}")
        try:
            data, extras = _to_field_layout(name, cls, container[name])
            built[name] = coerce(data, cls, name)
        except TypeMismatch as err:
            raise ConfigError(f"{source}: {err.message()}; {fix}") from None
        loader_values.update(extras)
    return built, loader_values


# ---------------------------------------------------------------------------------------
# Entry point


def load_config(
    algo: str,
    task: str,
    sim: str,
    overrides: Sequence[str] = (),
    *,
    conf_root: Path | None = None,
    sections: Mapping[str, type] | None = None,
) -> LoadedConfig:
    """Resolve an owner plus CLI overrides into typed configs (docs/contracts.md §train steps 2–4).

    Args:
        algo, task, sim: the ``--algo/--task/--sim`` selection.
        overrides: ``KEY=VALUE`` strings, applied in order (later wins).
        conf_root: the conf tree (default: the package's ``trainer/conf``).
        sections: top-level section → dataclass map (default: :func:`section_types`).

    Returns:
        The typed configs and the parsed overrides.

    Raises:
        ConfigError: first unmet condition, in contract order.
    """
    root = Path(conf_root) if conf_root is not None else DEFAULT_CONF_ROOT
    files = owner_chain(algo, task, sim, root)  # step 2 (owner exists) + chain discovery
    merged = _merge_chain(files)  # step 3: removed keys in any file
    declared = OmegaConf.select(merged, "training.sim_backend", default=None)
    if declared != sim:
        raise ConfigError(
            f"owner {files[-1]} resolves training.sim_backend={declared!r} but --sim is {sim!r}; "
            f"the owner file must declare training.sim_backend: {sim}"
        )
    section_map = dict(sections) if sections is not None else section_types()
    parsed: list[Override] = []
    for text in overrides:  # step 4, each override fully checked before the next
        override = parse_override(text)
        annotation = _check_override_key(override, merged, section_map)
        try:
            coerce(override.value, annotation, override.key)
        except TypeMismatch as err:
            raise ConfigError(f"override {override.text!r}: {err.message()}") from None
        try:
            OmegaConf.update(
                merged, override.key, _escape_interpolation(override.value), merge=True
            )
        except OmegaConfBaseException as err:
            raise ConfigError(f"override {override.text!r}: {err}") from err
        parsed.append(override)
    try:
        container = OmegaConf.to_container(merged, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as err:
        msg = " ".join(str(err).split())
        raise ConfigError(f"cannot resolve the owner chain of {files[-1]}: {msg}") from err
    assert isinstance(container, dict)
    built, loader_values = typed_sections(
        container, section_map, source=f"the owner chain of {files[-1]}"
    )
    return LoadedConfig(
        algo=algo,
        task=task,
        sim=sim,
        owner_files=tuple(files),
        training=built["training"],
        algo_cfg=built.get("algo"),
        task_cfg=built.get("env"),
        eval_cfg=built.get("eval"),
        overrides=tuple(parsed),
        config=container,
        loader_values=loader_values,
    )
