"""One `uv sync` installs our console scripts, and the package carries its own G1 model.

mjlab, once our G1 model source, shipped a `train` (and a `play`) script of its own, so
which `train` won depended on install order. The model is now bundled in the wheel
(docs/assets.md), and no installed distribution may claim one of our script names.
"""

from __future__ import annotations

import email
import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from trainer.sim.scene import BUNDLED_G1_MJCF

REPO = Path(__file__).resolve().parents[1]
# pyproject.toml's, not the installed metadata: collection must work where the project is not
# installed (the GPU machine runs the tests from a bare checkout).
OUR_SCRIPTS: dict[str, str] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
    "scripts"
]


@pytest.mark.parametrize("name", sorted(OUR_SCRIPTS))
def test_console_script_runs_our_entry_point(name: str) -> None:
    script = Path(sys.executable).parent / name
    assert script.is_file(), f"{name} is not installed; run: uv sync --extra mjwarp"
    module = OUR_SCRIPTS[name].split(":")[0]
    assert f"from {module} import" in script.read_text(encoding="utf-8"), (
        f"{script} is not ours (another package installed a script of that name); "
        "find it with: uv pip show --files <package>"
    )


def test_no_other_installed_distribution_claims_our_script_names() -> None:
    # Two distributions with one script name make the installed script depend on install order.
    clashes = sorted(
        f"{dist.metadata['Name']} {dist.version}: {entry.name}"
        for dist in metadata.distributions()
        if dist.metadata["Name"] != "g1soak"
        for entry in dist.entry_points
        if entry.group == "console_scripts" and entry.name in OUR_SCRIPTS
    )
    assert not clashes, f"other distributions install our console scripts: {clashes}"


@pytest.mark.slow
def test_wheel_ships_the_model_and_no_mjlab_requirement(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH (install it: python3 -m pip install uv)")
    build = subprocess.run(
        [uv, "build", "--wheel", "--offline", "--out-dir", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp_path.glob("g1soak-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        model = whl.read("trainer/sim/unitree_g1/g1.xml")
        assert "trainer/sim/unitree_g1/LICENSE" in whl.namelist()
        dist_info = next(
            n.split("/")[0] for n in whl.namelist() if n.endswith(".dist-info/METADATA")
        )
        requires = email.message_from_bytes(whl.read(f"{dist_info}/METADATA")).get_all(
            "Requires-Dist", []
        )
    assert hashlib.sha256(model).digest() == hashlib.sha256(BUNDLED_G1_MJCF.read_bytes()).digest()
    names = {re.match(r"[A-Za-z0-9._-]+", req).group(0).lower() for req in requires}
    assert "mjlab" not in names
    assert {"torch", "mujoco"} <= names
