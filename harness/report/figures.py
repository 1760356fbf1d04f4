"""The report's PNGs, drawn with matplotlib's Agg backend.

Training: reward, episode length and losses over env steps, env steps/s over wall time (all
from the event file), and the evaluation points over iteration with the best and the final
point marked. Resources: process-tree RSS, GPU memory, FDs by class, process count, and the
iteration / env-step curve over the soak's elapsed time (from ``progress.last``). A figure
that has nothing to draw is not drawn: its :class:`Figure` carries a note saying why (for
example "no GPU"), and the page prints the note in its place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.metrics.events import ScalarEvent
from harness.report.rundata import RunData
from harness.soak.proctree import FD_CLASSES

TRAINING, RESOURCES = "training", "resources"
REWARD_TAG = "Train/mean_reward"
EPISODE_LENGTH_TAG = "Train/mean_episode_length"
FPS_TAG = "Perf/total_fps"
LOSS_PREFIX = "Loss/"


@dataclass(frozen=True)
class Figure:
    """One figure of the page: drawn (``path``) or replaced by ``note``."""

    section: str
    name: str
    title: str
    path: Path | None
    note: str | None = None


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> Path:
    for ax in fig.axes:
        if ax.get_legend() is None and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    pyplot().close(fig)
    return path


def steps_axis(values: Sequence[float]) -> tuple[float, str]:
    top = max(values, default=0.0)
    if top >= 1e6:
        return 1e6, "env steps (M)"
    if top >= 1e4:
        return 1e3, "env steps (k)"
    return 1.0, "env steps"


def _time_axis(seconds: Sequence[float]) -> tuple[float, str]:
    return (60.0, "min") if max(seconds, default=0.0) >= 120 else (1.0, "s")


def _finite(events: Sequence[ScalarEvent]) -> tuple[list[float], list[float], int]:
    xs = [float(e.step) for e in events if math.isfinite(e.value)]
    ys = [e.value for e in events if math.isfinite(e.value)]
    return xs, ys, len(events) - len(xs)


# -- training ---------------------------------------------------------------------------
def _no_scalars(data: RunData, tag: str) -> str:
    if "run_dir" in data.notes:
        return data.notes["run_dir"]
    if "training" in data.notes:
        return data.notes["training"]
    return f"the event file holds no {tag} scalar"


def _scalar_figure(
    data: RunData, out_dir: Path, name: str, title: str, tag: str, ylabel: str
) -> Figure:
    events = data.scalars.get(tag)
    if not events:
        return Figure(TRAINING, name, title, None, _no_scalars(data, tag))
    xs, ys, bad = _finite(events)
    scale, xlabel = steps_axis(xs)
    fig, ax = pyplot().subplots(figsize=(8, 3.2), dpi=100)
    ax.plot([x / scale for x in xs], ys, label=tag)
    ax.set_title(title + (f"  ({bad} non-finite values not drawn)" if bad else ""), fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    return Figure(TRAINING, name, title, save_figure(fig, out_dir / name))


def _losses_figure(data: RunData, out_dir: Path) -> Figure:
    name, title = "losses.png", "Losses"
    tags = [t for t in data.scalars if t.startswith(LOSS_PREFIX)]
    if not tags:
        return Figure(TRAINING, name, title, None, _no_scalars(data, f"{LOSS_PREFIX}*"))
    cols = 2 if len(tags) > 1 else 1
    rows = math.ceil(len(tags) / cols)
    fig, axes = pyplot().subplots(
        rows, cols, figsize=(8, 2.4 * rows), dpi=100, squeeze=False, sharex=True
    )
    scale, xlabel = steps_axis([float(e.step) for t in tags for e in data.scalars[t]])
    for ax, tag in zip(axes.flat, tags, strict=False):
        xs, ys, bad = _finite(data.scalars[tag])
        ax.plot([x / scale for x in xs], ys, linewidth=1)
        ax.set_title(
            tag + (f"  ({bad} NON-FINITE)" if bad else ""),
            fontsize=9,
            color="#cf222e" if bad else "black",
        )
        ax.grid(alpha=0.3)
        ax.set_xlabel(xlabel)
    for ax in list(axes.flat)[len(tags) :]:
        ax.set_visible(False)
    return Figure(TRAINING, name, title, save_figure(fig, out_dir / name))


def _fps_figure(data: RunData, out_dir: Path) -> Figure:
    name, title = "env_steps_per_s.png", "Env steps/s over wall time"
    events = data.scalars.get(FPS_TAG)
    if not events:
        return Figure(TRAINING, name, title, None, _no_scalars(data, FPS_TAG))
    t0 = min(e.wall_time for e in events)
    finite = [e for e in events if math.isfinite(e.value)]
    seconds = [e.wall_time - t0 for e in finite]
    scale, unit = _time_axis(seconds)
    fig, ax = pyplot().subplots(figsize=(8, 3.2), dpi=100)
    ax.plot([s / scale for s in seconds], [e.value for e in finite], label=FPS_TAG)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(f"wall time since the first write ({unit})")
    ax.set_ylabel("env steps/s")
    ax.grid(alpha=0.3)
    return Figure(TRAINING, name, title, save_figure(fig, out_dir / name))


def _metric_series(points: Sequence[dict[str, Any]], mode: str, metric: str):
    pairs = [(p["iteration"], p["modes"][mode][metric]) for p in points]
    return [i for i, v in pairs if v is not None], [v for _, v in pairs if v is not None]


def _mark(ax: Any, points: dict[int, dict[str, Any]], it: int | None, metric: str, **style):
    if it is None or it not in points:
        return
    value = points[it]["modes"]["uniform"][metric]
    if value is not None:
        ax.plot([it], [value * (100 if metric == "success_rate" else 1)], linestyle="", **style)


def evaluation_figure(data: RunData, out_dir: Path) -> Figure:
    """Success rate and MPKPE / R-MPKPE over iteration, best and final marked."""
    name, title = "evaluation.png", "Evaluation (fixed protocol)"
    doc = data.evaluation
    if doc is None or not doc["points"]:
        note = data.notes.get("run_dir") or data.notes.get("evaluation") or "no evaluation point"
        return Figure(TRAINING, name, title, None, note)
    points = doc["points"]
    by_it = {p["iteration"]: p for p in points}
    best = doc["best"]["iteration"] if doc["best"] else None
    final = doc["final_iteration"]
    fig, (top, bottom) = pyplot().subplots(2, 1, figsize=(8, 5.4), dpi=100, sharex=True)
    for mode, style in (("uniform", "-"), ("frame0", "--")):
        xs, ys = _metric_series(points, mode, "success_rate")
        top.plot(xs, [y * 100 for y in ys], style, marker=".", label=f"success, {mode} starts")
        for metric, label in (("mpkpe_mm", "MPKPE"), ("r_mpkpe_mm", "R-MPKPE")):
            xs, ys = _metric_series(points, mode, metric)
            bottom.plot(xs, ys, style, marker=".", label=f"{label}, {mode} starts")
    for ax, metric in ((top, "success_rate"), (bottom, "r_mpkpe_mm")):
        best_style = {"marker": "*", "markersize": 14, "color": "#1a7f37"}
        _mark(ax, by_it, best, metric, label=f"best (iteration {best})", **best_style)
        final_style = {"marker": "s", "markersize": 10, "fillstyle": "none", "color": "#cf222e"}
        _mark(ax, by_it, final, metric, label=f"final (iteration {final})", **final_style)
        ax.grid(alpha=0.3)
    top.set_title(title, fontsize=10)
    top.set_ylabel("success rate (%)")
    bottom.set_ylabel("error (mm)")
    bottom.set_xlabel("iteration")
    return Figure(TRAINING, name, title, save_figure(fig, out_dir / name))


def training_figures(data: RunData, out_dir: Path) -> list[Figure]:
    return [
        _scalar_figure(
            data, out_dir, "reward.png", "Mean episode reward", REWARD_TAG, "episode return"
        ),
        _scalar_figure(
            data,
            out_dir,
            "episode_length.png",
            "Mean episode length",
            EPISODE_LENGTH_TAG,
            "control steps",
        ),
        _losses_figure(data, out_dir),
        _fps_figure(data, out_dir),
        evaluation_figure(data, out_dir),
    ]


# -- resources --------------------------------------------------------------------------
def _trend_note(artifact: dict[str, Any], series: str) -> str:
    trend = (artifact.get("resource_trends") or {}).get("series", {}).get(series)
    if not trend:
        return ""
    slope = trend.get("slope_per_hour")
    return f"trend {trend['verdict']}" + ("" if slope is None else f", slope {slope:.1f}/h")


class _Resources:
    """Shared axis and trend-window marker of the resource curves."""

    def __init__(self, artifact: dict[str, Any], out_dir: Path) -> None:
        self.artifact = artifact
        self.samples = artifact["samples"]
        self.out_dir = out_dir
        seconds = [float(s["elapsed_s"]) for s in self.samples]
        self.scale, self.unit = _time_axis(seconds)
        self.t = [s / self.scale for s in seconds]
        window = (artifact.get("resource_trends") or {}).get("window") or {}
        self.window_start = window.get("start_elapsed_s")

    def draw(
        self, name: str, title: str, ylabel: str, series: str, paint: Callable[[Any], None]
    ) -> Figure:
        if not self.samples:
            return Figure(RESOURCES, name, title, None, "the monitor took no sample")
        fig, ax = pyplot().subplots(figsize=(8, 3.2), dpi=100)
        note = _trend_note(self.artifact, series) if series else ""
        ax.set_title(title + (f"  ({note})" if note else ""), fontsize=10)
        ax.set_xlabel(f"elapsed ({self.unit})")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if self.window_start is not None:
            ax.axvline(
                self.window_start / self.scale,
                color="grey",
                linestyle="--",
                linewidth=0.8,
                label="trend window start",
            )
        paint(ax)
        return Figure(RESOURCES, name, title, save_figure(fig, self.out_dir / name))


def gpu_note(artifact: dict[str, Any]) -> str | None:
    """Why there is no GPU memory curve, or None when there is one."""
    samples = artifact["samples"]
    if any(s["gpu"].get("source") is not None for s in samples):
        return None
    devices = artifact["context"].get("gpu_devices") or []
    if not devices:
        return "no GPU: the monitor saw no GPU device on this machine"
    errors = next((s["gpu"].get("errors") for s in samples if s["gpu"].get("errors")), None)
    if not samples:
        return "the monitor took no sample"
    return "GPU memory unavailable" + (f": {errors[0]}" if errors else "")


def _progress_paint(res: _Resources) -> Callable[[Any], None]:
    def paint(ax: Any) -> None:
        rows = [
            (x, s["progress"]["last"])
            for x, s in zip(res.t, res.samples, strict=True)
            if isinstance(s["progress"].get("last"), dict)
        ]
        iters = [(x, last["iteration"]) for x, last in rows if _is_count(last.get("iteration"))]
        steps = [
            (x, last["total_env_steps"])
            for x, last in rows
            if _is_count(last.get("total_env_steps"))
        ]
        (left_line,) = ax.step([x for x, _ in iters], [v for _, v in iters], where="post")
        right = ax.twinx()
        scale, label = steps_axis([float(v) for _, v in steps])
        (right_line,) = right.step(
            [x for x, _ in steps],
            [v / scale for _, v in steps],
            where="post",
            color="#bc4c00",
            linestyle="--",
        )
        right.set_ylabel(label)
        handles, labels = ax.get_legend_handles_labels()  # the trend-window marker, if any
        ax.legend(
            [*handles, left_line, right_line], [*labels, "iteration", label], fontsize=8, loc="best"
        )

    return paint


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def resource_figures(artifact: dict[str, Any], out_dir: Path) -> list[Figure]:
    res = _Resources(artifact, out_dir)
    samples = res.samples
    figures = [
        res.draw(
            "rss.png",
            "Process-tree RSS",
            "MiB",
            "rss_kib",
            lambda ax: ax.plot(
                res.t, [s["process"]["rss_kib_total"] / 1024.0 for s in samples], label="rss total"
            ),
        )
    ]
    note = gpu_note(artifact)
    if note is not None:
        figures.append(Figure(RESOURCES, "gpu_memory.png", "GPU memory", None, note))
    else:
        observed = [(x, s) for x, s in zip(res.t, samples, strict=True) if s["gpu"].get("source")]
        figures.append(
            res.draw(
                "gpu_memory.png",
                "GPU memory of tree processes",
                "MiB",
                "gpu_memory_mib",
                lambda ax: ax.plot(
                    [x for x, _ in observed],
                    [s["gpu"]["used_memory_mib_total"] for _, s in observed],
                    label="used by tree",
                ),
            )
        )

    def fds(ax: Any) -> None:
        total = [s["process"]["fd_count_total"] for s in samples]
        ax.plot(res.t, total, label="total", color="black", linewidth=1.5)
        for name in FD_CLASSES:
            ys = [s["process"]["fd_classes_total"].get(name, 0) for s in samples]
            if any(ys):
                ax.plot(res.t, ys, label=name, linewidth=1)

    def processes(ax: Any) -> None:
        ax.step(
            res.t,
            [s["process"]["process_count"] for s in samples],
            where="post",
            label="tree + marker",
        )
        escaped = [sum(1 for p in s["process"]["processes"] if p.get("escaped")) for s in samples]
        if any(escaped):
            ax.step(
                res.t, escaped, where="post", label="escaped (other process group)", color="red"
            )

    figures.append(res.draw("fd_classes.png", "Open FDs by class", "FDs", "fd_count", fds))
    figures.append(
        res.draw("processes.png", "Process count", "processes", "process_count", processes)
    )
    if not any(isinstance(s["progress"].get("last"), dict) for s in samples):
        figures.append(
            Figure(
                RESOURCES,
                "progress.png",
                "Training progress",
                None,
                "no sample saw a progress.jsonl line, so iterations and env steps over time "
                "are unknown",
            )
        )
    else:
        figures.append(
            res.draw(
                "progress.png",
                "Training progress (iteration and env steps)",
                "iteration",
                "",
                _progress_paint(res),
            )
        )
    return figures
