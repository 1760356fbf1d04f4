"""``soak-campaign run CAMPAIGN.yaml`` and ``soak-campaign status DIR`` (docs/campaign.md).

``run`` validates the campaign file (exit 2 with one line naming the key), then runs every
cell as a Ray task (locally, or on the cluster at ``--address``) and writes ``campaign.json``
and ``index.html`` after every attempt; stdout gets the final table (or ``campaign.json`` with
``--json``), stderr one line per finished attempt. Exit 0 iff every cell passed, 1 otherwise
(failed, lost, error or interrupted cells, or a runtime failure), 2 for usage errors.
``status`` reads ``campaign.json`` only (no Ray): exit 0 when it is readable.
``regression`` runs the learning regression check, a campaign judged over seeds
(``harness/campaign/specs/regression.yaml``), as it is (the baseline) or with a candidate's
``--override`` entries. Before Ray starts, every cell's soak is checked with
``g1-soak --check-only`` (the trainer's config check included); ``--dry-run`` stops there.
``compare`` sets a candidate's finished check beside the baseline's (no Ray): exit 0 iff the
candidate passed, 1 if not, 2 when the two are not comparable.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.live import Live

from contracts.cli_app import run_app
from contracts.errors import UsageError
from contracts.jsonio import dumps_strict
from harness.campaign.spec import DEFAULT_LIBRARY_ROOT, CampaignSpec

_RUN_EXAMPLE = (
    "\b\nExamples:\n"
    "  soak-campaign run nightly.yaml\n"
    "  soak-campaign run nightly.yaml --dry-run\n"
    "  soak-campaign run nightly.yaml --address head-node:6379\n"
    "  soak-campaign run nightly.yaml --resume\n\n"
    "The campaign file and every cell's g1-soak flags are checked before Ray starts "
    "(exit 2). Campaign files, tables and faults: docs/campaign.md."
)
_STATUS_EXAMPLE = (
    "\b\nExamples:\n"
    "  soak-campaign status artifacts/campaigns/nightly\n"
    "  soak-campaign status artifacts/campaigns/nightly --watch --wide\n"
    "  soak-campaign status artifacts/campaigns/nightly --json"
)
_REGRESSION_EXAMPLE = (
    "\b\nExamples:\n"
    "  soak-campaign regression\n"
    "  soak-campaign regression --dry-run --library-root /data/g1-moves\n"
    "  soak-campaign regression --directory artifacts/campaigns/reg-1 --resume\n"
    "  soak-campaign regression --override algo.lr_end=3e-5\n\n"
    "2 library clips x 3 seeds, about 25 minutes of one GPU: docs/campaign.md."
)
_COMPARE_EXAMPLE = (
    "\b\nExamples:\n"
    "  soak-campaign compare artifacts/campaigns/base artifacts/campaigns/cand\n"
    "  soak-campaign compare base-dir cand-dir --json\n\n"
    "Gating a change to the algorithm or its defaults: docs/campaign.md."
)
REGRESSION_SPEC = Path(__file__).parent / "specs" / "regression.yaml"
REGRESSION_DIR = Path("artifacts/campaigns")

app = typer.Typer(
    name="soak-campaign",
    help="Run a matrix of g1-soak runs on Ray (one cell per Ray task) and table the results.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json", help="Print campaign.json (the plan with --dry-run) instead of the table."
    ),
]
WideOpt = Annotated[
    bool, typer.Option("--wide", help="Every column (host, GPU, residuals); wider than 80.")
]
LibraryOpt = Annotated[
    Path,
    typer.Option(
        "--library-root",
        help="The motion library that library:<path> motions name (relative to the CWD).",
    ),
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run", help="Check the file and preflight every cell, print the plan; start nothing."
    ),
]
AddressOpt = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="An existing Ray cluster (HOST:PORT or auto); default: start Ray here.",
    ),
]
ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Continue the campaign in its directory: keep verdicts, rerun the rest.",
    ),
]
NumCpusOpt = Annotated[
    int | None,
    typer.Option("--num-cpus", help="CPUs of the local Ray instance (default: all)."),
]


def _progress(line: str) -> None:
    sys.stderr.write(f"soak-campaign: {line}\n")
    sys.stderr.flush()


def _check_ray_options(address: str | None, num_cpus: int | None) -> None:
    if address is not None and num_cpus is not None:
        raise UsageError("--num-cpus sizes a local Ray instance; drop it with --address")
    if num_cpus is not None and num_cpus <= 0:
        raise UsageError(f"--num-cpus={num_cpus} must be an integer > 0")
    if address is not None and not address.strip():
        raise UsageError("--address is empty; pass HOST:PORT of the Ray head, or auto")


def _console(wide: bool) -> Console:
    """80 columns unless the terminal says otherwise; ``--wide``: room for every column."""
    return Console(width=200) if wide else Console()


def _run_spec(
    spec: CampaignSpec,
    *,
    address: str | None,
    resume: bool,
    num_cpus: int | None,
    json_out: bool,
    wide: bool,
    dry_run: bool,
) -> None:
    """Preflight every cell, then (unless ``dry_run``) run the campaign and print its table."""
    from harness.campaign.preflight import preflight_cells
    from harness.campaign.state import check_new_directory

    if not (resume or dry_run):
        check_new_directory(spec.directory)  # cheap checks before the preflight's seconds
    if resume and not dry_run:
        from harness.campaign.state import check_resumable

        check_resumable(spec)
    overridden = bool(spec.candidate_overrides)
    checked = preflight_cells(spec.cells, spec.path, _progress, overridden=overridden)
    if dry_run:
        from harness.campaign.plan import plan_document, print_plan

        if json_out:
            sys.stdout.write(dumps_strict(plan_document(spec, checked)))
        else:
            print_plan(spec, checked, _console(wide))
        raise typer.Exit(0)
    from harness.campaign.runner import RunOptions, run_campaign

    state = run_campaign(spec, RunOptions(address, resume, num_cpus), _progress)
    if json_out:
        sys.stdout.write(dumps_strict(state.doc))
    else:
        from harness.campaign.table import print_table

        print_table(state.doc, state.directory, _console(wide), wide=wide)
    raise typer.Exit(0 if state.passed else 1)


@app.command(epilog=_RUN_EXAMPLE)
def run(
    campaign_file: Annotated[Path, typer.Argument(help="The campaign file (YAML).")],
    address: AddressOpt = None,
    resume: ResumeOpt = False,
    num_cpus: NumCpusOpt = None,
    library_root: LibraryOpt = DEFAULT_LIBRARY_ROOT,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
    wide: WideOpt = False,
) -> None:
    """Run (or --resume) every cell of CAMPAIGN_FILE; exit 0 iff every cell passed
    (judged over seeds: iff every configuration passed)."""
    from harness.campaign.spec import load_campaign

    _check_ray_options(address, num_cpus)
    spec = load_campaign(campaign_file, library_root)
    _run_spec(
        spec, address=address, resume=resume, num_cpus=num_cpus, json_out=json_out,
        wide=wide, dry_run=dry_run,
    )  # fmt: skip


@app.command(epilog=_REGRESSION_EXAMPLE)
def regression(
    spec_file: Annotated[
        Path,
        typer.Option(
            "--spec",
            help="The check's campaign file (default: harness/campaign/specs/regression.yaml).",
            show_default=False,
        ),
    ] = REGRESSION_SPEC,
    directory: Annotated[
        Path | None,
        typer.Option(
            "--directory",
            help="Where the campaign goes (default: artifacts/campaigns/regression-<UTC "
            "time>, then -<hash> of the --override list).",
            show_default=False,
        ),
    ] = None,
    override: Annotated[
        list[str] | None,
        typer.Option(
            "--override",
            metavar="KEY=VALUE",
            help="The candidate's trainer override, after every override set's own "
            "(repeatable; default: none, the baseline).",
            show_default=False,
        ),
    ] = None,
    library_root: LibraryOpt = DEFAULT_LIBRARY_ROOT,
    address: AddressOpt = None,
    resume: ResumeOpt = False,
    num_cpus: NumCpusOpt = None,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
    wide: WideOpt = False,
) -> None:
    """The learning regression check: library clips x seeds at once (MPS where the GPU has
    it), judged over seeds; prints final vs best R-MPKPE per clip and seed. Exit 0 iff it
    passed."""
    from harness.campaign.candidate import check_candidate, directory_tag
    from harness.campaign.spec import CampaignFileError, load_campaign

    _check_ray_options(address, num_cpus)
    overrides = check_candidate(override or [])
    spec = load_campaign(spec_file, library_root, overrides)
    if spec.over_seeds is None:
        raise CampaignFileError(
            f"campaign file {spec.path}: over_seeds is missing; the regression check judges "
            "learning over seeds, add over_seeds: {} with at least 3 seeds"
        )
    if directory is None:
        if resume:
            raise UsageError("--resume needs --directory, the check's campaign directory")
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        directory = REGRESSION_DIR / f"regression-{stamp}{directory_tag(overrides)}"
    spec = dataclasses.replace(spec, directory=directory.absolute())
    _run_spec(
        spec, address=address, resume=resume, num_cpus=num_cpus, json_out=json_out,
        wide=wide, dry_run=dry_run,
    )  # fmt: skip


@app.command(epilog=_COMPARE_EXAMPLE)
def compare(
    baseline: Annotated[Path, typer.Argument(help="The baseline's finished check.")],
    candidate: Annotated[Path, typer.Argument(help="The candidate's finished check.")],
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the comparison as one JSON document.")
    ] = False,
    wide: Annotated[
        bool,
        typer.Option("--wide", help="Each seed's outcome and best iteration too; wider than 80."),
    ] = False,
) -> None:
    """Set CANDIDATE's regression check beside BASELINE's (same clips, seeds, sims and
    budget): per clip and seed, then over seeds. Exit 0 iff the candidate passed."""
    from harness.campaign.compare import compare_directories
    from harness.campaign.compare_view import document, print_comparison

    result = compare_directories(baseline, candidate)
    if json_out:
        sys.stdout.write(dumps_strict(document(result)))
    else:
        print_comparison(result, _console(wide), wide=wide)
    raise typer.Exit(0 if result.passed else 1)


@app.command(epilog=_STATUS_EXAMPLE)
def status(
    directory: Annotated[Path, typer.Argument(help="A campaign directory.")],
    json_out: JsonOpt = False,
    watch: Annotated[
        bool,
        typer.Option("--watch", help="Redraw the table until the campaign stops running."),
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between redraws with --watch (> 0).")
    ] = 5.0,
    wide: WideOpt = False,
) -> None:
    """Print the campaign table from DIR/campaign.json (read-only; needs no Ray)."""
    from harness.campaign.state import driver_running, load_state
    from harness.campaign.table import print_table, rich_table

    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory; pass a campaign directory")
    if json_out and watch:
        raise UsageError("--watch redraws the table; drop --json")
    if not interval > 0:
        raise UsageError(f"--interval={interval:g} must be a number > 0")
    doc = load_state(directory)
    if json_out:
        sys.stdout.write(dumps_strict(doc))
        return
    console = _console(wide)
    if watch:
        table = rich_table(doc, directory, wide=wide)
        with Live(table, console=console, auto_refresh=False) as live:
            while doc["status"] == "running" and driver_running(directory):
                time.sleep(interval)
                doc = load_state(directory)
                live.update(rich_table(doc, directory, wide=wide), refresh=True)
        _orphan_note(doc, directory, console)
        return
    print_table(doc, directory, console, wide=wide)
    _orphan_note(doc, directory, console)


def _orphan_note(doc: dict, directory: Path, console: Console) -> None:
    from harness.campaign.state import driver_running

    if doc["status"] == "running" and not driver_running(directory):
        console.print(
            "no soak-campaign run is driving this campaign any more (it was killed); "
            "continue it with `soak-campaign run <file> --resume`",
            markup=False,
            highlight=False,
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``soak-campaign``."""
    return run_app(
        app,
        argv,
        prog="soak-campaign",
        failures={OSError: lambda err: f"{type(err).__name__}: {err}"},
    )


if __name__ == "__main__":
    sys.exit(main())
