"""``training.duration_seconds``: a run that trains until its time budget is spent, then ends
through the normal path with every soak invariant intact. The budget's clock is
injected (one second per reading), so where the run stops is exact, with no sleeps."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import g1soak_runtime_fakes as fakes
import pytest

from contracts.jsonio import load_strict, loads_strict, write_json_atomic
from contracts.schemas import validate
from harness.metrics.events import read_scalars
from harness.soak.verdict import judge_run_dir
from trainer.runtime.learner_loop import run_training

pytestmark = pytest.mark.slow

NUM_ENVS, WARMUP, SAVE_INTERVAL = 8, 2, 4  # the fakes' tiny run: max(2, ceil(16 / 8)) = 2


class SecondsClock:
    """Monotonic seconds that advance by one on every reading."""

    def __init__(self) -> None:
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        return float(self.readings)


def _ctx(
    run_dir: Path,
    *,
    duration: float | None,
    cap: int | None,
    resume: Path | None = None,
    log_interval: int = 1,
):
    ctx = fakes.make_run_context(
        run_dir,
        training={
            "duration_seconds": duration,
            "replay_ingress_slot_rows": 4,
            "log_interval": log_interval,
        },
        algo={"max_iterations": cap, "save_interval": SAVE_INTERVAL},
    )
    if resume is not None:
        ctx = replace(ctx, training=replace(ctx.training, resume_from=str(resume)))
    config = {
        "algo": {"save_interval": SAVE_INTERVAL, "max_iterations": cap},
        "training": {"duration_seconds": duration},
    }
    write_json_atomic(run_dir / "run_config.json", {"run": {}, "config": config, "overrides": []})
    return ctx


def _run(ctx, learners: list | None = None) -> dict:
    def build(c, device):
        learner = fakes.FakeLearner(c.algo_cfg.num_envs, device)
        if learners is not None:
            learners.append(learner)
        return learner

    hooks = {
        "learner_factory": build,
        "env_factory": fakes.make_fake_env,
        "env_kwargs": {"num_envs": NUM_ENVS, "device": "cpu"},
        "pack_fn": fakes.pack,
        "budget_clock": SecondsClock(),
    }
    assert run_training(ctx, **hooks) == 0
    summary = load_strict(ctx.run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    return summary


def _assert_invariants(summary: dict, run_dir: Path, iterations: int) -> None:
    assert summary["status"] == "completed"
    assert summary["completed_iterations"] == iterations
    assert summary["total_env_steps"] == (WARMUP + iterations) * NUM_ENVS
    # The last update is the one the budget or the cap made last, whichever ended the run.
    assert summary["steady_env_steps_per_sec"] > 0
    manifest = summary["runtime_manifest"]
    ingress = manifest["replay_ingress"]
    chunks = summary["total_env_steps"] // ingress["ingress_slot_rows"]
    assert ingress["published_sequence"] == ingress["release_sequence"] == chunks
    assert ingress["occupancy"] == 0 and ingress["dropped_batches"] == 0
    flight = manifest["inference_flight"]
    assert (flight["queue_depth"], flight["publication_lag"]) == (0, 0)
    assert manifest["shutdown"]["classification"] == "normal_completion"
    assert manifest["shutdown"]["cleanup"]["errors"] == []
    verdict = judge_run_dir(run_dir, monitor_reasons=[], monitor_classification=None)
    assert verdict.status == "passed", verdict.reasons


@pytest.fixture(scope="module")
def five_second_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A run with a 5 s budget and no cap, ``(run_dir, summary)``: one run for the tests that
    only read it (or a copy of it), a run of the trainer's whole loop each."""
    run_dir = tmp_path_factory.mktemp("five-seconds") / "run"
    return run_dir, _run(_ctx(run_dir, duration=5.0, cap=None))


