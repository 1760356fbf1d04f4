"""The "Policy playback" block of ``soak-report``: the run's filmstrip, when it has one.

The soak itself never plays (it sets ``training.no_play=true``), but ``play RUN_DIR`` may run
afterwards, as in the README's quick start. So the block reads the run directory's current
``run_summary.json`` (not the copy in the artifact): when its ``play`` section names a
filmstrip PNG that exists, the PNG is embedded and the video linked; a failed play shows its
reason; otherwise the block is empty. Pure harness code: JSON and bytes only.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from contracts import rundir

__all__ = ["play_html", "run_dir_of"]


def run_dir_of(artifact: dict[str, Any]) -> Path | None:
    """The soaked run's directory: the summary's ``log_dir``, else the console log's folder."""
    summary = artifact.get("run_summary")
    if isinstance(summary, dict) and isinstance(summary.get("log_dir"), str):
        return Path(summary["log_dir"])
    console = artifact.get("console_log")
    return Path(console).parent if isinstance(console, str) and console else None


def _play_section(run_dir: Path) -> dict[str, Any] | None:
    try:
        summary = rundir.read(run_dir / rundir.RUN_SUMMARY, lenient=True)
    except rundir.DocumentError:
        return None
    play = summary.get("play") if isinstance(summary, dict) else None
    return play if isinstance(play, dict) else None


def play_html(artifact: dict[str, Any]) -> str:
    """The HTML block (empty when the run has neither a filmstrip nor a failed play)."""
    run_dir = run_dir_of(artifact)
    play = _play_section(run_dir) if run_dir is not None else None
    if play is None:
        return ""
    strip = Path(play["filmstrip"]) if play.get("filmstrip") else None
    parts = []
    if strip is not None and strip.is_file():
        data = base64.b64encode(strip.read_bytes()).decode("ascii")
        parts.append(f'<img alt="policy filmstrip" src="data:image/png;base64,{data}">')
    if play.get("video"):
        video = Path(play["video"])
        parts.append(
            f'<p>Video: <a href="{html.escape(video.absolute().as_uri())}">{html.escape(str(video))}</a>'
            f" ({html.escape(str(play.get('frames')))} frames; solid: policy, translucent: "
            "reference)</p>"
        )
    if play.get("status") == "failed":
        parts.append(f"<p>play failed: {html.escape(str(play.get('reason')))}</p>")
    if not parts:
        return ""
    return "<h2>Policy playback</h2>\n" + "\n".join(parts) + "\n"
