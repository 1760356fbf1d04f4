"""``extract-metrics LOG_DIR [--last N] [--json] [--legacy-unversioned]`` (docs/metrics.md).

Finds the run's single event file, checks the schema stamp of the ``run_summary.json`` next
to it, reads every scalar (no sampling; a damaged record is an error naming its byte offset)
and prints one row per metric of the selected mode: the mean of the last N values of its
tag, times the row's scale. Default mode is metric schema v1 (benchmark timings plus mean
reward and episode length); ``--legacy-unversioned`` reads old unstamped runs and is never a
fallback. A row whose tag the run did not log is left out of the table (named once below
it) and is null in ``--json``; a window with a non-finite value is null with a warning.
Exit codes: 0 printed; 1 the run's files failed a check; 2 usage, including a LOG_DIR that
is missing or holds no (or several) event files.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from contracts import rundir
from contracts.cli_app import run_app
from contracts.errors import HarnessError, UsageError
from contracts.jsonio import dumps_strict, is_exact_int, show
from contracts.paths import absolute
from harness.metrics.events import ScalarEvent, read_scalars
from harness.metrics.registry import REGISTRY_FILE, load_registry

__all__ = [
    "ROWS",
    "MetricRow",
    "MetricsReport",
    "app",
    "extract",
    "extract_report",
    "main",
    "rows_for",
]

MAX_LISTED_TAGS = 8


@dataclass(frozen=True)
class MetricRow:
    """One output row: its v1 tag (None: no v1 source), the v1 scale, its legacy tag."""

    name: str
    v1_tag: str | None
    v1_scale: float
    legacy_tag: str | None


_PERF_ROWS = (
    "collector_learner_action_wait_ms",
    "collector_replay_write_ms",
    "learner_collector_wait_ms",
    "learner_inference_ms",
    "learner_replay_batch_wait_ms",
    "learner_replay_sample_ms",
    "replay_ingress_h2d_submit_ms",
    "learner_collector_release_ms",
)
ROWS: tuple[MetricRow, ...] = (
    MetricRow("iter_ms", "Perf/iteration_time", 1000.0, "perf/iter_ms"),  # v1 logs seconds
    MetricRow("steps_per_sec", "Perf/total_fps", 1.0, "perf/steps_per_sec"),
    MetricRow("collector_active_steps_per_sec", None, 1.0, "perf/collector_active_steps_per_sec"),
    MetricRow("collector_cycle_ms", None, 1.0, "timing/collector_cycle_ms"),
    *(MetricRow(name, f"Perf/{name}", 1.0, f"timing/{name}") for name in _PERF_ROWS),
    MetricRow(
        "learner_train_ms", "Perf/learning_time", 1000.0, "timing/learner_train_ms"
    ),  # seconds -> ms
    MetricRow("mean_reward", "Train/mean_reward", 1.0, None),
    MetricRow("mean_episode_length", "Train/mean_episode_length", 1.0, None),
)
"""Every row; each mode reads the rows that have a tag in it (:func:`rows_for`)."""
LEGACY_TAGS = frozenset(row.legacy_tag for row in ROWS if row.legacy_tag is not None)


def rows_for(legacy: bool) -> tuple[MetricRow, ...]:
    """The rows of one mode: v1 rows have a v1 tag, legacy rows a legacy tag."""
    return tuple(row for row in ROWS if (row.legacy_tag if legacy else row.v1_tag) is not None)


app = typer.Typer(name="extract-metrics", add_completion=False, pretty_exceptions_enable=False)


def _warn(text: str) -> None:
    sys.stderr.write(f"warning: {text}\n")


def _listed(tags: Sequence[str]) -> str:
    shown = ", ".join(tags[:MAX_LISTED_TAGS])
    return shown + (
        f" (+{len(tags) - MAX_LISTED_TAGS} more)" if len(tags) > MAX_LISTED_TAGS else ""
    )


def find_event_file(log_dir: Path) -> Path:
    """The single ``events.out.tfevents.*`` file under ``log_dir`` (recursive; docs/contracts.md §extract-metrics)."""
    if not log_dir.is_dir():
        raise UsageError(f"LOG_DIR {log_dir} is not a directory; pass a run directory")
    found = sorted(p for p in log_dir.rglob(rundir.EVENT_GLOB) if p.is_file())
    if not found:
        raise UsageError(f"no event file found under {log_dir}; pass a run directory")
    if len(found) > 1:
        raise UsageError(
            f"expected exactly one event file under {log_dir}; pass one run directory (found {len(found)})"
        )
    return found[0]


def load_summary(run_dir: Path) -> dict[str, Any] | None:
    """The ``run_summary.json`` beside the event file, None if absent; it must be an object (docs/contracts.md §extract-metrics)."""
    path = run_dir / rundir.RUN_SUMMARY
    if not path.exists():
        return None
    try:  # lenient: an unstamped legacy summary is read too (--legacy-unversioned)
        doc = rundir.read(path, lenient=True)
    except rundir.DocumentError as err:
        raise HarnessError(f"run summary {path} is unreadable: {err.detail}") from err
    if not isinstance(doc, dict):
        raise HarnessError(
            f"run summary {path} is not a JSON object (got {type(doc).__name__}); fix or remove it"
        )
    return doc


def _check_v1_stamp(summary: Mapping[str, Any] | None, run_dir: Path) -> None:
    if summary is None:
        raise HarnessError(
            f"run summary lacks metric_schema_version: no {rundir.RUN_SUMMARY} in {run_dir}; "
            "v1 metrics need the stamped summary (use --legacy-unversioned only for unstamped runs)"
        )
    if "metric_schema_version" not in summary:
        raise HarnessError(
            f"run summary lacks metric_schema_version ({run_dir / rundir.RUN_SUMMARY}); "
            "use --legacy-unversioned only for unstamped runs"
        )
    version = summary["metric_schema_version"]
    if not (is_exact_int(version) and version == 1):
        raise HarnessError(
            f"unsupported metric_schema_version {show(version)}; this tool reads the exact int 1"
        )


def _check_v1_tags(scalars: Mapping[str, list[ScalarEvent]], event_file: Path) -> None:
    registry = load_registry()
    legacy = [tag for tag in scalars if registry.is_legacy(tag)]
    if legacy:
        raise HarnessError(
            f"a metric_schema_version 1 event file must not contain legacy tags: {_listed(legacy)} ({event_file})"
        )
    unknown = [tag for tag in scalars if not registry.is_registered(tag)]
    if unknown:
        raise HarnessError(
            f"unregistered metric tags {_listed(unknown)} in {event_file}; register them in schemas/{REGISTRY_FILE}"
        )
    candidates = [row.v1_tag for row in rows_for(legacy=False) if row.v1_tag is not None]
    if not any(tag in scalars for tag in candidates):
        raise HarnessError(
            f"no canonical metric tag in {event_file}; expected at least one of {_listed(candidates)}"
        )


def _check_legacy(
    summary: Mapping[str, Any] | None, scalars: Mapping[str, list[ScalarEvent]], event_file: Path
) -> None:
    if summary is not None and "metric_schema_version" in summary:
        raise HarnessError(
            f"--legacy-unversioned cannot read a schema-stamped run summary "
            f"(metric_schema_version={show(summary['metric_schema_version'])}); drop --legacy-unversioned"
        )
    registry = load_registry()
    canonical = [tag for tag in scalars if registry.is_registered(tag)]
    if canonical:
        raise HarnessError(
            f"canonical tags require metric_schema_version: {_listed(canonical)} in {event_file}; drop --legacy-unversioned"
        )
    if not any(tag in LEGACY_TAGS for tag in scalars):
        raise HarnessError(
            f"no recognised legacy tag in {event_file}; expected at least one of {_listed(sorted(LEGACY_TAGS))}"
        )


def _row_value(
    row: MetricRow, scalars: Mapping[str, list[ScalarEvent]], *, last: int, legacy: bool
) -> float | None:
    tag = row.legacy_tag if legacy else row.v1_tag
    scale = 1.0 if legacy else row.v1_scale
    events = scalars.get(tag) if tag is not None else None
    if not events:
        return None  # not logged by this run: named once under the table
    window = [event.value for event in events[-last:]]
    if not all(math.isfinite(v) for v in window):
        _warn(f"{row.name}: non-finite value among the last {len(window)} of {tag}; reporting null")
        return None
    mean = math.fsum(window) / len(window) * scale
    if not math.isfinite(mean):
        _warn(f"{row.name}: mean of {tag} overflows; reporting null")
        return None
    return mean


@dataclass(frozen=True)
class MetricsReport:
    """The rows of one run, and the rows whose tag the run did not log."""

    values: dict[str, float | None]
    absent: tuple[str, ...]


def extract(log_dir: Path, *, last: int = 20, legacy: bool = False) -> dict[str, float | None]:
    """:func:`extract_report`'s values: row name -> number, or None."""
    return extract_report(log_dir, last=last, legacy=legacy).values


