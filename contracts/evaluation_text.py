"""One-line texts of evaluation points for the tables of ``train`` and ``g1-soak``.

Both tables end with the run's evaluation (schemas/evaluation.v1.json): the final point
and the best one, as "success 100.0 % (frame 0: 71.9 %), MPKPE 17.9 mm, R-MPKPE 12.1 mm".
A null metric (not finite) reads ``null``, never a number. Pure: no I/O, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _pct(value: float | None) -> str:
    return "null" if value is None else f"{value * 100:.1f} %"


def _mm(value: float | None) -> str:
    return "null" if value is None else f"{value:.1f} mm"


def metrics_text(uniform: Mapping[str, Any], frame0: Mapping[str, Any]) -> str:
    """Uniform-start success (frame-0 success), MPKPE and R-MPKPE of one point."""
    return (
        f"success {_pct(uniform['success_rate'])} (frame 0: {_pct(frame0['success_rate'])}), "
        f"MPKPE {_mm(uniform['mpkpe_mm'])}, R-MPKPE {_mm(uniform['r_mpkpe_mm'])}"
    )


def evaluation_rows(section: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Table rows of ``run_summary.evaluation``: final and best, or why there are none."""
    if not isinstance(section, Mapping):
        return [("evaluation", "-")]
    if section.get("status") != "evaluated":
        return [("evaluation", f"{section.get('status')}: {section.get('reason')}")]
    rows = []
    for label in ("final", "best"):
        point = section[label]
        modes = point["modes"]
        rows.append(
            (
                f"evaluation, {label} (iteration {point['iteration']:,})",
                metrics_text(modes["uniform"], modes["frame0"]),
            )
        )
    return rows
