"""``evaluate RUN_DIR|CHECKPOINT``: re-evaluate checkpoints with the fixed protocol.

Prints a table of the metrics by start mode for the final (highest-iteration) point and its 3
worst joints by position error, after an overview of every point when there are several, and
on a clip set every clip's metrics, their mean, median, p90 and worst clip, and every clip's 3
worst joints; ``--json`` prints the ``evaluation.json`` document instead (all 29 joints) and
``--output`` writes it (schema-checked, atomic, rewritten after every point). Exit 0
evaluated; 1 the evaluation failed (physics overflow, say); 2 bad inputs, one ``error:`` line
(docs/evaluation.md).
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from contracts.cli_app import run_app
from contracts.evaluation_text import describe_failures
from contracts.jsonio import dumps_strict
from contracts.names import Backend
from trainer.evaluation.clips import SUMMARY_METRICS
from trainer.evaluation.document import best_point, final_point
from trainer.evaluation.metrics import FAILURE_FRAMES_FIELD, JOINT_ERROR_FIELD, METRIC_NAMES
from trainer.evaluation.protocol import START_MODES
from trainer.sim.backend import BackendFailure

__all__ = ["app", "main", "render"]


class PolicyWeights(enum.StrEnum):
    """Which weights of each checkpoint ``--policy`` evaluates."""

    deployed = "deployed"
    actor = "actor"


EXAMPLE = (
    "Example: evaluate logs/flashsac/g1_motion_tracking/2026-11-29T08-30-05Z_mujoco "
    "--sim mujoco --episodes 32"
)
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

_LABELS = {
    "success_rate": ("success", "{:.1%}"),
    "completed_fraction": ("completed fraction", "{:.3f}"),
    "mpkpe_mm": ("MPKPE, world (mm)", "{:.1f}"),
    "r_mpkpe_mm": ("R-MPKPE, anchor frame (mm)", "{:.1f}"),
    "joint_pos_error_rad": ("joint position error (rad)", "{:.3f}"),
    "anchor_pos_error_mm": ("anchor position error (mm)", "{:.1f}"),
    "anchor_ori_error_rad": ("anchor orientation error (rad)", "{:.3f}"),
    "end_effector_pos_error_mm": ("end-effector error (mm)", "{:.1f}"),
    "joint_vel_error_rad_s": ("joint velocity error (rad/s)", "{:.3f}"),
    "end_effector_ori_error_rad": ("end-effector orientation error (rad)", "{:.3f}"),
    "mean_step_reward": ("mean step reward", "{:.4f}"),
    "mean_episode_steps": ("mean episode steps", "{:.1f}"),
}


def _fmt(name: str, value: Any) -> str:
    return "null" if value is None else _LABELS[name][1].format(value)


def _metrics_table(point: dict[str, Any], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for mode in START_MODES:
        episodes = point["modes"][mode]["episodes"]
        table.add_column(f"{mode} ({episodes})", justify="right")
    for name in METRIC_NAMES:
        table.add_row(_LABELS[name][0], *(_fmt(name, point["modes"][m][name]) for m in START_MODES))
    return table


WORST_JOINTS = 3
"""How many joints the human view names per start mode and per clip (``--json`` has all 29)."""


def _worst_joints(metrics: dict[str, Any]) -> list[str] | None:
    """The :data:`WORST_JOINTS` joints of a mode's metrics with the largest position error, as
    ``"left_wrist_roll 0.412"`` (the ``_joint`` suffix dropped), worst first, ties in model
    order; None when the document has no per-joint errors (written before them)."""
    if JOINT_ERROR_FIELD not in metrics:
        return None
    by_joint = metrics[JOINT_ERROR_FIELD]
    if by_joint is None:
        return ["null"]
    ranked = sorted(
        by_joint.items(), key=lambda item: -float("inf") if item[1] is None else -item[1]
    )
    return [
        f"{name.removesuffix('_joint')} {_fmt('joint_pos_error_rad', value)}"
        for name, value in ranked[:WORST_JOINTS]
    ]


def _joints_table(point: dict[str, Any]) -> Table | None:
    """The final point's worst joints by start mode (None for a document without them)."""
    worst = {mode: _worst_joints(point["modes"][mode]) for mode in START_MODES}
    if all(w is None for w in worst.values()):
        return None
    table = Table(title="worst joints (mean absolute position error, rad)", title_justify="left")
    table.add_column("rank", justify="right")
    for mode in START_MODES:
        table.add_column(f"{mode} ({point['modes'][mode]['episodes']})")
    for rank in range(WORST_JOINTS):
        cells = [w[rank] if w is not None and rank < len(w) else "" for w in worst.values()]
        if any(cells):
            table.add_row(str(rank + 1), *cells)
    return table


