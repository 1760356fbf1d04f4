"""G1TrackingEnv on the CPU MuJoCo backend: step order, resets, dones and the sanity checks
of docs/task.md §sanity-checks (kinematic replay, zero-noise reset, empty mask, selected rows only)."""

from __future__ import annotations

import pytest
import torch

from contracts.env_spec import EnvSpec
from trainer.task.config import REWARD_TERM_NAMES
from trainer.task.math import quat_apply_inverse

NUM_ENVS = 4
EXP_TERMS = REWARD_TERM_NAMES[:6]
NOISELESS = {
    "noise_base_lin_vel": 0.0,
    "noise_base_ang_vel": 0.0,
    "noise_joint_pos": 0.0,
    "noise_joint_vel": 0.0,
    "reset_root_pos_range_m": (0.0, 0.0, 0.0),
    "reset_root_rpy_range_rad": (0.0, 0.0, 0.0),
    "reset_root_lin_vel_range": (0.0, 0.0, 0.0),
    "reset_root_ang_vel_range": (0.0, 0.0, 0.0),
    "reset_joint_pos_range_rad": 0.0,
}


def test_reset_and_step_return_160_289_29_shapes(make_g1_env):
    env = make_g1_env()
    obs, critic = env.reset_all()
    assert obs.shape == (NUM_ENVS, 160) and critic.shape == (NUM_ENVS, 289)
    assert env.action_dim == 29
    assert env.spec == EnvSpec(obs_dim=160, critic_obs_dim=289, action_dim=29)
    assert env.spec.row_width == 930  # the replay row the runtime packs from these
    res = env.step(torch.zeros(NUM_ENVS, 29))
    for t in (res.obs, res.terminal_obs):
        assert t.shape == (NUM_ENVS, 160)
    for t in (res.critic_obs, res.terminal_critic_obs):
        assert t.shape == (NUM_ENVS, 289)
    assert res.reward.shape == (NUM_ENVS,) and res.done.dtype == torch.bool
    assert set(res.reward_terms) == {f"reward/{n}" for n in REWARD_TERM_NAMES}


def test_kinematic_replay_gives_perfect_tracking_terms(make_g1_env, g1_clip):
    env = make_g1_env(**NOISELESS)
    frames = torch.tensor([0, 137, 260, g1_clip.num_frames - 3])
    for k in range(3):
        env.reset_rows(torch.ones(NUM_ENVS, dtype=torch.bool), frames + k)
        robot = env.robot_state()
        ref = env.reference_state(env.frame)
        values = env.reward_terms(ref, robot)
        for name in EXP_TERMS:
            assert torch.allclose(values[name], torch.ones(NUM_ENVS), atol=1e-5), name
        conds = env.termination_terms(ref, robot)
        for name in ("anchor_pos", "anchor_ori", "ee_body_pos"):
            assert not conds[name].any(), name
        assert torch.allclose(env.obs[:, 58:61], torch.zeros(NUM_ENVS, 3), atol=1e-5)
        rot6_identity = torch.tensor([1.0, 0, 0, 1, 0, 0]).expand(NUM_ENVS, -1)
        assert torch.allclose(env.obs[:, 61:67], rot6_identity, atol=1e-5)


def test_zero_noise_reset_reproduces_the_frame_including_body_frame_angular_velocity(
    make_g1_env, g1_clip
):
    env = make_g1_env(**NOISELESS)
    f = torch.tensor([3, 50, 200, 411])
    env.reset_rows(torch.ones(NUM_ENVS, dtype=torch.bool), f)
    qpos, qvel = env.backend.qpos, env.backend.qvel
    pelvis_pos = torch.as_tensor(g1_clip.body_pos_w[f.numpy(), 0])
    pelvis_quat = torch.as_tensor(g1_clip.body_quat_w[f.numpy(), 0])
    ang_w = torch.as_tensor(g1_clip.body_ang_vel_w[f.numpy(), 0])
    assert torch.allclose(qpos[:, 0:3], pelvis_pos, atol=1e-6)
    assert torch.allclose(qpos[:, 3:7], pelvis_quat, atol=1e-6)
    assert torch.allclose(qpos[:, 7:], torch.as_tensor(g1_clip.joint_pos[f.numpy()]), atol=1e-6)
    assert torch.allclose(
        qvel[:, 0:3], torch.as_tensor(g1_clip.body_lin_vel_w[f.numpy(), 0]), atol=1e-6
    )
    assert torch.allclose(qvel[:, 3:6], quat_apply_inverse(pelvis_quat, ang_w), atol=1e-6)
    assert torch.allclose(qvel[:, 6:], torch.as_tensor(g1_clip.joint_vel[f.numpy()]), atol=1e-6)
    # The command shows frame f after the reset; actions are zero.
    assert torch.equal(env.obs[:, :29], torch.as_tensor(g1_clip.joint_pos[f.numpy()]))
    assert torch.equal(env.obs[:, 131:], torch.zeros(NUM_ENVS, 29))


