"""FlashSacLearner on CPU at tiny sizes (plus GPU graph-vs-eager checks): docs/flashsac.md §losses, §reward-scaling, §exploration, §update-schedule."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from contracts.schemas import validate
from tests.trainer.algo.learner_builders import ACT, COBS, OBS, N, make_cfg, make_learner
from trainer import cuda_graphs
from trainer.algo import learner as learner_module
from trainer.algo.fusion import CycleFusion
from trainer.algo.learner import METRIC_NAMES, FlashSacLearner
from trainer.algo.replay import pack_transitions


def fill(learner: FlashSacLearner, ticks: int, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    n, dev = learner.num_envs, learner.device
    for _ in range(ticks):
        obs, nxt = torch.randn(n, OBS, generator=g), torch.randn(n, OBS, generator=g)
        action = torch.rand(n, ACT, generator=g) * 2 - 1
        rows = pack_transitions(
            obs, nxt, action, torch.randn(n, generator=g), torch.rand(n, generator=g) < 0.1,
            torch.rand(n, generator=g) < 0.1, torch.randn(n, COBS, generator=g), torch.randn(n, COBS, generator=g),
        )  # fmt: skip
        learner.replay.commit(rows.to(dev))


def params(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def run_cycle(learner: FlashSacLearner, seed: int) -> dict[str, float]:
    torch.manual_seed(seed)
    learner.prepare_iteration()
    return {k: float(v) for k, v in learner.update_cycle().items()}


@pytest.mark.slow
def test_cycles_are_finite_change_parameters_and_keep_norms() -> None:
    learner = make_learner()
    fill(learner, 3)
    actor0, critic0, target0 = (
        params(learner.actor),
        params(learner.critic),
        params(learner.critic_target),
    )
    for i in range(3):
        metrics = run_cycle(learner, i)
        assert set(metrics) == set(METRIC_NAMES)
        assert all(math.isfinite(v) for v in metrics.values())
    assert learner.update_count == 12 and learner.iterations == 3
    assert learner.lr_steps.tolist() == [
        6.0,
        12.0,
        6.0,
    ]  # 2 actor/alpha and 4 critic updates per cycle
    assert not torch.equal(params(learner.actor)["mu_head.weight"], actor0["mu_head.weight"])
    assert not torch.equal(params(learner.critic)["head.weight"], critic0["head.weight"])
    target = params(learner.critic_target)
    assert not torch.equal(target["head.weight"], target0["head.weight"])
    assert torch.equal(
        target["trunk.input_bn.running_mean"], target0["trunk.input_bn.running_mean"]
    )
    for module in (learner.actor, learner.critic):
        for weight in module.renorm_plan().rows:
            torch.testing.assert_close(
                weight.norm(dim=-1), torch.ones(weight.shape[:-1]), atol=1e-5, rtol=0
            )
    assert float(learner.log_alpha.detach()) != pytest.approx(math.log(0.01))


@pytest.mark.slow
def test_eager_and_graph_configs_give_equal_losses_on_cpu() -> None:
    results = []
    for graph in (False, True):
        learner = make_learner(use_cuda_graph=graph)
        fill(learner, 3)
        results.append([run_cycle(learner, 7 + i) for i in range(2)])
        assert learner.cuda_graph_diagnostics()["enabled"] is False
        assert learner.cuda_graph_diagnostics()["disable_reason"]
    assert results[0] == results[1]


@pytest.mark.slow  # trains, saves and restores a learner
def test_state_dict_round_trip_reproduces_the_next_update_exactly() -> None:
    a = make_learner()
    fill(a, 3)
    for i in range(2):
        run_cycle(a, i)
    state = a.state_dict()
    b = make_learner(seed=99)
    fill(b, 3)
    b.load_state_dict(state)
    b._folded_rows = a._folded_rows  # same replay contents, already folded into the loaded scaler
    assert run_cycle(a, 5) == run_cycle(b, 5)
    for key, value in params(a.critic).items():
        assert torch.equal(value, params(b.critic)[key]), key
    assert torch.equal(a.log_alpha.detach(), b.log_alpha.detach())
    assert state["schedulers"] == {"actor": 4, "critic": 8, "temperature": 4}
    assert state["update_count"] == 8


def test_the_target_moves_tau_of_the_way_to_the_stepped_critic() -> None:
    learner = make_learner(updates_per_step=1, policy_frequency=2, normalize_reward=False)
    fill(learner, 3)
    target0 = [p.detach().clone() for p in learner.critic_target.parameters()]
    run_cycle(learner, 0)
    tau = learner.cfg.tau
    for before, critic, target in zip(
        target0, learner.critic.parameters(), learner.critic_target.parameters(), strict=True
    ):
        torch.testing.assert_close(target, before + tau * (critic.detach() - before))
        assert not torch.equal(target, before)


def test_a_restored_target_is_still_the_one_the_polyak_update_moves() -> None:
    learner = make_learner(updates_per_step=1, policy_frequency=2, normalize_reward=False)
    fill(learner, 3)
    state = learner.state_dict()
    run_cycle(learner, 0)
    learner.load_state_dict(state)
    restored = [p.detach().clone() for p in learner.critic_target.parameters()]
    for name, p in learner.critic_target.named_parameters():
        assert torch.equal(p, state["critic_target"][name]), name
    run_cycle(learner, 1)
    tau = learner.cfg.tau
    for before, critic, target in zip(
        restored, learner.critic.parameters(), learner.critic_target.parameters(), strict=True
    ):
        torch.testing.assert_close(target, before + tau * (critic.detach() - before))


def test_non_finite_critic_loss_skips_the_step_and_the_polyak_but_advances_the_schedule() -> None:
    learner = make_learner(updates_per_step=1, policy_frequency=2, normalize_reward=False)
    fill(learner, 3)
    learner.replay.rows[:, learner.layout.reward] = float("nan")
    critic0, target0 = params(learner.critic), params(learner.critic_target)
    metrics = run_cycle(learner, 0)
    assert math.isnan(metrics["Loss/critic"])
    for key, value in params(learner.critic).items():
        if "running" not in key:  # renormalising again only rounds
            torch.testing.assert_close(value, critic0[key], atol=1e-6, rtol=0)
    for key, value in params(learner.critic_target).items():
        assert torch.equal(value, target0[key]), key
    assert learner.lr_steps.tolist() == [1.0, 1.0, 1.0]
    assert math.isfinite(metrics["Loss/actor"])


def test_prepare_iteration_folds_complete_ticks_once() -> None:
    learner = make_learner()
    fill(learner, 3)
    learner.prepare_iteration()
    count = float(learner.reward_scaler.count)
    assert count == pytest.approx(1e-4 + 3 * N)
    learner.replay.commit(torch.zeros(N // 2, learner.layout.width))  # half a tick waits
    learner.prepare_iteration()
    assert float(learner.reward_scaler.count) == pytest.approx(count)
    assert float(learner._inv_scale) == pytest.approx(1.0 / float(learner.reward_scaler.scale()))


def test_the_reward_scale_horizon_reaches_the_learners_scaler() -> None:
    learner = make_learner(reward_scale_horizon=2)
    fill(learner, 3)
    learner.prepare_iteration()
    assert float(learner.reward_scaler.count) == 2 * N  # three ticks folded, two ticks' weight


def test_act_shapes_bounds_and_validation() -> None:
    learner = make_learner()
    obs, done = torch.randn(N, OBS), torch.zeros(N, dtype=torch.bool)
    action = learner.act(obs, done)
    assert action.shape == (N, ACT) and bool((action.abs() <= 1).all())
    assert learner.act_deterministic(obs).shape == (N, ACT)
    with pytest.raises(ValueError, match="act\\(\\) takes obs"):
        learner.act(torch.randn(N + 1, OBS), torch.zeros(N + 1, dtype=torch.bool))


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("use_compile", [False, True], ids=["graph", "graph+compile"])
def test_graph_matches_eager_within_bf16_tolerance_and_never_syncs(use_compile: bool) -> None:
    results = []
    for graph, compiled in ((False, False), (True, use_compile)):
        # Production widths: inductor has failed to build a Triton kernel at toy widths (16),
        # which the learner survives by falling back (recorded), but this test wants compile on.
        learner = make_learner(
            "cuda",
            use_cuda_graph=graph,
            use_compile=compiled,
            batch_size=256,
            num_envs=64,
            replay_buffer_n=64,
            actor_hidden_dim=128,
            critic_hidden_dim=256,
            num_atoms=101,
        )
        fill(learner, 8)
        results.append([run_cycle(learner, 3 + i) for i in range(3)])
        diag = learner.cuda_graph_diagnostics()
        assert diag["enabled"] is graph, diag
        assert diag["compile"]["enabled"] is compiled, diag
        torch.cuda.set_sync_debug_mode("error")
        try:
            learner.prepare_iteration()
            learner.update_cycle()
            learner.act(
                torch.randn(64, OBS, device="cuda"),
                torch.zeros(64, dtype=torch.bool, device="cuda"),
            )
        finally:
            torch.cuda.set_sync_debug_mode("default")
    for eager, graphed in zip(*results, strict=True):
        for key in eager:
            assert graphed[key] == pytest.approx(eager[key], rel=2e-2, abs=2e-2), key


@pytest.mark.gpu
def test_parameter_addresses_survive_load_state_dict_on_cuda() -> None:
    learner = make_learner("cuda", batch_size=128, num_envs=64, replay_buffer_n=16)
    fill(learner, 4)
    run_cycle(learner, 0)
    ptrs = [p.data_ptr() for p in learner.critic.parameters()]
    learner.load_state_dict(learner.state_dict())
    assert ptrs == [p.data_ptr() for p in learner.critic.parameters()]
    assert all(math.isfinite(v) for v in run_cycle(learner, 1).values())


def test_config_is_validated_by_the_learner() -> None:
    with pytest.raises(ValueError, match="algo.n_step=3"):
        make_learner(n_step=3)
    assert dataclasses.replace(make_cfg(), use_cuda_graph=False).use_cuda_graph is False


def test_capture_graphs_is_a_no_op_without_cuda_graphs() -> None:
    learner = make_learner()
    learner.capture_graphs()
    diag = learner.cuda_graph_diagnostics()
    assert learner._graph is None and learner._act_graph is None
    assert diag["enabled"] is False and "not CUDA" in diag["disable_reason"]


def test_capture_graphs_captures_act_then_the_cycle_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime captures at startup (overlapping the collector's env build): the act graph
    first, because it compiles the eval-mode actor, then the cycle; a second call does nothing."""
    learner = make_learner()
    learner._graph_status.disable_reason = None
    learner._act_graph_status.disable_reason = None
    learner._compile_status.enabled = True
    calls: list[str] = []

    def fake_capture(body, state, status):
        calls.append(body.__name__)
        return object()

    monkeypatch.setattr(learner, "_capture", fake_capture)
    learner.capture_graphs()
    learner.capture_graphs()  # captured once
    assert calls == ["_act_body", "_cycle_body"]


