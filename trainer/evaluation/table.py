"""The final evaluation's rows at the end of ``train``'s summary table."""

from __future__ import annotations

from typing import Any

__all__ = ["evaluation_rows"]


def _pct(value: float | None) -> str:
    return "null" if value is None else f"{value:.1%}"


def _mm(value: float | None) -> str:
    return "null" if value is None else f"{value:,.1f} mm"


def _point_text(point: dict[str, Any]) -> str:
    uniform = point["modes"]["uniform"]
    return (
        f"{_pct(uniform['success_rate'])} / {_mm(uniform['r_mpkpe_mm'])} / "
        f"{_mm(uniform['mpkpe_mm'])} (iteration {point['iteration']:,})"
    )


def evaluation_rows(section: dict[str, Any] | None) -> list[tuple[str, str]]:
    """``(label, value)`` rows from ``run_summary.evaluation`` (none without the section)."""
    if not section:
        return []
    status = section["status"]
    if status != "evaluated":
        rows = [("evaluation", f"{status}: {section.get('reason', '')}"[:200])]
        if section.get("final") is None:
            return rows
    else:
        took = section.get("wall_time_s")
        spent = f", {took:.1f} s" if took is not None else ""
        rows = [("evaluation", f"{section['points']} points{spent} ({section['path']})")]
    final = section["final"]
    rows.append(("eval uniform: success / R-MPKPE / MPKPE", _point_text(final)))
    frame0 = final["modes"]["frame0"]
    rows.append(
        (
            "eval frame 0: success / R-MPKPE",
            f"{_pct(frame0['success_rate'])} / {_mm(frame0['r_mpkpe_mm'])}",
        )
    )
    if section.get("best") is not None:
        rows.append(("eval best (uniform)", _point_text(section["best"])))
    return rows
