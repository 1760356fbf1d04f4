"""Owner files and their ``inherits`` chain (docs/configuration.md).

An owner is ``<algo>/<task>/<sim>``: the file ``<conf root>/<algo>/task/<task>/<sim>.yaml``.
Its layers, later wins: ``<algo>/config.yaml``, ``task/<task>/base.yaml``, then the owner's
``inherits`` chain oldest first. The trainer's loader and the support matrix both read owners
here, so the chain has one implementation. Files are read with OmegaConf; every problem is a
``ConfigError`` naming the file and the fix.

The YAML stays in the trainer package (``trainer/conf``): :func:`default_conf_root` finds it
with ``importlib.util.find_spec``, which locates the package without importing it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from contracts.config_keys import (
    REMOVED_KEYS,
    moved_key_message,
    removed_key_in,
    removed_key_message,
)
from contracts.errors import ConfigError

__all__ = [
    "INHERITS_KEY",
    "REMOVED_KEYS",
    "default_conf_root",
    "inherits_chain",
    "list_owners",
    "load_yaml",
    "merge_chain",
    "owner_chain",
    "owner_file",
    "removed_key_in",
    "removed_key_message",
]

INHERITS_KEY = "inherits"
"""Owner-file key naming the sibling owner it extends (e.g. ``inherits: mujoco``)."""


def default_conf_root() -> Path:
    """``trainer/conf`` of the installed trainer package (found, not imported)."""
    spec = importlib.util.find_spec("trainer")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the trainer package is not installed, so it has no conf root; pass one")
    return Path(next(iter(spec.submodule_search_locations))) / "conf"


def list_owners(conf_root: Path | None = None) -> list[str]:
    """All owners under the conf root as ``<algo>/<task>/<sim>`` (``base.yaml`` is no owner)."""
    root = conf_root or default_conf_root()
    owners = []
    for path in sorted(root.glob("*/task/*/*.yaml")):
        if path.stem != "base":
            owners.append(f"{path.parent.parent.parent.name}/{path.parent.name}/{path.stem}")
    return owners


def owner_file(algo: str, task: str, sim: str, conf_root: Path | None = None) -> Path:
    """Path of the owner file selected by the flags (it need not exist)."""
    return (conf_root or default_conf_root()) / algo / "task" / task / f"{sim}.yaml"


def _require_owner(algo: str, task: str, sim: str, root: Path) -> Path:
    for name, value in (("--algo", algo), ("--task", task), ("--sim", sim)):
        if not value or "/" in value or value.startswith(".") or value == "base":
            raise ConfigError(
                f"{name} {value!r} is not an owner name; available owners: "
                f"{', '.join(list_owners(root)) or '(none)'}"
            )
    path = owner_file(algo, task, sim, root)
    if not path.is_file():
        owners = ", ".join(list_owners(root)) or "(none)"
        raise ConfigError(
            f"no owner file for --algo {algo} --task {task} --sim {sim} "
            f"({path.relative_to(root.parent) if root.parent in path.parents else path}); "
            f"available owners (algo/task/sim): {owners}"
        )
    return path


def load_yaml(path: Path) -> DictConfig:
    """One config file as an OmegaConf mapping (raises ConfigError naming the file)."""
    try:
        node = OmegaConf.load(path)
    except (OSError, OmegaConfBaseException, ValueError) as err:
        raise ConfigError(f"cannot load config file {path}: {err}; fix the YAML") from err
    except Exception as err:  # yaml.YAMLError and friends: one line, naming the file
        if type(err).__module__.startswith("yaml"):
            msg = " ".join(str(err).split())
            raise ConfigError(f"cannot parse config file {path}: {msg}; fix the YAML") from err
        raise
    if not isinstance(node, DictConfig):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return node


def _flat_keys(tree: Any, prefix: str = "") -> list[str]:
    keys: list[str] = []
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            path = f"{prefix}{key}"
            keys.append(path)
            keys.extend(_flat_keys(value, f"{path}."))
    return keys


def _check_removed(node: DictConfig, path: Path) -> None:
    raw = OmegaConf.to_container(node, resolve=False)
    keys = _flat_keys(raw)
    found = removed_key_in(keys)
    if found:
        raise ConfigError(f"{removed_key_message(found)} (found in {path})")
    for key in keys:
        moved = moved_key_message(key)
        if moved is not None:
            raise ConfigError(f"{moved} (found in {path})")


def inherits_chain(owner: Path, conf_root: Path | None = None) -> list[Path]:
    """``owner`` and the owners it inherits from, newest first (cycles and gaps raise)."""
    root = conf_root or default_conf_root()
    inherited: list[Path] = [owner]
    seen = {owner.resolve()}
    current = owner
    while True:
        node = load_yaml(current)
        parent = node.get(INHERITS_KEY) if INHERITS_KEY in node else None
        if parent is None:
            return inherited
        if not isinstance(parent, str) or not parent or "/" in parent:
            raise ConfigError(
                f"{current}: '{INHERITS_KEY}' must name a sibling owner "
                f"(e.g. 'mujoco'), got {parent!r}"
            )
        target = current.parent / (parent if parent.endswith(".yaml") else f"{parent}.yaml")
        if not target.is_file() or target.stem == "base":
            raise ConfigError(
                f"{current}: inherits {parent!r}, but {target} is not an owner "
                f"file; available owners: {', '.join(list_owners(root))}"
            )
        if target.resolve() in seen:
            raise ConfigError(f"{current}: inheritance cycle through {target}")
        seen.add(target.resolve())
        inherited.append(target)
        current = target


def owner_chain(algo: str, task: str, sim: str, conf_root: Path | None = None) -> list[Path]:
    """The files merged for an owner, in merge order (base layers, then oldest owner first)."""
    root = conf_root or default_conf_root()
    inherited = inherits_chain(_require_owner(algo, task, sim, root), root)
    base_files = [root / algo / "config.yaml", root / algo / "task" / task / "base.yaml"]
    for path in base_files:
        if not path.is_file():
            raise ConfigError(
                f"owner layer {path} is missing; every owner needs "
                f"{algo}/config.yaml and {algo}/task/{task}/base.yaml"
            )
    return base_files + list(reversed(inherited))


def merge_chain(files: Sequence[Path]) -> DictConfig:
    """The files merged in order (later wins), ``inherits`` dropped; removed keys raise."""
    merged = OmegaConf.create({})
    for path in files:
        node = load_yaml(path)
        _check_removed(node, path)
        if INHERITS_KEY in node:
            if path.stem in ("config", "base"):
                raise ConfigError(f"{path}: '{INHERITS_KEY}' is only allowed in owner files")
            node.pop(INHERITS_KEY)
        try:
            merged = OmegaConf.merge(merged, node)
        except OmegaConfBaseException as err:
            raise ConfigError(f"cannot merge {path}: {err}") from err
    return merged
