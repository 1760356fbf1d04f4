"""Every cell's soak checked before Ray starts: ``g1-soak --check-only`` on the cell's flags.

``g1-soak --check-only`` runs every pre-launch check of a soak (its flags, the overrides, the
clip, then the trainer's own ``check-config`` on exactly the command it would launch) and
launches nothing. It runs here in this process on each distinct cell, with a throwaway run
directory and artifact path, so a typo in an override fails the campaign in seconds, before
Ray starts or a cell runs. Cells that differ only by seed are checked once (the seed is a
schema-checked integer).
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from contracts.cli_app import EXIT_OK, EXIT_USAGE, run_app
from contracts.errors import HarnessError
from harness.campaign.spec import SEED_KEY, CampaignFileError, CellSpec

Progress = Callable[[str], None]


def seedless_args(cell: CellSpec) -> tuple[str, ...]:
    """The cell's arguments without its ``algo.seed`` override (what the check depends on)."""
    seed = f"{SEED_KEY}={cell.seed}"
    args = list(cell.args)
    if args[-2:] == ["--extra-override", seed]:
        del args[-2:]
    return tuple(args)


def distinct_cells(cells: Sequence[CellSpec]) -> list[CellSpec]:
    """The first cell of each set of cells that differ only by seed, in campaign order."""
    seen: set[tuple[str, ...]] = set()
    distinct = []
    for cell in cells:
        key = seedless_args(cell)
        if key not in seen:
            seen.add(key)
            distinct.append(cell)
    return distinct


def check_cell(cell: CellSpec, scratch: Path) -> tuple[int, list[str], list[str]]:
    """``g1-soak --check-only`` on the cell: ``(exit code, error lines, warning lines)``."""
    from harness.soak.cli import g1_soak_app

    argv = [
        *cell.args,
        "--log-dir", str(scratch / "run"), "--output", str(scratch / "soak.json"),
        "--check-only",
    ]  # fmt: skip
    errors: list[str] = []
    stderr = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
        code = run_app(g1_soak_app, argv, prog="g1-soak", printer=errors.append)
    warnings = [line.strip() for line in stderr.getvalue().splitlines() if line.strip()]
    return code, errors, warnings


def preflight_cells(
    cells: Sequence[CellSpec], source: Path, progress: Progress, *, overridden: bool = False
) -> int:
    """Check every distinct cell; return how many were checked. ``overridden``: the cells
    carry a candidate's ``--override`` list, so a refused value may come from either.

    Raises:
        CampaignFileError: g1-soak or the trainer refused a cell's input (exit 2).
        HarnessError: the check itself could not be made (exit 1).
    """
    distinct = distinct_cells(cells)
    seen_warnings: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="soak-campaign-preflight-") as folder:
        for index, cell in enumerate(distinct):
            code, errors, warnings = check_cell(cell, Path(folder) / str(index))
            for line in warnings:
                if line not in seen_warnings:
                    seen_warnings.add(line)
                    progress(f"preflight {cell.id}: {line}")
            message = " ".join(" ".join(errors).split()) or f"g1-soak exited {code}"
            if code == EXIT_USAGE:
                fix = "; fix the campaign file"
                if overridden:
                    fix += " or the --override list"
                raise CampaignFileError(f"campaign file {source}: cell {cell.id}: {message}{fix}")
            if code != EXIT_OK:
                raise HarnessError(f"cell {cell.id}: the pre-launch check failed: {message}")
    return len(distinct)
