"""``python -m harness.scaling``: end to end and beside-the-env figures per env count and
sharing mode, one table at the end (docs/benchmarks.md "Scaling sweep").

``run`` measures, in order: the env alone at every size (``trainer.bench.env_throughput``);
then per sharing mode (null first; ``cumps start`` before the MPS cells, ``cumps stop``
after) and size: the learner profile beside an env of that size and a ``g1-soak``. Every
step runs from the repository root as ``<python> -m <module>``, continuing past a failing
one; the document ``<out>/scaling.json`` is rewritten (atomically, validated) after each
step, so ``table <out>`` shows a sweep still running. Exit 0 iff every step passed.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from contracts.cli_app import EXIT_FAILED, EXIT_OK, run_app
from contracts.errors import UsageError
from contracts.jsonio import dumps_strict, load_strict
from contracts.schemas import validate
from harness.scaling import plan
from harness.scaling.plan import Part, Sweep
from harness.scaling.run import DOC_NAME, LOG_NAME, SCHEMA, STEPS, SweepRun
from harness.scaling.table import render
from harness.step_runner import Runner, repo_root, resolve_out


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    """``kill`` of a background sweep: stop the running step's group, say so, exit 143."""
    raise SystemExit(128 + signum)


# -- the command line ---------------------------------------------------------------------
def read_document(out: Path) -> dict[str, Any]:
    path = out / DOC_NAME if out.is_dir() else out
    try:
        doc = load_strict(path)
    except (OSError, ValueError) as err:
        raise UsageError(
            f"{path}: cannot read a sweep document ({err}); pass a sweep's --out"
        ) from None
    violations = validate(doc, SCHEMA)
    if violations:
        raise UsageError(f"{path} is not a {SCHEMA} document: {violations[0]}")
    return doc


app = typer.Typer(
    help="End to end and beside-the-env figures per env count and sharing mode.",
    epilog=(
        "\b\nExamples:\n"
        "  python -m harness.scaling run --out /tmp/scaling\n"
        "  python -m harness.scaling table /tmp/scaling --format github\n"
        '\nThe steps, the columns and the exit codes: docs/benchmarks.md "Scaling sweep".'
    ),
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
)
Fmt = Annotated[str, typer.Option("--format", help="Table style: simple, or github (Markdown).")]
Json = Annotated[bool, typer.Option("--json", help="Print the document instead of the table.")]


def _check_format(fmt: str) -> None:
    if fmt not in ("simple", "github"):
        raise UsageError(f"--format {fmt!r} must be simple or github")


def _emit(doc: dict[str, Any], json_output: bool, fmt: str) -> None:
    sys.stdout.write(dumps_strict(doc) if json_output else render(doc, fmt))


@app.command(
    "run",
    epilog=(
        "\b\nExamples:\n"
        "  python -m harness.scaling run --out /tmp/scaling\n"
        "  python -m harness.scaling run --num-envs 2048,4096 --skip soak\n"
        "\nA whole sweep takes longer than one 10-minute device call: start it with\n"
        "setsid in the background and read it with `table`, finished or not."
    ),
)
def run_command(
    num_envs: Annotated[str, typer.Option(help="Comma list of env counts.")] = "1024,2048,4096",
    sharing: Annotated[str, typer.Option(help="Comma list of null, mps.")] = "null,mps",
    iterations: Annotated[int, typer.Option(min=1, help="Each soak's iterations.")] = 1500,
    replay_rows: Annotated[
        int, typer.Option(min=1, help="Replay capacity held at every size (rows).")
    ] = plan.OWNER_REPLAY_ROWS,
    sim: Annotated[str, typer.Option(help="mjwarp (GPU) or mujoco (CPU).")] = "mjwarp",
    override: Annotated[
        list[str] | None,
        typer.Option(help="algo.KEY=VALUE for the profile and the soak; repeatable."),
    ] = None,
    cycles: Annotated[int, typer.Option(min=1, help="Profile cycles timed per cell.")] = 200,
    device: Annotated[
        str,
        typer.Option(help="Torch device of the profile and the env benchmark (default: theirs)."),
    ] = "",
    skip: Annotated[
        list[Part] | None, typer.Option("--skip", help="Leave a part out (repeatable).")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output directory (default: $OUT if set, else a new temp dir).", show_default=False
        ),
    ] = None,
    fmt: Fmt = "simple",
    json_output: Json = False,
) -> None:
    """Run the sweep, print one table last; exit 1 if any step failed."""
    if sim not in ("mjwarp", "mujoco"):
        raise UsageError(f"--sim {sim!r} must be mjwarp or mujoco")
    sizes = plan.parse_sizes(num_envs)
    plan.check_replay_rows(replay_rows, sizes)
    sweep = Sweep(
        sizes, plan.parse_sharing(sharing, sim), iterations, replay_rows, sim,
        plan.check_sweep_overrides(override or []), cycles, device,
    )  # fmt: skip
    _check_format(fmt)
    plan.preflight(sweep, Path(tempfile.gettempdir()) / f"scaling-preflight-{os.getpid()}" / "run")
    out = resolve_out(out, "scaling-", (DOC_NAME, LOG_NAME, STEPS))

    def note(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    with open(out / LOG_NAME, "w", encoding="utf-8") as log:
        runner = Runner(log, repo_root(), note)
        doc = SweepRun(sweep, out, runner, sys.executable, set(skip or [])).run()
    _emit(doc, json_output, fmt)
    raise typer.Exit(EXIT_FAILED if doc["status"] == "failed" else EXIT_OK)


@app.command(
    "table",
    epilog=(
        "\b\nExamples:\n"
        "  python -m harness.scaling table /tmp/scaling\n"
        "  python -m harness.scaling table /tmp/scaling/scaling.json --json"
    ),
)
def table_command(
    out: Annotated[Path, typer.Argument(help="A sweep's --out (or its scaling.json).")],
    fmt: Fmt = "simple",
    json_output: Json = False,
) -> None:
    """Print a sweep's table, finished or still running; exit 1 if a step failed."""
    _check_format(fmt)
    doc = read_document(out)
    _emit(doc, json_output, fmt)
    raise typer.Exit(EXIT_FAILED if doc["status"] == "failed" else EXIT_OK)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: exit 0 passed (or running), 1 a step failed, 2 usage."""
    return run_app(app, argv, prog="python -m harness.scaling", failures={RuntimeError: str})


if __name__ == "__main__":
    sys.exit(main())
