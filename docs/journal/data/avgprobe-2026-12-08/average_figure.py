"""Draws docs/img/m4-average-2026-12-08.png from the eight evaluation documents beside it.

M_Move4 in the regression check's cells with the averaged policy on (H100, 2026-12-08; the
journal entry "The averaged policy beside its own actor on M_Move4"): per seed and checkpoint,
the uniform-start success and R-MPKPE of the average (``average-sN.json``, the run's own
evaluation) and of the same run's actor (``actor-sN.json``, ``evaluate RUN --policy actor``).
The clip: G1 Moves, Mitch Chaiet, CC-BY-4.0, experientialtech/g1-moves.
Run from the repository root:

    uv run python docs/journal/data/avgprobe-2026-12-08/average_figure.py
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from contracts.jsonio import load_strict

HERE = Path(__file__).parent
OUT = Path("docs/img/m4-average-2026-12-08.png")
SEEDS = (1, 2, 3, 4)


def curve(name: str, key: str) -> tuple[list[int], list[float]]:
    points = load_strict(HERE / f"{name}.json")["points"]
    return [p["iteration"] for p in points], [p["modes"]["uniform"][key] for p in points]


PANELS = (  # metric, axis label, limits
    ("success_rate", "uniform-start success", (0.6, 1.0)),
    ("r_mpkpe_mm", "R-MPKPE (mm)", (55, 100)),
)


def main() -> None:
    fig, axes = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    for ax, (key, label, limits) in zip(axes, PANELS, strict=True):
        for seed in SEEDS:
            line = ax.plot(*curve(f"average-s{seed}", key), "-", marker="o",
                           label=f"s{seed}, averaged policy")  # fmt: skip
            ax.plot(*curve(f"actor-s{seed}", key), "--", marker="x", color=line[0].get_color(),
                    alpha=0.7, label=f"s{seed}, its actor")  # fmt: skip
        ax.set(ylabel=label, ylim=limits, xlim=(7500, 21000))
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("iteration (the last point is the final policy)")
    axes[0].set_title("M_Move4, averaged policy (rate 0.002) beside the same run's actor\n"
                      "512 envs x 420 s a seed, 512 episodes a point, H100, 2026-12-08")  # fmt: skip
    axes[0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(OUT, dpi=110)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
