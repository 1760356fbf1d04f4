"""Several clips on one frame axis: per-clip sampler bins, starts inside a clip, truncation at
the clip's own end; one clip keeps the single-clip numbers exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from trainer.config.defaults import default_task_cfg
from trainer.task.g1_tracking import make_env
from trainer.task.motion import MotionClip
from trainer.task.sampler import AdaptiveSampler

CPU = torch.device("cpu")
ENDS = [100, 160, 300]


def test_each_clip_gets_its_own_bins_and_no_start_is_a_clip_end() -> None:
    sampler = AdaptiveSampler(300, CPU, clip_ends=ENDS)
    assert sampler.num_bins == (100 // 50 + 1) + (60 // 50 + 1) + (140 // 50 + 1)  # 3 + 2 + 3
    gen = torch.Generator().manual_seed(0)
    frames = sampler.sample(20000, gen)
    assert int(frames.min()) == 0 and int(frames.max()) <= 298
    assert not torch.isin(frames, torch.tensor([99, 159, 299])).any()
    assert torch.isin(torch.tensor([0, 100, 160]), frames).all()  # every clip's first frame
    bins = sampler.bin_of(torch.tensor([0, 99, 100, 159, 160, 299]))
    assert bins.tolist() == [0, 2, 3, 4, 5, 7]


def test_a_failure_counts_in_its_own_clips_bin() -> None:
    sampler = AdaptiveSampler(300, CPU, clip_ends=ENDS, alpha=1.0)
    sampler.update(torch.tensor([True, False]), torch.tensor([120, 10]))
    assert sampler.failures.nonzero().flatten().tolist() == [3]
    gen = torch.Generator().manual_seed(1)
    frames = sampler.sample(4000, gen)
    share = ((frames >= 100) & (frames < 130)).float().mean()
    assert share > 0.8  # p ∝ F + 0.1/B puts most starts into the failing bin


def test_one_clip_keeps_the_single_clip_draws_exactly() -> None:
    plain = AdaptiveSampler(500, CPU)
    one = AdaptiveSampler(500, CPU, clip_ends=[500])
    draws = [s.sample(256, torch.Generator().manual_seed(3)) for s in (plain, one)]
    assert torch.equal(draws[0], draws[1])


def _two_clips(clip: MotionClip, split: int) -> MotionClip:
    """The synthetic clip cut at ``split`` into two clips of one clip set."""
    return dataclasses.replace(clip, clip_ends=np.asarray([split, clip.num_frames], dtype=np.int64))


def test_an_episode_ends_at_its_clips_end_and_never_crosses_into_the_next(
    g1_model, g1_clip
) -> None:
    split = 200
    env = make_env(
        default_task_cfg(),
        sim_backend="mujoco",
        num_envs=2,
        device="cpu",
        seed=0,
        motion=_two_clips(g1_clip, split),
        model=g1_model,
        backend_options={"num_threads": 1},
        compile_backend=None,
    )
    start = split - 3
    env.reset_rows(torch.ones(2, dtype=torch.bool), frames=torch.tensor([start, split]))
    actions = torch.zeros(2, 29)
    for step in range(1, split - start + 1):  # exactly T_c − f steps (docs/task.md, per clip)
        res = env.step(actions)
        if step < split - start:
            assert not bool(res.truncated[0]) and int(env.frame[0]) == start + step
    assert bool(res.truncated[0]) and not bool(res.terminated[0])
    assert float(res.info["Episode_Termination/motion_clip_end"]) == 0.5
    assert int(env.frame[0]) not in (split - 1, g1_clip.num_frames - 1)  # a sampled start
    assert int(env.frame[1]) == split + split - start  # the other row runs on in clip 2
