"""Where each value of a resolved config came from: an owner-chain file or an override.

``train --print-config`` shows the merged config key by key with its origin. The rule is
the loader's own layering (docs/configuration.md "Owner files and layering"): mappings
merge deeply and anything else (a scalar, a list, an empty mapping) is replaced whole, so
a leaf's origin is the last layer that set it or a mapping leaf above it, and an override
of a key owns every leaf under it. A value written as an interpolation is reported as
resolved, with the file that holds the interpolation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from omegaconf import OmegaConf

from trainer.config.loader import INHERITS_KEY, LoadedConfig

__all__ = ["Origin", "ResolvedValue", "flatten", "resolve_origins"]


@dataclass(frozen=True)
class Origin:
    """One layer: an owner-chain file or a command-line override."""

    kind: Literal["file", "override"]
    source: str
    """The file's absolute path, or the override as typed (``algo.batch_size=256``)."""

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "source": self.source}


@dataclass(frozen=True)
class ResolvedValue:
    """One leaf of the resolved config."""

    key: str
    value: Any
    origin: Origin


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of a nested mapping by dotted key; an empty mapping or a list is one leaf."""
    if isinstance(tree, Mapping) and tree:
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: tree} if prefix else {}


def _layer_keys(path: Path) -> set[str]:
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    if isinstance(raw, dict):
        raw.pop(INHERITS_KEY, None)
    return set(flatten(raw))


def _covers(layer_key: str, leaf: str) -> bool:
    return leaf == layer_key or leaf.startswith(layer_key + ".")


def resolve_origins(loaded: LoadedConfig) -> list[ResolvedValue]:
    """Every leaf of ``loaded.config`` with the layer that decided it, in key order.

    Files are read again only for their key structure (the loader has validated them).
    """
    layers: list[tuple[Origin, set[str]]] = [
        (Origin("file", str(path)), _layer_keys(path)) for path in loaded.owner_files
    ]
    layers += [(Origin("override", o.text), {o.key}) for o in loaded.overrides]
    values: list[ResolvedValue] = []
    for leaf, value in sorted(flatten(loaded.config).items()):
        origin = next(
            (layer for layer, keys in reversed(layers) if any(_covers(k, leaf) for k in keys)),
            None,
        )
        if origin is None:
            raise AssertionError(f"{leaf} is in the resolved config but no layer sets it")
        values.append(ResolvedValue(leaf, value, origin))
    return values