def _points_table(doc: dict[str, Any]) -> Table:
    best = doc["best"]["iteration"] if doc["best"] is not None else None
    table = Table(title="points (uniform starts; frame 0 success last)", title_justify="left")
    for column in ("iteration", "env steps", "success", "R-MPKPE mm", "MPKPE mm", "joint rad"):
        table.add_column(column, justify="right")
    table.add_column("frame-0 success", justify="right")
    for point in doc["points"]:
        uniform = point["modes"]["uniform"]
        mark = " (best)" if point["iteration"] == best else ""
        table.add_row(
            f"{point['iteration']:,}{mark}",
            f"{point['env_steps']:,}",
            _fmt("success_rate", uniform["success_rate"]),
            _fmt("r_mpkpe_mm", uniform["r_mpkpe_mm"]),
            _fmt("mpkpe_mm", uniform["mpkpe_mm"]),
            _fmt("joint_pos_error_rad", uniform["joint_pos_error_rad"]),
            _fmt("success_rate", point["modes"]["frame0"]["success_rate"]),
        )
    return table


_CLIP_COLUMNS = (
    ("success", "success_rate"),
    ("fraction", "completed_fraction"),
    ("R-MPKPE mm", "r_mpkpe_mm"),
    ("MPKPE mm", "mpkpe_mm"),
    ("joint rad", "joint_pos_error_rad"),
)


_CLIP_NAME_MAX = 30
"""A longer clip name folds; a shorter one is never cut, so the table fits 80 columns."""


def _compact(title: str) -> Table:
    """A table of clips that fits 80 columns: one space between columns, no frame."""
    return Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 0), pad_edge=False,
        show_edge=False,
    )  # fmt: skip


def _clip_column(table: Table, header: str, names: Sequence[str]) -> int:
    """Add a column of clip names; return its width."""
    width = min(max([len(header), *(len(n) for n in names)]), _CLIP_NAME_MAX)
    table.add_column(header, overflow="fold", width=width)
    return width


def _badness(clip: dict[str, Any]) -> tuple[float, float]:
    """A clip's uniform-start R-MPKPE and MPKPE, null as infinite: the clip tables' order."""
    uniform = clip["modes"]["uniform"]
    return tuple(
        float("inf") if uniform[k] is None else uniform[k] for k in ("r_mpkpe_mm", "mpkpe_mm")
    )


def _clips_table(point: dict[str, Any]) -> Table:
    """Every clip's uniform-start metrics, worst R-MPKPE (then MPKPE) first; the clip names
    whole, the headers of the numbers fold to fit 80 columns."""
    table = _compact("clips (uniform starts, worst R-MPKPE on top)")
    _clip_column(table, "clip", [clip["clip"] for clip in point["clips"]])
    table.add_column("episodes", justify="right")
    for label, _ in _CLIP_COLUMNS:
        table.add_column(label, justify="right")
    for clip in sorted(point["clips"], key=_badness, reverse=True):
        uniform = clip["modes"]["uniform"]
        table.add_row(
            clip["clip"],
            str(uniform["episodes"]),
            *(_fmt(name, uniform[name]) for _, name in _CLIP_COLUMNS),
        )
    return table


