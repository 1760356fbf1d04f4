"""The learner's late-decline diagnostics of one or more runs: a figure, a table, a document.

docs/flashsac.md §diagnosing-a-late-decline names the candidate causes of a final policy
worse than its best and the TensorBoard tags the learner writes for each. This module puts
them where a reader looks: one panel per cause over env steps, under the evaluation's
uniform-start R-MPKPE, with each run's best and final evaluation points marked, so the curve
that moved when the error turned is in view; and a table of every tag's value at the best
point against the final one. Several runs (a baseline and its candidates) overlay, one
colour each. ``soak-report`` draws the one-run figure; ``python -m
harness.report.diagnostics RUN_DIR ...`` the overlay, the table and ``--json``
(``schemas/decline_diagnostics.v1.json``).
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
from contracts.jsonio import dumps_strict, write_json_atomic
from contracts.paths import absolute
from contracts.schemas import validate
from harness.metrics.events import EventFileError, ScalarEvent, read_scalars
from harness.report.figures import TRAINING, Figure, pyplot, steps_axis
from harness.report.rundata import RunData

SCHEMA = "decline_diagnostics.v1.json"
FIGURE_NAME = "decline_diagnostics.png"
CURVE_POINTS = 200
"""Bins per curve: a canonical run logs ~65,000 values per tag, far more than a panel shows."""
NO_TAGS = (
    "holds none of the learner's diagnostics tags (Critic/*, Train/reward_scale, ...): the "
    "trainer that wrote it predates them"
)
WINDOW_FRACTION = 0.02
"""A tag's value at an evaluation point: the mean over the run's last 2 % of env steps up to
that point, so one noisy log line does not stand for the policy's state."""


@dataclass(frozen=True)
class Panel:
    """One candidate cause: its title and the tags that show it."""

    title: str
    tags: tuple[str, ...]
    log_y: bool = False
    twin: bool = False
    """Draw the tags after the first on a right-hand axis (a different magnitude)."""


PANELS: tuple[Panel, ...] = (
    Panel("Critic: Q, TD target, observed return (r / D)",
          ("Critic/q_mean", "Critic/q_target_mean", "Critic/return_estimate")),
    Panel("Critic loss; scaled batch reward (right)",
          ("Loss/critic", "Critic/batch_reward_scaled"), twin=True),
    Panel("Temperature α", ("Policy/temperature",), log_y=True),
    Panel("Entropy (target −13.87 for 29 actions)", ("Loss/entropy",)),
    Panel("Learning rates", ("Train/lr_actor", "Train/lr_critic", "Train/lr_temperature"),
          log_y=True),
    Panel("Replay: sampled age (ticks); fill (right)",
          ("Train/replay_sample_age", "Train/replay_fill"), twin=True),
    Panel("Reward scale D and return moments",
          ("Train/reward_scale", "Train/reward_scale_std", "Train/reward_return_mean")),
    Panel("Actor input BatchNorm drift per cycle",
          ("Policy/obs_bn_mean_shift", "Policy/obs_bn_var_shift"), log_y=True),
)  # fmt: skip
"""The causes in docs/flashsac.md's table, in its order (bf16 is a flag, shown in the table)."""

TABLE_TAGS: tuple[str, ...] = (*(t for p in PANELS for t in p.tags), "Train/bf16")


@dataclass(frozen=True)
class EvalMark:
    """One evaluation point: where it was taken and its uniform-start R-MPKPE."""

    iteration: int
    env_steps: int
    r_mpkpe_mm: float | None


@dataclass(frozen=True)
class DiagnosticRun:
    """What the diagnostics need of one run: its scalars and its evaluation points."""

    label: str
    scalars: Mapping[str, Sequence[ScalarEvent]]
    points: tuple[EvalMark, ...] = ()
    best: EvalMark | None = None
    final: EvalMark | None = None


def _mark(point: Mapping[str, Any]) -> EvalMark:
    return EvalMark(point["iteration"], point["env_steps"], point["modes"]["uniform"]["r_mpkpe_mm"])


