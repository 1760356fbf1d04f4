"""Where the env step and the learner cycle run on the GPU, turn by turn, and how much overlaps.

One turn is one env step and one learner cycle, each a span ``(start_ms, end_ms)`` on its own
stream, read from CUDA events (``trainer/bench/one_context.py``). From the two timelines this
module gives, per turn: each side's busy time, the time both were busy (the overlap), the
time neither was (idle), and the iteration; and it can draw the first turns as two rows.
Pure Python: the arithmetic and the plot need no GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from trainer.figures import pyplot, write_png

Span = tuple[float, float]

PLOT_TURNS = 12
"""Turns the plot draws: enough to see the pattern repeat, few enough to read each one."""


def union(spans: Sequence[Span]) -> list[Span]:
    """The spans merged where they touch or overlap, in time order."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def busy(spans: Sequence[Span]) -> float:
    return sum(end - start for start, end in union(spans))


def overlap(a: Sequence[Span], b: Sequence[Span]) -> float:
    """Time during which both ``a`` and ``b`` have a span running."""
    ua, ub = union(a), union(b)
    i = j = 0
    total = 0.0
    while i < len(ua) and j < len(ub):
        lo, hi = max(ua[i][0], ub[j][0]), min(ua[i][1], ub[j][1])
        total += max(0.0, hi - lo)
        if ua[i][1] < ub[j][1]:
            i += 1
        else:
            j += 1
    return total


def summarize(env: Sequence[Span], cycle: Sequence[Span]) -> dict[str, float | int]:
    """Per-turn means over a window of turns: the document's ``timeline`` section."""
    if not env or len(env) != len(cycle):
        raise ValueError(
            f"need the same number of env and cycle spans, got {len(env)} and {len(cycle)}"
        )
    turns = len(env)
    everything = [*env, *cycle]
    window = max(end for _, end in everything) - min(start for start, _ in everything)
    both = overlap(env, cycle)
    idle = window - busy(everything)
    return {
        "turns": turns,
        "iteration_ms": round(window / turns, 4),
        "env_step_ms": round(busy(env) / turns, 4),
        "cycle_ms": round(busy(cycle) / turns, 4),
        "overlap_ms": round(both / turns, 4),
        "idle_ms": round(max(0.0, idle) / turns, 4),
    }


def plot(env: Sequence[Span], cycle: Sequence[Span], path: Path, title: str) -> Path:
    """Draw the first :data:`PLOT_TURNS` turns as two rows of bars (PNG), time from the first start."""
    plt = pyplot()
    env, cycle = list(env[:PLOT_TURNS]), list(cycle[:PLOT_TURNS])
    t0 = min(start for start, _ in [*env, *cycle])
    fig, ax = plt.subplots(figsize=(10, 2.4))
    rows = (("learner cycle", cycle, "tab:orange"), ("env step", env, "tab:blue"))
    for y, (_, spans, colour) in enumerate(rows):
        bars = [(start - t0, end - start) for start, end in spans]
        ax.broken_barh(bars, (y - 0.35, 0.7), facecolors=colour, edgecolors="white", linewidth=0.5)
    ax.set_yticks(range(len(rows)), [label for label, _, _ in rows])
    ax.set_xlabel("ms on the GPU, from the first turn drawn")
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return write_png(fig, path, dpi=120)