def _pack(entries: Sequence[str], width: int) -> str:
    """``entries`` joined by ", ", with a line break instead of the space where a line would
    pass ``width``: an entry is never split between its joint and its number."""
    items = [f"{entry}," for entry in entries[:-1]] + list(entries[-1:])
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 1 + len(item) <= width:
            lines[-1] += f" {item}"
        else:
            lines.append(item)
    return "\n".join(lines)


def _clip_joints_table(point: dict[str, Any], width: int) -> Table | None:
    """Every clip's worst joints (uniform starts), in the clips table's order, within
    ``width`` columns; None for a document without per-joint errors."""
    clips = sorted(point["clips"], key=_badness, reverse=True)
    worst = [_worst_joints(clip["modes"]["uniform"]) for clip in clips]
    if all(w is None for w in worst):
        return None
    table = _compact("worst joints by clip (uniform starts, rad)")
    left = _clip_column(table, "clip", [clip["clip"] for clip in clips]) + 1
    table.add_column("worst joints")
    for clip, entries in zip(clips, worst, strict=True):
        table.add_row(clip["clip"], "" if entries is None else _pack(entries, width - left))
    return table


def _clip_summary_table(summary: dict[str, Any]) -> Table:
    """Mean, median, p90 and worst clip of each summarized metric."""
    table = _compact(f"over {summary['clips']} clips ({summary['mode']} starts)")
    table.add_column("metric")
    for column in ("mean", "median", "p90", "worst"):
        table.add_column(column, justify="right", no_wrap=True)
    _clip_column(table, "worst clip", [summary[name]["worst_clip"] for name in SUMMARY_METRICS])
    for name in SUMMARY_METRICS:
        stats = summary[name]
        table.add_row(
            _LABELS[name][0],
            *(_fmt(name, stats[k]) for k in ("mean", "median", "p90", "worst")),
            stats["worst_clip"],
        )
    return table


FAILING_CLIPS_SHOWN = 6
"""Clips of a clip set whose failures the human view places (most failures first)."""


def failure_rows(point: dict[str, Any], fps: float) -> list[tuple[str, str, str]]:
    """Where ``point``'s failed episodes ended on the clip, as ``(start mode or clip, failed,
    spans)`` rows: by start mode, and on a clip set by clip (uniform starts, most failures
    first); none for a document without failure frames or without failures."""

    def row(label: str, metrics: dict[str, Any]) -> tuple[str, str, str]:
        frames = metrics[FAILURE_FRAMES_FIELD]
        return label, f"{len(frames)} of {metrics['episodes']}", describe_failures(frames, fps)

    modes = [(mode, point["modes"][mode]) for mode in START_MODES]
    rows = [row(mode, m) for mode, m in modes if m.get(FAILURE_FRAMES_FIELD)]
    clips = [(c["clip"], c["modes"]["uniform"]) for c in point.get("clips", [])]
    failing = [(name, m) for name, m in clips if m.get(FAILURE_FRAMES_FIELD)]
    failing.sort(key=lambda item: -len(item[1][FAILURE_FRAMES_FIELD]))
    rows += [row(name, m) for name, m in failing[:FAILING_CLIPS_SHOWN]]
    if len(failing) > FAILING_CLIPS_SHOWN:
        rows.append((f"{len(failing) - FAILING_CLIPS_SHOWN} more clips", "", "see --json"))
    return rows


