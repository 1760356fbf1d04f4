"""Each configuration over its seeds (harness/campaign/spread.py), from campaign.json cells."""

from __future__ import annotations

from harness.campaign import spread


def _cell(override: str, seed: int, success, r_mpkpe, steady, motion: str = "synthetic") -> dict:
    final = {"iteration": 3000, "success_rate": success, "r_mpkpe_mm": r_mpkpe, "mpkpe_mm": None}
    attempt = {
        "evaluation": {"status": "evaluated", "points": 1, "final": final, "best": final},
        "throughput": {"steady_env_steps_per_sec": steady},
    }
    return {
        "override": override,
        "seed": seed,
        "motion": motion,
        "sim": "mjwarp",
        "attempts": [attempt],
    }


def test_cells_group_by_configuration_in_campaign_order_across_seeds() -> None:
    doc = {
        "cells": [
            _cell("owner", 1, 0.977, 78.2, 132_200.0),
            _cell("multi_kernel", 1, 0.43, 73.7, 127_400.0),
            _cell("owner", 2, 0.664, 68.9, 124_800.0),
            _cell("owner", 3, 0.234, 81.3, 121_000.0),
            _cell("owner", 1, 1.0, 5.0, 120_000.0, motion="march"),
        ]
    }
    groups = spread.spreads(doc)
    assert [(g.override, g.motion, g.cells) for g in groups] == [
        ("owner", "synthetic", 3),
        ("multi_kernel", "synthetic", 1),
        ("owner", "march", 1),
    ]
    assert spread.worth_showing(groups)
    assert spread.row(groups[0]) == [
        "owner · synthetic · mjwarp", "3/3", "0.625", "0.234–0.977", "76.1", "68.9–81.3", "126.0k",
    ]  # fmt: skip


def test_a_cell_without_figures_counts_but_adds_none() -> None:
    unevaluated = {"override": "base", "seed": 2, "motion": "m", "sim": "mujoco", "attempts": []}
    failed = _cell("base", 1, None, None, None, motion="m") | {"sim": "mujoco"}
    groups = spread.spreads({"cells": [failed, unevaluated]})
    assert spread.row(groups[0]) == ["base · m · mujoco", "0/2", "-", "-", "-", "-", "-"]
    one_seed_each = spread.spreads(
        {"cells": [_cell("a", 1, 0.5, 1.0, 9.0), _cell("b", 1, 0.5, 1.0, 9.0)]}
    )
    assert not spread.worth_showing(one_seed_each)
