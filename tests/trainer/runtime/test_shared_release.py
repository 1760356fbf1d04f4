"""The release order of the tensors the learner shares with the collector (shared_tensors.py).

Unit tests of the watch and the ring/ingress release, then real runs (fake env and learner,
CPU shared memory, real processes) where one side keeps a shared view past its release: the
problem is named in the summary, not left to torch's unnamed warning at exit.
"""

from __future__ import annotations

import logging

import g1soak_runtime_fakes as fakes
import pytest
import torch

from contracts.jsonio import load_strict
from harness.soak.verdict import judge_run_dir
from trainer.runtime.control import ControlBlock, Word
from trainer.runtime.inference_ring import InferenceRing
from trainer.runtime.learner_loop import run_training
from trainer.runtime.replay_ingress import ReplayIngress
from trainer.runtime.shared_tensors import StorageWatch, release, release_all, shared_tensors

CPU = torch.device("cpu")


def _ring_and_ingress() -> tuple[InferenceRing, ReplayIngress]:
    ring = InferenceRing(
        capacity=2, num_envs=4, obs_dim=3, critic_obs_dim=5, action_dim=2, device="cpu"
    )
    return ring, ReplayIngress(depth=2, slot_rows=2, num_envs=4, device="cpu", row_width=7)


def test_the_watch_names_exactly_the_storages_still_referenced() -> None:
    a, b = torch.zeros(3), torch.zeros(4)
    watch = StorageWatch({"a": a, "b": b})
    view = b[1:]  # a view keeps the whole storage alive
    assert watch.alive() == ["a", "b"]
    del a, b
    assert watch.alive() == ["b"]
    del view
    assert watch.alive() == []


def test_releasing_the_ring_and_ingress_frees_every_shared_storage() -> None:
    ring, ingress = _ring_and_ingress()
    sizes = (ring.nbytes, ingress.nbytes)
    watch = StorageWatch(shared_tensors(ring, ingress))
    assert release(lambda: release_all(ring, ingress), watch, [CPU]) == []
    # Counters, sizes and snapshots stay usable for the manifest after the release.
    block = ControlBlock.create()
    block.set(Word.PUBLISHED_TICK, 3)
    assert (ring.nbytes, ingress.nbytes) == sizes
    assert ring.snapshot(block)["published_tick"] == 3
    assert ingress.snapshot(block)["published_sequence"] == 0


def test_a_view_kept_past_the_release_is_named() -> None:
    ring, ingress = _ring_and_ingress()
    watch = StorageWatch(shared_tensors(ring, ingress))
    kept = [ring.observe(ControlBlock.create(), 0)[2]]  # the done flags of slot 0
    assert release(lambda: release_all(ring, ingress), watch, [CPU]) == ["ring.done"]
    kept.clear()
    assert watch.alive() == []


def test_reference_cycles_do_not_keep_a_storage_alive() -> None:
    ring, ingress = _ring_and_ingress()
    watch = StorageWatch(shared_tensors(ring, ingress))
    cycle: dict = {"obs": ring.obs}
    cycle["self"] = cycle
    del cycle  # only the cycle refers to ring.obs now: the release's gc.collect frees it

    assert release(lambda: release_all(ring, ingress), watch, [CPU]) == []


# -- real runs -------------------------------------------------------------------------------
def _hooks(ctx, *, learner: dict | None = None, pack=fakes.pack, **env_kwargs) -> dict:
    def learner_factory(ctx, device):
        return fakes.FakeLearner(ctx.algo_cfg.num_envs, device, **(learner or {}))

    return {
        "learner_factory": learner_factory,
        "env_factory": fakes.make_fake_env,
        "env_kwargs": {"num_envs": ctx.algo_cfg.num_envs, "device": "cpu", **env_kwargs},
        "pack_fn": pack,
    }


def _cleanup_errors(ctx) -> list[dict]:
    summary = load_strict(ctx.run_dir / "run_summary.json")
    return summary["runtime_manifest"]["shutdown"]["cleanup"]["errors"]


@pytest.mark.slow
def test_a_collector_keeping_a_shared_view_fails_the_completed_run_naming_it(make_ctx) -> None:
    ctx = make_ctx()
    assert run_training(ctx, **_hooks(ctx, pack=fakes.pack_and_keep)) == 0
    errors = _cleanup_errors(ctx)
    assert [e["type"] for e in errors] == ["SharedTensorsHeld"]
    assert errors[0]["message"] == "the collector still referenced ring.obs when it exited"
    verdict = judge_run_dir(ctx.run_dir, monitor_reasons=[], monitor_classification=None)
    assert verdict.status == "failed"
    assert any("SharedTensorsHeld" in reason for reason in verdict.reasons), verdict.reasons


@pytest.mark.slow
def test_a_learner_keeping_shared_views_fails_the_completed_run_naming_them(make_ctx) -> None:
    ctx = make_ctx()
    assert run_training(ctx, **_hooks(ctx, learner={"keep_inputs": True})) == 0
    errors = _cleanup_errors(ctx)
    assert [e["message"] for e in errors] == [
        "the learner still referenced ring.obs, ring.done after freeing them"
    ]


@pytest.mark.slow
def test_a_failing_collector_still_frees_its_copies_before_it_exits(make_ctx, caplog) -> None:
    """The exception's traceback held the tick loop's frame; the release comes after it."""
    ctx = make_ctx(algo={"max_iterations": 50})
    caplog.set_level(logging.WARNING, logger="trainer.runtime.learner_shutdown")
    assert run_training(ctx, **_hooks(ctx, fail_at_tick=5)) == 1
    shutdown = load_strict(ctx.run_dir / "run_summary.json")["runtime_manifest"]["shutdown"]
    assert shutdown["classification"] == "collector_failure"
    assert [
        r.message for r in caplog.records if "referenced" in r.message or "freeing" in r.message
    ] == []


@pytest.mark.slow
def test_a_killed_collector_is_reported_as_not_having_freed_its_copies(make_ctx, caplog) -> None:
    ctx = make_ctx(algo={"max_iterations": 50})
    caplog.set_level(logging.WARNING, logger="trainer.runtime.learner_shutdown")
    assert run_training(ctx, **_hooks(ctx, kill_self_at_tick=5)) == 1
    messages = [r.message for r in caplog.records if "without freeing" in r.message]
    what = "its copies of the shared ring and ingress tensors"
    assert messages == [f"the collector exited without freeing {what} (exit code -9)"]
