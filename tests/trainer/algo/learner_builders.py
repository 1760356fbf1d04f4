"""Tiny FlashSAC learners for the algo tests (CPU unless a device is given)."""

from __future__ import annotations

from contracts.env_spec import EnvSpec
from trainer.algo.config import FlashSacCfg
from trainer.algo.fusion import CycleFusion
from trainer.algo.learner import FlashSacLearner
from trainer.config.defaults import default_algo_cfg

OBS, COBS, ACT, N = 6, 7, 3, 8
SPEC = EnvSpec(obs_dim=OBS, critic_obs_dim=COBS, action_dim=ACT)


def make_cfg(**over) -> FlashSacCfg:
    base = {
        "num_envs": N, "batch_size": 16, "updates_per_step": 4, "replay_buffer_n": 16, "learning_starts": 2,
        "actor_hidden_dim": 16, "critic_hidden_dim": 16, "num_atoms": 11, "use_compile": False,
    }  # fmt: skip
    return default_algo_cfg(**(base | over))


def make_learner(device: str = "cpu", fusion: CycleFusion | None = None, **over) -> FlashSacLearner:
    cfg = make_cfg(**over)
    return FlashSacLearner(cfg, SPEC, num_envs=cfg.num_envs, device=device, fusion=fusion)