def _in_a_manifest(learner_diag: dict) -> list:
    doc = {"schema_version": 1, "cuda_graph": {"env": None, "learner": learner_diag}}
    return validate(doc, "runtime_manifest.v1.json")


def test_on_the_cpu_nothing_is_attempted_so_nothing_falls_back() -> None:
    diag = make_learner().cuda_graph_diagnostics()
    assert diag["fallbacks"] == [] and _in_a_manifest(diag) == []


def test_a_failing_capture_records_each_dropped_acceleration_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fusions go first, then compile, then the graph itself: three fallbacks, each with the
    capture's error, in the order they happened (the soak fails on any)."""
    learner = make_learner()
    learner._graph_status.disable_reason = None
    learner._compile_status.enabled = True
    learner._fusion_active = CycleFusion()
    tries: list[int] = []

    def failing_capture(body, state):
        tries.append(1)
        raise RuntimeError(f"capture {len(tries)} failed")

    monkeypatch.setattr(cuda_graphs, "capture_graph", failing_capture)
    assert learner._capture(learner._cycle_body, [], learner._graph_status) is None
    diag = learner.cuda_graph_diagnostics()
    assert [(f["feature"], f["reason"]) for f in diag["fallbacks"]] == [
        ("fusion", "graph warm-up/capture failed: RuntimeError('capture 1 failed')"),
        ("compile", "graph warm-up/capture failed with compile: RuntimeError('capture 2 failed')"),
        ("cycle_graph", "capture failed: RuntimeError: capture 3 failed"),
    ]
    assert diag["fusion"]["enabled"] == CycleFusion.none().as_dict()
    assert diag["compile"]["enabled"] is False and diag["enabled"] is False
    assert _in_a_manifest(diag) == []


