"""``soak-report ARTIFACT [--out DIR]`` (CONTRACTS §1.3).

Reads a 0.3.0 soak artifact (strict JSON, validated against the schema), draws the
resource curves over time with matplotlib's Agg backend (RSS, GPU memory, FD classes,
process count, run-dir progress bytes) as PNGs, and writes ``report.html`` with the
verdict, the failure reason, a summary table, the run's policy filmstrip when ``play``
made one (harness.report.play), the trend verdicts and the PNGs embedded as base64 (the
page needs no other file). Exit 0 rendered; 1 unreadable/invalid artifact.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli_app import run_app
from harness.errors import HarnessError, StrictJsonError
from harness.jsonio import load_strict, write_atomic_text
from harness.report.play import play_html
from harness.schemas import validate
from harness.soak.proctree import FD_CLASSES

SCHEMA_FILE = "soak_artifact.0.3.0.json"
FD_CLASS_ORDER = FD_CLASSES
PLOTS: tuple[tuple[str, str], ...] = (
    ("rss.png", "Process-tree RSS"),
    ("gpu_memory.png", "GPU memory of tree processes"),
    ("fd_classes.png", "Open file descriptors by class"),
    ("processes.png", "Process count"),
    ("progress.png", "Run-directory progress bytes"),
)


def load_artifact(path: Path) -> dict[str, Any]:
    """Load and validate an artifact.

    Raises:
        HarnessError: unreadable, not strict JSON, not an object, or schema-invalid.
    """
    try:
        doc = load_strict(path)
    except FileNotFoundError as err:
        raise HarnessError(
            f"artifact {path} does not exist; pass the --output of g1-soak/soak-run"
        ) from err
    except (OSError, StrictJsonError) as err:
        raise HarnessError(f"artifact {path} is unreadable: {err}") from err
    if not isinstance(doc, dict):
        raise HarnessError(f"artifact {path} is not a JSON object")
    violations = validate(doc, SCHEMA_FILE)
    if violations:
        more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
        raise HarnessError(
            f"artifact {path} is not a valid 0.3.0 soak artifact: {violations[0]}{more}"
        )
    return doc


def _time_axis(samples: Sequence[dict[str, Any]]) -> tuple[list[float], float, str]:
    """Elapsed times in minutes (or seconds for soaks under two minutes)."""
    last = float(samples[-1]["elapsed_s"]) if samples else 0.0
    scale, unit = (60.0, "min") if last >= 120 else (1.0, "s")
    return [float(s["elapsed_s"]) / scale for s in samples], scale, unit


def _trend_note(artifact: dict[str, Any], series: str) -> str:
    trend = (artifact.get("resource_trends") or {}).get("series", {}).get(series)
    if not trend:
        return ""
    slope = trend.get("slope_per_hour")
    return f"trend {trend['verdict']}" + ("" if slope is None else f", slope {slope:.1f}/h")


def render_plots(artifact: dict[str, Any], out_dir: Path) -> list[Path]:
    """Draw the five PNGs into ``out_dir``; returns their paths in PLOTS order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = artifact["samples"]
    t, scale, unit = _time_axis(samples)
    window = (artifact.get("resource_trends") or {}).get("window") or {}
    start = window.get("start_elapsed_s")
    paths: list[Path] = []

    def figure(name: str, title: str, ylabel: str, note: str):
        fig, ax = plt.subplots(figsize=(8, 3.2), dpi=100)
        ax.set_title(f"{title}" + (f"  ({note})" if note else ""), fontsize=10)
        ax.set_xlabel(f"elapsed ({unit})")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if start is not None:
            ax.axvline(
                start / scale,
                color="grey",
                linestyle="--",
                linewidth=0.8,
                label="trend window start",
            )
        return fig, ax

    def save(fig: Any, ax: Any, name: str) -> None:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper left")
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)

    fig, ax = figure("rss.png", "Process-tree RSS", "MiB", _trend_note(artifact, "rss_kib"))
    ax.plot(t, [s["process"]["rss_kib_total"] / 1024.0 for s in samples], label="rss total")
    save(fig, ax, "rss.png")

    fig, ax = figure("gpu_memory.png", "GPU memory", "MiB", _trend_note(artifact, "gpu_memory_mib"))
    gpu_t = [x for x, s in zip(t, samples, strict=True) if s["gpu"].get("source") is not None]
    gpu_y = [
        s["gpu"]["used_memory_mib_total"] for s in samples if s["gpu"].get("source") is not None
    ]
    if gpu_y:
        ax.plot(gpu_t, gpu_y, label="used by tree")
    else:
        errors = next((s["gpu"].get("errors") for s in samples if s["gpu"].get("errors")), None)
        text = "GPU memory unavailable" + (f":\n{errors[0][:90]}" if errors else "")
        ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9)
    save(fig, ax, "gpu_memory.png")

    fig, ax = figure(
        "fd_classes.png", "Open FDs by class", "FDs", _trend_note(artifact, "fd_count")
    )
    ax.plot(
        t,
        [s["process"]["fd_count_total"] for s in samples],
        label="total",
        color="black",
        linewidth=1.5,
    )
    for name in FD_CLASS_ORDER:
        ys = [s["process"]["fd_classes_total"].get(name, 0) for s in samples]
        if any(ys):
            ax.plot(t, ys, label=name, linewidth=1)
    save(fig, ax, "fd_classes.png")

    fig, ax = figure(
        "processes.png", "Process count", "processes", _trend_note(artifact, "process_count")
    )
    ax.step(
        t, [s["process"]["process_count"] for s in samples], where="post", label="tree + marker"
    )
    escaped = [sum(1 for p in s["process"]["processes"] if p.get("escaped")) for s in samples]
    if any(escaped):
        ax.step(t, escaped, where="post", label="escaped (other process group)", color="red")
    save(fig, ax, "processes.png")

    fig, ax = figure("progress.png", "Run-directory progress", "MiB", "")
    ax.plot(
        t,
        [s["progress"]["bytes_total"] / (1024.0 * 1024.0) for s in samples],
        label="bytes (excl. console log)",
    )
    save(fig, ax, "progress.png")
    return paths


