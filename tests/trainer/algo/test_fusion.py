"""The compiled fusions of the update cycle compute what the eager maths computes.

``aot_eager`` runs dynamo's trace and AOTAutograd's forward/backward split without inductor's
code generation, so these CPU tests check the traced semantics (in-place renorm on the
networks' tensors, separate autograd graphs per loss) exactly; the inductor test checks its
CPU kernels against eager within fp32 reassociation.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.trainer.algo.learner_builders import make_cfg, make_learner
from tests.trainer.algo.test_learner import fill, run_cycle
from trainer.algo import losses
from trainer.algo.fusion import CycleFusion, LossFns, compile_losses, compile_renorm
from trainer.algo.networks import Actor, Critic
from trainer.compile_mode import MULTI_KERNEL_CACHE_ENV

FUSIONS = CycleFusion.names()
REPO = Path(__file__).resolve().parents[3]


def _loss_inputs(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    e, b, k, a = 2, 16, 11, 3
    return {
        "mu": torch.randn(b, a, generator=g).requires_grad_(),
        "rho": torch.randn(b, a, generator=g).requires_grad_(),
        "eps": torch.randn(b, a, generator=g),
        "log_probs": torch.randn(e, b, k, generator=g).log_softmax(-1).requires_grad_(),
        "target": torch.rand(b, k, generator=g).softmax(-1),
        "support": torch.linspace(-5, 5, k),
        "log_alpha": torch.tensor(-4.6, requires_grad=True),
    }


def _losses_and_grads(fns: LossFns, seed: int) -> list[torch.Tensor]:
    x = _loss_inputs(seed)
    action, log_prob = fns.sample(x["mu"], x["rho"], x["eps"])
    critic = fns.critic(x["target"], x["log_probs"])
    actor = fns.actor(x["log_probs"], x["support"], log_prob, x["log_alpha"].exp())
    temp, entropy = fns.temperature(x["log_alpha"], log_prob, -13.8)
    critic.backward(retain_graph=True)
    actor.backward()  # the actor and temperature losses backpropagate separately, as trained
    temp.backward()
    grads = [x[name].grad for name in ("mu", "rho", "log_probs", "log_alpha")]
    return [action, log_prob, critic, actor, temp, entropy, *grads]


@pytest.mark.parametrize(
    ("backend", "options"),
    [
        ("aot_eager", None),
        pytest.param("inductor", None, marks=pytest.mark.slow),
        pytest.param(
            "inductor",
            CycleFusion(multi_kernel=False).compile_options("inductor"),
            marks=pytest.mark.slow,
        ),
        # multi-kernel is a triton switch: on the CPU this checks that inductor takes its key
        pytest.param("inductor", CycleFusion().compile_options("inductor"), marks=pytest.mark.slow),
    ],
    ids=["aot_eager", "inductor", "inductor-combo", "inductor-combo-multi-kernel"],
)
@pytest.mark.slow  # compiles the losses with their backward
def test_compiled_losses_equal_the_eager_maths_with_their_gradients(
    backend: str, options: dict | None
) -> None:
    eager = _losses_and_grads(LossFns(), seed=3)
    fused = _losses_and_grads(compile_losses(backend, options), seed=3)
    exact = backend == "aot_eager"
    for a, b in zip(eager, fused, strict=True):
        torch.testing.assert_close(b, a, atol=0 if exact else 1e-5, rtol=0 if exact else 1e-5)


def test_the_eager_loss_fns_are_the_loss_module_maths() -> None:
    x = _loss_inputs(4)
    action, log_prob = LossFns().sample(x["mu"], x["rho"], x["eps"])
    ref = losses.squashed_gaussian(x["mu"].float(), x["rho"].float(), x["eps"])
    torch.testing.assert_close((action, log_prob), ref, atol=0, rtol=0)
    q = losses.expected_q(x["log_probs"], x["support"]).amin(0)
    alpha = x["log_alpha"].exp()
    torch.testing.assert_close(
        LossFns().actor(x["log_probs"], x["support"], log_prob, alpha),
        losses.actor_loss(log_prob, q, alpha),
        atol=0,
        rtol=0,
    )


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_compiled_renorm_rescales_the_same_tensors_in_place(backend: str) -> None:
    torch.manual_seed(0)
    nets = [Critic(7, 3, 16, 2, 11), Actor(6, 3, 16, 2)]
    for net in nets:
        with torch.no_grad():
            for p in net.parameters():
                p.mul_(torch.rand_like(p) * 3)  # as after an optimizer step: off the norms
        ref = copy.deepcopy(net)
        ref.renorm_plan().apply()
        compile_renorm(net.renorm_plan(), backend)()
        exact = backend == "aot_eager"
        for (name, got), want in zip(
            net.state_dict().items(), ref.state_dict().values(), strict=True
        ):
            torch.testing.assert_close(
                got, want, atol=0 if exact else 1e-6, rtol=0 if exact else 1e-5, msg=name
            )


@pytest.mark.parametrize(
    "fusion",
    [CycleFusion(), CycleFusion(renorm=False, losses=False, networks=True)],
    ids=["all", "networks"],
)
@pytest.mark.slow  # compiles a learner's fusions
def test_a_fused_learner_trains_exactly_like_the_eager_one(fusion: CycleFusion) -> None:
    """Same seed, same replay, same cycles: losses, actions and every parameter agree."""
    learners = []
    for variant in (CycleFusion.none(), fusion):
        learner = make_learner(seed=7)
        learner._enable_fusion(variant, backend="aot_eager")
        fill(learner, 4)
        metrics = [run_cycle(learner, 11 + i) for i in range(2)]
        learners.append((learner, metrics))
    (eager, m0), (fused, m1) = learners
    assert fused.cuda_graph_diagnostics()["fusion"]["enabled"] == fusion.as_dict()
    for eager_cycle, fused_cycle in zip(m0, m1, strict=True):
        assert fused_cycle == pytest.approx(eager_cycle, rel=1e-6, abs=1e-6)
    obs, done = (
        torch.randn(eager.num_envs, eager.layout.obs_dim),
        torch.zeros(eager.num_envs, dtype=torch.bool),
    )
    torch.manual_seed(5)
    eager_action = eager.act(obs, done)
    torch.manual_seed(5)
    torch.testing.assert_close(fused.act(obs, done), eager_action, atol=1e-6, rtol=1e-5)
    for net in ("actor", "critic", "critic_target", "policy"):
        a, b = getattr(eager, net).state_dict(), getattr(fused, net).state_dict()
        for key in a:
            torch.testing.assert_close(b[key], a[key], atol=1e-6, rtol=1e-5, msg=f"{net}.{key}")


def test_fusion_is_reported_requested_but_off_where_the_learner_does_not_compile() -> None:
    diag = make_learner(fusion=CycleFusion()).cuda_graph_diagnostics()["fusion"]  # CPU
    assert diag == {
        "requested": {name: True for name in FUSIONS},
        "enabled": {name: False for name in FUSIONS},
        "disable_reason": None,
    }


def test_the_learner_requests_the_owners_fusions_by_default() -> None:
    # renorm, losses and networks are on since the seventh H200 session, combo kernels since
    # the fifteenth, each after a side-by-side learning record (docs/benchmarks.md);
    # multi-kernel waits for its own
    default = make_learner().cuda_graph_diagnostics()["fusion"]
    assert default["requested"] == {
        "renorm": True,
        "losses": True,
        "networks": True,
        "combo_kernels": True,
        "multi_kernel": False,
    }


@pytest.mark.parametrize("on", [*([name] for name in FUSIONS), FUSIONS], ids=[*FUSIONS, "all"])
def test_the_fuse_keys_choose_the_fusions_the_learner_requests(on: list[str]) -> None:
    learner = make_learner(**{f"fuse_{name}": name in on for name in FUSIONS})
    requested = learner.cuda_graph_diagnostics()["fusion"]["requested"]
    assert requested == {name: name in on for name in FUSIONS}


@pytest.mark.parametrize(
    ("fusion", "backend", "options"),
    [
        (CycleFusion(), "inductor", {"combo_kernels": True, "triton.multi_kernel": 1}),
        (CycleFusion(multi_kernel=False), "inductor", {"combo_kernels": True}),
        (CycleFusion(combo_kernels=False), "inductor", {"triton.multi_kernel": 1}),
        (CycleFusion(combo_kernels=False, multi_kernel=False), "inductor", None),
        (CycleFusion(), "aot_eager", None),  # inductor's options mean nothing to other backends
    ],
    ids=["combo-multi-kernel", "combo", "multi-kernel", "neither", "aot_eager"],
)
def test_inductor_options_reach_every_learner_compile_as_its_own_options(
    monkeypatch: pytest.MonkeyPatch, fusion: CycleFusion, backend: str, options: dict | None
) -> None:
    monkeypatch.setenv(MULTI_KERNEL_CACHE_ENV, "0")  # restored after the test
    learner = make_learner(seed=2)
    learner._compile_status.enabled = True  # as on CUDA, where the learner compiles
    calls: list[dict] = []

    def record(fn: Callable, **kwargs: object) -> Callable:  # stands in for torch.compile
        calls.append(kwargs)
        return fn

    monkeypatch.setattr(torch, "compile", record)
    learner._enable_fusion(fusion, backend)
    # TD target, 4 losses, 2 renorm plans, 4 networks and the two critics' forward_t
    assert len(calls) == 13
    assert all(call["backend"] == backend and call["options"] == options for call in calls)
    assert fusion.compile_options(backend) == options
    # a multi-kernel never reads a pick saved by another process (trainer/compile_mode.py)
    multi_kernel = bool(options and options.get("triton.multi_kernel"))
    assert (os.environ.get(MULTI_KERNEL_CACHE_ENV) == "1") is multi_kernel


def test_dropping_the_networks_fusion_leaves_every_network_eager_without_compile() -> None:
    learner = make_learner(seed=3)
    learner._enable_fusion(CycleFusion(renorm=False, losses=False, networks=True), "aot_eager")
    nets = (learner.actor, learner.critic, learner.critic_target, learner.policy)
    assert all(net._compiled_call_impl is not None for net in nets)
    learner._enable_fusion(CycleFusion.none(), "aot_eager")  # what a failed capture does
    assert all(net._compiled_call_impl is None for net in nets)
    assert all(net.trunk._compiled_call_impl is None for net in nets)  # CPU: compile is off
    assert learner._critic_t == learner.critic.forward_t


def fused_against_unfused(fusion: CycleFusion) -> None:
    """Three CUDA cycles of an unfused and a ``fusion`` learner from one seed agree at bf16
    tolerance, with every fusion ``fusion`` asks for running (none fell back)."""
    results = []
    for each in (CycleFusion.none(), fusion):
        learner = make_learner(
            "cuda", fusion=each, use_compile=True, batch_size=256, num_envs=64,
            replay_buffer_n=64, actor_hidden_dim=128, critic_hidden_dim=256, num_atoms=101,
        )  # fmt: skip
        fill(learner, 8)
        results.append([run_cycle(learner, 3 + i) for i in range(3)])
        diag = learner.cuda_graph_diagnostics()
        assert diag["enabled"] and diag["compile"]["enabled"], diag
        assert diag["fusion"]["enabled"] == each.as_dict(), diag  # no silent fallback
        assert diag["fallbacks"] == [], diag
    for unfused, fused in zip(*results, strict=True):
        for key in unfused:
            assert fused[key] == pytest.approx(unfused[key], rel=2e-2, abs=2e-2), key


@pytest.mark.gpu
@pytest.mark.slow
def test_on_cuda_the_owners_fused_graph_matches_the_unfused_graph_within_bf16_tolerance() -> None:
    fused_against_unfused(CycleFusion.from_cfg(make_cfg()))


@pytest.mark.gpu
@pytest.mark.slow
def test_on_cuda_all_five_fusions_in_a_process_of_their_own_match_the_unfused_graph() -> None:
    """Multi-kernel too, compiled as a run with ``algo.fuse_multi_kernel=true`` compiles it:
    in a fresh process. After this suite's earlier compiles of the same functions without
    it, the learner's multi-kernel compile failed on the H200 (docs/benchmarks.md "Sixteenth
    H200 session"), so in-process this would test the suite's history, not the fusion."""
    code = (
        "from tests.trainer.algo.test_fusion import fused_against_unfused;"
        "from trainer.algo.fusion import CycleFusion;"
        "fused_against_unfused(CycleFusion())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-6000:]
