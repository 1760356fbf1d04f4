"""The installed console scripts are ours (mjlab, our model source, ships a `train` too)."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

OUR_SCRIPTS = {
    entry.name: entry.value
    for entry in metadata.distribution("g1soak").entry_points
    if entry.group == "console_scripts"
}


@pytest.mark.parametrize("name", sorted(OUR_SCRIPTS))
def test_console_script_runs_our_entry_point(name: str) -> None:
    script = Path(sys.executable).parent / name
    assert script.is_file(), f"{name} is not installed; run: uv sync --extra mjwarp"
    module = OUR_SCRIPTS[name].split(":")[0]
    assert f"from {module} import" in script.read_text(encoding="utf-8"), (
        f"{script} is not ours (another package installed a script of that name); "
        "run: uv sync --extra mjwarp --reinstall-package g1soak"
    )