def test_empty_reset_mask_draws_nothing_and_changes_nothing(make_g1_env):
    env = make_g1_env()
    env.step(torch.rand(NUM_ENVS, 29) * 0.2)
    state = env.reset_generator.get_state().clone()
    before = [
        t.clone() for t in (env.backend.qpos, env.backend.qvel, env.obs, env.critic_obs, env.frame)
    ]
    env.reset_rows(torch.zeros(NUM_ENVS, dtype=torch.bool))
    assert torch.equal(env.reset_generator.get_state(), state)
    after = (env.backend.qpos, env.backend.qvel, env.obs, env.critic_obs, env.frame)
    for b, a in zip(before, after, strict=True):
        assert torch.equal(b, a)


def test_reset_touches_only_the_selected_rows(make_g1_env):
    env = make_g1_env()
    env.step(torch.rand(NUM_ENVS, 29) * 0.2)
    views = lambda: (
        env.backend.qpos,
        env.backend.qvel,
        env.backend.ctrl,
        env.obs,
        env.critic_obs,
        env.frame,
        env.episode_step,
        env.actions,
    )
    before = [t.clone() for t in views()]
    mask = torch.tensor([False, True, False, True])
    env.reset_rows(mask)
    for b, a in zip(before, views(), strict=True):
        assert torch.equal(b[~mask], a[~mask])
    assert not torch.equal(before[0][mask], env.backend.qpos[mask])
    assert (env.episode_step[mask] == 0).all() and (env.actions[mask] == 0).all()


def test_fall_terminates_and_is_never_also_truncated(make_g1_env, g1_clip):
    env = make_g1_env(**NOISELESS)
    env.reset_rows(torch.ones(NUM_ENVS, dtype=torch.bool), torch.tensor([10, 10, 10, 10]))
    qpos = env.backend.qpos.clone()
    qpos[0, 2] -= 0.7  # row 0 sinks 0.7 m below the reference anchor height
    env.episode_step[0] = env.max_episode_steps - 1  # and would also time out
    env.backend.reset_rows(
        torch.tensor([True, False, False, False]), qpos, env.backend.qvel.clone()
    )
    res = env.step(torch.zeros(NUM_ENVS, 29))
    assert res.terminated[0] and not res.truncated[0] and res.done[0]
    assert not (res.terminated & res.truncated).any()


def test_time_out_and_clip_end_truncate_and_return_the_terminal_observation(make_g1_env, g1_clip):
    env = make_g1_env(**NOISELESS)
    last = g1_clip.num_frames - 1
    env.reset_rows(torch.ones(NUM_ENVS, dtype=torch.bool), torch.tensor([5, last, 100, 200]))
    env.episode_step[0] = env.max_episode_steps - 1
    res = env.step(torch.zeros(NUM_ENVS, 29))
    assert res.truncated[:2].all() and not res.terminated[:2].any()
    assert not res.done[2:].any()
    assert res.episode_length[0] == env.max_episode_steps and res.episode_length[1] == 1
    # Terminal observation: frame kept (done rows do not advance), obs after reset differ.
    assert torch.equal(res.terminal_obs[1, :29], torch.as_tensor(g1_clip.joint_pos[last]))
    assert torch.equal(res.terminal_obs[2:], res.obs[2:])
    assert not torch.equal(res.terminal_obs[:2], res.obs[:2])
    assert torch.equal(res.terminal_critic_obs[2:], res.critic_obs[2:])
    # Continuing rows advanced one frame: the command shows k + 1.
    assert torch.equal(res.obs[2, :29], torch.as_tensor(g1_clip.joint_pos[101]))