def test_a_failing_act_capture_is_an_act_graph_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    learner = make_learner()
    learner._act_graph_status.disable_reason = None

    def failing_capture(body, state):
        raise RuntimeError("no capture here")

    monkeypatch.setattr(cuda_graphs, "capture_graph", failing_capture)
    assert learner._capture(learner._act_body, [], learner._act_graph_status) is None
    assert learner.cuda_graph_diagnostics()["fallbacks"] == [
        {"feature": "act_graph", "reason": "capture failed: RuntimeError: no capture here"}
    ]


def test_a_failed_capture_logs_its_whole_traceback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # the fallback record keeps 300 characters, which cut inductor's error short on 2026-12-07
    learner = make_learner()
    learner._act_graph_status.disable_reason = None
    long = "inductor said " + "x" * 400

    def failing_capture(body, state):
        raise RuntimeError(long)

    monkeypatch.setattr(cuda_graphs, "capture_graph", failing_capture)
    with caplog.at_level("WARNING", logger=learner_module.log.name):
        learner._capture(learner._act_body, [], learner._act_graph_status)
    failed = [r for r in caplog.records if r.getMessage() == "learner graph warm-up/capture failed"]
    assert failed and failed[0].exc_info is not None and str(failed[0].exc_info[1]) == long
    assert len(learner.cuda_graph_diagnostics()["fallbacks"][0]["reason"]) <= 300


