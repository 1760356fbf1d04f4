"""Learning judged over seeds (harness/campaign/seeds.py): per-seed outcomes, the olympic
score and the aggregate verdict, with its failure cases, from campaign.json cells."""

from __future__ import annotations

from typing import Any

import pytest

from harness.campaign import seeds
from harness.campaign.spec import OverSeeds

CFG = OverSeeds(window_points=2)


def _points(*r_mpkpe: float | None, success: float = 1.0) -> list[dict[str, Any]]:
    return [
        {"iteration": 1000 * (i + 1), "success_rate": success, "r_mpkpe_mm": value}
        for i, value in enumerate(r_mpkpe)
    ]


def _cell(
    seed: int,
    *r_mpkpe: float | None,
    status: str = "passed",
    learning: str | None = "passed",
    motion: str = "clip",
) -> dict[str, Any]:
    """A finished cell whose soak evaluated points with these R-MPKPE values."""
    final = {"iteration": 1000 * len(r_mpkpe), "success_rate": 1.0, "r_mpkpe_mm": r_mpkpe[-1]}
    known = [v for v in r_mpkpe if v is not None]
    best_value = min(known) if known else None
    best = {
        "iteration": 1000 * (r_mpkpe.index(best_value) + 1) if known else 0,
        "success_rate": 1.0,
        "r_mpkpe_mm": best_value,
    }
    attempt = {
        "evaluation": {"status": "evaluated", "points": len(r_mpkpe), "final": final, "best": best},
        "learning": None
        if learning is None
        else {"verdict": learning, "reason": None, "findings": [], "points": _points(*r_mpkpe)},
    }
    return {
        "id": f"base-s{seed}-{motion}-mujoco",
        "override": "base",
        "seed": seed,
        "motion": motion,
        "sim": "mujoco",
        "status": status,
        "reason": None if status == "passed" else f"{status} reason",
        "attempts": [attempt],
    }


def _crashed(seed: int) -> dict[str, Any]:
    """A cell whose soak could not be judged: the task raised, no artifact."""
    return {
        "id": f"base-s{seed}-clip-mujoco", "override": "base", "seed": seed, "motion": "clip",
        "sim": "mujoco", "status": "error", "reason": "g1-soak exited 1 (no artifact)",
        "attempts": [{"evaluation": None, "learning": None}],
    }  # fmt: skip


def _missing(seed: int) -> dict[str, Any]:
    return {
        "id": f"base-s{seed}-clip-mujoco", "override": "base", "seed": seed, "motion": "clip",
        "sim": "mujoco", "status": "interrupted", "reason": "the campaign was interrupted",
        "attempts": [],
    }  # fmt: skip


def _judge(*cells: dict[str, Any], status: str = "finished", cfg: OverSeeds = CFG):
    (found,) = seeds.configurations({"status": status, "cells": list(cells)}, cfg)
    return found


def test_three_passing_seeds_pass_with_the_olympic_window_score() -> None:
    found = _judge(_cell(1, 30.0, 10.0, 12.0), _cell(2, 30.0, 20.0, 22.0), _cell(3, 9.0, 5.0, 7.0))
    assert found.verdict == "passed" and found.reasons == ()
    # windows (last 2 points): 11, 21, 6; best (6) and worst (21) dropped
    assert [s.window_r_mpkpe_mm for s in found.seeds] == [11.0, 21.0, 6.0]
    assert found.olympic_r_mpkpe_mm == 11.0
    assert found.r_mpkpe_range() == (6.0, 21.0)
    assert found.olympic_success_rate == 1.0
    first = found.seeds[0]
    assert (first.final_r_mpkpe_mm, first.best_r_mpkpe_mm, first.best_iteration) == (
        12.0, 10.0, 2000,
    )  # fmt: skip


def test_one_failing_seed_is_allowed_two_fail_the_configuration() -> None:
    one = _judge(
        _cell(1, 10.0, 10.0),
        _cell(2, 10.0, 30.0, status="failed", learning="regression"),
        _cell(3, 11.0, 11.0),
    )
    assert one.verdict == "passed" and [s.outcome for s in one.seeds][1] == "regression"
    two = _judge(
        _cell(1, 10.0, 10.0),
        _cell(2, 10.0, 30.0, status="failed", learning="regression"),
        _cell(3, 11.0, 40.0, status="failed", learning="unverified"),
    )
    assert two.verdict == "failed"
    assert two.reasons == ("2 of 3 seeds failed (s2 regression, s3 unverified); at most 1 may",)


def test_a_crashed_seed_fails_and_ranks_worst() -> None:
    found = _judge(_cell(1, 10.0, 10.0), _crashed(2), _cell(3, 12.0, 12.0))
    assert [s.outcome for s in found.seeds] == ["passed", "crashed", "passed"]
    assert found.seeds[1].detail == "g1-soak exited 1 (no artifact)"
    assert found.verdict == "passed"  # one failing seed is allowed
    assert found.olympic_r_mpkpe_mm == 12.0  # 10 dropped as best, the crash as worst
    assert found.r_mpkpe_range() == (10.0, 12.0)
    two = _judge(_crashed(1), _crashed(2), _cell(3, 12.0, 12.0))
    assert two.verdict == "failed" and two.olympic_r_mpkpe_mm is None


