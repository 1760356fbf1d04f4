"""Reward terms as data: ``env.rewards.<term>: {weight, sigma}`` from the YAML into
``RewardTerm``, checked against the term table; the old flat keys fail naming the new one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from trainer.config.errors import ConfigError
from trainer.config.loader import DEFAULT_CONF_ROOT, load_config
from trainer.task.config import (
    KERNEL_TERM_NAMES,
    REWARD_TERM_NAMES,
    RewardTerm,
)
from trainer.task.terms import TERMS, RewardTable, TermConstants

ALGO, TASK = "flashsac", "g1_motion_tracking"


@pytest.fixture
def base_yaml(tmp_path: Path) -> tuple[Path, Path]:
    """``(conf root copy, its task base.yaml)``."""
    root = tmp_path / "conf"
    shutil.copytree(DEFAULT_CONF_ROOT, root)
    return root, root / ALGO / "task" / TASK / "base.yaml"


def test_the_owner_yaml_fills_one_term_per_reward_in_table_order() -> None:
    rewards = load_config(ALGO, TASK, "mujoco").task_cfg.rewards
    assert tuple(rewards) == REWARD_TERM_NAMES == tuple(TERMS)
    assert rewards["motion_body_pos"] == RewardTerm(weight=2.0, sigma=0.3)
    assert rewards["joint_limit"] == RewardTerm(weight=-2.0, sigma=None)
    assert all(rewards[name].sigma is not None for name in KERNEL_TERM_NAMES)


def test_a_reward_override_reaches_the_weight_vector() -> None:
    cfg = load_config(ALGO, TASK, "mujoco", ["env.rewards.joint_limit.weight=-3"]).task_cfg
    constants = TermConstants(0, torch.zeros(29), torch.zeros(29), torch.zeros(0), 0.05)
    table = RewardTable(cfg.rewards, constants, torch.device("cpu"))
    assert table.weights[REWARD_TERM_NAMES.index("joint_limit")] == -3.0
    assert table.weights.tolist() == pytest.approx(
        [cfg.rewards[name].weight for name in REWARD_TERM_NAMES]
    )


@pytest.mark.parametrize(
    ("override", "new_key"),
    [
        ("env.weight_joint_limit=-1", "env.rewards.joint_limit.weight"),
        ("env.sigma_motion_body_pos=0.2", "env.rewards.motion_body_pos.sigma"),
    ],
)
def test_an_old_flat_override_names_the_new_key(override: str, new_key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(ALGO, TASK, "mujoco", [override])
    message = str(info.value)
    assert "\n" not in message
    assert f"{override.split('=')[0]} was moved to {new_key}; rename the key" in message


def test_an_old_flat_key_in_an_owner_file_names_the_new_key(base_yaml) -> None:
    root, path = base_yaml
    path.write_text(path.read_text().replace("env:\n", "env:\n  weight_action_rate_l2: -0.1\n", 1))
    with pytest.raises(ConfigError) as info:
        load_config(ALGO, TASK, "mujoco", conf_root=root)
    assert "env.weight_action_rate_l2 was moved to env.rewards.action_rate_l2.weight" in str(
        info.value
    )
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("env.rewards.joint_limit.sigma=0.3", "env.rewards.joint_limit.sigma=0.3 must be null"),
        ("env.rewards.motion_body_ori.sigma=null", "env.rewards.motion_body_ori.sigma=None must"),
        ("env.rewards.motion_body_ori.sigma=0", "sigma=0.0 must be a finite number > 0"),
        ("env.rewards.motion_body_pos.weight=true", "has type bool; expected float"),
    ],
)
def test_bad_reward_values_exit_with_the_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match="env") as info:
        load_config(ALGO, TASK, "mujoco", [override])
    assert message in str(info.value)


def test_a_missing_or_unknown_term_is_rejected(base_yaml) -> None:
    root, path = base_yaml
    text = path.read_text()
    path.write_text(text.replace("    joint_limit: {weight: -2.0, sigma: null}", "", 1))
    with pytest.raises(ConfigError, match="env.rewards.joint_limit is missing"):
        load_config(ALGO, TASK, "mujoco", conf_root=root)
    path.write_text(text.replace("    joint_limit:", "    joint_limits:", 1))
    with pytest.raises(ConfigError, match="env.rewards.joint_limits is no reward term"):
        load_config(ALGO, TASK, "mujoco", conf_root=root)


def test_a_term_needs_both_weight_and_sigma(base_yaml) -> None:
    root, path = base_yaml
    path.write_text(
        path.read_text().replace(
            "joint_limit: {weight: -2.0, sigma: null}", "joint_limit: {weight: -2.0}"
        )
    )
    with pytest.raises(ConfigError, match=r"missing config key 'env.rewards.joint_limit.sigma'"):
        load_config(ALGO, TASK, "mujoco", conf_root=root)
