"""``python -m trainer.bench.cycle_drift`` on a tiny CPU config: the document, the verdicts, the errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from contracts.jsonio import load_strict, loads_strict
from contracts.schemas import validate
from trainer.algo.learner import FlashSacLearner
from trainer.bench.cycle_drift import Drift, cli, drift, verdict

TINY = [
    "--num-envs", "8", "--cycles", "1,2", "--fill-ticks", "4", "--replay-per-env", "16",
    *(
        f"--override=algo.{kv}"
        for kv in ("batch_size=16", "actor_hidden_dim=16", "critic_hidden_dim=16",
                   "num_atoms=11", "learning_starts=2")
    ),
]  # fmt: skip
GPU_SMALL = [
    "--num-envs", "64", "--cycles", "1,2", "--fill-ticks", "40", "--replay-per-env", "128",
    "--override=algo.learning_starts=40",
]  # fmt: skip
"""The owner's network and batch sizes on few envs: at TINY's sizes Triton failed to compile a
combo-kernel BatchNorm reduction on the H200, and the fusions fell back (docs/benchmarks.md,
nineteenth session)."""


@pytest.mark.slow  # builds and trains several learners
def test_on_the_cpu_every_build_is_bit_equal_and_the_document_is_what_it_prints(
    tmp_path: Path, capsys
) -> None:
    out = tmp_path / "drift.json"
    assert cli([*TINY, "--json", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    printed = loads_strict(captured.out)  # --json: stdout holds the document alone
    assert printed == load_strict(out)
    assert validate(printed, "cycle_drift.v1.json") == []
    progress = [line.split(" took ")[0] for line in captured.err.splitlines()]
    assert progress == [
        "cycle_drift: build 1/4 (owner)", "cycle_drift: build 2/4 (owner)",
        "cycle_drift: build 3/4 (no_combo)", "cycle_drift: build 4/4 (legacy)",
    ]  # fmt: skip
    assert printed["config"]["overrides"][0] == "algo.replay_buffer_n=16"
    assert printed["config"]["cycles"] == [1, 2]
    rerun = printed["rerun"]["drift"]
    assert [d["cycles"] for d in rerun] == [1, 2]
    assert all(d["max_abs_diff"] == 0.0 and d["bit_equal"] == d["tensors"] > 10 for d in rerun)
    assert [row["variant"] for row in printed["variants"]] == ["no_combo", "legacy"]
    for row in printed["variants"]:
        assert row["verdict"] == "bit_equal"
        assert [(d["verdict"], d["ratio_to_rerun"]) for d in row["drift"]] == [
            ("bit_equal", None)
        ] * 2
        assert row["critic_loss"] == printed["reference"]["critic_loss"]
    assert printed["passed"] is True


@pytest.mark.slow  # builds and trains several learners
def test_the_table_names_the_rerun_and_each_variant(capsys) -> None:
    assert cli([*TINY, "--variants", "legacy"]) == 0
    text = capsys.readouterr().out
    assert "drift from the owner on cpu" in text
    assert "owner again" in text and "legacy" in text and "bit_equal" in text


def _state(**values: float) -> dict[str, torch.Tensor]:
    return {name: torch.full((3,), value) for name, value in values.items()}


def test_drift_finds_the_largest_difference_and_the_bit_equal_tensors() -> None:
    ref = _state(w=1.0, b=2.0, action=0.5)
    other = {**ref, "b": torch.tensor([2.0, 2.25, 2.0]), "action": torch.full((3,), 0.4)}
    moved = drift(5, ref, other)
    assert moved.cycles == 5 and moved.tensors == 3 and moved.bit_equal == 1
    assert moved.max_abs_diff == pytest.approx(0.25) and moved.worst_tensor == "b"
    assert moved.action_max_abs_diff == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("moved", "rerun", "expected"),
    [
        (0.0, 0.08, "bit_equal"),
        (0.087, 0.081, "within_rerun"),
        (0.162, 0.081, "within_rerun"),  # exactly the factor
        (0.17, 0.081, "beyond_rerun"),
        (1e-7, 0.0, "beyond_rerun"),  # a device that reproduces itself: any difference
    ],
)
def test_a_variant_is_judged_against_the_rerun(moved: float, rerun: float, expected: str) -> None:
    def d(x: float) -> Drift:
        return Drift(
            cycles=1, tensors=2, bit_equal=0, max_abs_diff=x, worst_tensor="action",
            action_max_abs_diff=x,
        )  # fmt: skip

    assert verdict(d(moved), d(rerun), factor=2.0) == expected


@pytest.mark.slow  # builds and trains several learners
def test_a_variant_beyond_the_rerun_exits_1_naming_it_and_keeps_the_document(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variant whose arithmetic differs: here the legacy build's first action is nudged."""
    honest = FlashSacLearner.act
    calls = {"n": 0}

    def act(self: FlashSacLearner, obs: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1  # two checkpoints per build: owner 1-2, owner again 3-4, legacy 5-6
        actions = honest(self, obs, done)
        return actions + 0.5 if calls["n"] == 5 else actions

    monkeypatch.setattr(FlashSacLearner, "act", act)
    out = tmp_path / "drift.json"
    assert cli([*TINY, "--variants", "legacy", "--output", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "error: variant 'legacy' moved the learner 0.5 from the owner after 1 cycle, beyond 2x"
        " the owner's rerun (0)"
    ), err
    doc = load_strict(out)
    assert validate(doc, "cycle_drift.v1.json") == []
    row = doc["variants"][0]
    assert doc["passed"] is False and row["verdict"] == "beyond_rerun"
    assert [d["verdict"] for d in row["drift"]] == ["beyond_rerun", "bit_equal"]
    assert row["drift"][0]["worst_tensor"] == "action"


def test_a_build_that_fell_back_exits_1_and_writes_nothing(
    tmp_path: Path, capsys, learner_fell_back: str
) -> None:
    out = tmp_path / "drift.json"
    assert cli([*TINY, "--output", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: variant 'owner': the learner's fusion fell back"), err
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variants", "fast"], "must be a comma list of ['combo', 'fused', 'legacy'"),
        (["--variants", "legacy,owner"], "'owner' is the reference every variant is judged"),
        (["--override", "training.log_interval=5"], "is not an algo.* key"),
        (["--override", "algo.batch_size=0"], "algo.batch_size=0"),
        (["--device", "cuda:x"], "is not a torch device"),
        (["--cycles", "5,1"], "must be increasing positive cycle counts; use e.g. 1,5,20"),
        (["--cycles", "0,3"], "must be increasing positive cycle counts"),
        (["--cycles", "x"], "must be increasing positive cycle counts"),
        (["--factor", "0.5"], "'--factor': Input should be greater than or equal to 1"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    tmp_path: Path, capsys, args: list[str], message: str
) -> None:
    out = tmp_path / "drift.json"
    assert cli([*TINY, *args, "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1], err
    assert not out.exists()


@pytest.mark.gpu
def test_on_cuda_the_fusions_run_and_the_exit_status_follows_the_verdict(
    tmp_path: Path, capsys
) -> None:
    """On CUDA the owner compiles with its fusions and the variant without combo kernels; the
    verdict depends on the device's own rerun spread, so only its consistency is asserted."""
    out = tmp_path / "drift.json"
    rc = cli(
        [*GPU_SMALL, "--variants", "no_combo", "--device", "cuda", "--json", "--output", str(out)]
    )
    assert out.exists(), capsys.readouterr().err.strip().splitlines()[-1:]  # a fallback: exit 1
    doc = load_strict(out)
    assert validate(doc, "cycle_drift.v1.json") == []
    assert doc["device"] != "cpu"
    assert doc["reference"]["fusion"]["combo_kernels"] is True
    assert doc["rerun"]["fusion"] == doc["reference"]["fusion"]
    assert doc["variants"][0]["fusion"]["combo_kernels"] is False
    assert doc["variants"][0]["fusion"]["networks"] is True
    assert rc == (0 if doc["passed"] else 1)