def test_a_missing_seed_is_pending_while_running_and_failing_once_finished() -> None:
    cells = (_cell(1, 10.0, 10.0), _missing(2), _cell(3, 12.0, 12.0))
    assert _judge(*cells, status="running").verdict == "pending"
    finished = _judge(*cells, status="interrupted")
    assert finished.seeds[1].outcome == "missing" and finished.verdict == "passed"
    both = _judge(_missing(1), _missing(2), _cell(3, 12.0, 12.0), status="finished")
    assert both.verdict == "failed" and "s1 missing, s2 missing" in both.reasons[0]


def test_fewer_than_three_seeds_fail_even_when_every_seed_passed() -> None:
    found = _judge(_cell(1, 10.0, 10.0), _cell(2, 11.0, 11.0))
    assert found.verdict == "failed" and found.olympic_r_mpkpe_mm is None
    assert found.reasons == (
        "2 seed(s); judging over seeds needs at least 3 (the best and the worst are dropped)",
    )


@pytest.mark.parametrize(
    ("values", "score"),
    [
        pytest.param([10.0, 10.0, 10.0], 10.0, id="all-tied"),
        pytest.param([10.0, 10.0, 20.0], 10.0, id="tied-best"),
        pytest.param([10.0, 20.0, 20.0], 20.0, id="tied-worst"),
        pytest.param([5.0, 7.0, 9.0, 30.0], 8.0, id="four-seeds"),
        pytest.param([None, 7.0, 9.0], 9.0, id="missing-ranks-worst"),
        pytest.param([None, None, 9.0], None, id="two-missing"),
        pytest.param([7.0, 9.0], None, id="too-few"),
    ],
)
def test_olympic_drops_exactly_one_best_and_one_worst(values, score) -> None:
    assert seeds.olympic(values) == score


def test_olympic_success_drops_the_highest_and_the_lowest() -> None:
    assert seeds.olympic([1.0, 0.5, 0.9], higher_is_better=True) == 0.9
    assert seeds.olympic([None, 0.5, 0.9], higher_is_better=True) == 0.5


def test_bounds_apply_to_the_olympic_score() -> None:
    cells = (_cell(1, 20.0, 20.0), _cell(2, 30.0, 30.0), _cell(3, 40.0, 40.0))
    strict = OverSeeds(window_points=1, max_r_mpkpe_mm=25.0, min_success_rate=0.99)
    found = _judge(*cells, cfg=strict)
    assert found.verdict == "failed"
    assert found.reasons == ("olympic R-MPKPE 30.0 mm is above the bound 25 mm",)
    assert _judge(*cells, cfg=OverSeeds(window_points=1, max_r_mpkpe_mm=30.0)).verdict == "passed"


def test_window_mean_needs_every_point_of_the_window_finite() -> None:
    points = _points(50.0, None, 12.0, 14.0)
    assert seeds.window_mean(points, "r_mpkpe_mm", 2) == 13.0
    assert seeds.window_mean(points, "r_mpkpe_mm", 3) is None
    assert seeds.window_mean(points[::-1], "r_mpkpe_mm", 1) == 14.0  # by iteration, not order
    assert seeds.window_mean(points, "r_mpkpe_mm", 10) is None


def test_outcomes_of_soaks_that_failed_or_never_judged() -> None:
    soak_failed = _cell(1, 10.0, status="failed", learning="passed")
    not_judged = _cell(2, 10.0, status="failed", learning="not_judged")
    old_record = _cell(3, 10.0, learning=None)  # written before attempts had a learning field
    found = _judge(soak_failed, not_judged, old_record)
    assert [s.outcome for s in found.seeds] == ["soak_failed", "crashed", "unverified"]
    assert found.seeds[2].window_r_mpkpe_mm == 10.0  # the final point stands in
    assert found.verdict == "failed"


def test_configurations_group_by_override_motion_and_sim_in_campaign_order() -> None:
    cells = [_cell(s, 10.0, motion=m) for m in ("b", "a") for s in (1, 2, 3)]
    found = seeds.configurations({"status": "finished", "cells": cells}, CFG)
    assert [(c.motion, len(c.seeds), c.verdict) for c in found] == [
        ("b", 3, "passed"),
        ("a", 3, "passed"),
    ]
    assert seeds.campaign_passed(found)


def test_an_attempt_keeps_the_soaks_learning_verdict_and_every_point() -> None:
    from harness.campaign.cell import learning_summary

    def headline(iteration: int, r_mpkpe: float | None) -> dict[str, Any]:
        figures = {"success_rate": 1.0, "mpkpe_mm": 30.0, "r_mpkpe_mm": r_mpkpe}
        return {"iteration": iteration, "env_steps": 4 * iteration, "source": "checkpoint",
                "uniform": figures, "frame0": figures}  # fmt: skip

    artifact = {
        "learning": {
            "mode": "enforce", "verdict": "regression", "reason": None, "thresholds": {},
            "evaluation": {"points": [headline(2000, 12.9), headline(4000, None)]},
            "losses": None,
            "findings": [{"check": "final_behind_best", "classification": "learning_regression",
                          "message": "final uniform-start R-MPKPE ..."}],
        }
    }  # fmt: skip
    assert learning_summary(artifact) == {
        "verdict": "regression",
        "reason": None,
        "findings": ["final_behind_best"],
        "points": [
            {"iteration": 2000, "success_rate": 1.0, "r_mpkpe_mm": 12.9},
            {"iteration": 4000, "success_rate": 1.0, "r_mpkpe_mm": None},
        ],
    }
    assert learning_summary({"learning": None}) is None