def _failures_table(point: dict[str, Any], fps: float) -> Table | None:
    rows = failure_rows(point, fps)
    if not rows:
        return None
    table = Table(title="where the failed episodes ended", title_justify="left")
    for column in ("start mode / clip", "failed", "clip time (most failures first)"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    return table


def _network_note(points: Sequence[dict[str, Any]]) -> str:
    """``, the averaged policy`` where the points evaluated one (``network``), else nothing."""
    averaged = sum(p.get("network") == "policy_average" for p in points)
    if averaged == 0:
        return ""
    return ", the averaged policy" + ("" if averaged == len(points) else f" at {averaged} points")


def render(doc: dict[str, Any], console: Console) -> None:
    """The human view of an evaluation document."""
    protocol, motion = doc["protocol"], doc["motion"]
    console.print(
        f"evaluation: {motion['motion_id']} ({motion['num_frames']} frames), "
        f"{protocol['sim_backend']} on {protocol['device']}, mean action, "
        f"{protocol['frame0_episodes']} frame-0 + {protocol['uniform_episodes']} uniform episodes"
        + _network_note(doc["points"])
    )
    if len(doc["points"]) > 1:
        console.print(_points_table(doc))
    final = final_point(doc) or doc["points"][-1]
    best = best_point(doc["points"])
    console.print(
        _metrics_table(final, f"iteration {final['iteration']:,} ({final['checkpoint']})")
    )
    joints = _joints_table(final)
    if joints is not None:
        console.print(joints)
    failures = _failures_table(final, float(motion["fps"]))
    if failures is not None:
        console.print(failures)
    if "clips" in final:
        console.print(_clips_table(final))
        console.print(_clip_summary_table(final["clip_summary"]))
        clip_joints = _clip_joints_table(final, console.width)
        if clip_joints is not None:
            console.print(clip_joints)
    if best is None:
        console.print("no point has a finite uniform success rate and R-MPKPE: the policy diverged")


@app.command(
    help=(
        "Re-evaluate the checkpoints of a run directory (every model_<k>.pt) or one checkpoint "
        "with the fixed protocol of docs/evaluation.md: mean action, no noise, frame-0 and "
        "evenly spaced starts; prints the metrics by start mode. Exit 0 evaluated, 1 the "
        "evaluation failed, 2 bad inputs.\n\n" + EXAMPLE
    )
)
def evaluate(
    target: Annotated[
        Path,
        typer.Argument(
            metavar="RUN_DIR|CHECKPOINT", help="A train run directory or a model_<k>.pt."
        ),
    ],
    motion: Annotated[
        str | None,
        typer.Option(
            "--motion",
            help="Clip to track: synthetic, dance, an asset id or a path (default: the run's).",
        ),
    ] = None,
    sim: Annotated[
        Backend | None, typer.Option("--sim", help="Physics backend (default: the run's).")
    ] = None,
    episodes: Annotated[
        int | None,
        typer.Option("--episodes", min=1, help="Uniform-start episodes per checkpoint."),
    ] = None,
    frame0_episodes: Annotated[
        int | None,
        typer.Option("--frame0-episodes", min=1, help="Frame-0 episodes per checkpoint."),
    ] = None,
    num_envs: Annotated[
        int | None,
        typer.Option(
            "--num-envs", min=1, help="Rows of the evaluation env (default: every episode, capped)."
        ),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the evaluation.json document instead.")
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", help="Also write the document to this file.")
    ] = None,
    policy: Annotated[
        PolicyWeights,
        typer.Option(
            "--policy",
            help="deployed: the averaged policy where the run kept one, else the actor; "
            "actor: the actor's own weights.",
        ),
    ] = PolicyWeights.deployed,
) -> None:
    """Evaluate (see the command help)."""
    from trainer.evaluation.offline import evaluate_offline

    console, progress = Console(), Console(stderr=True)
    doc = evaluate_offline(
        target,
        sim=sim.value if sim is not None else None,
        motion=motion,
        episodes=episodes,
        frame0_episodes=frame0_episodes,
        num_envs=num_envs,
        output=output,
        on_point=lambda p: progress.print(f"evaluated iteration {p['iteration']:,}", style="dim"),
        actor_only=policy is PolicyWeights.actor,
    )
    if json_out:
        sys.stdout.write(dumps_strict(doc))
    else:
        render(doc, console)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``evaluate`` script."""
    return run_app(
        app,
        argv,
        prog="evaluate",
        usage_suffix=" (see evaluate --help)",
        failures={BackendFailure: str, RuntimeError: str},
    )


if __name__ == "__main__":
    sys.exit(main())
