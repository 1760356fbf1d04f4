"""``python -m trainer.bench.env_throughput`` on the CPU backend: the table, the JSON, flags."""

from __future__ import annotations

import json

import pytest

from trainer.bench import env_throughput


def _main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    return env_throughput.main(list(args))


def test_cpu_run_writes_one_result_per_size(isolated_cache, tmp_path, monkeypatch, capsys) -> None:
    out = tmp_path / "et.json"
    code = _main(
        monkeypatch,
        *("--sim", "mujoco", "--device", "cpu", "--num-envs", "2,3"),
        *("--iters", "2", "--warmup", "1", "--output", str(out)),
    )
    assert code == 0
    doc = json.loads(out.read_text())
    assert [r["num_envs"] for r in doc["results"]] == [2, 3]
    for res in doc["results"]:
        assert res["full_task_steps_per_s"] > 0 and res["physics_only_steps_per_s"] > 0
        assert res["task_cuda_graph"]["enabled"] is False
        assert res["task_compile"]["requested"] is False  # compile is CUDA only
        assert res["solver_iterations"] is None  # CPU MuJoCo keeps them behind its bridge
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["num_envs", "full", "task"]
    assert [line.split()[0] for line in table[2:]] == ["2", "3"]
    assert "solver it. mean/max" in table[0]


@pytest.mark.parametrize("sizes", ["", "2,x", "0"])
def test_bad_sizes_are_a_usage_error(monkeypatch, capsys, tmp_path, sizes: str) -> None:
    out = tmp_path / "et.json"
    assert _main(monkeypatch, "--sim", "mujoco", "--num-envs", sizes, "--output", str(out)) == 2
    assert "--num-envs" in capsys.readouterr().err
    assert not out.exists()


def test_solver_iterations_summarise_every_world_of_every_sampled_step() -> None:
    from types import SimpleNamespace

    import torch

    counts = iter(
        [torch.tensor([1, 3], dtype=torch.int32), torch.tensor([2, 100], dtype=torch.int32)]
    )
    latest = {"value": torch.tensor([0, 0], dtype=torch.int32)}

    def step(actions: torch.Tensor) -> None:
        latest["value"] = next(counts)

    backend = SimpleNamespace(
        solver_iterations=lambda: latest["value"],
        model=SimpleNamespace(opt=SimpleNamespace(iterations=100)),
    )
    env = SimpleNamespace(step=step, backend=backend)
    gen = torch.Generator().manual_seed(0)
    stats = env_throughput._solver_iterations(env, gen, torch.zeros(2, 3), samples=2)
    assert stats == {
        "mean": 26.5,
        "p95": pytest.approx(85.45),
        "max": 100,
        "limit": 100,
        "samples": 2,
    }
    assert env_throughput._solver_cell(stats) == "26.5/100 of 100"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--sim", "mujoco", "--mjwarp-option", "broadphase=sap_tile"), "mjwarp only"),
        (("--mjwarp-option", "broadphase=sap"), "broadphase='sap' must be one of"),
        (("--mjwarp-option", "iterations=10"), "is not KEY=VALUE"),
    ],
)
def test_a_bad_mjwarp_option_is_a_usage_error_before_anything_is_built(
    monkeypatch, capsys, tmp_path, args: tuple[str, ...], needle: str
) -> None:
    out = tmp_path / "et.json"
    assert _main(monkeypatch, *args, "--output", str(out)) == 2
    err = capsys.readouterr().err
    assert "--mjwarp-option" in err and needle in err
    assert not out.exists()


def test_the_document_records_the_mjwarp_options(isolated_cache, tmp_path, monkeypatch) -> None:
    out = tmp_path / "et.json"
    code = _main(
        monkeypatch,
        *("--sim", "mujoco", "--device", "cpu", "--num-envs", "2"),
        *("--iters", "1", "--warmup", "0", "--output", str(out)),
    )
    assert code == 0
    assert json.loads(out.read_text())["mjwarp_options"] is None
