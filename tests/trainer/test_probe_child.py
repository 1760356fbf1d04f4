"""The backend probe child (``python -m trainer.probe``): workload pieces, that its control step
is the env's control step, the reset policy (scheduled + clip-end rows, terminated rows not
reset), phase bookkeeping and the host-bridge counters on the CPU mujoco backend."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import torch

from trainer import probe
from trainer.cpu_threads import affinity_cpus

NUM_ENVS = 4


@pytest.fixture
def make(make_g1_env):
    """Envs built like the probe's (seed 7, one physics thread)."""
    return functools.partial(make_g1_env, seed=probe.SEED, num_threads=1)


def _actions(seed: int = 0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    return torch.as_tensor(rng.uniform(-1, 1, size=(NUM_ENVS, 29)).astype(np.float32))


@pytest.mark.parametrize(
    ("n", "stride", "rows"),
    [(1, 1, 1), (4, 4, 1), (15, 15, 1), (16, 16, 1), (2048, 16, 128), (40, 16, 2)],
)
def test_reset_schedule_stride_and_rows(n: int, stride: int, rows: int) -> None:
    assert probe.reset_stride(n) == stride
    assert probe.scheduled_reset_rows(n) == rows


def test_scheduled_mask_visits_every_row_once_per_stride() -> None:
    masks = np.stack([probe.scheduled_mask(40, it) for it in range(16)])
    assert masks.sum(axis=0).tolist() == [1] * 40  # each row exactly once per 16 iterations
    assert np.flatnonzero(probe.scheduled_mask(40, 17)).tolist() == [1, 17, 33]
    assert np.flatnonzero(probe.scheduled_mask(4, 6)).tolist() == [2]


def test_summarize_ms_statistics() -> None:
    stats = probe.summarize_ms([1.0, 2.0, 3.0, 10.0])
    assert stats == {
        "mean_ms": 4.0,
        "std_ms": pytest.approx(np.std([1, 2, 3, 10])),
        "p50_ms": 2.5,
        "min_ms": 1.0,
        "max_ms": 10.0,
        "iters": 4,
    }


def test_transfer_inventory_is_the_contract_table() -> None:
    rows = [
        (r["phase"], r["direction"], r["semantic_limit_per_control_step"])
        for r in probe.transfer_inventory()
    ]
    assert rows == [
        ("control", "d2h", 1),
        ("cpu_physics", "none", 0),
        ("update_state_full_read", "h2d", 1),
        ("update_state_manager_compute", "none", 0),
        ("reset_done_selection", "none", 0),
        ("reset_commit", "d2h", 1),
        ("reset_publication", "h2d", 1),
        ("replay_publication", "excluded", None),
    ]


def test_an_iteration_without_scheduled_rows_is_the_env_step_where_nothing_ended(make) -> None:
    ref_env, probe_env = make(), make()
    actions = _actions()
    result = ref_env.step(actions)
    clock = probe.PhaseClock(torch.device("cpu"))
    _, mask, clip_end = probe.probe_iteration(
        probe_env, actions, torch.zeros(NUM_ENVS, dtype=torch.bool), clock
    )
    assert torch.equal(mask, clip_end)  # only clip-end rows would reset
    keep = ~result.done & ~mask  # rows neither run reset
    assert keep.any()
    torch.testing.assert_close(probe_env.obs[keep], result.obs[keep], rtol=0, atol=0)
    torch.testing.assert_close(probe_env.critic_obs[keep], result.critic_obs[keep], rtol=0, atol=0)
    assert torch.equal(probe_env.backend.qpos[keep], ref_env.backend.qpos[keep])
    assert torch.equal(probe_env.frame[keep], ref_env.frame[keep])


def test_probe_iteration_resets_scheduled_and_clip_end_rows_but_not_terminated_rows(
    make, g1_clip, monkeypatch
) -> None:
    env = make()
    clock = probe.PhaseClock(torch.device("cpu"))
    last = int(g1_clip.clip_ends[0]) - 1
    env.frame[1] = last  # row 1 sits on its clip's last frame -> clip end
    before_steps = env.episode_step.clone()
    terms = env.termination_terms

    def forced(ref, robot):  # row 3 terminates (falls) this step
        out = dict(terms(ref, robot))
        out["anchor_pos"] = out["anchor_pos"].clone()
        out["anchor_pos"][3] = True
        return out

    monkeypatch.setattr(env, "termination_terms", forced)
    counts = env.backend.transfer_stats()
    scheduled = torch.as_tensor(probe.scheduled_mask(NUM_ENVS, 0))  # row 0
    ms, mask, clip_end = probe.probe_iteration(env, _actions(), scheduled, clock)
    assert mask.tolist() == [True, True, False, False]
    assert clip_end[1] and not clip_end[3]
    assert env.episode_step[0] == 0 and env.episode_step[1] == 0  # reset
    assert env.episode_step[3] == before_steps[3] + 1  # terminated, not reset
    after = env.backend.transfer_stats()
    assert after["d2h_count"] - counts["d2h_count"] == 2  # ctrl copy + one reset commit
    assert set(ms) == set(probe.PHASES) and all(v >= 0.0 for v in ms.values())
    assert ms["iteration_ms"] >= max(v for k, v in ms.items() if k != "iteration_ms")


def test_empty_reset_is_a_no_op_without_backend_call(make) -> None:
    env = make()
    clock = probe.PhaseClock(torch.device("cpu"))
    counts = env.backend.transfer_stats()
    state = env.reset_generator.get_state()
    _, mask, _ = probe.probe_iteration(
        env, _actions(), torch.zeros(NUM_ENVS, dtype=torch.bool), clock
    )
    assert not mask.any()
    after = env.backend.transfer_stats()
    assert after["d2h_count"] - counts["d2h_count"] == 1  # the step's ctrl copy only
    assert torch.equal(env.reset_generator.get_state(), state)  # nothing drawn


@pytest.mark.slow
def test_run_backend_probe_on_cpu_mujoco(isolated_cache, monkeypatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    threads_before = torch.get_num_threads()
    try:
        result = probe.run_backend_probe(
            "mujoco",
            num_envs=NUM_ENVS,
            warmup=1,
            iters=4,
            motion="synthetic",
            acceptance=True,
            child_snapshot=None,
        )
    finally:
        torch.set_num_threads(threads_before)  # the probe sets the (child) process's count
    assert result["status"] == "passed" and result["tensor_execution"] == "host_bridge"
    assert result["reset_counts"]["scheduled_rows"] == 4  # one row per iteration at N=4
    assert (
        result["reset_counts"]["reset_rows"] >= 4
        and result["reset_counts"]["empty_reset_iterations"] == 0
    )
    stats = result["host_bridge_transfer_stats"]
    assert stats["d2h_count"] == 8 and stats["h2d_count"] == 8  # 2 per iteration, <= 2 x iters
    assert result["motion"]["source"] == "generated"
    assert result["child_runtime"]["cuda_device"] is None
    # One torch thread; the physics pool keeps the CPUs (capped at one per env).
    assert result["child_runtime"]["torch_threads"] == 1
    assert result["child_runtime"]["physics_threads"] == min(affinity_cpus(), NUM_ENVS)


def test_child_without_single_result_is_a_usage_error(capsys) -> None:
    assert probe.main(["--backends", "mujoco"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert "needs --_single-result PATH; run g1-backend-probe" in errors[0]


def test_child_takes_exactly_one_backend(tmp_path, capsys) -> None:
    assert (
        probe.main(["--backends", "mjwarp,mujoco", "--_single-result", str(tmp_path / "r.json")])
        == 2
    )
    assert not (tmp_path / "r.json").exists()


def test_child_mjwarp_without_cuda_writes_a_failed_result(tmp_path, monkeypatch, capsys) -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present: mjwarp would run")
    monkeypatch.setenv("G1SOAK_PROBE_GPU_QUERY", "nvidia-smi")
    monkeypatch.setenv("PATH", "/nonexistent")
    out = tmp_path / "r.json"
    assert probe.main(["--backends", "mjwarp", "--_single-result", str(out), "--_quiet"]) == 1
    doc = json.loads(out.read_text())
    assert doc["status"] == "failed" and "needs CUDA" in doc["failure_reason"]
    assert doc["gpu_snapshots"]["child_before_cuda_init"]["errors"] == [
        "nvidia-smi not found on PATH"
    ]


@pytest.mark.parametrize("key", ["CUDA_LAUNCH_BLOCKING", "G1SOAK_PROFILE_STOP_COMMAND"])
def test_child_in_acceptance_mode_refuses_profiler_env(tmp_path, monkeypatch, capsys, key) -> None:
    monkeypatch.setenv(key, "")
    out = tmp_path / "r.json"
    assert probe.main(["--backends", "mujoco", "--acceptance", "--_single-result", str(out)]) == 1
    assert key in capsys.readouterr().err
    assert "acceptance mode refuses profiler environment variables" in out.read_text()


@pytest.mark.slow
def test_staged_probe_iteration_runs_the_env_phases_with_the_probe_reset_rows(
    make_warp_cpu_env, g1_clip
) -> None:
    """On a staged backend (MJWarp on Warp's CPU device) the probe replays the env's own step
    phases; its ``select`` resets the scheduled and clip-end rows, not the terminated ones."""
    env = make_warp_cpu_env(NUM_ENVS, seed=probe.SEED)
    assert env.staged
    env.frame[1] = int(g1_clip.clip_ends[0]) - 1  # clip end this step
    env.episode_step[2] = env.max_episode_steps - 1  # times out this step: done, not reset
    before = env.episode_step.clone()
    scheduled = torch.as_tensor(probe.scheduled_mask(NUM_ENVS, 0))  # row 0
    clock = probe.PhaseClock(torch.device("cpu"))
    ms, mask, clip_end = probe.probe_iteration(env, _actions(), scheduled, clock)
    assert mask.tolist() == [True, True, False, False]
    assert clip_end.tolist() == [False, True, False, False]
    assert env.episode_step.tolist() == [0, 0, before[2] + 1, before[3] + 1]
    assert set(ms) == set(probe.PHASES) and all(v >= 0.0 for v in ms.values())
    parts = sum(v for k, v in ms.items() if k != "iteration_ms")
    assert ms["iteration_ms"] >= parts  # host-timed phases inside the synchronized iteration
