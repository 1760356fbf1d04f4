"""Owner routing and overrides: the chain, inheritance, removed keys, JSON literals, types."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from trainer.config.defaults import default_algo_cfg, default_task_cfg
from trainer.config.errors import ConfigError
from trainer.config.loader import (
    DEFAULT_CONF_ROOT,
    list_owners,
    load_config,
    owner_chain,
    parse_override,
    parse_value,
    removed_key_message,
)

ALGO, TASK = "flashsac", "g1_motion_tracking"


def _flat(tree: object, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            out.update(_flat(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: tree}


@pytest.fixture
def conf_root(tmp_path: Path) -> Path:
    """A writable copy of the package conf tree."""
    root = tmp_path / "conf"
    shutil.copytree(DEFAULT_CONF_ROOT, root)
    return root


def _task_dir(root: Path) -> Path:
    return root / ALGO / "task" / TASK


def test_owners_are_listed_without_base() -> None:
    assert list_owners() == [f"{ALGO}/{TASK}/mjwarp", f"{ALGO}/{TASK}/mujoco"]


def test_mjwarp_chain_merges_config_base_mujoco_then_mjwarp() -> None:
    names = [p.relative_to(DEFAULT_CONF_ROOT).as_posix() for p in owner_chain(ALGO, TASK, "mjwarp")]
    assert names == [
        "flashsac/config.yaml",
        "flashsac/task/g1_motion_tracking/base.yaml",
        "flashsac/task/g1_motion_tracking/mujoco.yaml",
        "flashsac/task/g1_motion_tracking/mjwarp.yaml",
    ]


def test_mjwarp_owner_differs_from_mujoco_only_in_backend_metrics_interval_and_replay() -> None:
    mjwarp = _flat(load_config(ALGO, TASK, "mjwarp").config)
    mujoco = _flat(load_config(ALGO, TASK, "mujoco").config)
    assert mjwarp.keys() == mujoco.keys()
    differing = {k for k in mjwarp if mjwarp[k] != mujoco[k]}
    assert differing == {
        "training.sim_backend", "training.collector_metrics_interval", "algo.replay_buffer_n"
    }  # fmt: skip
    assert (mjwarp["algo.replay_buffer_n"], mujoco["algo.replay_buffer_n"]) == (8192, 512)
    assert (mjwarp["training.sim_backend"], mjwarp["training.collector_metrics_interval"]) == (
        "mjwarp",
        100,
    )
    assert (mujoco["training.sim_backend"], mujoco["training.collector_metrics_interval"]) == (
        "mujoco",
        1,
    )
    assert "inherits" not in mjwarp


def test_effective_settings_match_the_contract_table() -> None:
    loaded = load_config(ALGO, TASK, "mjwarp")
    t = loaded.training
    assert t.task_name == "G1MotionTracking"
    assert (t.inference_slot_capacity, t.replay_ingress_depth, t.replay_ingress_slot_rows) == (
        1,
        2,
        None,
    )
    assert (t.cuda_process_sharing, t.env_steps_per_sync, t.log_dir, t.play_only) == (
        None,
        1,
        None,
        False,
    )
    cfg = loaded.config
    assert cfg["env"]["scene"]["model_file"] == "robots/g1/scene_flat.xml"
    assert cfg["env"]["scene"]["robot_mjcf"] is None
    assert cfg["env"]["commands"]["motion"] == {
        "motion_file": "motions/g1/dance1_subject2_part.npz",
        "hub_repo": "unilabsim/unilab-motions",
    }
    assert "tensor_runtime" not in cfg["env"]
    # The YAML owns the values; they equal the dataclass defaults but for the GPU replay size.
    assert loaded.algo_cfg == dataclasses.replace(default_algo_cfg(), replay_buffer_n=8192)
    assert (loaded.algo_cfg.num_envs, loaded.algo_cfg.max_iterations) == (2048, 25000)
    assert loaded.task_cfg == default_task_cfg()
    assert loaded.loader_values == {"env.scene.model_file": "robots/g1/scene_flat.xml"}


@pytest.mark.parametrize("key", ["tensor_runtime", "tensor_runtime_device"])
@pytest.mark.parametrize("file_name", ["base.yaml", "mujoco.yaml"])
def test_removed_key_in_any_owner_layer_is_rejected(
    conf_root: Path, key: str, file_name: str
) -> None:
    path = _task_dir(conf_root) / file_name
    path.write_text(
        path.read_text() + f"\nenv:\n  {key}: cuda\n"
        if file_name == "mujoco.yaml"
        else path.read_text().replace("env:\n", f"env:\n  {key}: cuda\n", 1)
    )
    # mjwarp inherits mujoco, so the key is found through the inherits chain too.
    with pytest.raises(ConfigError) as info:
        load_config(ALGO, TASK, "mjwarp", conf_root=conf_root)
    assert removed_key_message(f"env.{key}") in str(info.value)
    assert str(path) in str(info.value)


def test_removed_key_message_is_the_contract_text() -> None:
    assert removed_key_message("env.tensor_runtime") == (
        "env.tensor_runtime was removed (no alias): tensor execution is a runtime invariant and "
        "the device follows the backend data plane and the rank device; delete the key"
    )


@pytest.mark.parametrize("override", ["env.tensor_runtime=cpu", "env.tensor_runtime_device=cuda:0"])
def test_removed_key_override_is_rejected_naming_the_key(override: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(ALGO, TASK, "mujoco", [override])
    assert removed_key_message(override.split("=")[0]) in str(info.value)


def test_owner_that_declares_another_backend_is_rejected(conf_root: Path) -> None:
    (_task_dir(conf_root) / "mujoco.yaml").write_text("training:\n  sim_backend: mjwarp\n")
    with pytest.raises(ConfigError, match="training.sim_backend='mjwarp' but --sim is 'mujoco'"):
        load_config(ALGO, TASK, "mujoco", conf_root=conf_root)


def test_inheritance_cycle_is_rejected(conf_root: Path) -> None:
    path = _task_dir(conf_root) / "mujoco.yaml"
    path.write_text("inherits: mjwarp\n" + path.read_text())
    with pytest.raises(ConfigError, match="inheritance cycle"):
        load_config(ALGO, TASK, "mjwarp", conf_root=conf_root)


def test_unknown_key_in_owner_file_is_rejected(conf_root: Path) -> None:
    path = _task_dir(conf_root) / "mujoco.yaml"
    path.write_text(path.read_text() + "  replay_ingres_depth: 3\n")
    with pytest.raises(
        ConfigError,
        match=r"unknown config key 'training.replay_ingres_depth'.*replay_ingress_depth",
    ):
        load_config(ALGO, TASK, "mujoco", conf_root=conf_root)


def test_missing_key_in_owner_chain_is_rejected(conf_root: Path) -> None:
    path = conf_root / ALGO / "config.yaml"
    path.write_text(path.read_text().replace("  n_step: 1", ""))
    with pytest.raises(ConfigError, match=r"missing config key 'algo.n_step'"):
        load_config(ALGO, TASK, "mujoco", conf_root=conf_root)


def test_wrong_type_in_owner_file_is_rejected(conf_root: Path) -> None:
    path = conf_root / ALGO / "config.yaml"
    path.write_text(path.read_text().replace("num_envs: 2048", "num_envs: many"))
    with pytest.raises(ConfigError, match=r'algo.num_envs="many" has type str; expected int'):
        load_config(ALGO, TASK, "mujoco", conf_root=conf_root)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("null", None),
        ("true", True),
        ("17", 17),
        ("-5.5", -5.5),
        ("3e-4", 3e-4),
        ('"17"', "17"),
        ("[1, 2]", [1, 2]),
        ('{"a": 1}', {"a": 1}),
        ("cpu", "cpu"),
        ("/tmp/run dir", "/tmp/run dir"),
        ("motions/g1/synthetic_dance.npz", "motions/g1/synthetic_dance.npz"),
        ("NaN", "NaN"),  # non-finite tokens are not JSON literals here
        ("", ""),
    ],
)
def test_override_value_is_a_json_literal_when_it_parses_else_a_raw_string(
    text: str, value: object
) -> None:
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_override_splits_at_the_first_equals_sign() -> None:
    override = parse_override("training.log_dir=/tmp/a=b")
    assert (override.key, override.value, override.text) == (
        "training.log_dir",
        "/tmp/a=b",
        "training.log_dir=/tmp/a=b",
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("+algo.seed=3", "leading '+'"),
        ("~algo.seed", "leading '~'"),
        ("algo.seed", "is not KEY=VALUE"),
        ("algo..seed=3", "is not a dotted config key"),
        (
            "algo=sac",
            "'algo' is selected by --algo/--task/--sim and declared by the owner; it cannot be overridden",
        ),
        ("training.play_only=true", "'training.play_only' is selected by --algo/--task/--sim"),
        ("algo.num_env=8", "unknown config key 'algo.num_env'"),
        ("env.commands.motion.file=x", "unknown config key 'env.commands.motion.file'"),
        ("env.motion_file=x", "unknown config key 'env.motion_file'"),
        ("env.commands=1", "'env.commands' is a config section"),
        ("algo.num_envs=1.5", "algo.num_envs=1.5 has type float; expected int"),
        ("algo.num_envs=true", "algo.num_envs=true has type bool; expected int"),
        ("algo.num_envs=64.0", "has type float; expected int"),
        ("algo.use_amp=1", "algo.use_amp=1 has type int; expected bool"),
        ("algo.gamma=high", 'algo.gamma="high" has type str; expected float'),
        ("training.task_name=17", "has type int; expected str"),
        ("env.reset_root_pos_range_m=[1, 2]", "expected tuple[float, float, float]"),
        ("env.scene.decimation=null", "has type null; expected int"),
    ],
)
def test_bad_override_is_a_config_error(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(ALGO, TASK, "mujoco", [override])
    assert message in str(info.value)


def test_overrides_apply_in_order_with_contract_spelling_and_numeric_widening() -> None:
    loaded = load_config(
        ALGO,
        TASK,
        "mujoco",
        [
            "algo.num_envs=64",
            "algo.num_envs=128",
            "algo.gamma=1",  # an int is accepted for a float field
            "algo.seed=null",
            "training.replay_ingress_slot_rows=32",
            "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz",
            "env.scene.robot_mjcf=/opt/g1.xml",
            "env.reset_root_pos_range_m=[0, 0, 0.5]",
            "training.log_dir=${oc.env:HOME}",  # CLI strings are literal, never interpolated
        ],
    )
    assert loaded.algo_cfg.num_envs == 128
    assert loaded.algo_cfg.gamma == 1.0 and isinstance(loaded.algo_cfg.gamma, float)
    assert loaded.algo_cfg.seed is None and loaded.seed_overridden
    assert loaded.training.replay_ingress_slot_rows == 32
    assert loaded.task_cfg.motion_file == "motions/g1/synthetic_dance.npz"
    assert (
        loaded.config["env"]["commands"]["motion"]["motion_file"]
        == "motions/g1/synthetic_dance.npz"
    )
    assert loaded.task_cfg.scene.robot_mjcf == "/opt/g1.xml"
    assert loaded.task_cfg.reset_root_pos_range_m == (0.0, 0.0, 0.5)
    assert loaded.training.log_dir == "${oc.env:HOME}"
    assert [o.key for o in loaded.overrides][:3] == ["algo.num_envs", "algo.num_envs", "algo.gamma"]


def test_missing_owner_lists_the_owners() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(ALGO, TASK, "isaac")
    assert "flashsac/g1_motion_tracking/mjwarp, flashsac/g1_motion_tracking/mujoco" in str(
        info.value
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("training.device=tpu", 'training.device="tpu" must be one of "auto", "cpu", "cuda"'),
        ("training.device=1", 'training.device=1 must be one of "auto", "cpu", "cuda"'),
        ("training.motion_hub=null", 'must be one of "auto", "skip", "require"'),
        ("training.cuda_process_sharing=MPS", 'must be one of "mps", null'),
        ("algo.amp_dtype=fp16", 'algo.amp_dtype="fp16" must be one of "auto", "bf16", "fp32"'),
    ],
)
def test_a_value_outside_a_literal_is_one_line_naming_the_allowed_values(
    override: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(ALGO, TASK, "mujoco", [override])
    text = str(info.value)
    assert text.startswith(f"override {override!r}: ")
    assert message in text and "\n" not in text


def test_a_literal_in_the_owner_chain_is_checked_too(conf_root: Path) -> None:
    owner = conf_root / ALGO / "task" / TASK / "mujoco.yaml"
    owner.write_text(owner.read_text() + "  device: gpu\n")
    with pytest.raises(ConfigError, match='training.device="gpu" must be one of "auto"'):
        load_config(ALGO, TASK, "mujoco", conf_root=conf_root)
    assert load_config(ALGO, TASK, "mjwarp").training.cuda_process_sharing is None
