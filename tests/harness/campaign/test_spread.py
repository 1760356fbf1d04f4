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


def test_a_file_motion_shows_as_the_cells_label_not_its_path() -> None:
    """A path would wrap the 80-column table into five lines per configuration."""
    motion = "/tmp/repo/artifacts/m4probe/M_Move4.npz"
    groups = spread.spreads(
        {"cells": [_cell("mps", s, 0.9, 60.0, 25_000.0, motion) for s in (1, 2)]}
    )
    assert spread.row(groups[0])[0] == "mps · m-move4 · mjwarp"
    assert groups[0].motion == motion  # the document keeps the path


def test_the_table_names_only_the_parts_that_tell_configurations_apart() -> None:
    cells = [
        _cell(o, s, 0.9, 60.0, 25_000.0, f"/data/{m}.npz")
        for o, m in (("mps", "M_Move4"), ("mps", "M_Move4_blend"))
        for s in (1, 2)
    ]
    groups = spread.spreads({"cells": cells})
    show = spread.varying(groups)
    assert show == (False, True, False)
    assert [spread.row(g, show)[0] for g in groups] == ["m-move4", "m-move4-blend"]
    mixed = spread.spreads(
        {"cells": [*cells, _cell("avg", 1, 0.9, 60.0, 1.0, "/data/M_Move4.npz")]}
    )
    assert [spread.row(g, spread.varying(mixed))[0] for g in mixed] == [
        "mps · m-move4",
        "mps · m-move4-blend",
        "avg · m-move4",
    ]
    one = spread.spreads({"cells": cells[:2]})
    assert spread.row(one[0], spread.varying(one))[0] == "m-move4"
