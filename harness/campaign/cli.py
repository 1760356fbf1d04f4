"""``soak-campaign run CAMPAIGN.yaml`` and ``soak-campaign status DIR`` (docs/campaign.md).

``run`` validates the campaign file (exit 2 with one line naming the key), then runs every
cell as a Ray task (locally, or on the cluster at ``--address``) and writes ``campaign.json``
and ``index.html`` after every attempt; stdout gets the final table (or ``campaign.json`` with
``--json``), stderr one line per finished attempt. Exit 0 iff every cell passed, 1 otherwise
(failed, lost, error or interrupted cells, or a runtime failure), 2 for usage errors.
``status`` reads ``campaign.json`` only (no Ray): exit 0 when it is readable.
"""

from __future__ import annotations

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

_RUN_EXAMPLE = (
    "Example: soak-campaign run nightly.yaml   |   "
    "soak-campaign run nightly.yaml --address head-node:6379   |   "
    "soak-campaign run nightly.yaml --resume"
)
_STATUS_EXAMPLE = "Example: soak-campaign status artifacts/campaigns/nightly --json"

app = typer.Typer(
    name="soak-campaign",
    help="Run a matrix of g1-soak runs on Ray (one cell per Ray task) and table the results.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print campaign.json (strict JSON) instead of the table.")
]


def _progress(line: str) -> None:
    sys.stderr.write(f"soak-campaign: {line}\n")
    sys.stderr.flush()


@app.command(epilog=_RUN_EXAMPLE)
def run(
    campaign_file: Annotated[Path, typer.Argument(help="The campaign file (YAML).")],
    address: Annotated[
        str | None,
        typer.Option(
            "--address",
            help="An existing Ray cluster (HOST:PORT or auto); default: start Ray here.",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue the campaign in its directory: keep verdicts, rerun the rest.",
        ),
    ] = False,
    num_cpus: Annotated[
        int | None,
        typer.Option("--num-cpus", help="CPUs of the local Ray instance (default: all)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Run (or --resume) every cell of CAMPAIGN_FILE; exit 0 iff every cell passed."""
    from harness.campaign.spec import load_campaign

    if address is not None and num_cpus is not None:
        raise UsageError("--num-cpus sizes a local Ray instance; drop it with --address")
    if num_cpus is not None and num_cpus <= 0:
        raise UsageError(f"--num-cpus={num_cpus} must be an integer > 0")
    if address is not None and not address.strip():
        raise UsageError("--address is empty; pass HOST:PORT of the Ray head, or auto")
    spec = load_campaign(campaign_file)
    from harness.campaign.runner import RunOptions, run_campaign

    state = run_campaign(spec, RunOptions(address, resume, num_cpus), _progress)
    if json_out:
        sys.stdout.write(dumps_strict(state.doc))
    else:
        from harness.campaign.table import print_table

        print_table(state.doc, state.directory, Console())
    raise typer.Exit(0 if state.passed else 1)


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
    console = Console()
    if watch:
        with Live(rich_table(doc, directory), console=console, auto_refresh=False) as live:
            while doc["status"] == "running" and driver_running(directory):
                time.sleep(interval)
                doc = load_state(directory)
                live.update(rich_table(doc, directory), refresh=True)
        _orphan_note(doc, directory, console)
        return
    print_table(doc, directory, console)
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
