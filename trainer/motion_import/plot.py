"""The ``g1-motion inspect --png`` figure: root and foot height over time, joint ranges."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainer.figures import pyplot, write_png
from trainer.motion_import.checks import AIRBORNE_M, BOUNDS
from trainer.motion_import.report import Report

__all__ = ["render_png"]


def render_png(report: Report, out: Path) -> Path:
    """Draw the figure (matplotlib Agg) and write it atomically to ``out``."""
    plt = pyplot()
    arrays = report.conversion.arrays
    names = list(arrays["body_names"])
    t = np.arange(report.conversion.num_frames) / float(arrays["fps"])
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(10, 11), gridspec_kw={"height_ratios": [1, 2.4]}, constrained_layout=True
    )
    top.plot(t, arrays["body_pos_w"][:, names.index("pelvis"), 2], label="pelvis height")
    top.plot(t, report.conversion.foot_min_z, label="lowest foot point")
    for key in ("root_height_min", "root_height_max", "foot_height_min"):
        top.axhline(BOUNDS[key].limit, color="0.7", linestyle=":", linewidth=0.8)
    top.axhline(AIRBORNE_M, color="0.7", linestyle="--", linewidth=0.8)
    for end in report.conversion.source.clip_ends[:-1]:
        top.axvline(end / float(arrays["fps"]), color="0.5", linewidth=0.6)
    top.set_xlabel("time (s)")
    top.set_ylabel("height (m)")
    top.set_title(f"{report.conversion.source.path.name}: root and foot height")
    top.legend(loc="best", fontsize="small")
    rows = np.arange(len(report.ranges))
    for i, r in enumerate(report.ranges):
        bottom.plot([r.lower, r.upper], [i, i], color="0.82", linewidth=7, solid_capstyle="butt")
        color = "tab:red" if r.excess > BOUNDS["joint_limit_excess"].limit else "tab:blue"
        bottom.plot([r.clip_min, r.clip_max], [i, i], color=color, linewidth=3.5, marker="|")
    bottom.set_yticks(rows, [r.joint for r in report.ranges], fontsize="small")
    bottom.invert_yaxis()
    bottom.set_xlabel("joint angle (rad): grey = XML range, blue = clip range, red = beyond range")
    bottom.set_title("joint ranges")
    return write_png(fig, out, dpi=110)