def test_row_that_never_fails_truncates_after_t_minus_f_steps(make_g1_env, g1_clip):
    env = make_g1_env(num_envs=1, **NOISELESS)
    f = g1_clip.num_frames - 6
    env.reset_rows(torch.ones(1, dtype=torch.bool), torch.tensor([f]))
    steps = g1_clip.num_frames - f  # docs/task.md §sanity-checks: exactly T - f steps
    for i in range(steps):
        res = env.step(torch.zeros(1, 29))
        assert bool(res.done[0]) == (i == steps - 1)
    assert res.truncated[0] and res.episode_length[0] == steps


def test_logged_reward_terms_times_dt_sum_to_the_mean_step_reward(make_g1_env):
    env = make_g1_env()
    gen = torch.Generator().manual_seed(5)
    for _ in range(3):
        res = env.step(torch.rand(NUM_ENVS, 29, generator=gen) * 2 - 1)
        total = 0.02 * torch.stack(list(res.reward_terms.values())).sum()
        assert torch.allclose(total, res.reward.mean(), atol=1e-6)


def test_random_actions_fall_within_a_second(make_g1_env):
    env = make_g1_env(num_envs=2)
    gen = torch.Generator().manual_seed(0)
    lengths = []
    for _ in range(80):
        res = env.step(torch.rand(2, 29, generator=gen) * 2 - 1)
        lengths += res.episode_length[res.terminated].tolist()
    assert lengths and max(lengths) <= 50


def test_seeded_envs_are_reproducible(make_g1_env):
    a, b = make_g1_env(seed=3), make_g1_env(seed=3)
    acts = torch.rand(NUM_ENVS, 29) - 0.5
    ra, rb = a.step(acts), b.step(acts)
    assert torch.equal(ra.obs, rb.obs) and torch.equal(ra.reward, rb.reward)


def test_cpu_backend_rejects_non_finite_actions_at_once(make_g1_env):
    env = make_g1_env()
    actions = torch.zeros(NUM_ENVS, 29)
    actions[2, 4] = float("nan")
    with pytest.raises(Exception, match="non-finite action in env row 2"):
        env.step(actions)


def test_action_latency_applies_the_previous_action(make_g1_env):
    env = make_g1_env(simulate_action_latency=True)
    a = torch.full((NUM_ENVS, 29), 0.1)
    env.step(a)
    q_default = torch.as_tensor(env._q_default)
    assert torch.allclose(env.backend.ctrl, q_default.expand(NUM_ENVS, -1))
    env.step(a)
    assert torch.allclose(env.backend.ctrl, (q_default + 0.2).expand(NUM_ENVS, -1))
    assert torch.equal(env.obs[:, 131:], a)


def test_static_outputs_are_views_of_one_buffer_and_copies_by_default(make_g1_env):
    env = make_g1_env()
    a = env.step(torch.zeros(NUM_ENVS, 29))
    kept = a.obs.clone()
    env.step(torch.full((NUM_ENVS, 29), 0.3))
    assert torch.equal(a.obs, kept)  # default: a fresh copy per step
    static = make_g1_env(static_outputs=True)
    r = static.step(torch.zeros(NUM_ENVS, 29))
    assert r.obs.data_ptr() == static._out["obs"].data_ptr()
    assert torch.equal(r.obs, static.obs)
    diag = static.diagnostics()
    assert diag["available"] is False  # CPU backend: unavailable form, no task graph entry
    assert static.task_cuda_graph.enabled is False


