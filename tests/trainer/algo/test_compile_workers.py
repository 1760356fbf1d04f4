"""Inductor's compile-worker pool is shut down (on a thread) once the update cycle is captured."""

from __future__ import annotations

import pytest
from torch._inductor import async_compile

from tests.trainer.algo.learner_builders import make_learner


def test_release_shuts_the_pool_down_and_records_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    monkeypatch.setattr(async_compile, "shutdown_compile_workers", lambda: calls.append(True))
    learner = make_learner()
    assert learner.cuda_graph_diagnostics()["compile"]["workers_released"] is None
    learner._release_compile_workers()
    # The release runs on a thread: the diagnostics join it, so read them first.
    assert learner.cuda_graph_diagnostics()["compile"]["workers_released"] is True
    assert calls == [True]


def test_a_failing_release_is_recorded_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> None:
        raise RuntimeError("pool busy")

    monkeypatch.setattr(async_compile, "shutdown_compile_workers", boom)
    learner = make_learner()
    learner._release_compile_workers()
    assert learner.cuda_graph_diagnostics()["compile"]["workers_released"] is False


def test_release_runs_beside_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    # Shutting the pool down waits for its workers to exit: the caller must not.
    import threading

    from trainer import cuda_graphs

    gate = threading.Event()
    monkeypatch.setattr(async_compile, "shutdown_compile_workers", lambda: gate.wait(30))
    release = cuda_graphs.release_compile_workers()
    assert release.result(timeout=0.05) is None  # still shutting down, caller already back
    gate.set()
    assert release.result(timeout=30) is True
