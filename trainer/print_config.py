"""``train --print-config [--json]``: the resolved owner chain, value by value, with origins.

Loads the owner chain and the overrides exactly as ``train`` does (steps 1–4 of
docs/configuration.md "What train does"), then prints every key with its value (as JSON,
the spelling an override takes) and the layer that set it: an owner-chain file or an
override. Nothing is written and no semantic check runs, so a config that ``train`` would
reject for its values can still be inspected. Exit 0, or 2 with the loader's one-line error.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contracts.cli_app import EXIT_OK, EXIT_USAGE, error
from trainer.config.errors import FLAGS_TOGETHER, ConfigError
from trainer.config.loader import DEFAULT_CONF_ROOT, LoadedConfig, load_config
from trainer.config.provenance import Origin, resolve_origins

__all__ = ["config_json", "print_config", "render_config"]

MAX_WIDTH = 160


def _label(origin: Origin, conf_root: Path) -> str:
    if origin.kind == "override":
        return f"override {origin.source}"
    path = Path(origin.source)
    return str(path.relative_to(conf_root)) if conf_root in path.parents else str(path)


def config_json(loaded: LoadedConfig) -> dict[str, Any]:
    """The resolved config for machines: owner, files, overrides, and each key's value and origin."""
    return {
        "owner": f"{loaded.algo}/{loaded.task}/{loaded.sim}",
        "owner_files": [str(p) for p in loaded.owner_files],
        "overrides": [o.text for o in loaded.overrides],
        "values": {
            item.key: {"value": item.value, "origin": item.origin.to_json()}
            for item in resolve_origins(loaded)
        },
    }


def render_config(loaded: LoadedConfig, conf_root: Path, width: int | None = None) -> str:
    """The resolved config for a person: the chain, then a key / value / origin table."""
    from rich.console import Console
    from rich.table import Table

    cols = width or min(MAX_WIDTH, shutil.get_terminal_size((100, 24)).columns)
    buffer = io.StringIO()
    console = Console(file=buffer, width=cols, color_system=None, highlight=False)
    console.print(f"owner {loaded.algo}/{loaded.task}/{loaded.sim}; layers, later wins:")
    for n, path in enumerate(loaded.owner_files, 1):
        console.print(f"  {n}. {path}", overflow="fold")
    for override in loaded.overrides:
        console.print(f"  override {override.text}", overflow="fold")
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("key", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("origin", no_wrap=True)
    for item in resolve_origins(loaded):
        table.add_row(item.key, json.dumps(item.value), _label(item.origin, conf_root))
    console.print(table)
    console.print("Every key and its meaning: docs/configuration.md")
    return buffer.getvalue()


def print_config(
    algo: str | None,
    task: str | None,
    sim: str | None,
    overrides: Sequence[str],
    *,
    as_json: bool,
    conf_root: Path | None = None,
) -> int:
    """Print the resolved config on stdout; returns 0, or 2 after one ``error:`` line."""
    root = conf_root or DEFAULT_CONF_ROOT
    try:
        if not (algo and task and sim):
            raise ConfigError(FLAGS_TOGETHER)
        loaded = load_config(algo, task, sim, overrides, conf_root=root)
    except ConfigError as err:
        return error(str(err), EXIT_USAGE)
    if as_json:
        from contracts.jsonio import dumps_strict

        sys.stdout.write(dumps_strict(config_json(loaded)) + "\n")
    else:
        sys.stdout.write(render_config(loaded, root))
    return EXIT_OK