def test_a_time_budget_ends_the_run_at_the_tick_that_found_it_spent(
    five_second_run: tuple[Path, dict],
) -> None:
    # Readings: 1 at training start, then one per iteration tick; the 5th tick reads 6,
    # 5 s after the start, so iteration 5 is the last.
    run_dir, summary = five_second_run
    _assert_invariants(summary, run_dir, iterations=5)
    assert summary["time_budget"] == {
        "duration_seconds": 5.0,
        "max_iterations": None,
        "stopped_by": "duration",
        "final_iteration": 5,
        "training_seconds": 6.0,
    }
    assert sorted(p.name for p in run_dir.glob("model_*.pt")) == ["model_4.pt", "model_5.pt"]
    assert summary["last_checkpoint"] == str(run_dir / "model_5.pt")
    limits = summary["runtime_manifest"]["runtime_limits"]
    assert limits["total_ticks"] == WARMUP + 5
    lines = [loads_strict(x) for x in (run_dir / "progress.jsonl").read_text().splitlines()]
    # The last progress line agrees with the summary (no tick left uncounted).
    assert lines[-1]["iteration"] == 5
    assert lines[-1]["total_env_steps"] == summary["total_env_steps"]


def test_a_budget_that_ends_between_two_rows_still_writes_the_partial_row(
    tmp_path: Path,
) -> None:
    # Rows at iterations 2 and 4 (log_interval 2) and a partial one at 5, the last. The final
    # rate is not any row's: a run shorter than ten seconds reports its whole training span,
    # the updates the tail covers too.
    run_dir = tmp_path / "run"
    summary = _run(_ctx(run_dir, duration=5.0, cap=None, log_interval=2))
    _assert_invariants(summary, run_dir, iterations=5)
    (events,) = run_dir.glob("events.out.tfevents.*")
    fps = read_scalars(events)["Perf/total_fps"]
    rows = {int(e.step) // NUM_ENVS - WARMUP: e.value for e in fps}
    assert sorted(rows) == [2, 4, 5]
    assert summary["final_env_steps_per_sec"] == summary["tail_env_steps_per_sec"]
    assert summary["final_learner_replay_rows_per_sec"] == summary["final_env_steps_per_sec"]


def test_the_iteration_cap_ends_a_budgeted_run_that_is_faster_than_its_budget(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    summary = _run(_ctx(run_dir, duration=1e6, cap=6))
    _assert_invariants(summary, run_dir, iterations=6)
    assert summary["time_budget"]["stopped_by"] == "iterations"
    assert summary["time_budget"]["max_iterations"] == 6


def test_a_run_without_a_budget_records_that_it_was_sized_in_iterations(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = _run(_ctx(run_dir, duration=None, cap=6))
    _assert_invariants(summary, run_dir, iterations=6)
    assert summary["time_budget"]["duration_seconds"] is None
    assert summary["time_budget"]["stopped_by"] == "iterations"


def test_a_missing_last_checkpoint_of_a_budgeted_run_fails_the_soak_check(
    five_second_run: tuple[Path, dict], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(five_second_run[0], run_dir)  # the shared run stays whole
    (run_dir / "model_5.pt").unlink()
    verdict = judge_run_dir(run_dir, monitor_reasons=[], monitor_classification=None)
    assert verdict.status == "failed"
    assert any("missing required artifacts: model_5.pt" in r for r in verdict.reasons)


def test_a_budgeted_run_resumes_from_the_last_checkpoint_of_another(
    five_second_run: tuple[Path, dict], tmp_path: Path
) -> None:
    first = five_second_run[0]
    second = tmp_path / "second"
    summary = _run(_ctx(second, duration=3.0, cap=None, resume=first / "model_5.pt"))
    # Iterations 6, 7, 8 of the lineage: 3 of this run, with its own warm-up.
    _assert_invariants(summary, second, iterations=3)
    assert summary["time_budget"]["final_iteration"] == 8
    assert summary["runtime_manifest"]["resumed_from"]["iteration"] == 5
    assert sorted(p.name for p in second.glob("model_*.pt")) == ["model_4.pt", "model_8.pt"]


@pytest.mark.parametrize(
    ("duration", "cap", "horizons"),
    [
        # One clock second per iteration: after iteration k, k done in k s, 5 - k s left.
        (5.0, None, [5, 5, 5, 5, 5]),
        # The cap bounds a forecast that would run far past it; the cap's own last tick
        # reads no clock (nothing to forecast), so it re-sizes nothing.
        (1e6, 3, [3, 3]),
        (None, 3, []),  # sized in iterations: the period is max_iterations from the start
    ],
)
def test_a_whole_run_cosine_follows_the_forecast_length_of_a_budgeted_run(
    tmp_path: Path, duration: float | None, cap: int | None, horizons: list[int]
) -> None:
    learners: list = []
    _run(_ctx(tmp_path / "run", duration=duration, cap=cap), learners)
    assert learners[0].lr_horizons == horizons
