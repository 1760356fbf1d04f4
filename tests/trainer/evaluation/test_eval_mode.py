"""The env's evaluation mode: explicit start frames without noise or draws, noise off and
back, no auto-reset with held rows, per-row outputs, the sampler and the compiled reset
left as they were."""

from __future__ import annotations

import pytest
import torch

from trainer.algo.networks import Actor
from trainer.task.config import REWARD_TERM_NAMES
from trainer.task.terminations import CONDITION_NAMES, TERMINATION_NAMES

NOISELESS_OBS = {
    "noise_base_lin_vel": 0.0,
    "noise_base_ang_vel": 0.0,
    "noise_joint_pos": 0.0,
    "noise_joint_vel": 0.0,
}


def _env(make_g1_env, n: int = 4, **kw):
    return make_g1_env(num_envs=n, num_threads=1, compile_backend=None, **kw)


def test_start_puts_every_row_exactly_on_its_frame_without_drawing(make_g1_env, g1_clip):
    env = _env(make_g1_env)
    frames = torch.tensor([0, 7, 250, g1_clip.num_frames - 2])
    before = env.reset_generator.get_state()
    with env.evaluation() as ev:
        ev.start(frames)
        assert torch.equal(env.frame, frames) and torch.equal(env.episode_step, torch.zeros(4))
        qpos = env.backend.qpos
        pelvis = torch.as_tensor(g1_clip.body_pos_w[frames.numpy(), 0])
        assert torch.allclose(qpos[:, :3], pelvis, atol=1e-6)  # no reset noise
        assert torch.allclose(qpos[:, 7:], torch.as_tensor(g1_clip.joint_pos[frames.numpy()]))
        assert torch.equal(env.reset_generator.get_state(), before)
        with pytest.raises(ValueError, match="start frames must lie in"):
            ev.start(torch.tensor([0, 0, 0, g1_clip.num_frames - 1]))


def test_observation_noise_is_off_inside_and_back_after(make_g1_env):
    noisy, clean = _env(make_g1_env), _env(make_g1_env, **NOISELESS_OBS)
    frames = torch.tensor([3, 30, 60, 90])
    with noisy.evaluation() as a, clean.evaluation() as b:
        assert torch.equal(a.start(frames), b.start(frames))
        act = torch.full((4, 29), 0.05)
        assert torch.equal(a.step(act).result.obs, b.step(act).result.obs)
        assert noisy.observation_noise is False
    assert noisy.observation_noise is True
    noisy.reset_rows(torch.ones(4, dtype=torch.bool), frames, noise=False)
    clean.reset_rows(torch.ones(4, dtype=torch.bool), frames, noise=False)
    assert not torch.equal(noisy.obs, clean.obs)  # the configured noise is back


def test_rows_are_not_reset_and_a_row_that_ended_is_held(make_g1_env, g1_clip):
    env = _env(make_g1_env, n=3)
    last = g1_clip.num_frames - 2
    failures = torch.linspace(0.1, 0.9, env.sampler.failures.numel())
    env.sampler.failures.copy_(failures)
    with env.evaluation() as ev:
        ev.start(torch.tensor([last, 100, 200]), torch.tensor([True, True, False]))
        first = ev.step(torch.zeros(3, 29))
        assert first.active.tolist() == [True, True, False]
        assert first.result.frame.tolist() == [last, 100, 200]
        second = ev.step(torch.zeros(3, 29))  # row 0 scores the clip's last frame: it ends
        assert second.ended.tolist() == [True, False, False]
        assert second.result.truncated[0] and second.termination_reason()[0] == -1
        held = env.backend.qpos[0].clone()
        for _ in range(3):
            step = ev.step(torch.zeros(3, 29))
            assert step.active.tolist() == [False, True, False] and not step.ended[0]
            assert torch.equal(env.backend.qpos[0], held)  # frozen at its terminal state
            assert env.frame[0] == last + 1  # no new episode, no frame past the clip
        assert env.episode_step[1] == 5  # the running row was never reset
    assert torch.equal(env.sampler.failures, failures)


def test_the_step_result_carries_per_row_terms_conditions_and_states(make_g1_env):
    env = _env(make_g1_env)
    with env.evaluation() as ev:
        ev.start(torch.tensor([10, 20, 30, 40]))
        result = ev.step(torch.full((4, 29), 0.1)).result
    assert result.conditions.shape == (4, len(CONDITION_NAMES))
    assert result.row_reward_terms.shape == (4, len(REWARD_TERM_NAMES))
    assert torch.allclose(result.row_reward_terms.sum(-1) * env.cfg.ctrl_dt, result.reward)
    assert result.robot.body_pos_w.shape == result.reference.body_pos_w.shape == (4, 14, 3)
    assert torch.equal(result.frame, torch.tensor([10, 20, 30, 40]))


def test_a_termination_names_its_condition(make_g1_env):
    env = _env(make_g1_env, n=2)
    with env.evaluation() as ev:
        ev.start(torch.tensor([0, 0]))
        for _ in range(200):  # full-range targets: the robot falls
            step = ev.step(torch.ones(2, 29))
            if step.ended.any():
                break
        assert step.ended.all() and step.result.terminated.all()
        reasons = step.termination_reason()
        for row, reason in enumerate(reasons.tolist()):
            assert step.result.conditions[row, reason], TERMINATION_NAMES[reason]


