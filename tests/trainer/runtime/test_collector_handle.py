"""The collector handle: backend options from the run's config, a thread's end, placements."""

from __future__ import annotations

import threading

import pytest

from trainer.cpu_threads import ThreadPlan
from trainer.runtime.collector_handle import (
    ThreadCollector,
    _backend_options,
    make_collector_handle,
)
from trainer.runtime.control import ControlBlock
from trainer.runtime.shutdown import CollectorFailure
from trainer.runtime.signals import SignalGuard


def _plan(physics: int | None) -> ThreadPlan:
    return ThreadPlan(
        cpus=4, torch_source="rule", learner_torch=2, collector_torch=1, collector_physics=physics
    )


def test_the_collector_steps_on_the_configured_stream_with_its_physics_threads(make_ctx):
    high = make_ctx(training={"collector_stream_priority": "high"})
    assert _backend_options(high, None) == {"stream_priority": "high"}
    assert _backend_options(make_ctx(), _plan(3)) == {
        "stream_priority": "default",
        "num_threads": 3,
    }
    assert _backend_options(make_ctx(), _plan(None)) == {"stream_priority": "default"}


def test_a_collector_thread_that_ended_unannounced_is_a_collector_failure():
    handle = ThreadCollector(SignalGuard(), stale_after_s=30.0)
    handle.block = ControlBlock.create(shared=False)
    handle.thread = threading.Thread(target=lambda: None)
    handle.thread.start()
    handle.thread.join()
    with pytest.raises(CollectorFailure, match="the collector thread ended before"):
        handle.check()
    assert handle.exit_record() == {
        "alive": False,
        "exitcode": None,
        "signal": None,
        "signal_name": None,
    }
    assert handle.release_problems() == [] and not handle.interprocess


def test_an_unknown_placement_names_the_choices():
    with pytest.raises(ValueError, match="collector_placement='fiber' must be one of process"):
        make_collector_handle("fiber", SignalGuard(), 30.0)  # type: ignore[arg-type]
