"""``g1-motion``: inspect, convert and list motion clips (docs/assets.md, "Importing clips").

* ``inspect FILE``: the detected convention, frames, rates, duration, the check table, the
  forward-kinematics residual; ``--json`` (``schemas/motion_inspect.v1.json``), ``--png``.
* ``convert IN OUT``: write IN in our NPZ contract, with provenance; ``--strict`` writes
  nothing when a check fails.
* ``list``: the clips ``--motion`` / ``env.commands.motion.motion_file`` can name.
* ``import LIBRARY``: every clip of a library folder (or a subset) checked in one table and,
  with ``--out``, written as one clip set that keeps the library's attribution.

Exit codes: 0 done; 1 a check failed under ``--strict`` or a write failed; 2 a bad input file
or bad usage (one ``error:`` line naming the key and the fix).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from contracts.cli_app import run_app
from contracts.errors import UsageError
from contracts.jsonio import dumps_strict
from contracts.schemas import validate
from trainer.assets import AssetError, cache_root
from trainer.motion_import.checks import BOUNDS, Check
from trainer.motion_import.convert import convert_file
from trainer.motion_import.library import Library, LibraryClip, convert_clip, read_library
from trainer.motion_import.repair import REPAIRS, parse_repairs
from trainer.motion_import.report import INSPECT_SCHEMA, Report, build_report, list_clips
from trainer.motion_import.resolve import (
    cached_conversion,
    library_clip_path,
    library_extra,
    write_clip_set,
)
from trainer.task.motion.clip import MotionError, ResolvedMotion
from trainer.task.motion.synthetic import write_npz_atomic

__all__ = ["app", "main"]

app = typer.Typer(
    name="g1-motion",
    help=(
        "Inspect, convert and list G1 motion clips. Clips in the mjlab/BeyondMimic, "
        "root-included-with-names, retargeted-CSV and our own conventions are detected and "
        "mapped by name. Example: g1-motion inspect clip.csv --png clip.png"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class QuatOrderChoice(str, Enum):
    auto = "auto"
    wxyz = "wxyz"
    xyzw = "xyzw"


FpsIn = Annotated[
    float | None,
    typer.Option("--fps-in", help="Source frame rate where the file has none (CSV default 30)."),
]
QuatOrderOpt = Annotated[
    QuatOrderChoice,
    typer.Option("--quat-order", help="Root quaternion component order; auto detects it."),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one strict-JSON object instead.")]
RepairOpt = Annotated[
    str | None,
    typer.Option(
        "--repair",
        help="Comma list of explicit repairs: unwrap, despike, blend-steps (recorded in the file).",
    ),
]
StrictFlag = Annotated[
    bool, typer.Option("--strict", help="Exit 1 when a check fails (convert writes nothing).")
]


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _summary_table(report: Report) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")  # a long path folds, never cut
    for key, value in report.summary_rows():
        table.add_row(key, value)
    return table


def _check_table(checks: list[Check]) -> Table:
    """One row per check, 80 columns wide: names whole, the ``where`` detail (with the
    ``--repair`` that removes named jumps) wraps, never cut."""
    table = Table(
        title="checks", box=box.SIMPLE_HEAD, padding=(0, 0), pad_edge=False, show_edge=False
    )
    for col in ("check", "value", "bound", "unit", "result"):
        table.add_column(
            col, justify="right" if col in ("value", "bound") else "left", no_wrap=True
        )
    table.add_column("where", overflow="fold")
    for c in checks:
        sign = "≤" if BOUNDS[c.name].kind == "max" else "≥"
        result = "ok" if c.passed else "FAIL"
        table.add_row(c.name, _fmt(c.value), f"{sign} {_fmt(c.limit)}", c.unit, result, c.detail)
    return table


_RESIDUAL_ROWS = 8


def _residual_table(report: Report) -> Table | None:
    """The worst bodies when a residual check failed: which part of the mapping is off."""
    failed = any(c.name.startswith("fk_residual") and not c.passed for c in report.checks)
    if not failed or not report.conversion.residual:
        return None
    table = Table(
        title=f"largest forward-kinematics residuals (of {len(report.conversion.residual)} bodies)"
    )
    for col in ("body", "position (m)", "orientation (rad)"):
        table.add_column(col)
    worst = sorted(report.conversion.residual, key=lambda r: r.pos_m, reverse=True)
    for r in worst[:_RESIDUAL_ROWS]:
        table.add_row(r.body, _fmt(r.pos_m), _fmt(r.ori_rad))
    return table


def _print_report(report: Report, console: Console) -> None:
    console.print(_summary_table(report))
    console.print(_check_table(report.checks))
    residual = _residual_table(report)
    if residual is not None:
        console.print(residual)
    over = [r for r in report.ranges if r.excess > 0.0]
    if over:
        table = Table(title="joints beyond their XML range")
        for col in ("joint", "clip min", "clip max", "lower", "upper", "excess (rad)"):
            table.add_column(col)
        for r in over:
            table.add_row(
                r.joint, *(_fmt(v) for v in (r.clip_min, r.clip_max, r.lower, r.upper, r.excess))
            )
        console.print(table)


def _emit_json(doc: dict) -> None:
    violations = validate(doc, INSPECT_SCHEMA)
    if violations:  # our own output breaking its schema is a bug, not a user error
        raise AssertionError(f"inspect JSON breaks {INSPECT_SCHEMA}: {violations[0]}")
    sys.stdout.write(dumps_strict(doc) + "\n")


def _strict_failure(report: Report) -> str:
    failed = [c for c in report.checks if not c.passed]
    parts = [
        f"{c.name} = {_fmt(c.value)} {c.unit} (bound {_fmt(c.limit)}; {c.detail})" for c in failed
    ]
    return f"{len(failed)} check(s) fail under --strict: " + "; ".join(parts)


@contextmanager
def _input_errors() -> Iterator[None]:
    """A bad input file is an input error (exit 2), like a bad flag."""
    try:
        yield
    except (MotionError, ValueError) as err:
        raise UsageError(str(err)) from err


@app.command()
def inspect(
    file: Annotated[Path, typer.Argument(help="A clip: .npz or .csv, any supported convention.")],
    fps_in: FpsIn = None,
    quat_order: QuatOrderOpt = QuatOrderChoice.auto,
    png: Annotated[
        Path | None, typer.Option("--png", help="Also draw root height and joint ranges here.")
    ] = None,
    json_out: JsonFlag = False,
    strict: StrictFlag = False,
    repair: RepairOpt = None,
) -> None:
    """Report a clip's convention, frames, rate, duration and checks.

    Example: g1-motion inspect lafan_walk.csv --fps-in 30 --png walk.png
    """
    with _input_errors():
        repairs = parse_repairs(repair)
        conversion = convert_file(file, fps_in=fps_in, quat_order=quat_order.value, repairs=repairs)
        report = build_report(conversion)
    if png is not None:
        from trainer.motion_import.plot import render_png

        render_png(report, png)
    if json_out:
        _emit_json(report.as_json())
    else:
        console = Console()
        _print_report(report, console)
        if png is not None:
            console.print(f"figure: {png}")
    if strict and not report.passed:
        raise MotionCheckFailed(_strict_failure(report))


@app.command()
def convert(
    src: Annotated[Path, typer.Argument(metavar="IN", help="The clip to convert.")],
    out: Annotated[Path, typer.Argument(metavar="OUT", help="The .npz to write.")],
    fps_in: FpsIn = None,
    quat_order: QuatOrderOpt = QuatOrderChoice.auto,
    strict: StrictFlag = False,
    force: Annotated[bool, typer.Option("--force", help="Replace OUT if it exists.")] = False,
    json_out: JsonFlag = False,
    repair: RepairOpt = None,
) -> None:
    """Convert a clip to our NPZ contract at 50 fps, recording its provenance.

    Example: g1-motion convert lafan_walk.csv walk.npz --fps-in 30 --strict
    """
    if out.suffix.lower() != ".npz":
        raise UsageError(f"OUT {out} must end in .npz (the converted clip is an NPZ)")
    if out.exists() and not force:
        raise UsageError(f"OUT {out} already exists; pass --force to replace it")
    if out.resolve() == src.resolve():
        raise UsageError(f"OUT {out} is IN; write the converted clip to another file")
    with _input_errors():
        repairs = parse_repairs(repair)
        conversion = convert_file(src, fps_in=fps_in, quat_order=quat_order.value, repairs=repairs)
        if conversion.source.clip_ends:
            raise MotionError(
                f"motion file '{src}': key 'clip_ends' marks a clip set of {len(conversion.source.clip_ends)} clips; convert the clips one by one"
            )
        report = build_report(conversion)
    if strict and not report.passed:
        if json_out:
            _emit_json(report.as_json())
        raise MotionCheckFailed(_strict_failure(report) + "; nothing written")
    write_npz_atomic(out, conversion.arrays)
    if json_out:
        _emit_json({**report.as_json(), "output": str(out)})
        return
    console = Console()
    _print_report(report, console)
    console.print(f"wrote {out} ({conversion.num_frames} frames at 50 fps)")


@app.command(name="list")
def list_command(json_out: JsonFlag = False) -> None:
    """List the clips --motion (env.commands.motion.motion_file) can name.

    Any path works too, as does a comma list or a directory of clips (one clip set).
    Example: g1-motion list --json
    """
    rows = list_clips()
    if json_out:
        sys.stdout.write(dumps_strict([row.__dict__ for row in rows]) + "\n")
        return
    table = Table(title="clips --motion can name")
    for col in ("name", "kind", "frames", "note"):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(row.name, row.kind, "-" if row.frames is None else str(row.frames), row.note)
    Console().print(table)


LIBRARY_SCHEMA = "motion_library.v1.json"


def _library_row(clip: LibraryClip, report: Report) -> dict:
    conv = report.conversion
    kinds = Counter(d.kind for d in conv.discontinuities)
    return {
        "clip": clip.name,
        "path": clip.relpath,
        "category": clip.category,
        "seconds": (conv.num_frames - 1) / float(conv.arrays["fps"]),
        "frames": conv.num_frames,
        "passed": report.passed,
        "failed_checks": [c.name for c in report.checks if not c.passed],
        "discontinuities": {k: kinds.get(k, 0) for k in ("wrap", "spike", "step")},
        "repaired": len(conv.repaired),
        "checks": [c.as_dict() for c in report.checks],
    }


_CLIP_COLUMN_MAX = 30
"""A longer clip name folds, so the failed checks keep room at 80 columns."""


def _library_table(rows: list[dict], title: str) -> Table:
    """One row per clip, 80 columns wide: the failed checks by their short labels, which
    :func:`_failed_legend` names below the table."""
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 0), pad_edge=False, show_edge=False)
    longest = max((len(r["clip"]) for r in rows), default=0)
    table.add_column("clip", overflow="fold", width=min(max(longest, 4), _CLIP_COLUMN_MAX))
    table.add_column("kind", no_wrap=True)
    for col in ("s", "steps", "spikes", "wraps", "fixed"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("failed")
    for r in rows:
        d = r["discontinuities"]
        failed = ", ".join(BOUNDS[name].label for name in r["failed_checks"]) or "ok"
        table.add_row(
            r["clip"], r["category"], f"{r['seconds']:.1f}", str(d["step"]), str(d["spike"]),
            str(d["wrap"]), str(r["repaired"]), failed,
        )  # fmt: skip
    return table


def _failed_legend(rows: list[dict], repairs: tuple[str, ...]) -> list[str]:
    """Each failed check's label, name, bound and clip count; for named jumps, the repairs
    not yet asked for that remove them."""
    counts = Counter(name for r in rows for name in r["failed_checks"])
    if not counts:
        return []
    kinds = {kind for r in rows for kind, n in r["discontinuities"].items() if n}
    fixes = ",".join(n for n, kind in REPAIRS.items() if kind in kinds and n not in repairs)
    width = max(len(BOUNDS[name].label) for name in counts)
    lines = ["failed checks (bounds in docs/assets.md; details: g1-motion inspect FILE):"]
    for name, bound in BOUNDS.items():
        if name not in counts:
            continue
        n = counts[name]
        fails_when = f"{'>' if bound.kind == 'max' else '<'} {bound.limit:g}"
        if name == "joint_discontinuities":  # a count: the jumps left after the repairs
            line = f"{name} {fails_when}: {n} clip{'s' if n > 1 else ''}"
            line += f" (--repair {fixes})" if fixes else " (left after the repairs)"
        else:
            line = f"{name} {fails_when} {bound.unit}: {n} clip{'s' if n > 1 else ''}"
        lines.append(f"  {bound.label:<{width}}  {line}")
    return lines


def _convert_library(
    library: Library, repairs: tuple[str, ...], cache: Path
) -> tuple[list[dict], list[ResolvedMotion]]:
    """Convert and check every clip (progress on stderr); the table rows and cached files."""
    rows: list[dict] = []
    resolved: list[ResolvedMotion] = []
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("importing", total=len(library.clips))
        for clip in library.clips:
            progress.update(task, description=f"importing {clip.name}")
            conversion, sha = convert_clip(clip, repairs)
            rows.append(_library_row(clip, build_report(conversion)))
            target = library_clip_path(clip, sha, repairs, cache)
            resolved.append(cached_conversion(target, conversion.arrays))
            progress.advance(task)
    return rows, resolved


@app.command(name="import")
def import_command(
    library_dir: Annotated[
        Path,
        typer.Argument(metavar="LIBRARY", help="A folder of clips, with or without manifest.json."),
    ],
    clips: Annotated[
        list[str] | None,
        typer.Option("--clips", help="Glob over clip names or paths (repeatable); default all."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the selected clips as one clip-set .npz.")
    ] = None,
    repair: RepairOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
    json_out: JsonFlag = False,
    strict: StrictFlag = False,
) -> None:
    """Check every clip of a motion library in one table; with --out, write one clip set.

    Rates and quaternion order come from the library's manifest.json (or are detected); the
    clip set keeps the library's attribution and the repairs asked for.
    Example: g1-motion import ../shared/motions/g1-moves --repair despike,blend-steps --out moves.npz
    """
    if out is not None:
        if out.suffix.lower() != ".npz":
            raise UsageError(f"--out {out} must end in .npz (the clip set is an NPZ)")
        if out.exists() and not force:
            raise UsageError(f"--out {out} already exists; pass --force to replace it")
    with _input_errors():
        repairs = parse_repairs(repair)
        library = read_library(library_dir).select(tuple(clips or ()))
        rows, resolved = _convert_library(library, repairs, cache_root())
    doc = {
        "schema_version": 1,
        "library": str(library.root),
        "attribution": library.attribution or None,
        "repairs": list(repairs),
        "clips": rows,
        "passed": all(r["passed"] for r in rows),
        "output": None,
    }
    failing = [r["clip"] for r in rows if not r["passed"]]
    if strict and failing:
        if json_out:
            _emit_library_json(doc)
        raise MotionCheckFailed(
            f"{len(failing)} of {len(rows)} clips fail a check under --strict ({', '.join(failing[:5])}"
            f"{' ...' if len(failing) > 5 else ''}); nothing written"
        )
    if out is not None:
        names = [c.name for c in library.clips]
        write_clip_set(resolved, names, out, library_extra(library, repairs))
        doc["output"] = str(out)
    if json_out:
        _emit_library_json(doc)
        return
    console = Console()
    seconds = sum(r["seconds"] for r in rows)
    console.print(
        _library_table(rows, f"{library.root}: {len(rows)} clips, {seconds / 60:.1f} min")
    )
    console.print(
        f"{len(rows) - len(failing)} of {len(rows)} clips pass every check; repairs: {', '.join(repairs) or 'none'}"
    )
    for line in _failed_legend(rows, repairs):
        console.print(line, markup=False, highlight=False)
    if library.attribution:
        console.print(f"attribution: {library.attribution}")
    if out is not None:
        console.print(f"wrote {out} ({len(rows)} clips); train on it with --motion {out}")


def _emit_library_json(doc: dict) -> None:
    violations = validate(doc, LIBRARY_SCHEMA)
    if violations:
        raise AssertionError(f"import JSON breaks {LIBRARY_SCHEMA}: {violations[0]}")
    sys.stdout.write(dumps_strict(doc) + "\n")


class MotionCheckFailed(Exception):
    """A check failed under ``--strict`` (exit 1)."""


def main(argv: list[str] | None = None) -> int:
    """Console entry point: exit 0 done, 1 check or write failed, 2 bad input or usage."""
    return run_app(
        app,
        argv,
        prog="g1-motion",
        failures={
            MotionCheckFailed: str,
            AssetError: str,
            OSError: lambda err: f"cannot write the output: {err}; pick a writable OUT/--png path",
        },
    )


if __name__ == "__main__":
    sys.exit(main())
