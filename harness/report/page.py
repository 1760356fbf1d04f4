"""The self-contained ``report.html`` of ``soak-report``.

Sections, in reading order: the verdict banner; on a failed soak, what failed (every
reason, the trainer's own error and the console tail); the run (configuration and context,
iterations and env steps); links to the run's files; the verdicts (summary, resource trends
and the learning verdict, each saying plainly when and why it did not judge); training
(reward, episode length, losses, env steps/s, evaluation points); resources (curves and the
summary table). PNGs are embedded as base64, so the page needs no other file.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from contracts import rundir
from contracts.identity import MotionRef, RunIdentity
from harness.report.clips import clips_table
from harness.report.figures import RESOURCES, TRAINING, Figure
from harness.report.play import play_html
from harness.report.rundata import RunData
from harness.soak.trend import MIN_TREND_SAMPLES
from harness.soak.verdict_table import POLICY_TEXT, judged_network

PASS_COLOUR, FAIL_COLOUR = "#1a7f37", "#cf222e"
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 72em; }
.banner { color: white; padding: 0.8em 1em; border-radius: 6px; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ddd; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
img { max-width: 100%; }
pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; font-size: 85%; }
.note { background: #fff8c5; border-left: 4px solid #d4a72c; padding: 0.5em 0.8em; }
.bad { color: #cf222e; font-weight: bold; }
"""


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _cell(value: Any) -> str:
    return "&ndash;" if value is None else _esc(value)


