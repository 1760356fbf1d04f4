"""The metric registry of schema v1 (docs/contracts.md §metric-schema), loaded from ``schemas/metric_registry.v1.json``.

The JSON file is the single source of truth for every TensorBoard scalar tag: owner, unit,
aggregation and description, plus the two open patterns ``reward/<term>`` (``<term>`` not
``mean`` or ``mean_ep100``) and ``Loss/aux_<name>``. The file carries its own meta-schema,
so loading validates it against itself. Unknown tags fail closed: the trainer's writer
raises and consumers (``extract-metrics``) reject them. The legacy prefixes ``perf/``,
``timing/`` and ``train/`` are never emitted by a v1 trainer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from contracts.schemas import load_schema, require_valid

__all__ = [
    "LEGACY_PREFIXES",
    "REGISTRY_FILE",
    "MetricRegistry",
    "MetricSpec",
    "PatternSpec",
    "is_legacy_tag",
    "is_registered",
    "load_registry",
    "lookup",
    "registry_markdown_table",
]

REGISTRY_FILE = "metric_registry.v1.json"
LEGACY_PREFIXES: tuple[str, ...] = ("perf/", "timing/", "train/")

Owner = Literal["logger", "collector", "learner"]


@dataclass(frozen=True)
class MetricSpec:
    """One registered tag (or the spec an open pattern gives a matching tag)."""

    tag: str
    owner: Owner
    unit: str
    aggregation: str
    description: str


@dataclass(frozen=True)
class PatternSpec:
    """An open tag family such as ``reward/<term>``."""

    pattern: str
    prefix: str
    regex: re.Pattern[str]
    excluded_names: tuple[str, ...]
    owner: Owner
    unit: str
    aggregation: str
    description: str

    def matches(self, tag: str) -> bool:
        return self.regex.fullmatch(tag) is not None


@dataclass(frozen=True)
class MetricRegistry:
    """All registered tags and patterns of one metric schema version."""

    metric_schema_version: int
    tags: Mapping[str, MetricSpec]
    patterns: tuple[PatternSpec, ...]
    legacy_prefixes: tuple[str, ...]

    def lookup(self, tag: str) -> MetricSpec | None:
        """The spec of ``tag`` (exact entry first, then the open patterns), or None."""
        spec = self.tags.get(tag)
        if spec is not None:
            return spec
        for pattern in self.patterns:
            if pattern.matches(tag):
                return MetricSpec(
                    tag, pattern.owner, pattern.unit, pattern.aggregation, pattern.description
                )
        return None

    def is_registered(self, tag: str) -> bool:
        """True iff ``tag`` is a v1 tag (exact or via an open pattern)."""
        return self.lookup(tag) is not None

    def is_legacy(self, tag: str) -> bool:
        """True iff ``tag`` starts with a legacy prefix (``perf/``, ``timing/``, ``train/``)."""
        return tag.startswith(self.legacy_prefixes)


@functools.cache
def load_registry() -> MetricRegistry:
    """Load and self-validate ``schemas/metric_registry.v1.json`` (cached).

    Raises:
        ValueError: the registry file does not match its own meta-schema.
    """
    doc = load_schema(REGISTRY_FILE)  # kept in memory by contracts.schemas once read
    require_valid(doc, REGISTRY_FILE)
    tags = {
        tag: MetricSpec(
            tag, entry["owner"], entry["unit"], entry["aggregation"], entry["description"]
        )
        for tag, entry in doc["tags"].items()
    }
    patterns = tuple(
        PatternSpec(
            pattern=entry["pattern"],
            prefix=entry["prefix"],
            regex=re.compile(entry["regex"]),
            excluded_names=tuple(entry["excluded_names"]),
            owner=entry["owner"],
            unit=entry["unit"],
            aggregation=entry["aggregation"],
            description=entry["description"],
        )
        for entry in doc["patterns"]
    )
    return MetricRegistry(
        doc["metric_schema_version"], tags, patterns, tuple(doc["legacy_prefixes"])
    )


def lookup(tag: str) -> MetricSpec | None:
    """Module-level :meth:`MetricRegistry.lookup` on the v1 registry."""
    return load_registry().lookup(tag)


def is_registered(tag: str) -> bool:
    """True iff ``tag`` is registered in metric schema v1 (exact tag or open pattern)."""
    return load_registry().is_registered(tag)


def is_legacy_tag(tag: str) -> bool:
    """True iff ``tag`` uses a legacy prefix (``perf/``, ``timing/``, ``train/``)."""
    return tag.startswith(LEGACY_PREFIXES)


def registry_markdown_table(registry: MetricRegistry | None = None) -> str:
    """The registry as a Markdown table (tags in file order, then the open patterns).

    ``docs/metrics.md`` embeds this block verbatim; a test keeps the two in step.
    """
    registry = registry or load_registry()
    lines = ["| Tag | Owner | Unit | Aggregation | Description |", "|---|---|---|---|---|"]
    for spec in registry.tags.values():
        lines.append(
            f"| `{spec.tag}` | {spec.owner} | {spec.unit} | {spec.aggregation} | {spec.description} |"
        )
    for pattern in registry.patterns:
        lines.append(
            f"| `{pattern.pattern}` (open) | {pattern.owner} | {pattern.unit} | {pattern.aggregation} | {pattern.description} |"
        )
    return "\n".join(lines) + "\n"
