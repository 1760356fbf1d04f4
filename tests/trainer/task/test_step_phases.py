"""The step as named phases (``step_phases``) and the compiled phase functions.

On CPU the compiled path runs with torch.compile's ``aot_eager`` backend: the same dynamo
trace and functionalisation inductor gets on CUDA, without a C++/Triton toolchain. The GPU
test compares inductor + CUDA graphs against the plain eager step.
"""

from __future__ import annotations

import pytest
import torch

from trainer.task.acceleration import AcceleratedEnv
from trainer.task.eval_mode import EvaluableEnv
from trainer.task.g1_tracking import STEP_PHASES, G1TrackingEnv

FIELDS = ("obs", "critic_obs", "terminal_obs", "reward", "done", "terminated", "truncated")


def _cpu_env(make_g1_env, compile_backend, num_envs=6) -> G1TrackingEnv:
    return make_g1_env(num_envs=num_envs, seed=5, num_threads=1, compile_backend=compile_backend)


def _actions(num_envs: int, steps: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(2)
    return [torch.rand(num_envs, 29, generator=gen) * 0.6 - 0.3 for _ in range(steps)]


def _assert_same_steps(a: G1TrackingEnv, b: G1TrackingEnv, steps: int, atol: float) -> None:
    n = a.num_envs
    for env in (a, b):  # half the rows time out at step 2: the reset path runs too
        env.episode_step[: n // 2] = env.max_episode_steps - 2
    for t, act in enumerate(_actions(n, steps)):
        ra, rb = a.step(act), b.step(act)
        for name in FIELDS:
            x, y = getattr(ra, name), getattr(rb, name)
            if x.dtype == torch.bool:
                assert torch.equal(x, y), (t, name)
            else:
                assert torch.allclose(x, y, atol=atol), (t, name, (x - y).abs().max())
    assert torch.equal(a.frame, b.frame)
    assert torch.equal(a.sampler.failures, b.sampler.failures)


@pytest.mark.slow
def test_compiled_phase_functions_match_the_eager_step(make_g1_env):
    compiled = _cpu_env(make_g1_env, "aot_eager")
    eager = _cpu_env(make_g1_env, None)
    assert compiled.task_compile.to_json() == {
        "requested": True,
        "enabled": True,
        "disable_reason": None,
    }
    assert eager.task_compile.requested is False
    _assert_same_steps(compiled, eager, steps=4, atol=1e-5)


def test_make_env_compiles_only_on_cuda(make_g1_env):
    env = _cpu_env(make_g1_env, True, num_envs=2)  # torch_compile=True, but CPU
    assert env.task_compile.requested is False
    assert "compile_backend=None" in env.task_compile.disable_reason


def test_a_failing_compile_reverts_to_eager_and_says_why(make_g1_env):
    env = _cpu_env(make_g1_env, "no_such_backend", num_envs=2)
    entry = env.task_compile
    assert entry.requested is True and entry.enabled is False and entry.fell_back is True
    assert "no_such_backend" in entry.disable_reason
    assert entry.to_json()["fell_back"] is True  # mjwarp's manifest carries it; the soak fails
    assert env._fns["update"] == env._update_core  # the eager functions run
    env.step(torch.zeros(2, 29))


def test_cpu_step_phases_run_one_by_one_equal_step(make_g1_env):
    """The CPU backend hands out the same eight phases (host physics and reset) as a staged
    one: running them in order is ``step``, and an empty reset mask draws nothing."""
    a, b = _cpu_env(make_g1_env, None, num_envs=4), _cpu_env(make_g1_env, None, num_envs=4)
    assert [name for name, _ in b.step_phases()] == list(STEP_PHASES)
    for env in (a, b):
        env.episode_step[:2] = env.max_episode_steps - 1  # rows 0, 1 time out: resets run
    for act in _actions(4, 2):
        ra = a.step(act)
        b.stage_actions(act)
        with b.phase_stream():
            for _, run in b.step_phases():
                run()
        for name in FIELDS:
            assert torch.equal(getattr(ra, name), b._out[name]), name
    assert torch.equal(a.frame, b.frame)
    assert torch.equal(a.reset_generator.get_state(), b.reset_generator.get_state())


@pytest.mark.slow
def test_phases_run_one_by_one_equal_step_and_select_can_be_replaced(make_warp_cpu_env):
    """The probe's use: run the phases by name; a replaced ``select`` resets exactly the rows
    it writes into ``reset_mask`` (here row 1 only, while row 0 times out and is kept)."""
    n = 3
    stepped = make_warp_cpu_env(n)
    phased = make_warp_cpu_env(n, compile_backend="aot_eager")
    assert phased.task_compile.enabled, phased.task_compile.disable_reason
    assert [name for name, _ in phased.step_phases()] == list(STEP_PHASES)
    acts = _actions(n, 2)
    for act in acts:
        expected = stepped.step(act)
        phased.stage_actions(act)
        with phased.phase_stream():
            for _, run in phased.step_phases():
                run()
        for name in ("obs", "reward", "done"):
            got = phased._out[name]
            assert torch.allclose(got.float(), getattr(expected, name).float(), atol=1e-5), name

    phased.episode_step[0] = phased.max_episode_steps - 1  # row 0 times out this step
    frames_before = phased.frame.clone()
    phased.stage_actions(torch.zeros(n, 29))
    with phased.phase_stream():
        for name, run in phased.step_phases():
            if name == "select":
                phased.reset_mask.copy_(torch.tensor([False, True, False]))
            else:
                run()
    assert phased._out["done"][0] and not phased._out["done"][1]
    assert phased.episode_step.tolist()[:2] == [phased.max_episode_steps, 0]
    assert phased.frame[2] == frames_before[2] + 1
    assert phased.clip_end.dtype == torch.bool and phased.clip_end.shape == (n,)


@pytest.mark.gpu
def test_inductor_and_graphs_match_the_eager_step_on_cuda(make_cuda_env):
    eager = make_cuda_env(64, cuda_graph=False, compile_backend=None)
    fast = make_cuda_env(64)
    assert fast.task_compile.enabled, fast.task_compile.disable_reason
    assert fast.task_cuda_graph.enabled, fast.task_cuda_graph.disable_reason
    diag = fast.diagnostics()["diagnostics"]
    assert diag["task_compile"]["enabled"] is True
    # Physics contact ordering is not bitwise reproducible between two Data instances.
    _assert_same_steps(fast, eager, steps=4, atol=2e-2)


def test_the_env_has_every_member_acceleration_and_evaluation_drive(make_g1_env):
    env = _cpu_env(make_g1_env, None, num_envs=2)
    assert isinstance(env, AcceleratedEnv) and isinstance(env, EvaluableEnv)
    assert env.backend.staged() is None and env.staged is False
    with pytest.raises(ValueError, match="phase functions"):
        env.set_phase_functions({"update": env.phase_cores()["update"]})
