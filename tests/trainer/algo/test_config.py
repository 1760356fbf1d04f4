"""FlashSacCfg defaults (docs/configuration.md §algo-flashsac), derived values and fail-closed validation."""

from __future__ import annotations

import dataclasses

import pytest

from trainer.algo.config import UNSIZED_DECAY_STEPS, FlashSacCfg, FlashSacConfigError, warmup_ticks
from trainer.config.defaults import default_algo_cfg
from trainer.config.errors import ConfigError

SPEC_KEYS = [
    "num_envs",
    "max_iterations",
    "batch_size",
    "updates_per_step",
    "policy_frequency",
    "gamma",
    "tau",
    "n_step",
    "actor_lr",
    "critic_lr",
    "temp_lr",
    "lr_end",
    "lr_warmup_steps",
    "lr_decay_steps",
    "learning_starts",
    "replay_buffer_n",
    "actor_hidden_dim",
    "critic_hidden_dim",
    "num_blocks",
    "num_atoms",
    "critic_min_v",
    "critic_max_v",
    "temp_initial",
    "temp_target_sigma",
    "target_entropy",
    "noise_zeta_mu",
    "noise_max_repeat",
    "normalize_reward",
    "normalized_g_max",
    "reward_scale_horizon",
    "policy_average_rate",
    "use_amp",
    "amp_dtype",
    "use_compile",
    "use_cuda_graph",
    "fuse_renorm",
    "fuse_losses",
    "fuse_networks",
    "fuse_combo_kernels",
    "fuse_multi_kernel",
    "seed",
    "save_interval",
]


def test_fields_are_exactly_the_spec_keys_and_defaults_validate() -> None:
    assert [f.name for f in dataclasses.fields(FlashSacCfg)] == SPEC_KEYS
    cfg = default_algo_cfg().validate()
    assert cfg.replay_capacity == 512 * 2048
    assert cfg.resolved_target_entropy(29) == pytest.approx(-13.867262, abs=1e-6)
    assert cfg.resolved_amp_dtype("cuda") == "bf16" and cfg.resolved_amp_dtype("cpu") == "fp32"


def test_null_lr_decay_steps_decays_each_optimizer_over_its_updates_in_the_run() -> None:
    cfg = default_algo_cfg(max_iterations=65000, updates_per_step=4, policy_frequency=2,
                      lr_decay_steps=500000)  # fmt: skip
    assert cfg.resolved_lr_decay_steps() == (500000, 500000, 500000)
    whole_run = dataclasses.replace(cfg, lr_decay_steps=None).validate()
    assert whole_run.resolved_lr_decay_steps() == (130000, 260000, 130000)
    odd = dataclasses.replace(whole_run, updates_per_step=3)  # actor after updates 0 and 2
    assert odd.resolved_lr_decay_steps() == (130000, 195000, 130000)
    # A time budget's forecast length replaces the cap; before any forecast: peak rate.
    assert whole_run.resolved_lr_decay_steps(70000) == (140000, 280000, 140000)
    unsized = dataclasses.replace(whole_run, max_iterations=None).validate()
    assert unsized.resolved_lr_decay_steps() == (UNSIZED_DECAY_STEPS,) * 3


def test_warmup_ticks_and_total_env_steps() -> None:
    assert warmup_ticks(98, 2048, 1024) == 98
    assert warmup_ticks(98, 2048, 20) == 103
    assert default_algo_cfg(num_envs=1024, max_iterations=65000).total_env_steps == 66_660_352
    assert default_algo_cfg().total_env_steps == 51_400_704


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({"n_step": 3}, "algo.n_step=3"),
        ({"amp_dtype": "fp16"}, "algo.amp_dtype='fp16'"),
        ({"amp_dtype": "int8"}, "algo.amp_dtype='int8'"),
        ({"batch_size": 0}, "algo.batch_size=0"),
        ({"num_envs": -1}, "algo.num_envs=-1"),
        ({"num_atoms": 1}, "algo.num_atoms=1"),
        ({"batch_size": 4096, "num_envs": 2, "replay_buffer_n": 8}, "exceeds the replay capacity"),
        ({"learning_starts": 600, "replay_buffer_n": 512}, "warm-up threshold"),
        ({"critic_min_v": 5.0}, "algo.critic_min_v=5.0"),
        ({"gamma": 1.5}, "algo.gamma=1.5"),
        ({"tau": 0.0}, "algo.tau=0.0"),
        ({"lr_decay_steps": 0}, "algo.lr_decay_steps=0 must be a positive integer or null"),
        ({"reward_scale_horizon": 0}, "algo.reward_scale_horizon=0 must be a positive integer"),
        ({"reward_scale_horizon": 2.5}, "algo.reward_scale_horizon=2.5 must be a positive"),
        ({"policy_average_rate": -0.1}, "algo.policy_average_rate=-0.1 must lie in [0, 1]"),
        ({"policy_average_rate": 1.5}, "algo.policy_average_rate=1.5 must lie in [0, 1]"),
        ({"policy_average_rate": float("nan")}, "algo.policy_average_rate=nan"),
        ({"actor_lr": float("nan")}, "algo.actor_lr=nan"),
        ({"learning_starts": -1}, "algo.learning_starts=-1"),
    ],
)
def test_validate_rejects_bad_values_with_one_line(override, fragment) -> None:
    with pytest.raises(FlashSacConfigError) as info:
        default_algo_cfg(**override).validate()
    message = str(info.value)
    assert fragment in message and "\n" not in message
    assert isinstance(info.value, ConfigError) and isinstance(info.value, ValueError)
