"""The report's view of where on the clip the evaluation's episodes failed: a heat map.

``evaluation.json`` keeps the clip frame each failed episode ended on (``failure_frames``,
docs/evaluation.md). The heat map counts the uniform-start failures of every evaluation point
in bins of :data:`BIN_S` seconds of clip time: a column that stays dark over training is one
moment of the clip the policy never gets past (a glitch of the reference, a move it has not
learned); failures spread over the clip are a policy that is fragile everywhere; a row that
darkens at the end is a late decline, placed. Drawn for a single clip only: on a clip set the
frames belong to different clips (the per-clip view is ``clips.png``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contracts.evaluation_text import FAILURE_FRAMES_FIELD as FIELD
from harness.report.figures import TRAINING, Figure, pyplot, save_figure
from harness.report.rundata import RunData

NAME, TITLE = "failures.png", "Where uniform-start episodes failed (clip time)"
BIN_S = 0.5
"""Width of a bin of clip time (s)."""


def failure_counts(
    points: Sequence[Mapping[str, Any]], num_frames: int, fps: float
) -> list[list[int]]:
    """``[point][bin]`` counts of the uniform-start failure frames in :data:`BIN_S` bins."""
    bins = max(1, math.ceil(num_frames / fps / BIN_S))
    grid = []
    for point in points:
        row = [0] * bins
        for frame in point["modes"]["uniform"][FIELD]:
            row[min(bins - 1, int(frame / fps / BIN_S))] += 1
        grid.append(row)
    return grid


def failures_figure(data: RunData, out_dir: Path) -> Figure | None:
    """The heat map; None without failure frames (a clip set, or a document from before them)."""
    doc = data.evaluation
    if doc is None:
        return None
    points = [p for p in doc["points"] if FIELD in p["modes"]["uniform"]]
    if not points:
        return None
    if not any(p["modes"]["uniform"][FIELD] for p in points):
        note = f"no uniform-start episode failed at any of the {len(points)} evaluation points"
        return Figure(TRAINING, NAME, TITLE, None, note)
    motion = doc["motion"]
    grid = failure_counts(points, motion["num_frames"], float(motion["fps"]))
    episodes = points[-1]["modes"]["uniform"]["episodes"]
    final = doc["final_iteration"]
    labels = [
        f"{p['iteration']:,}" + (" (final)" if p["iteration"] == final else "") for p in points
    ]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, max(3.0, 0.2 * len(points) + 1.6)), dpi=100)
    seconds = len(grid[0]) * BIN_S
    image = ax.imshow(
        [[math.nan if c == 0 else c for c in row] for row in grid],
        aspect="auto",
        cmap="Reds",
        interpolation="nearest",
        extent=(0.0, seconds, len(points) - 0.5, -0.5),
        vmin=0,
    )
    ax.set_yticks(range(len(points)), labels, fontsize=6 if len(points) > 24 else 8)
    ax.set_xlabel(f"clip time (s), bins of {BIN_S:g} s; blank: no failure")
    ax.set_ylabel("evaluation point (iteration)")
    ax.set_title(f"{TITLE}, {episodes} episodes a point", fontsize=10)
    fig.colorbar(image, ax=ax, label="failed episodes")
    return Figure(TRAINING, NAME, TITLE, save_figure(fig, out_dir / NAME))