def diagnostic_run(
    label: str, scalars: Mapping[str, Sequence[ScalarEvent]], evaluation: Mapping[str, Any] | None
) -> DiagnosticRun:
    """A run from its scalars and its (valid) ``evaluation.json``; without one (``None``, or
    no points) the run has no evaluation marks and its figure and table show the tags alone."""
    if not evaluation or not evaluation.get("points"):
        return DiagnosticRun(label, scalars)
    by_it = {p["iteration"]: _mark(p) for p in evaluation["points"]}
    best = evaluation.get("best")
    return DiagnosticRun(
        label,
        scalars,
        tuple(by_it.values()),
        by_it.get(best["iteration"]) if best else None,
        by_it.get(evaluation["final_iteration"]),
    )


def has_diagnostics(scalars: Mapping[str, Sequence[ScalarEvent]]) -> bool:
    """Whether the learner logged its diagnostics (the losses predate them)."""
    return any(scalars.get(tag) for tag in TABLE_TAGS if not tag.startswith("Loss/"))


def binned(events: Sequence[ScalarEvent], bins: int = CURVE_POINTS) -> list[tuple[int, float]]:
    """The finite values averaged in ``bins`` equal spans of env steps: (span start, mean)."""
    finite = [(e.step, e.value) for e in events if math.isfinite(e.value)]
    if not finite:
        return []
    lo, hi = min(s for s, _ in finite), max(s for s, _ in finite)
    width = max(1, math.ceil((hi - lo + 1) / bins))
    sums: dict[int, list[float]] = {}
    for step, value in finite:
        acc = sums.setdefault(lo + (step - lo) // width * width, [0.0, 0])
        acc[0] += value
        acc[1] += 1
    return [(start, acc[0] / acc[1]) for start, acc in sorted(sums.items())]


def value_at(events: Sequence[ScalarEvent], env_steps: int) -> float | None:
    """The mean finite value over the last :data:`WINDOW_FRACTION` of the run's env steps up
    to ``env_steps`` (the latest value before it when that window is empty); None if none."""
    finite = [e for e in events if math.isfinite(e.value) and e.step <= env_steps]
    if not finite:
        return None
    span = max(e.step for e in events) - min(e.step for e in events)
    window = [e.value for e in finite if e.step >= env_steps - WINDOW_FRACTION * span]
    return sum(window) / len(window) if window else finite[-1].value


def tag_rows(run: DiagnosticRun) -> dict[str, dict[str, float | None]]:
    """Every diagnostics tag the run holds: its value at the best and at the final point."""
    rows = {}
    for tag in TABLE_TAGS:
        events = run.scalars.get(tag)
        if not events:
            continue
        at = {}
        for key, mark in (("at_best", run.best), ("at_final", run.final)):
            at[key] = None if mark is None else value_at(events, mark.env_steps)
        rows[tag] = at
    return rows


# -- the figure -------------------------------------------------------------------------
def _eval_panel(
    ax: Any, runs: Sequence[DiagnosticRun], colours: Sequence[str], scale: float
) -> None:
    for run, colour in zip(runs, colours, strict=True):
        pts = [p for p in run.points if p.r_mpkpe_mm is not None]
        ax.plot([p.env_steps / scale for p in pts], [p.r_mpkpe_mm for p in pts], marker=".",
                color=colour, label=run.label)  # fmt: skip
        for mark, style in ((run.best, "*"), (run.final, "s")):
            if mark is not None and mark.r_mpkpe_mm is not None:
                ax.plot([mark.env_steps / scale], [mark.r_mpkpe_mm], style, color=colour,
                        markersize=12 if style == "*" else 8, fillstyle="none" if style == "s" else "full")  # fmt: skip
    ax.set_title("Evaluation: uniform-start R-MPKPE (mm); ★ best, □ final", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")


def _cause_panel(
    ax: Any, panel: Panel, runs: Sequence[DiagnosticRun], colours: Sequence[str], scale: float
) -> bool:
    drew = False
    right = ax.twinx() if panel.twin else ax
    for run, colour in zip(runs, colours, strict=True):
        for k, (tag, style) in enumerate(zip(panel.tags, ("-", "--", ":"), strict=False)):
            curve = binned(run.scalars.get(tag, ()))
            if panel.log_y:
                curve = [(s, v) for s, v in curve if v > 0]
            if curve:
                drew = True
                (right if k else ax).plot(
                    [s / scale for s, _ in curve], [v for _, v in curve], style, color=colour,
                    linewidth=1, label=tag if run is runs[0] else None,
                )  # fmt: skip
        if run.best is not None:
            ax.axvline(run.best.env_steps / scale, color=colour, linewidth=0.6, alpha=0.5)
    if panel.log_y and drew:
        ax.set_yscale("log")
    ax.set_title(panel.title, fontsize=9)
    if drew:
        handles = [h for a in dict.fromkeys((ax, right)) for h in a.get_legend_handles_labels()[0]]
        right.legend(handles=handles, fontsize=6, loc="best")
    return drew


def draw(runs: Sequence[DiagnosticRun], path: Path) -> Path:
    """The evaluation panel and one panel per cause, every run overlaid; returns ``path``."""
    plt = pyplot()
    colours = [f"C{k % 10}" for k in range(len(runs))]
    cols = 3
    rows = math.ceil((len(PANELS) + 1) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(13, 3.0 * rows), dpi=100, sharex=True)
    flat = list(axes.flat)
    scale, xlabel = steps_axis(
        [float(e.step) for run in runs for tag in TABLE_TAGS for e in run.scalars.get(tag, ())[-1:]]
        + [float(p.env_steps) for run in runs for p in run.points]
    )
    _eval_panel(flat[0], runs, colours, scale)
    for ax, panel in zip(flat[1:], PANELS, strict=False):
        if not _cause_panel(ax, panel, runs, colours, scale):
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes)
    for ax in flat:
        ax.grid(alpha=0.3)
    for ax in flat[-cols:]:
        ax.set_xlabel(f"{xlabel}; thin lines: each run's best point")
    for ax in flat[len(PANELS) + 1 :]:
        ax.set_visible(False)
    fig.tight_layout()  # not save_figure: it would add a second legend to each twin axis
    fig.savefig(path)
    plt.close(fig)
    return path


def diagnostics_figure(data: RunData, out_dir: Path) -> Figure:
    """The one-run figure of ``soak-report``'s Training section (or a note why not)."""
    title = "Learner diagnostics (candidate causes of a late decline)"
    if not has_diagnostics(data.scalars):
        note = (
            data.notes.get("run_dir") or data.notes.get("training") or f"the event file {NO_TAGS}"
        )
        return Figure(TRAINING, FIGURE_NAME, title, None, note)
    run = diagnostic_run(labels([data.run_dir])[0], data.scalars, data.evaluation)
    return Figure(TRAINING, FIGURE_NAME, title, draw([run], out_dir / FIGURE_NAME))


# -- the document and the command -------------------------------------------------------
def _mark_doc(mark: EvalMark | None) -> dict[str, Any] | None:
    if mark is None:
        return None
    return {"iteration": mark.iteration, "env_steps": mark.env_steps, "r_mpkpe_mm": mark.r_mpkpe_mm}


def document(runs: Sequence[tuple[Path, DiagnosticRun]]) -> dict[str, Any]:
    """The ``decline_diagnostics.v1.json`` document of ``runs`` (validated by the caller)."""
    return {
        "tool": "decline_diagnostics",
        "schema_version": 1,
        "curve_points": CURVE_POINTS,
        "window_fraction": WINDOW_FRACTION,
        "runs": [
            {
                "label": run.label,
                "run_dir": str(path),
                "best": _mark_doc(run.best),
                "final": _mark_doc(run.final),
                "tags": tag_rows(run),
                "curves": {
                    tag: [[start, value] for start, value in binned(run.scalars[tag])]
                    for tag in TABLE_TAGS
                    if run.scalars.get(tag)
                },
            }
            for path, run in runs
        ],
    }


def labels(run_dirs: Sequence[Path]) -> list[str]:
    """Short distinct names for ``run_dirs``: a trailing ``run`` (the trainer's --log-dir in a
    learning check or a campaign) and trailing parts all of them share (``attempt-1``) are
    dropped, then as many trailing parts as make the names distinct are kept."""
    parts = [list(p.parts[:-1] if p.name == "run" else p.parts) for p in run_dirs]
    while len(parts) > 1 and all(len(x) > 1 for x in parts) and len({x[-1] for x in parts}) == 1:
        for x in parts:
            x.pop()
    depth = 1
    while True:
        names = ["/".join(x[-depth:]) for x in parts]
        if len(set(names)) == len(names) or depth >= max(len(x) for x in parts):
            return names
        depth += 1


def load_run(run_dir: Path, label: str) -> DiagnosticRun:
    """A run directory's scalars and evaluation points.

    Raises:
        UsageError: ``run_dir`` is not a directory.
        HarnessError: no single readable event file, one without the diagnostics tags, or an
            invalid ``evaluation.json``.
    """
    if not run_dir.is_dir():
        raise UsageError(
            f"run directory {run_dir} does not exist; pass a trainer --log-dir (a soak's run/)"
        )
    events = rundir.event_files(run_dir)
    if len(events) != 1:
        raise HarnessError(
            f"{run_dir} holds {len(events)} {rundir.EVENT_GLOB} files, expected one; pass the "
            "directory of one training run"
        )
    try:
        # a canonical run's file is ~270 MB, about half a minute to read: say so on stderr
        size_mb = events[0].stat().st_size / 1e6
        print(f"reading {events[0]} ({size_mb:,.0f} MB)", file=sys.stderr, flush=True)
        scalars = read_scalars(events[0])
    except (EventFileError, OSError) as err:
        raise HarnessError(f"the event file of {run_dir} is unreadable: {err}") from err
    if not has_diagnostics(scalars):  # before the next run's file is read
        raise HarnessError(f"{run_dir} {NO_TAGS}; train it again on this code")
    evaluation = None
    if (run_dir / rundir.EVALUATION).exists():
        try:
            evaluation = rundir.read(run_dir / rundir.EVALUATION)
        except rundir.DocumentError as err:
            raise HarnessError(f"{err}; re-run `evaluate` on the run directory") from err
    return diagnostic_run(label, scalars, evaluation)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _change(row: Mapping[str, float | None]) -> str:
    best, final = row["at_best"], row["at_final"]
    if best is None or final is None or best == 0:
        return "-"
    return f"{(final - best) / abs(best):+.1%}"


def render(doc: Mapping[str, Any]) -> None:
    """One table per run: each tag at the best and the final evaluation point."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for run in doc["runs"]:
        best, final = run["best"], run["final"]
        where = "no evaluation points"
        if best and final:
            where = (
                f"best at iteration {best['iteration']:,} ({_fmt(best['r_mpkpe_mm'])} mm), "
                f"final at {final['iteration']:,} ({_fmt(final['r_mpkpe_mm'])} mm)"
            )
        table = Table(title=f"{run['label']}: {where}", title_justify="left")
        for name in ("tag", "at best", "at final", "change"):
            table.add_column(name, justify="left" if name == "tag" else "right")
        for tag, row in run["tags"].items():
            table.add_row(tag, _fmt(row["at_best"]), _fmt(row["at_final"]), _change(row))
        console.print(table)


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command(
    epilog=(
        "\b\nExamples:\n"
        "  python -m harness.report.diagnostics lc/A/run lc/A+h8192/run --out d.png\n"
        "  python -m harness.report.diagnostics artifacts/run --json > diagnostics.json\n\n"
        "The panels and what each shows: docs/flashsac.md (Diagnosing a late decline). Exit 0 "
        "drawn, 1 an unreadable run, 2 usage."
    )
)
def main(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="Training run directories (a trainer --log-dir).")
    ],
    out: Annotated[
        Path, typer.Option("--out", help="The figure (PNG), every run overlaid.")
    ] = Path(FIGURE_NAME),
    output: Annotated[
        Path | None, typer.Option("--output", help="Also write the JSON document here.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print only the JSON document.")] = False,
) -> None:
    """Draw the decline diagnostics of runs side by side; table each tag at best vs final."""
    out = absolute(out)
    if out.suffix.lower() != ".png":
        raise UsageError(f"--out {out} must end in .png (the figure is a PNG)")
    paths = [absolute(p) for p in run_dirs]
    runs = [(p, load_run(p, name)) for p, name in zip(paths, labels(paths), strict=True)]
    doc = document(runs)
    violations = validate(doc, SCHEMA)
    if violations:
        raise HarnessError(f"the diagnostics document violates {SCHEMA}: {violations[0]}")
    draw([run for _, run in runs], out)
    if output is not None:
        write_json_atomic(absolute(output), doc)
    if json_out:
        typer.echo(dumps_strict(doc))
        return
    render(doc)
    print(out)


def cli(argv: Sequence[str] | None = None) -> int:
    return run_app(app, argv, prog="python -m harness.report.diagnostics")


if __name__ == "__main__":
    cli()