def _table(rows: Iterable[tuple[str, Any]]) -> str:
    body = "".join(f"<tr><th>{_esc(k)}</th><td>{_cell(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _note(text: str) -> str:
    return f'<p class="note">{_esc(text)}</p>'


def _get(doc: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def _pct(value: float | None) -> str | None:
    return None if value is None else f"{value * 100:.1f} %"


def _mm(value: float | None) -> str | None:
    return None if value is None else f"{value:.1f}"


# -- banner and failure -------------------------------------------------------------------
def _banner(artifact: dict[str, Any]) -> str:
    passed = artifact["status"] == "passed"
    reason = artifact["failure_reason"] or "no failure recorded"
    return (
        f'<div class="banner" style="background: {PASS_COLOUR if passed else FAIL_COLOUR}">'
        f"<h1>Soak {_esc(artifact['status'].upper())}</h1>"
        f"<p>{_esc(artifact['failure_classification'] or 'passed')}: {_esc(reason)}</p></div>"
    )


def _trainer_error(artifact: dict[str, Any]) -> list[tuple[str, Any]]:
    summary = artifact.get("run_summary") or {}
    shutdown = artifact.get("shutdown") or {}
    rows: list[tuple[str, Any]] = []
    if summary.get("error") is not None:
        rows.append(("trainer error", f"{summary.get('error_type', 'error')}: {summary['error']}"))
    if shutdown:
        where = f"owner {shutdown.get('owner')}, phase {shutdown.get('phase')}"
        rows.append(("trainer shutdown", f"{shutdown.get('classification')} ({where})"))
        exception = shutdown.get("exception")
        if isinstance(exception, dict):
            rows.append(
                ("trainer exception", f"{exception.get('type')}: {exception.get('message')}")
            )
    if artifact.get("run_summary_error"):
        rows.append(("run_summary.json", artifact["run_summary_error"]))
    rows.append(("returncode", artifact["returncode"]))
    return rows


def _failure_section(artifact: dict[str, Any], data: RunData) -> str:
    if artifact["status"] == "passed":
        return ""
    reasons = (artifact["failure_reason"] or "").split("; ")
    items = "".join(f"<li>{_esc(r)}</li>" for r in reasons if r)
    out = f'<h2 id="failure">What failed</h2><ul>{items}</ul>' + _table(_trainer_error(artifact))
    if data.console_tail:
        out += (
            f"<h3>Console tail (last {len(data.console_tail)} lines, from "
            f"{_esc(data.console_tail_source)})</h3><pre>{_esc(chr(10).join(data.console_tail))}</pre>"
        )
    else:
        out += _note(data.notes.get("console", "the console log is empty"))
    return out


# -- run ----------------------------------------------------------------------------------
def _gpu_text(context: dict[str, Any]) -> str:
    devices = context.get("gpu_devices") or []
    if not devices:
        errors = context.get("gpu_errors") or []
        return "no GPU" + (f" ({errors[0]})" if errors else "")
    return "; ".join(f"{d['name']} (driver {d['driver_version']}, {d['uuid']})" for d in devices)


def _versions(context: dict[str, Any]) -> str:
    software = context.get("software") or {}
    names = ("python", "torch", "mujoco", "mujoco_warp", "warp_lang", "harness")
    return ", ".join(f"{n} {software[n]}" for n in names if software.get(n))


def run_rows(artifact: dict[str, Any], data: RunData) -> list[tuple[str, Any]]:
    """The run's configuration and context, from the artifact, run_summary and run_config."""
    summary = artifact.get("run_summary") or {}
    config = data.run_config or {}
    algo = _get(config, "config", "algo") or {}
    context = artifact["context"]
    identity = RunIdentity.from_artifact(artifact, config)
    motion = identity.motion or MotionRef(id=None, file_sha256=None, source=None)
    completed, configured = summary.get("completed_iterations"), algo.get("max_iterations")
    iterations = None
    if completed is not None or configured is not None:
        iterations = f"{_cell(completed) if completed is not None else '?'} of {configured or '?'}"
    protocol = _get(data.evaluation, "protocol")
    rows: list[tuple[str, Any]] = [
        ("sim backend", identity.sim),
        ("algo / task", f"{identity.algo} / {identity.task}"),
        ("envs", algo.get("num_envs")),
        ("iterations (completed of configured)", iterations),
        ("env steps", summary.get("total_env_steps")),
        ("checkpoint interval", algo.get("save_interval")),
        ("seed", identity.seed),
        ("motion", motion.id),
        ("motion file sha256", motion.file_sha256),
        ("commit", identity.source.describe() if identity.source else None),
        ("versions", _versions(context)),
        ("GPU", _gpu_text(context)),
        ("learner / collector device", _devices(config)),
        ("CUDA_VISIBLE_DEVICES", _get(context, "environment", "CUDA_VISIBLE_DEVICES")),
        ("host", _get(config, "run", "hostname")),
        ("started / ended (UTC)", f"{artifact['started_at_utc']} / {artifact['ended_at_utc']}"),
        ("soak duration (s)", f"{artifact['duration_s']:.1f}"),
        ("training wall time (s)", summary.get("training_wall_time_sec")),
        ("env steps/s (steady)", _steady(summary)),
        ("env steps/s (final / tail)", _rates(summary)),
        ("learner acceleration", acceleration_text(_get(summary, *LEARNER_RECORD))),
        ("command", " ".join(artifact["command"])),
    ]
    if protocol is not None:
        rows.append(("evaluation protocol", _protocol(protocol)))
    return rows


LEARNER_RECORD = ("runtime_manifest", "cuda_graph", "learner")


def acceleration_text(learner: Any) -> str | None:
    """What the learner ran with (``runtime_manifest.cuda_graph.learner``) in one line:
    graphs, compile, the fusions that ran, precision, then what fell back, if anything."""
    if not isinstance(learner, dict) or not isinstance(learner.get("fallbacks"), list):
        return None

    def on(entry: Any) -> str:
        return "on" if isinstance(entry, dict) and entry.get("enabled") is True else "off"

    enabled = _get(learner, "fusion", "enabled")
    fusions = [name for name, ran in (enabled or {}).items() if ran is True]
    fell = "; ".join(f"{f.get('feature')} ({f.get('reason')})" for f in learner["fallbacks"])
    return (
        f"cycle graph {on(learner)}, act graph {on(learner.get('act_graph'))}, "
        f"compile {on(learner.get('compile'))}, fusions {', '.join(fusions) or 'none'}, "
        f"{learner.get('precision')}; " + (f"fell back: {fell}" if fell else "nothing fell back")
    )


def _protocol(protocol: dict[str, Any]) -> str:
    frame0 = protocol.get("frame0_episodes", "-")
    return (
        f"{protocol['uniform_episodes']} uniform-start and {frame0} frame-0 episodes, at most "
        f"{protocol['max_episode_steps']} steps, {protocol['sim_backend']} on {protocol['device']}"
    )


def _devices(config: dict[str, Any]) -> str | None:
    devices = _get(config, "run", "devices")
    if not isinstance(devices, dict):
        return None
    return f"{devices.get('learner')} / {devices.get('collector')}"


def _per_s(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _steady(summary: dict[str, Any]) -> str | None:
    value = summary.get("steady_env_steps_per_sec")
    return None if value is None else _per_s(value)


def _rates(summary: dict[str, Any]) -> str | None:
    final, tail = summary.get("final_env_steps_per_sec"), summary.get("tail_env_steps_per_sec")
    if final is None and tail is None:
        return None
    return " / ".join(_per_s(v) for v in (final, tail))


def _run_section(artifact: dict[str, Any], data: RunData) -> str:
    notes = "".join(_note(data.notes[k]) for k in ("run_dir", "run_config") if k in data.notes)
    return '<h2 id="run">Run</h2>' + notes + _table(run_rows(artifact, data))


# -- links --------------------------------------------------------------------------------
def _link(path: Path) -> str:
    return f'<a href="{_esc(path.absolute().as_uri())}">{_esc(path)}</a>'


def _links_section(artifact: dict[str, Any], data: RunData, artifact_path: Path) -> str:
    run_dir = data.run_dir
    entries: list[tuple[str, Path | None]] = [
        ("artifact", artifact_path),
        ("run directory", run_dir if data.exists else None),
        ("console log", Path(artifact["console_log"])),
        *(
            (name, run_dir / name)
            for name in (rundir.RUN_SUMMARY, rundir.RUN_CONFIG, rundir.EVALUATION)
        ),
        ("event file", data.event_file),
    ]
    rows = []
    for label, path in entries:
        if path is not None and path.exists():
            rows.append(f"<tr><th>{_esc(label)}</th><td>{_link(path)}</td></tr>")
        else:
            where = "" if path is None else f" ({_esc(path)})"
            rows.append(f"<tr><th>{_esc(label)}</th><td>missing{where}</td></tr>")
    checkpoints = ", ".join(
        f'<a href="{_esc(p.absolute().as_uri())}">{_esc(p.name)}</a>' for p in data.checkpoints
    )
    rows.append(f"<tr><th>checkpoints</th><td>{checkpoints or 'none'}</td></tr>")
    return f'<h2 id="links">Files</h2><table>{"".join(rows)}</table>'


# -- verdicts -----------------------------------------------------------------------------
def _summary_rows(artifact: dict[str, Any]) -> list[tuple[str, Any]]:
    shutdown = artifact["shutdown"]
    return [
        ("status", artifact["status"]),
        ("failure classification", artifact["failure_classification"]),
        ("monitor classification replaced", artifact.get("monitor_failure_classification")),
        ("returncode", artifact["returncode"]),
        (
            "shutdown",
            None
            if not shutdown
            else f"{shutdown.get('classification')} ({shutdown.get('owner')}, {shutdown.get('phase')})",
        ),
        (
            "residual processes",
            ", ".join(str(p["pid"]) for p in artifact["post_shutdown"]["residual_processes"])
            or "none",
        ),
    ]


def trend_statement(trends: dict[str, Any] | None) -> str | None:
    """A plain sentence when the trends did not judge (or could not fail the soak)."""
    if not trends:
        return "Resource trends were not recorded in this artifact."
    parts: list[str] = []
    window = trends.get("window") or {}
    if trends.get("verdict") == "insufficient_data":
        count, start, end = (
            window.get("sample_count"),
            window.get("start_elapsed_s"),
            window.get("end_elapsed_s"),
        )
        if not count:
            parts.append(
                "Trends were not judged: the trend window never started (it opens "
                f"{trends.get('warmup_s')} s after the first run-directory progress, and the "
                "soak ended before that)."
            )
        else:
            span = (end or 0.0) - (start or 0.0)
            parts.append(
                f"Trends were not judged: the window held {count} samples over {span:.0f} s; a "
                f"verdict needs at least {MIN_TREND_SAMPLES} samples over at least "
                f"{trends.get('min_window_s')} s. Soak longer, or lower --trend-warmup-seconds "
                "or --trend-min-window-seconds."
            )
    unavailable = [
        n for n, s in (trends.get("series") or {}).items() if s["verdict"] == "unavailable"
    ]
    if unavailable:
        parts.append(f"Never observed, so not judged: {', '.join(unavailable)}.")
    if trends.get("mode") == "report":
        parts.append("Report mode: the trends were recorded but could not fail the soak.")
    return " ".join(parts) or None


def _trend_table(trends: dict[str, Any]) -> str:
    rows = ""
    for name, series in (trends.get("series") or {}).items():
        limit = (trends.get("thresholds") or {}).get(name, {})
        cells = (
            series["verdict"],
            series.get("slope_per_hour"),
            series.get("slope_lower_bound_per_hour"),
            limit.get("max_slope_per_hour"),
            series.get("growth"),
            limit.get("min_growth"),
            series.get("samples"),
        )
        rows += (
            f"<tr><th>{_esc(name)}</th>" + "".join(f"<td>{_cell(c)}</td>" for c in cells) + "</tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "series",
            "verdict",
            "slope/h",
            "lower bound/h",
            "max/h",
            "growth",
            "min growth",
            "samples",
        )
    )
    return f"<table><tr>{head}</tr>{rows}</table>"


def learning_statement(learning: dict[str, Any] | None) -> str | None:
    """A plain sentence when the learning verdict did not judge, or could not fail."""
    if learning is None:
        return "This artifact has no learning verdict (it was written before the verdict existed)."
    if learning["verdict"] == "not_judged":
        return f"Learning was not judged: {learning['reason']}."
    if learning["mode"] == "report" and learning["findings"]:
        return "Report mode: the learning findings were recorded but could not fail the soak."
    return None


def _learning_html(learning: dict[str, Any] | None) -> str:
    title = "Learning verdict"
    if learning is not None:
        title += f" (verdict: {_esc(learning['verdict'])}, mode: {_esc(learning['mode'])})"
    out = f"<h3>{title}</h3>"
    statement = learning_statement(learning)
    if statement:
        out += _note(statement)
    if learning is None:
        return out
    thresholds = learning["thresholds"]
    rows = [
        ("margin (relative, success rate and R-MPKPE)", _pct(thresholds["margin"])),
        ("minimum success rate", _pct(thresholds["min_success_rate"]) or "none"),
        ("R-MPKPE tolerance (absolute)", f"{thresholds.get('r_mpkpe_tolerance_mm', 0):g} mm"),
        (
            "minimum success rate of every clip",
            _pct(thresholds.get("min_clip_success_rate")) or "none",
        ),
    ]
    network = judged_network(learning)
    if network is not None:
        rows.append(("policy judged", POLICY_TEXT[network]))
    out += _table(rows)
    if learning["findings"]:
        items = "".join(
            f'<li><span class="bad">{_esc(f["classification"])}</span> ({_esc(f["check"])}): '
            f"{_esc(f['message'])}</li>"
            for f in learning["findings"]
        )
        out += f"<ul>{items}</ul>"
    elif learning["verdict"] == "passed":
        out += "<p>No finding: losses and evaluated metrics finite, the final point within the margin of the best.</p>"
    return out


def _verdict_section(artifact: dict[str, Any]) -> str:
    trends = artifact.get("resource_trends")
    out = '<h2 id="verdicts">Verdicts</h2>' + _table(_summary_rows(artifact))
    out += (
        f"<h3>Resource trends (verdict: {_cell(_get(trends, 'verdict'))}, mode: "
        f"{_cell(_get(trends, 'mode'))})</h3>"
    )
    statement = trend_statement(trends)
    if statement:
        out += _note(statement)
    if trends:
        out += _trend_table(trends)
    return out + _learning_html(artifact.get("learning"))


# -- figures and the evaluation table ----------------------------------------------------
def _figure_html(figure: Figure) -> str:
    if figure.path is None:
        return f"<h3>{_esc(figure.title)}</h3>" + _note(figure.note or "not drawn")
    data = base64.b64encode(figure.path.read_bytes()).decode("ascii")
    return (
        f"<h3>{_esc(figure.title)}</h3>"
        f'<img alt="{_esc(figure.title)}" src="data:image/png;base64,{data}">'
    )


def evaluation_rows(doc: dict[str, Any]) -> list[list[str | None]]:
    """One row per evaluation point: iteration, env steps, mark, and the headline metrics."""
    best = doc["best"]["iteration"] if doc["best"] else None
    rows = []
    for p in doc["points"]:
        marks = [
            m
            for m, it in (("best", best), ("final", doc["final_iteration"]))
            if it == p["iteration"]
        ]
        u, f = p["modes"]["uniform"], p["modes"]["frame0"]
        rows.append(
            [
                str(p["iteration"]),
                f"{p['env_steps']:,}",
                " + ".join(marks) or None,
                _pct(u["success_rate"]),
                _pct(f["success_rate"]),
                _mm(u["mpkpe_mm"]),
                _mm(u["r_mpkpe_mm"]),
                None if u["joint_pos_error_rad"] is None else f"{u['joint_pos_error_rad']:.3f}",
                _mm(f["r_mpkpe_mm"]),
            ]
        )
    return rows


EVALUATION_HEADER = (
    "iteration",
    "env steps",
    "",
    "success (uniform)",
    "success (frame 0)",
    "MPKPE mm (uniform)",
    "R-MPKPE mm (uniform)",
    "joint error rad (uniform)",
    "R-MPKPE mm (frame 0)",
)


def _evaluation_table(data: RunData) -> str:
    if data.evaluation is None or not data.evaluation["points"]:
        return ""
    head = "".join(f"<th>{_esc(h)}</th>" for h in EVALUATION_HEADER)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>"
        for row in evaluation_rows(data.evaluation)
    )
    return f"<p>From {_esc(data.evaluation_path)}; null metrics are shown as &ndash;.</p><table><tr>{head}</tr>{body}</table>"


def _section(title: str, anchor: str, figures: Sequence[Figure], extra: str = "") -> str:
    return f'<h2 id="{anchor}">{title}</h2>' + "".join(_figure_html(f) for f in figures) + extra


def render_page(
    artifact: dict[str, Any], data: RunData, figures: Sequence[Figure], artifact_path: Path
) -> str:
    """The whole page."""
    training = [f for f in figures if f.section == TRAINING]
    resources = [f for f in figures if f.section == RESOURCES]
    resource_summary = _table(artifact["resource_summary"].items())
    body = "\n".join(
        [
            _banner(artifact),
            _failure_section(artifact, data),
            _run_section(artifact, data),
            _links_section(artifact, data, artifact_path),
            play_html(artifact),
            _verdict_section(artifact),
            _section(
                "Training",
                "training",
                training,
                _evaluation_table(data)
                + clips_table(data, _get(artifact, "learning", "evaluation", "clips")),
            ),
            _section("Resources", "resources", resources),
            f"<h3>Resource summary</h3>{resource_summary}",
        ]
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Soak report: {_esc(artifact["status"])}</title>
<style>{STYLE}</style></head><body>
{body}
</body></html>
"""
