"""The report's per-clip view of a clip-set run: a heat map and a table.

Drawn only when the evaluation points carry ``clips`` (``evaluation.json`` of a clip set).
The heat map shows every clip's uniform-start R-MPKPE at every evaluation point (clips sorted
worst final first, so a late decline reads as a band that darkens to the right); the table
lists each clip's final and best point and what the learning verdict found behind its best.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contracts.evaluation_text import FAILURE_FRAMES_FIELD, describe_failures
from harness.report.figures import TRAINING, Figure, pyplot, save_figure
from harness.report.rundata import RunData
from harness.soak.learning_clips import same_clip_points

NAME, TITLE = "clips.png", "R-MPKPE per clip over training (uniform starts)"
HEADER = (
    "clip",
    "episodes",
    "final success",
    "final R-MPKPE mm",
    "final MPKPE mm",
    "best R-MPKPE mm (iteration)",
    "behind its best",
    "failures ended at (clip time)",
)


def clip_points(data: RunData) -> list[Mapping[str, Any]]:
    """The evaluation points that carry the last point's clips, in iteration order."""
    doc = data.evaluation
    return (
        []
        if doc is None or not doc["points"]
        else same_clip_points(doc["points"], doc["points"][-1])
    )


def _uniform_error(point: Mapping[str, Any], clip: int) -> float | None:
    return point["clips"][clip]["modes"]["uniform"]["r_mpkpe_mm"]


def _final_error(clip: Mapping[str, Any]) -> float:
    value = clip["modes"]["uniform"]["r_mpkpe_mm"]
    return float("inf") if value is None else value


def clips_figure(data: RunData, out_dir: Path) -> Figure | None:
    """The heat map, or None for a run of one clip."""
    points = clip_points(data)
    if not points:
        return None
    order = sorted(
        range(len(points[-1]["clips"])), key=lambda c: -_final_error(points[-1]["clips"][c])
    )
    names = [points[-1]["clips"][c]["clip"] for c in order]
    nan = float("nan")
    grid = [[nan if (v := _uniform_error(p, c)) is None else v for p in points] for c in order]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, max(3.0, 0.18 * len(names) + 1.5)), dpi=100)
    image = ax.imshow(grid, aspect="auto", cmap="magma_r", interpolation="nearest")
    ax.set_yticks(range(len(names)), names, fontsize=6 if len(names) > 24 else 8)
    ticks = range(0, len(points), max(1, len(points) // 10))
    ax.set_xticks(list(ticks), [f"{points[i]['iteration']:,}" for i in ticks], fontsize=7)
    ax.set_xlabel("iteration")
    ax.set_title(TITLE + ", worst final on top", fontsize=10)
    fig.colorbar(image, ax=ax, label="R-MPKPE (mm)")
    return Figure(TRAINING, NAME, TITLE, save_figure(fig, out_dir / NAME))


def _cell(value: Any) -> str:
    return "&ndash;" if value is None else html.escape(str(value))


def _mm(value: float | None) -> str | None:
    return None if value is None else f"{value:.1f}"


def _failures(uniform: Mapping[str, Any], fps: float) -> str | None:
    """Where the clip's failed episodes ended; None for a document without failure frames."""
    frames = uniform.get(FAILURE_FRAMES_FIELD)
    if frames is None:
        return None
    return describe_failures(frames, fps) if frames else "none"


def clips_table(data: RunData, verdict_clips: Sequence[Mapping[str, Any]] | None) -> str:
    """Every clip's final metrics, worst first, with the verdict's best point and regressions,
    and where its failed episodes ended."""
    doc, points = data.evaluation, clip_points(data)
    if doc is None or not points:
        return ""
    fps = float(doc["motion"]["fps"])
    judged = {c["clip"]: c for c in verdict_clips or []}
    rows = []
    for clip in sorted(points[-1]["clips"], key=_final_error, reverse=True):
        uniform = clip["modes"]["uniform"]
        record = judged.get(clip["clip"])
        best = (
            None
            if record is None
            else f"{_mm(record['best']['r_mpkpe_mm']) or '–'} ({record['best_iteration']:,})"
        )
        behind = None if record is None else (", ".join(record["regressed"]) or "no")
        success = uniform["success_rate"]
        cells = [
            clip["clip"],
            uniform["episodes"],
            None if success is None else f"{success * 100:.1f} %",
            _mm(uniform["r_mpkpe_mm"]),
            _mm(uniform["mpkpe_mm"]),
            best,
            behind,
            _failures(uniform, fps),
        ]
        css = ' class="bad"' if record is not None and record["regressed"] else ""
        rows.append(f"<tr{css}>" + "".join(f"<td>{_cell(c)}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADER)
    source = "" if verdict_clips else " The learning verdict did not judge the clips."
    return (
        f"<h3>Clips ({len(rows)}, final point, worst R-MPKPE first)</h3>"
        f"<p>Uniform-start metrics of the final evaluation point; where its failed episodes "
        f"ended, as spans of the clip's time (failures at most 0.5 s apart share one).{source}</p>"
        f"<table><tr>{head}</tr>{''.join(rows)}</table>"
    )