def extract_report(log_dir: Path, *, last: int = 20, legacy: bool = False) -> MetricsReport:
    """The rows of the selected mode (:func:`rows_for`) for the run under ``log_dir``, in
    output order; a row whose tag the run did not log is None.

    Raises:
        HarnessError: a check of the run's files fails (bad stamp, legacy or unregistered
            tags, no candidate tag, a corrupt event file).
        UsageError: ``last`` < 1, or ``log_dir`` is not a directory holding exactly one
            event file.
    """
    if last < 1:
        raise UsageError(f"--last {last} must be >= 1")
    event_file = find_event_file(log_dir)
    summary = load_summary(event_file.parent)
    if not legacy:
        _check_v1_stamp(summary, event_file.parent)
    try:
        scalars = read_scalars(event_file)
    except OSError as err:
        raise HarnessError(f"cannot read event file {event_file}: {err.strerror or err}") from err
    if legacy:
        _check_legacy(summary, scalars, event_file)
    else:
        _check_v1_tags(scalars, event_file)
    rows = rows_for(legacy)
    absent = tuple(
        row.name for row in rows if not scalars.get(row.legacy_tag if legacy else row.v1_tag)
    )
    values = {row.name: _row_value(row, scalars, last=last, legacy=legacy) for row in rows}
    return MetricsReport(values=values, absent=absent)


