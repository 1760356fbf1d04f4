"""The trainer's outcome as label/value rows, from a ``run_summary.json`` document.

``train`` prints these rows when it ends, and ``g1-soak`` repeats them under its verdict,
so a person reads the same table in both places. Values the summary lacks show as ``-``.
The error row is the error's first line, prefixed with its type only when the line does
not already name it (``collector raised MotionError: ...`` stays as it is). Pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["error_text", "summary_rows"]

MAX_ERROR_CHARS = 200


def _fmt(value: Any, spec: str = ",.1f") -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    try:
        return format(value, spec)
    except ValueError:  # an int spec on a float
        return format(value, ",.1f")


def error_text(summary: Mapping[str, Any]) -> str | None:
    """``<type>: <first line>`` of the summary's error (the type once), or None."""
    lines = str(summary.get("error") or "").strip().splitlines()
    if not lines:
        return None
    first = lines[0][:MAX_ERROR_CHARS]
    kind = summary.get("error_type")
    if not isinstance(kind, str) or not kind or kind in first:
        return first
    return f"{kind}: {first}"


def summary_rows(summary: Mapping[str, Any], run_dir: str | None = None) -> list[tuple[str, str]]:
    """The rows of the trainer's summary table, in reading order."""
    manifest = summary.get("runtime_manifest")
    shutdown = (manifest.get("shutdown") if isinstance(manifest, Mapping) else None) or {}
    rows = [
        ("status", str(summary.get("status") or "-")),
        ("shutdown", f"{shutdown.get('classification')} ({shutdown.get('phase')})"),
        ("iterations", _fmt(summary.get("completed_iterations"), ",d")),
        ("env steps", _fmt(summary.get("total_env_steps"), ",d")),
        ("env steps/s (steady)", _fmt(summary.get("steady_env_steps_per_sec"), ",.0f")),
        ("env steps/s (whole training)", _fmt(summary.get("training_env_steps_per_sec"), ",.0f")),
        ("env steps/s (final / tail)", (f"{_fmt(summary.get('final_env_steps_per_sec'), ',.0f')}"
         f" / {_fmt(summary.get('tail_env_steps_per_sec'), ',.0f')}")),
        ("mean episode length", _fmt(summary.get("mean_episode_length"))),
        ("mean reward (final / best)", (f"{_fmt(summary.get('final_mean_reward'), '.3f')}"
         f" / {_fmt(summary.get('best_mean_reward'), '.3f')}")),
        ("wall time (s)", _fmt(summary.get("wall_time_sec"))),
        ("last checkpoint", str(summary.get("last_checkpoint") or "-")),
        ("error", error_text(summary) or "-"),
    ]  # fmt: skip
    if run_dir is not None:
        rows.append(("run directory", run_dir))
    return rows
