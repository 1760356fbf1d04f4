"""``soak-report ARTIFACT [--out DIR]`` (docs/contracts.md §other-commands).

Reads a 0.3.0 soak artifact (strict JSON, validated against the schema) and the run
directory beside it (harness.report.rundata), draws the training and resource curves
(harness.report.figures) and writes a self-contained ``report.html``
(harness.report.page): what failed, the run, its files, the verdicts, training and
resources. Exit 0 rendered; 1 unreadable/invalid artifact; 2 no artifact at that path (a
relative path is taken from the current directory, contracts.paths).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from contracts.cli_app import run_app
from contracts.errors import HarnessError, StrictJsonError, UsageError
from contracts.jsonio import load_strict, write_atomic_text
from contracts.paths import absolute, absolute_or_none
from contracts.schemas import validate
from harness.report.clips import clips_figure
from harness.report.diagnostics import diagnostics_figure
from harness.report.failures import failures_figure
from harness.report.figures import resource_figures, training_figures
from harness.report.page import render_page
from harness.report.rundata import read_run_data

SCHEMA_FILE = "soak_artifact.0.3.0.json"
PASS_AN_ARTIFACT = "pass the artifact g1-soak or soak-run wrote (its --output)"


def load_artifact(path: Path) -> dict[str, Any]:
    """Load and validate an artifact.

    Raises:
        UsageError: no file at ``path`` (the input names nothing: exit 2).
        HarnessError: unreadable, not strict JSON, not an object, or schema-invalid.
    """
    try:
        doc = load_strict(path)
    except FileNotFoundError as err:
        raise UsageError(
            f"artifact {path} does not exist; pass the --output of g1-soak/soak-run"
        ) from err
    except (OSError, StrictJsonError) as err:
        raise HarnessError(f"artifact {path} is unreadable: {err}; {PASS_AN_ARTIFACT}") from err
    if not isinstance(doc, dict):
        raise HarnessError(f"artifact {path} is not a JSON object; {PASS_AN_ARTIFACT}")
    violations = validate(doc, SCHEMA_FILE)
    if violations:
        more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
        raise HarnessError(
            f"artifact {path} is not a valid 0.3.0 soak artifact: {violations[0]}{more}; "
            + PASS_AN_ARTIFACT
        )
    return doc


def render_report(artifact: dict[str, Any], out_dir: Path, artifact_path: Path) -> list[Path]:
    """Draw the PNGs and write report.html into ``out_dir``; returns the page, then the PNGs."""
    data = read_run_data(artifact)
    optional = (clips_figure(data, out_dir), failures_figure(data, out_dir))
    figures = [
        *training_figures(data, out_dir),
        diagnostics_figure(data, out_dir),
        *(f for f in optional if f is not None),
        *resource_figures(artifact, out_dir),
    ]
    page = write_atomic_text(
        out_dir / "report.html", render_page(artifact, data, figures, artifact_path)
    )
    page.chmod(0o644)  # a page to share, unlike the temp file's private default
    return [page, *(f.path for f in figures if f.path is not None)]


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command(
    epilog=(
        "\b\nExamples:\n"
        "  soak-report artifacts/g1-soak.json\n"
        "  soak-report artifacts/g1-soak.json --out artifacts/g1-soak-report\n\n"
        "Sections and figures: docs/guide.md. Exit 0 rendered, 1 an unreadable or invalid "
        "artifact, 2 usage (no artifact at that path)."
    )
)
def soak_report(
    artifact: Annotated[
        Path, typer.Argument(help="A soak artifact written by g1-soak or soak-run.")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Output directory (default: <artifact stem>-report beside it)."),
    ] = None,
) -> None:
    """Render report.html with the run, its verdicts, training and resource curves."""
    artifact = absolute(artifact)
    out = absolute_or_none(out)
    doc = load_artifact(artifact)
    out_dir = out if out is not None else artifact.parent / f"{artifact.stem}-report"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise HarnessError(f"cannot create --out {out_dir}: {err.strerror or err}") from err
    for path in render_report(doc, out_dir, artifact):
        print(path)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``soak-report``."""
    return run_app(app, argv, prog="soak-report")
