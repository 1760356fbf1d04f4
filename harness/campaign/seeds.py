"""Learning judged over seeds: per-seed verdicts and an olympic aggregate (docs/campaign.md).

One run cannot judge a recipe: the owner's configuration spans 23-98 % success over seeds at
3,000 iterations. So a campaign with ``over_seeds`` judges each configuration (override set x
motion x sim) over its seeds:

- **per seed**: the cell's soak passed and its learning verdict (final point against the best
  one, harness/soak/learning.py) passed. Anything else fails the seed, by kind: ``regression``,
  ``unverified``, ``soak_failed`` (the soak failed on something else), ``crashed`` (no soak
  could be judged: an error, a lost worker, a run that never completed) or ``missing`` (the
  cell never finished).
- **aggregate**: the configuration fails when more than ``max_failing_seeds`` (1) seeds fail.
  Its score is olympic, as MLPerf scores its runs: the best and the worst seed are dropped and
  the rest averaged, so one lucky or unlucky seed moves neither the score nor the verdict. A
  seed without a figure ranks worst. Each seed's figure is the mean of its last
  ``window_points`` evaluation points (uniform starts), which damps the point-to-point
  wandering of a converged policy; optional bounds apply to the olympic score.

Pure: reads ``campaign.json`` cells only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from harness.campaign.spec import MIN_SEEDS, OverSeeds

PASSED = "passed"
FAILED = "failed"
PENDING = "pending"
UNFINISHED = ("pending", "interrupted")
CRASHED_CELL = ("error", "lost")


@dataclass(frozen=True)
class SeedResult:
    """One seed of one configuration: its outcome and its figures (uniform starts)."""

    seed: int
    cell_id: str
    outcome: str
    detail: str | None = None
    final_r_mpkpe_mm: float | None = None
    best_r_mpkpe_mm: float | None = None
    best_iteration: int | None = None
    final_success_rate: float | None = None
    window_r_mpkpe_mm: float | None = None
    window_success_rate: float | None = None

    @property
    def failed(self) -> bool:
        return self.outcome != PASSED

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "cell": self.cell_id,
            "outcome": self.outcome,
            "detail": self.detail,
            "final_r_mpkpe_mm": self.final_r_mpkpe_mm,
            "best_r_mpkpe_mm": self.best_r_mpkpe_mm,
            "best_iteration": self.best_iteration,
            "final_success_rate": self.final_success_rate,
            "window_r_mpkpe_mm": self.window_r_mpkpe_mm,
            "window_success_rate": self.window_success_rate,
        }


@dataclass(frozen=True)
class Configuration:
    """One configuration judged over its seeds."""

    override: str
    motion: str
    sim: str
    seeds: tuple[SeedResult, ...]
    verdict: str
    reasons: tuple[str, ...]
    olympic_r_mpkpe_mm: float | None
    olympic_success_rate: float | None

    @property
    def failing(self) -> list[SeedResult]:
        return [seed for seed in self.seeds if seed.failed]

    def r_mpkpe_range(self) -> tuple[float, float] | None:
        return _range([s.window_r_mpkpe_mm for s in self.seeds])

    def success_range(self) -> tuple[float, float] | None:
        return _range([s.window_success_rate for s in self.seeds])

    def to_json(self) -> dict[str, Any]:
        r_range, s_range = self.r_mpkpe_range(), self.success_range()
        return {
            "override": self.override,
            "motion": self.motion,
            "sim": self.sim,
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "failing_seeds": len(self.failing),
            "olympic_r_mpkpe_mm": self.olympic_r_mpkpe_mm,
            "olympic_success_rate": self.olympic_success_rate,
            "r_mpkpe_range_mm": None if r_range is None else list(r_range),
            "success_rate_range": None if s_range is None else list(s_range),
            "seeds": [seed.to_json() for seed in self.seeds],
        }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _range(values: Sequence[float | None]) -> tuple[float, float] | None:
    known = [v for v in values if v is not None]
    return (min(known), max(known)) if known else None


def window_mean(points: Sequence[Mapping[str, Any]], key: str, window: int) -> float | None:
    """The mean of ``key`` over the last ``window`` points by iteration; None if one is null."""
    last = sorted(points, key=lambda p: p["iteration"])[-window:]
    values = [_number(p.get(key)) for p in last]
    if not values or any(v is None for v in values):
        return None
    return fmean(values)  # type: ignore[arg-type]


def _figures(attempt: Mapping[str, Any], window: int) -> dict[str, Any]:
    evaluation = attempt.get("evaluation") or {}
    final = evaluation.get("final") or {}
    best = evaluation.get("best") or {}
    points = (attempt.get("learning") or {}).get("points") or []
    figures = {
        "final_r_mpkpe_mm": _number(final.get("r_mpkpe_mm")),
        "best_r_mpkpe_mm": _number(best.get("r_mpkpe_mm")),
        "best_iteration": best.get("iteration"),
        "final_success_rate": _number(final.get("success_rate")),
    }
    if points:
        figures["window_r_mpkpe_mm"] = window_mean(points, "r_mpkpe_mm", window)
        figures["window_success_rate"] = window_mean(points, "success_rate", window)
    else:  # no point list: the final point alone
        figures["window_r_mpkpe_mm"] = figures["final_r_mpkpe_mm"]
        figures["window_success_rate"] = figures["final_success_rate"]
    return figures


def _outcome(cell: Mapping[str, Any], attempt: Mapping[str, Any]) -> tuple[str, str | None]:
    status = cell["status"]
    if status in UNFINISHED or not cell["attempts"]:
        return "missing", cell.get("reason") or "the cell has not finished"
    if status in CRASHED_CELL:
        return "crashed", cell.get("reason")
    learning = attempt.get("learning") or {}
    verdict = learning.get("verdict")
    if verdict == "passed":
        if status == PASSED:
            return PASSED, None
        return "soak_failed", cell.get("reason")
    if verdict in ("regression", "unverified"):
        return verdict, learning.get("reason") or cell.get("reason")
    if verdict == "not_judged":
        return "crashed", learning.get("reason") or cell.get("reason")
    return "unverified", cell.get("reason") or "the soak recorded no learning verdict"


def seed_result(cell: Mapping[str, Any], window: int) -> SeedResult:
    """The seed of one campaign cell: its outcome and figures from its last attempt."""
    attempt = cell["attempts"][-1] if cell["attempts"] else {}
    outcome, detail = _outcome(cell, attempt)
    return SeedResult(cell["seed"], cell["id"], outcome, detail, **_figures(attempt, window))


def olympic(values: Sequence[float | None], *, higher_is_better: bool = False) -> float | None:
    """Mean after dropping the best and the worst value; a missing value ranks worst.

    None with fewer than ``MIN_SEEDS`` values, or when a missing value survives the drop.
    """
    if len(values) < MIN_SEEDS:
        return None
    worst = -math.inf if higher_is_better else math.inf

    def rank(value: float | None) -> float:
        known = worst if value is None else value
        return -known if higher_is_better else known

    kept = sorted(values, key=rank)[1:-1]  # a stable sort: ties keep their seed order
    if any(v is None for v in kept):
        return None
    return fmean(kept)  # type: ignore[arg-type]


def _bound_reasons(cfg: OverSeeds, r_mpkpe: float | None, success: float | None) -> list[str]:
    reasons = []
    if cfg.max_r_mpkpe_mm is not None and (r_mpkpe is None or r_mpkpe > cfg.max_r_mpkpe_mm):
        shown = "none" if r_mpkpe is None else f"{r_mpkpe:.1f} mm"
        reasons.append(f"olympic R-MPKPE {shown} is above the bound {cfg.max_r_mpkpe_mm:g} mm")
    if cfg.min_success_rate is not None and (success is None or success < cfg.min_success_rate):
        shown = "none" if success is None else f"{success:.3f}"
        reasons.append(f"olympic success rate {shown} is below the bound {cfg.min_success_rate:g}")
    return reasons


def judge(
    key: tuple[str, str, str],
    seeds: Sequence[SeedResult],
    cfg: OverSeeds,
    *,
    finished: bool,
) -> Configuration:
    """One configuration's verdict; ``finished``: the campaign will run no more cells, so a
    missing seed is a failing one (else the verdict is ``pending`` while seeds are missing)."""
    r_score = olympic([s.window_r_mpkpe_mm for s in seeds])
    s_score = olympic([s.window_success_rate for s in seeds], higher_is_better=True)
    failing = [s for s in seeds if s.failed]
    if not finished and any(s.outcome == "missing" for s in seeds):
        return Configuration(*key, tuple(seeds), PENDING, (), r_score, s_score)
    reasons: list[str] = []
    if len(seeds) < MIN_SEEDS:
        reasons.append(
            f"{len(seeds)} seed(s); judging over seeds needs at least {MIN_SEEDS} "
            "(the best and the worst are dropped)"
        )
    if len(failing) > cfg.max_failing_seeds:
        listed = ", ".join(f"s{s.seed} {s.outcome}" for s in failing)
        reasons.append(
            f"{len(failing)} of {len(seeds)} seeds failed ({listed}); "
            f"at most {cfg.max_failing_seeds} may"
        )
    reasons += _bound_reasons(cfg, r_score, s_score)
    verdict = FAILED if reasons else PASSED
    return Configuration(*key, tuple(seeds), verdict, tuple(reasons), r_score, s_score)


def configurations(doc: Mapping[str, Any], cfg: OverSeeds) -> list[Configuration]:
    """Every configuration of ``campaign.json``, in campaign order, judged over its seeds."""
    groups: dict[tuple[str, str, str], list[SeedResult]] = {}
    for cell in doc["cells"]:
        key = (cell["override"], cell["motion"], cell["sim"])
        groups.setdefault(key, []).append(seed_result(cell, cfg.window_points))
    finished = doc["status"] != "running"
    return [judge(key, seeds, cfg, finished=finished) for key, seeds in groups.items()]


def config_of(doc: Mapping[str, Any]) -> OverSeeds | None:
    """The ``over_seeds`` settings ``campaign.json`` records, or None for a plain campaign."""
    section = doc.get("over_seeds")
    return None if section is None else OverSeeds(**section["config"])


def campaign_passed(found: Sequence[Configuration]) -> bool:
    return all(c.verdict == PASSED for c in found)
