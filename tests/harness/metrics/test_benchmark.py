"""Benchmark: extract-metrics reads a 200k-scalar event file (target < 3 s; docs/contracts.md §extract-metrics).

Worst case for the reader: one scalar per event, so 200k records each pay framing, two CRCs
and an Event decode. Timing is reported by pytest-benchmark, never asserted.
"""

from __future__ import annotations

import pytest

from contracts.jsonio import show
from harness.metrics.cli import ROWS, extract
from tests.harness.metrics.event_files import scalar_event, write_event_file

SCALARS = 200_000


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("bench")
    tags = [row.v1_tag for row in ROWS if row.v1_tag is not None]
    payloads = [
        scalar_event(i * 64, {tags[i % len(tags)]: 0.001 * (i % 97)}, wall_time=1.0 + i)
        for i in range(SCALARS)
    ]
    write_event_file(run, payloads)
    (run / "run_summary.json").write_text('{"metric_schema_version": 1}\n')
    return run


@pytest.mark.slow
def test_extract_metrics_reads_200k_scalars(benchmark, big_run) -> None:
    rows = benchmark.pedantic(extract, args=(big_run,), kwargs={"last": 20}, rounds=3, iterations=1)
    assert rows["steps_per_sec"] is not None and "collector_cycle_ms" not in rows, show(rows)