@app.command(
    epilog=(
        "\b\nExamples:\n"
        "  extract-metrics runs/g1-soak\n"
        "  extract-metrics runs/g1-soak --last 50 --json\n\n"
        "Rows, tags and scales: docs/metrics.md. Exit 0 printed, 1 a check of the run's "
        "files failed, 2 usage (LOG_DIR missing or without exactly one event file)."
    )
)
def extract_metrics(
    log_dir: Annotated[
        Path,
        typer.Argument(help="Run directory holding exactly one event file.", show_default=False),
    ],
    last: Annotated[
        int, typer.Option("--last", min=1, help="Average the last N values of each tag.")
    ] = 20,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one strict-JSON object {row: number|null}.")
    ] = False,
    legacy_unversioned: Annotated[
        bool,
        typer.Option(
            "--legacy-unversioned", help="Read an unstamped run with legacy perf/ and timing/ tags."
        ),
    ] = False,
) -> None:
    """Print the benchmark timings, mean reward and episode length of one run from its
    TensorBoard event file."""
    report = extract_report(absolute(log_dir), last=last, legacy=legacy_unversioned)
    if json_output:
        sys.stdout.write(dumps_strict(report.values))
        return
    shown = {name: v for name, v in report.values.items() if name not in report.absent}
    width = max((len(name) for name in shown), default=0)
    for name, value in shown.items():
        sys.stdout.write(f"{name.ljust(width)} {'null' if value is None else f'{value:.3f}'}\n")
    if report.absent:
        sys.stdout.write(f"(not logged by this run: {', '.join(report.absent)})\n")


def main(argv: list[str] | None = None) -> int:
    """Console entry point: ``error: ...`` on stderr; exit 0 printed, 1 check failed, 2 usage."""
    return run_app(app, argv, prog="extract-metrics")


if __name__ == "__main__":
    sys.exit(main())