def test_noise_free_reset_needs_explicit_frames(make_g1_env):
    env = _env(make_g1_env, n=2)
    with pytest.raises(ValueError, match="needs explicit start frames"):
        env.reset_rows(torch.ones(2, dtype=torch.bool), noise=False)


@pytest.mark.slow
def test_explicit_start_frames_do_not_recompile_a_compiled_env(make_g1_env):
    torch._dynamo.reset()  # other tests' compiles of the same phase functions do not count
    env = make_g1_env(num_envs=3, num_threads=1, compile_backend="aot_eager")
    assert env.task_compile.enabled, env.task_compile.disable_reason
    with torch._dynamo.config.patch(error_on_recompile=True), env.evaluation() as ev:
        ev.start(torch.tensor([5, 50, 100]))
        ev.step(torch.zeros(3, 29))
        ev.start(torch.tensor([1, 2, 3]))
    assert torch.equal(env.frame.clamp(max=0), torch.zeros(3, dtype=torch.long))


@pytest.mark.slow
def test_the_staged_compiled_step_honours_the_evaluation_mode(make_warp_cpu_env):
    """MJWarp on Warp's CPU device with compiled phases: the path the GPU runs, graphs aside."""
    env = make_warp_cpu_env(3, compile_backend="aot_eager")
    assert env.staged and env.task_compile.enabled
    with env.evaluation() as ev:
        obs = ev.start(torch.tensor([0, 100, 200])).clone()
        assert torch.equal(obs, env.obs)
        clean = env.obs.clone()
        env.set_observation_noise(True)
        env.reset_rows(torch.ones(3, dtype=torch.bool), torch.tensor([0, 100, 200]), noise=False)
        assert not torch.equal(env.obs, clean)  # the compiled finish reads the scale tensor
        env.set_observation_noise(False)
        env.reset_rows(torch.ones(3, dtype=torch.bool), torch.tensor([0, 100, 200]), noise=False)
        assert torch.equal(env.obs, clean)
        ev.start(torch.tensor([498, 100, 200]))
        ev.step(torch.zeros(3, 29))
        step = ev.step(torch.zeros(3, 29))
        assert step.ended.tolist() == [True, False, False]
        held = env.backend.qpos[0].clone()
        ev.step(torch.zeros(3, 29))
        assert torch.equal(env.backend.qpos[0], held)


MAX_CONTACT_FLIPPED_ROWS = 2


@pytest.mark.gpu
def test_the_compiled_captured_cuda_env_evaluates_noise_free_without_host_syncs(make_cuda_env):
    """The GPU path: inductor-compiled phases replayed as CUDA graphs honour the zeroed noise
    scale (actor obs = clean critic obs on the noisy columns, exactly), the evaluation step
    never syncs, it agrees with the eager env on all but a contact-flipped row or two, and the
    env trains again afterwards."""
    from trainer.evaluation.policy import PolicyPoint
    from trainer.evaluation.protocol import Protocol
    from trainer.evaluation.runner import evaluate_points

    n, noisy = 64, slice(67, 131)
    fast = make_cuda_env(n)
    assert fast.task_compile.enabled and fast.task_cuda_graph.enabled
    eager = make_cuda_env(n, cuda_graph=False, compile_backend=None)
    frames = (torch.arange(n, device="cuda") * 7) % 498
    gen = torch.Generator(device="cuda").manual_seed(5)
    acts = [torch.rand(n, 29, generator=gen, device="cuda") * 0.2 - 0.1 for _ in range(6)]
    with fast.evaluation() as a, eager.evaluation() as b:
        a.start(frames)
        b.start(frames)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            got = [(s.result.obs.clone(), s.result.critic_obs.clone(), s.active.clone())
                   for s in (a.step(act) for act in acts)]  # fmt: skip
        finally:
            torch.cuda.set_sync_debug_mode(0)
        want = [(s.result.obs.clone(), s.active.clone()) for s in (b.step(act) for act in acts)]
    for (obs, critic, active), (obs_e, active_e) in zip(got, want, strict=True):
        assert torch.equal(obs[:, noisy], critic[:, noisy])
        assert torch.equal(active, active_e)
        # MJWarp's sums are not bitwise: a contact that one run activates and the other does not
        # moves that row's joint velocities by ~0.2 (seen on the H200); a wrong phase moves them all
        diverged = int(((obs - obs_e).abs().amax(dim=1) >= 2e-2).sum())
        assert diverged <= MAX_CONTACT_FLIPPED_ROWS
    fast.step(torch.zeros(n, 29, device="cuda"))  # back to training: graphs, resets, noise
    fast.check_health()
    torch.manual_seed(0)
    actor = Actor(160, 29, 32, 1).to("cuda").eval()
    points = [PolicyPoint(k, k, "checkpoint", f"model_{k}.pt", None, actor) for k in (1, 2)]
    records = evaluate_points(fast, points, Protocol(24, 4, 500, "mjwarp", "cuda:0"))
    assert [r["modes"]["uniform"]["episodes"] for r in records] == [24, 24]
    modes = [r["modes"][m] for r in records for m in ("frame0", "uniform")]
    assert all(m["success_rate"] is not None and m["mpkpe_mm"] is not None for m in modes)