def _cell(value: Any) -> str:
    return "&ndash;" if value is None else html.escape(str(value))


def render_html(artifact: dict[str, Any], pngs: Sequence[Path], artifact_path: Path) -> str:
    """The self-contained page: verdict banner, summary table, trends, embedded PNGs."""
    passed = artifact["status"] == "passed"
    colour = "#1a7f37" if passed else "#cf222e"
    summary = artifact["resource_summary"]
    trends = artifact.get("resource_trends") or {}
    rows = [
        ("status", artifact["status"]),
        ("failure classification", artifact["failure_classification"]),
        ("failure reason", artifact["failure_reason"]),
        ("monitor classification replaced", artifact.get("monitor_failure_classification")),
        ("command", " ".join(artifact["command"])),
        ("started / ended (UTC)", f"{artifact['started_at_utc']} / {artifact['ended_at_utc']}"),
        ("duration_s", artifact["duration_s"]),
        ("returncode", artifact["returncode"]),
        (
            "shutdown",
            None
            if not artifact["shutdown"]
            else f"{artifact['shutdown'].get('classification')} ({artifact['shutdown'].get('owner')}, {artifact['shutdown'].get('phase')})",
        ),
        (
            "residual processes",
            ", ".join(str(p["pid"]) for p in artifact["post_shutdown"]["residual_processes"])
            or "none",
        ),
        ("console log", artifact["console_log"]),
        ("artifact", str(artifact_path)),
    ]
    summary_rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{_cell(v)}</td></tr>" for k, v in rows
    )
    resource_rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{_cell(v)}</td></tr>" for k, v in summary.items()
    )
    trend_rows = ""
    for name, series in (trends.get("series") or {}).items():
        limit = (trends.get("thresholds") or {}).get(name, {})
        trend_rows += (
            f"<tr><th>{html.escape(name)}</th><td>{_cell(series['verdict'])}</td>"
            f"<td>{_cell(series.get('slope_per_hour'))}</td><td>{_cell(series.get('slope_lower_bound_per_hour'))}</td>"
            f"<td>{_cell(limit.get('max_slope_per_hour'))}</td><td>{_cell(series.get('growth'))}</td>"
            f"<td>{_cell(limit.get('min_growth'))}</td><td>{_cell(series.get('samples'))}</td></tr>"
        )
    images = ""
    for path, (_, title) in zip(pngs, PLOTS, strict=True):
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        images += f'<h3>{html.escape(title)}</h3><img alt="{html.escape(title)}" src="data:image/png;base64,{data}">\n'
    reason = artifact["failure_reason"] or "no failure recorded"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Soak report: {html.escape(artifact["status"])}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 70em; }}
.banner {{ background: {colour}; color: white; padding: 0.8em 1em; border-radius: 6px; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ddd; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }}
th {{ background: #f6f8fa; }}
img {{ max-width: 100%; }}
</style></head><body>
<div class="banner"><h1>Soak {html.escape(artifact["status"].upper())}</h1>
<p>{html.escape(str(artifact["failure_classification"] or "passed"))}: {html.escape(reason)}</p></div>
<h2>Summary</h2><table>{summary_rows}</table>
{play_html(artifact)}<h2>Resource trends (verdict: {_cell(trends.get("verdict"))}, mode: {_cell(trends.get("mode"))})</h2>
<table><tr><th>series</th><th>verdict</th><th>slope/h</th><th>lower bound/h</th><th>max/h</th><th>growth</th><th>min growth</th><th>samples</th></tr>
{trend_rows}</table>
<h2>Resource curves</h2>
{images}
<h2>Resource summary</h2><table>{resource_rows}</table>
</body></html>
"""


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def soak_report(
    artifact: Annotated[
        Path, typer.Argument(help="A soak artifact written by g1-soak or soak-run.")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Output directory (default: <artifact stem>-report beside it)."),
    ] = None,
) -> None:
    """Render report.html and PNG resource curves for a soak artifact."""
    doc = load_artifact(artifact)
    out_dir = out if out is not None else artifact.parent / f"{artifact.stem}-report"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise HarnessError(f"cannot create --out {out_dir}: {err.strerror or err}") from err
    pngs = render_plots(doc, out_dir)
    report = write_atomic_text(out_dir / "report.html", render_html(doc, pngs, artifact.absolute()))
    report.chmod(0o644)  # a page to share, unlike the temp file's private default
    print(report)
    for png in pngs:
        print(png)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``soak-report``."""
    return run_app(app, argv, prog="soak-report")
