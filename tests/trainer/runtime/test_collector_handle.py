"""The collector's backend options come from the run's config and thread plan."""

from __future__ import annotations

from trainer.cpu_threads import ThreadPlan
from trainer.runtime.collector_handle import _backend_options


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
