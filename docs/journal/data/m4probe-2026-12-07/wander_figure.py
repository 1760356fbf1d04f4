"""Draws docs/img/m4-wander-2026-12-07.png from the four evaluation.json files beside it.

M_Move4 in the regression check's cells (H100, 2026-12-07; the journal entry "M_Move4 as
recorded beside its shoulder steps blended"): per checkpoint, the uniform-start success rate,
the R-MPKPE, and how many of the 512 episodes failed at the high kick (ending 9-12 s into the
clip) or at the shoulder steps (26.8-28 s). Run from the repository root:

    uv run python docs/journal/data/m4probe-2026-12-07/wander_figure.py
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from contracts.evaluation_text import FAILURE_FRAMES_FIELD
from contracts.jsonio import load_strict

HERE = Path(__file__).parent
OUT = Path("docs/img/m4-wander-2026-12-07.png")
RUNS = ("recorded-s1", "recorded-s2", "blended-s1", "blended-s2")
KICK_S, STEPS_S = (9.0, 12.0), (26.8, 28.0)


def failures_within(point: dict, fps: float, span: tuple[float, float]) -> int:
    frames = point["modes"]["uniform"].get(FAILURE_FRAMES_FIELD, [])
    return sum(span[0] <= f / fps < span[1] for f in frames)


def main() -> None:
    fig, axes = plt.subplots(3, 1, figsize=(8, 8.5), sharex=True)
    for name in RUNS:
        doc = load_strict(HERE / f"evaluation-{name}.json")
        fps = float(doc["motion"]["fps"])
        points = doc["points"]
        its = [p["iteration"] for p in points]
        style = "-" if name.startswith("recorded") else "--"
        axes[0].plot(its, [p["modes"]["uniform"]["success_rate"] for p in points], style,
                     marker="o", label=name)  # fmt: skip
        axes[1].plot(its, [p["modes"]["uniform"]["r_mpkpe_mm"] for p in points], style,
                     marker="o", label=name)  # fmt: skip
        kick = [failures_within(p, fps, KICK_S) for p in points]
        steps = [failures_within(p, fps, STEPS_S) for p in points]
        line = axes[2].plot(its, kick, style, marker="o", label=f"{name}, at the kick")
        axes[2].plot(its, steps, ":", marker="x", color=line[0].get_color(),
                     label=f"{name}, at the steps")  # fmt: skip
    axes[0].set_ylabel("uniform-start success")
    axes[0].set_ylim(0.6, 1.0)
    axes[1].set_ylabel("R-MPKPE (mm)")
    axes[1].set_ylim(55, 100)
    axes[2].set_ylabel("failed episodes of 512")
    axes[2].set_xlabel("iteration (the last point is the final policy)")
    axes[0].set_title("M_Move4, regression-check cells (512 envs x 420 s, H100, 2026-12-07)")
    axes[0].legend(fontsize=8, ncol=2)
    axes[2].legend(fontsize=7, ncol=2)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.set_xlim(9000, 21500)
    fig.tight_layout()
    fig.savefig(OUT, dpi=110)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
