"""``support-matrix [--json] [--write] [--check]``: print or maintain the support matrix (docs/contracts.md §support-matrix).

Without flags it prints the evidence level of every algo × task × sim owner, the platform
facts per backend and the GPU topology modes as tables; ``--json`` prints the same as one strict-JSON object. ``--write``
rewrites the generated block of ``docs/support_matrix.md``; ``--check`` exits 1 when the
committed block differs from what the generator produces now (CI runs it through a test).
Exit codes: 0 printed/written/up to date, 1 stale block or malformed evidence, 2 bad flags.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from tabulate import tabulate

from contracts.cli_app import run_app
from contracts.errors import UsageError
from contracts.jsonio import dumps_strict
from contracts.paths import absolute
from harness.generated_block import GeneratedPage
from harness.support.matrix import (
    DOC_PAGE,
    LEVELS,
    SupportMatrix,
    build_matrix,
    committed_block,
    render_block,
    replace_block,
    topology_modes,
)

__all__ = ["REPO_ROOT", "app", "main"]

REPO_ROOT = Path(__file__).resolve().parents[2]

_PAGE = GeneratedPage(
    shown=str(DOC_PAGE),
    what="generated block",
    stale=f"{DOC_PAGE} generated block is stale (or its markers are missing); "
    "run support-matrix --write and commit the result",
    committed=committed_block,
    replace=replace_block,
)

app = typer.Typer(name="support-matrix", add_completion=False, pretty_exceptions_enable=False)


def render_tables(matrix: SupportMatrix) -> str:
    """The two human tables (levels, platform facts)."""
    levels = tabulate(
        [[r.algo, r.task, r.sim, LEVELS[r.level], r.level, r.missing or "-"] for r in matrix.rows],
        headers=["algo", "task", "sim", "level", "value", "next level needs"],
        tablefmt="github",
    )
    facts = tabulate(
        [
            [
                f["backend"],
                f["execution"],
                f["device"],
                f["reset_randomization"],
                f["diagnostics_available"],
            ]
            for f in matrix.platform_facts
        ],
        headers=["backend", "execution", "device", "reset randomization", "diagnostics"],
        tablefmt="github",
    )
    topology = tabulate(
        [[m["mode"], m["selector"], m["state"]] for m in topology_modes()],
        headers=["topology mode", "selector", "state"],
        tablefmt="github",
    )
    return f"{levels}\n\n{facts}\n\n{topology}\n"


@app.command(
    epilog=(
        "\b\nExamples:\n"
        "  support-matrix\n"
        "  support-matrix --json\n"
        "  support-matrix --check\n\n"
        f"Levels and evidence: {DOC_PAGE}. Exit 0 ok, 1 stale or malformed evidence, 2 usage."
    )
)
def support_matrix(
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one strict-JSON object.")
    ] = False,
    write: Annotated[
        bool, typer.Option("--write", help=f"Rewrite the generated block of {DOC_PAGE}.")
    ] = False,
    check: Annotated[
        bool,
        typer.Option("--check", help=f"Exit 1 when the committed block of {DOC_PAGE} is stale."),
    ] = False,
    root: Annotated[
        Path, typer.Option("--root", hidden=True, help="Repository root (tests).")
    ] = REPO_ROOT,
) -> None:
    """Evidence level of every algo/task/sim owner, platform facts, GPU topology modes."""
    root = absolute(root)
    if write and check:
        raise UsageError("--write and --check exclude each other; run --write, then --check")
    matrix = build_matrix(root)
    if write or check:
        _PAGE.sync(root / DOC_PAGE, render_block(matrix), check=check)
    if json_output:
        sys.stdout.write(dumps_strict(matrix.to_json()))
    elif not (write or check):
        sys.stdout.write(render_tables(matrix))


def main(argv: list[str] | None = None) -> int:
    """Console entry point: ``error: ...`` on stderr; exit 0 ok, 1 stale/malformed, 2 usage."""
    return run_app(app, argv, prog="support-matrix")


if __name__ == "__main__":
    sys.exit(main())