@pytest.mark.gpu
@pytest.mark.slow
def test_graphs_captured_before_any_data_match_graphs_captured_at_first_use() -> None:
    results = []
    for early in (False, True):
        learner = make_learner(
            "cuda", batch_size=256, num_envs=64, replay_buffer_n=64,
            actor_hidden_dim=128, critic_hidden_dim=256, num_atoms=101,
        )  # fmt: skip
        if early:
            learner.capture_graphs()  # zero buffers, empty replay
            assert learner._graph is not None and learner._act_graph is not None
        fill(learner, 8)
        torch.manual_seed(5)
        obs = torch.randn(64, OBS, device="cuda")
        action = learner.act(obs, torch.zeros(64, dtype=torch.bool, device="cuda"))
        results.append((action, [run_cycle(learner, 3 + i) for i in range(3)]))
    (a0, c0), (a1, c1) = results
    torch.testing.assert_close(a1, a0)
    for lazy, early in zip(c0, c1, strict=True):
        for key in lazy:
            assert early[key] == pytest.approx(lazy[key], rel=1e-2, abs=1e-3), key


@pytest.mark.slow
def test_set_lr_horizon_resizes_a_whole_run_cosine_in_place() -> None:
    learner = make_learner(max_iterations=1000, lr_decay_steps=None)
    fill(learner, 3)
    run_cycle(learner, 0)
    peak = learner.cfg.critic_lr
    assert learner.optimizers[1].param_groups[0]["lr"] == pytest.approx(peak, rel=1e-3)
    learner.set_lr_horizon(1)  # the run ends after one iteration: the cosine is spent
    run_cycle(learner, 1)
    assert learner.optimizers[1].param_groups[0]["lr"] == pytest.approx(learner.cfg.lr_end)


def test_set_lr_horizon_refuses_a_fixed_period() -> None:
    learner = make_learner(lr_decay_steps=500000)
    with pytest.raises(ValueError, match="lr_decay_steps=null"):
        learner.set_lr_horizon(10)
