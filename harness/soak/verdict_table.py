"""The end-of-soak verdict for a person: rich tables that never grow past the terminal.

:func:`render_summary` turns an artifact into the soak's rows (verdict, reason, peaks, budget,
trend and learning verdicts); :func:`render_verdict` lays them out.

Values fold inside their column (a 700-character reason wraps, it does not widen the
table); the width is the terminal's, at most :data:`MAX_WIDTH`. On a passing soak the
trainer's own summary table (``contracts.summary_table``, what ``train`` printed) follows the
soak's. The artifact path and the report command come last as plain lines, whole, so they
can be copied.
"""

from __future__ import annotations

import io
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contracts.evaluation_text import metrics_text
from contracts.summary_table import summary_rows

__all__ = [
    "MAX_WIDTH",
    "POLICY_TEXT",
    "judged_network",
    "learning_rows",
    "render_summary",
    "render_verdict",
    "table_text",
]

MAX_WIDTH = 120


def _width() -> int:
    return max(40, min(MAX_WIDTH, shutil.get_terminal_size((100, 24)).columns))


def table_text(title: str, rows: Sequence[tuple[str, str]], width: int | None = None) -> str:
    """Two columns, the value folded to fit ``width`` (default: the terminal's)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    cols = width or _width()
    utf = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "").startswith("utf")
    buffer = io.StringIO()
    console = Console(file=buffer, width=cols, color_system=None, highlight=False)
    table = Table(
        title=title,
        title_justify="left",
        show_header=False,
        width=cols,
        box=box.SQUARE if utf else box.ASCII,
    )
    table.add_column("key", no_wrap=True)
    table.add_column("value", overflow="fold", ratio=1)
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    return buffer.getvalue().rstrip("\n")


def render_verdict(
    rows: Sequence[tuple[str, str]],
    artifact: Mapping[str, Any],
    artifact_path: Path,
    width: int | None = None,
) -> str:
    """The soak's rows, the trainer's summary when the soak passed, then the paths."""
    parts = [table_text("soak", rows, width)]
    summary = artifact.get("run_summary")
    if artifact.get("status") == "passed" and isinstance(summary, Mapping):
        parts.append(table_text("trainer (run_summary.json)", summary_rows(summary), width))
    parts.append(f"artifact: {artifact_path}\nreport:   soak-report {artifact_path}")
    return "\n".join(parts)


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)


def render_summary(artifact: dict[str, Any], artifact_path: Path) -> str:
    """The end-of-soak tables: verdict, reason, duration, peaks, trend verdicts (and the
    trainer's summary on a pass), then the artifact and report paths."""
    summary = artifact["resource_summary"]
    trends = artifact.get("resource_trends") or {}
    rows: list[tuple[str, str]] = [
        ("verdict", artifact["status"]),
        ("classification", _fmt(artifact["failure_classification"])),
        ("reason", _fmt(artifact["failure_reason"])),
        ("duration_s", f"{artifact['duration_s']:.1f}"),
        ("returncode", _fmt(artifact["returncode"])),
        ("samples", _fmt(summary["sample_count"])),
        ("max processes", _fmt(summary["max_process_count"])),
        ("max RSS (KiB)", _fmt(summary["max_process_rss_kib"])),
        ("max GPU memory (MiB)", _fmt(summary["max_gpu_used_memory_mib"])),
        (
            "max eventfd / shm FDs",
            f"{_fmt(summary['max_eventfd_count'])} / {_fmt(summary['max_shared_memory_fd_count'])}",
        ),
        ("residual processes", _fmt(summary["residual_process_count"])),
        *_budget_rows(artifact.get("budget")),
        ("trend verdict", f"{_fmt(trends.get('verdict'))} ({_fmt(trends.get('mode'))})"),
        *_window_rows(trends),
    ]
    for name, series in (trends.get("series") or {}).items():
        slope = series.get("slope_per_hour")
        rows.append(
            (
                f"  {name}",
                f"{series['verdict']}" + ("" if slope is None else f" (slope {slope:.1f}/h)"),
            )
        )
    rows.extend(learning_rows(artifact.get("learning")))
    return render_verdict(rows, artifact, artifact_path)


def _point_text(point: dict[str, Any] | None) -> str:
    if point is None:
        return "-"
    return f"iter {point['iteration']}: " + metrics_text(point["uniform"], point["frame0"])


POLICY_TEXT = {
    "actor": "the actor",
    "policy_average": "the averaged policy (algo.policy_average_rate)",
}


def judged_network(learning: Mapping[str, Any] | None) -> str | None:
    """Which weights of the final checkpoint the verdict judged (its point's ``network``, a
    key of :data:`POLICY_TEXT`); None where the point does not say (an evaluation written
    before the field)."""
    evaluation = (learning or {}).get("evaluation") or {}
    final = evaluation.get("final_iteration")
    point = next((p for p in evaluation.get("points") or [] if p["iteration"] == final), None)
    return None if point is None else point.get("network")


def learning_rows(learning: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Summary-table rows of the learning verdict: verdict, final and best points, and the
    policy judged where it is not the actor (the default, left unsaid)."""
    if learning is None:
        return []
    rows = [("learning verdict", f"{learning['verdict']} ({learning['mode']})")]
    if learning["reason"]:
        rows.append(("  not judged", learning["reason"]))
    evaluation = learning.get("evaluation") or {}
    by_iteration = {p["iteration"]: p for p in evaluation.get("points") or []}
    for label, key in (("  final", "final_iteration"), ("  best", "best_iteration")):
        if evaluation.get(key) is not None:
            rows.append((label, _point_text(by_iteration.get(evaluation[key]))))
    if judged_network(learning) == "policy_average":
        rows.append(("  policy judged", POLICY_TEXT["policy_average"]))
    return rows


def _budget_rows(budget: dict[str, Any] | None) -> list[tuple[str, str]]:
    if not budget or budget.get("kind") is None:
        return []
    if budget["kind"] == "duration":
        cap = budget["iterations"]
        plan = f"{budget['duration_s']:g} s of training" + (
            f", cap {cap:,} iterations" if cap else ""
        )
    else:
        plan = f"{budget['iterations']:,} iterations"
    reached = budget["reached"]
    got = "-"
    if reached.get("final_iteration") is not None:
        got = f"iteration {reached['final_iteration']:,}"
        if reached.get("training_s") is not None:
            got += f" after {reached['training_s']:.1f} s of training"
        if reached.get("stopped_by"):
            got += f" (stopped by {reached['stopped_by']})"
    return [("budget", plan), ("reached", got)]


def _window_rows(trends: dict[str, Any]) -> list[tuple[str, str]]:
    if "window_rule" not in trends:
        return []
    text = f"warm-up {trends['warmup_s']:g} s, minimum {trends['min_window_s']:g} s"
    if trends["window_rule"] == "scaled" and trends.get("planned_length_s") is not None:
        text += f" (scaled to {trends['planned_length_s']:g} s)"
    if trends.get("window_end") == "last_training_progress":
        text += ", to training's end"
    return [("trend window", text)]