@pytest.mark.slow
def test_staged_mjwarp_step_resets_done_rows_inside_step_with_fixed_draws(make_warp_cpu_env):
    """The step phases (actions, Warp step, ..., Warp reset, finish) run eagerly on Warp's CPU device."""
    env = make_warp_cpu_env(4)
    entry = env.diagnostics()["diagnostics"]["task_cuda_graph"]
    assert entry == {
        "requested": True,
        "enabled": False,
        "disable_reason": "torch device is cpu; CUDA graphs need CUDA",
    }
    assert env.diagnostics()["backend_type"] == "mjwarp"
    env.episode_step[:2] = env.max_episode_steps - 2
    gen = torch.Generator().manual_seed(0)
    results = []
    for _ in range(3):
        state = env.reset_generator.get_state().clone()
        results.append(env.step(torch.rand(4, 29, generator=gen) * 0.2 - 0.1))
        assert not torch.equal(state, env.reset_generator.get_state())  # fixed draw every step
    first, second, third = results
    assert not first.done.any()
    assert second.done.tolist() == [True, True, False, False]
    assert second.truncated[:2].all() and (second.episode_length[:2] == env.max_episode_steps).all()
    assert (env.episode_step == torch.tensor([1, 1, 3, 3])).all()
    assert torch.equal(second.obs[2:], second.terminal_obs[2:])
    assert (second.obs[:2] != second.terminal_obs[:2]).any(-1).all()
    assert torch.equal(second.obs[:2, 131:], torch.zeros(2, 29))  # actions zeroed on reset
    total = 0.02 * torch.stack(list(third.reward_terms.values())).sum()
    assert torch.allclose(total, third.reward.mean(), atol=1e-6)


@pytest.mark.gpu
def test_cuda_graph_step_matches_eager_and_never_syncs(make_cuda_env):
    """Graphed and eager steps from the same seed and state agree; the graphed loop runs under
    ``set_sync_debug_mode("error")``. Random numbers (reset and observation noise) must match
    to float rounding: both paths draw the same philox offsets. Physics-derived values get a
    small tolerance because MJWarp's contact ordering (atomics) is not bitwise reproducible
    between two separate Data instances; exact agreement is reported when it happens."""
    n, steps = 64, 6
    eager = make_cuda_env(n, cuda_graph=False, compile_backend=None)
    graphed = make_cuda_env(n, compile_backend=None)  # graphs alone
    entry = graphed.diagnostics()["diagnostics"]["task_cuda_graph"]
    assert entry["enabled"] is True, entry["disable_reason"]
    assert eager.diagnostics()["diagnostics"]["task_cuda_graph"]["enabled"] is False
    for env in (eager, graphed):  # half the rows time out at step 2: resets inside the graphs
        env.episode_step[: n // 2] = env.max_episode_steps - 2
    gen = torch.Generator(device="cuda").manual_seed(3)
    acts = [torch.rand(n, 29, generator=gen, device="cuda") * 0.4 - 0.2 for _ in range(steps)]
    noisy = slice(67, 131)  # base_lin_vel .. joint_vel carry noise in the actor obs only
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        res_g = [graphed.step(a) for a in acts]
    finally:
        torch.cuda.set_sync_debug_mode(0)
    res_e = [eager.step(a) for a in acts]
    torch.cuda.synchronize()
    for t, (g, e) in enumerate(zip(res_g, res_e, strict=True)):
        for name in ("done", "terminated", "truncated", "episode_length"):
            assert torch.equal(getattr(g, name), getattr(e, name)), (t, name)
        noise_g = g.obs[:, noisy] - g.critic_obs[:, noisy]
        noise_e = e.obs[:, noisy] - e.critic_obs[:, noisy]
        assert torch.allclose(noise_g, noise_e, atol=1e-4), (t, (noise_g - noise_e).abs().max())
        for name in ("obs", "critic_obs", "terminal_critic_obs", "reward", "episode_return"):
            diff = (getattr(g, name) - getattr(e, name)).abs().max().item()
            assert diff < 2e-2, (t, name, diff)
    assert res_g[1].done[: n // 2].all() and not res_g[1].done[n // 2 :].any()
    # Fresh noise on every replay: consecutive steps draw different observation noise.
    n0 = res_g[2].obs[:, noisy] - res_g[2].critic_obs[:, noisy]
    n1 = res_g[3].obs[:, noisy] - res_g[3].critic_obs[:, noisy]
    assert not torch.allclose(n0, n1)
    # Reset targets drawn inside the stage_reset graph equal the eager draws (same frames, same noise).
    assert torch.equal(graphed.frame, eager.frame)
    assert torch.allclose(graphed.backend.qpos, eager.backend.qpos, atol=2e-2)
    graphed.check_health()
    eager.check_health()
