"""``python -m trainer.bench.learner_profile`` on a tiny CPU config: the document and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.jsonio import load_strict, loads_strict
from contracts.schemas import validate
from trainer.bench.learner_profile import CATEGORIES, category, cli

TINY = [
    "--num-envs", "8", "--cycles", "2", "--profile-cycles", "2", "--warmup", "1",
    "--fill-ticks", "4",
    *(
        f"--override=algo.{kv}"
        for kv in ("batch_size=16", "actor_hidden_dim=16", "critic_hidden_dim=16",
                   "num_atoms=11", "replay_buffer_n=16", "learning_starts=2")
    ),
]  # fmt: skip


@pytest.mark.slow  # builds, compiles and profiles learners
def test_a_cpu_profile_writes_the_document_it_prints(tmp_path: Path, capsys) -> None:
    out = tmp_path / "profile.json"
    assert cli([*TINY, "--json", "--output", str(out)]) == 0
    printed = loads_strict(capsys.readouterr().out)
    assert printed == load_strict(out)
    assert validate(printed, "learner_profile.v1.json") == []
    assert printed["kernel_source"] == "cpu_leaf_ops"
    assert printed["config"]["updates_per_step"] == 4  # the g1 owner's value, not overridden
    assert printed["config"]["cuda_process_sharing"] is None
    assert [r["variant"] for r in printed["runs"]] == ["legacy", "fused"]
    run = printed["runs"][1]
    assert run["diagnostics"]["enabled"] is False
    cats = {c["category"]: c for c in run["categories"]}
    assert tuple(cats) == CATEGORIES
    assert sum(c["share"] for c in cats.values()) == pytest.approx(1.0, abs=1e-3)
    for present in ("gemm", "norm", "c51_projection", "optimizer", "elementwise"):
        assert cats[present]["kernels_per_cycle"] > 0, present
    # 4 critic + 2 actor + 2 temperature Adam steps, every parameter's update in each
    assert cats["optimizer"]["kernels_per_cycle"] > cats["c51_projection"]["kernels_per_cycle"]
    total = sum(c["kernels_per_cycle"] for c in cats.values())
    assert total == pytest.approx(run["kernels_per_cycle"], abs=0.05)
    times = [k["time_ms_per_cycle"] for k in run["top_kernels"]]
    assert 0 < len(times) <= 20 and times == sorted(times, reverse=True)


@pytest.mark.slow  # builds and compiles the owner's learner
def test_the_owner_variant_asks_for_the_fusions_its_config_switches_on(capsys) -> None:
    """``owner`` profiles what ``train`` would build, overrides included (the scaling sweep
    passes its overrides to both)."""
    args = ["--variants", "owner", "--override", "algo.fuse_losses=false", "--json"]
    assert cli([*TINY, *args]) == 0
    (run,) = loads_strict(capsys.readouterr().out)["runs"]
    requested = run["diagnostics"]["fusion"]["requested"]
    assert run["variant"] == "owner"
    assert requested["losses"] is False and requested["renorm"] is True
    assert requested["multi_kernel"] is False  # off in the g1 owner


@pytest.mark.slow  # builds a learner
def test_a_variant_whose_learner_fell_back_exits_1_and_writes_nothing(
    tmp_path: Path, capsys, learner_fell_back: str
) -> None:
    """Timed after a fallback, "fused" would be the unfused cycle under the fused name."""
    reason = learner_fell_back
    out = tmp_path / "profile.json"
    assert cli([*TINY, "--variants", "fused", "--output", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"error: variant 'fused': the learner's fusion fell back at capture ({reason}), so its"
        " figures would be another cycle's; run it in a process of its own: --variants fused"
    ), err
    assert not out.exists()


@pytest.mark.slow  # profiles every variant
def test_the_table_names_each_variant_and_category(capsys) -> None:
    assert cli([*TINY, "--variants", "legacy"]) == 0
    text = capsys.readouterr().out
    assert "legacy: cycle" in text and "top 20 kernels" in text
    assert all(cat in text for cat in CATEGORIES)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--variants", "fast"],
            "must be a comma list of ['combo', 'fused', 'legacy', 'losses', 'multi_kernel', 'networks', 'no_combo', 'no_multi_kernel', 'owner', 'renorm']",
        ),
        (["--override", "training.log_interval=5"], "is not an algo.* key"),
        (["--override", "algo.batch_size=0"], "algo.batch_size=0"),
        (["--device", "cuda:x"], "is not a torch device"),
        (
            ["--mps", "--device", "cpu"],
            "MPS needs a CUDA device, not 'cpu'; use --device cuda or drop --mps",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    tmp_path: Path, capsys, args: list[str], message: str
) -> None:
    out = tmp_path / "profile.json"
    assert cli([*TINY, *args, "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1], err
    assert not out.exists()


def test_mps_without_a_daemon_fails_before_cuda_starts_and_writes_nothing(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    # An explicit, empty pipe directory: no daemon can answer there (on a machine without a
    # GPU the preflight already fails at listing the GPUs).
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "no-daemon"))
    out = tmp_path / "profile.json"
    assert cli([*TINY, "--mps", "--output", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: "), err
    assert not out.exists()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvjet_tst_128x64_64x8_1x2_h_bz_coopB_NNT", "gemm"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "gemm"),
        ("triton_per_fused__native_batch_norm_legit_functional_add_relu_3", "norm"),
        ("triton_red_fused_clamp_div_linalg_vector_norm_0", "norm"),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::NormTwoOps", "norm"),
        ("triton_poi_fused_add_clamp_floor_scatter_add_2", "c51_projection"),
        ("void at::native::_scatter_gather_elementwise_kernel<128, 4>", "c51_projection"),
        ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor", "optimizer"),
        ("void at::native::multi_tensor_apply_kernel<at::native::LerpFunctor<float>>", "optimizer"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::lerp_kernel_tensor_weight(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::{lambda(float, float, float)#1}>", "optimizer"),
        ("void at::native::multi_tensor_apply_kernel<at::native::TensorListMetadata<2>, at::native::UnaryOpFunctor<float, 2, 1, 1>, at::native::Copy<float, float>>", "optimizer"),
        ("aten::_foreach_copy_", "optimizer"),
        ("void at::native::multi_tensor_apply_kernel<TensorListMetadata<1>, BinaryOpScalarFunctor<float, 1, 1, 0>, std::plus<float>, float>", "optimizer"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", "elementwise"),
        ("triton_poi_fused__to_copy_exp_mul_tanh_1", "elementwise"),
        ("void at::native::distribution_elementwise_grid_stride_kernel<float, normal_kernel>", "other"),
        ("Memcpy DtoD (Device -> Device)", "other"),
        ("void at::native::index_elementwise_kernel_select", "elementwise"),
        ("triton_red_fused_sum_5", "other"),
    ],
)  # fmt: skip
def test_kernel_names_map_to_the_documented_categories(name: str, expected: str) -> None:
    assert category(name) == expected
