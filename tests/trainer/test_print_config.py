"""``train --print-config [--json]``: the resolved owner chain, each value with the file or
override that set it; nothing written, exit 0 (2 with the loader's error)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trainer import cli
from trainer.config.loader import DEFAULT_CONF_ROOT, load_config
from trainer.config.provenance import Origin, resolve_origins

ALGO, TASK = "flashsac", "g1_motion_tracking"
OWNER = ["--algo", ALGO, "--task", TASK]
TASK_DIR = DEFAULT_CONF_ROOT / ALGO / "task" / TASK


@pytest.fixture
def conf_root(tmp_path: Path) -> Path:
    root = tmp_path / "conf"
    shutil.copytree(DEFAULT_CONF_ROOT, root)
    return root


def _origins(loaded) -> dict[str, tuple[object, Origin]]:
    return {item.key: (item.value, item.origin) for item in resolve_origins(loaded)}


def test_each_value_names_the_last_layer_that_set_it(conf_root: Path) -> None:
    task_dir = conf_root / ALGO / "task" / TASK
    mujoco = task_dir / "mujoco.yaml"
    mujoco.write_text(
        mujoco.read_text() + "algo:\n  tau: 0.01\n  learning_starts: ${algo.batch_size}\n"
    )
    loaded = load_config(
        ALGO, TASK, "mjwarp", ["algo.batch_size=32", "env.reset_root_pos_range_m=[0, 0, 0]"],
        conf_root=conf_root,
    )  # fmt: skip
    found = _origins(loaded)
    assert found["training.sim_backend"] == (
        "mjwarp",
        Origin("file", str(task_dir / "mjwarp.yaml")),
    )
    assert found["algo.tau"] == (0.01, Origin("file", str(mujoco)))  # inherited owner
    assert found["algo.gamma"][1] == Origin("file", str(task_dir / "base.yaml"))
    assert found["algo.actor_lr"][1] == Origin("file", str(conf_root / ALGO / "config.yaml"))
    assert found["algo.batch_size"] == (32, Origin("override", "algo.batch_size=32"))
    # An interpolation resolves to the overridden value and keeps the file that wrote it.
    assert found["algo.learning_starts"] == (32, Origin("file", str(mujoco)))
    assert found["env.reset_root_pos_range_m"] == (
        [0, 0, 0],
        Origin("override", "env.reset_root_pos_range_m=[0, 0, 0]"),
    )
    assert set(found) == set(_flat_keys(loaded.config))


def _flat_keys(tree: dict, prefix: str = "") -> list[str]:
    keys: list[str] = []
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            keys += _flat_keys(value, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def test_print_config_table_shows_the_chain_and_every_origin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "120")
    code = cli.main([*OWNER, "--sim", "mujoco", "--print-config", "algo.batch_size=8"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:5] == [
        f"owner {ALGO}/{TASK}/mujoco; layers, later wins:",
        f"  1. {DEFAULT_CONF_ROOT / ALGO / 'config.yaml'}",
        f"  2. {TASK_DIR / 'base.yaml'}",
        f"  3. {TASK_DIR / 'mujoco.yaml'}",
        "  override algo.batch_size=8",
    ]
    rows = {line.split()[0]: line.split() for line in lines[6:-1]}
    assert rows["algo.batch_size"][1:] == ["8", "override", "algo.batch_size=8"]
    assert rows["training.sim_backend"][1:] == ['"mujoco"', f"{ALGO}/task/{TASK}/mujoco.yaml"]
    assert rows["training.log_dir"][1:] == ["null", f"{ALGO}/config.yaml"]
    assert lines[-1] == "Every key and its meaning: docs/configuration.md"
    assert all(len(line) <= 120 for line in lines)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_print_config_json_is_one_object_with_structured_origins(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = cli.main([*OWNER, "--sim", "mjwarp", "--print-config", "--json", "algo.seed=3"])
    out, _ = capsys.readouterr()
    assert code == 0
    doc = json.loads(out)
    assert doc["owner"] == f"{ALGO}/{TASK}/mjwarp"
    assert doc["owner_files"][-1] == str(TASK_DIR / "mjwarp.yaml")
    assert doc["values"]["training.collector_metrics_interval"] == {
        "value": 100,
        "origin": {"kind": "file", "source": str(TASK_DIR / "mjwarp.yaml")},
    }


def test_print_config_json_override_origin(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*OWNER, "--sim", "mujoco", "--print-config", "--json", "algo.tau=0.1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["overrides"] == ["algo.tau=0.1"]
    assert doc["values"]["algo.tau"] == {
        "value": 0.1,
        "origin": {"kind": "override", "source": "algo.tau=0.1"},
    }


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        pytest.param(
            [*OWNER, "--sim", "mujoco", "--print-config", "algo.batchsize=256"],
            "error: unknown config key 'algo.batchsize' (override 'algo.batchsize=256'); "
            "did you mean 'algo.batch_size'?",
            id="unknown-key",
        ),
        pytest.param(
            ["--print-config"],
            "error: --algo, --task and --sim must be given together",
            id="no-owner",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "--json"],
            "error: Invalid value for --json: --json needs --print-config (see train --help)",
            id="json-alone",
        ),
    ],
)
def test_print_config_errors_exit_2_in_one_line(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [line]
