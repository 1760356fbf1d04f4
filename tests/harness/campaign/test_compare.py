"""`soak-campaign compare` on two recorded regression checks (no Ray, no GPU): the pass rule,
the refusals of unlike or unfinished checks (exit 2, the difference named), --json against
its schema, and the 80-column table."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from contracts.schemas import validate
from harness.campaign import cli
from harness.campaign.spec import load_campaign
from harness.campaign.state import CampaignState
from harness.soak.learning import DEFAULT_MARGIN, DEFAULT_TOLERANCE_MM
from tests.harness.campaign.recorded import learning_result

MOTIONS = ("synthetic", "march")
# windows of the last 2 points: 14.5, 15.5, 16.5 mm -> olympic 15.5 mm on each clip
GOOD = {1: (40.0, 14.0, 15.0), 2: (40.0, 15.0, 16.0), 3: (40.0, 16.0, 17.0)}


def _check(
    tmp_path: Path,
    write_campaign,
    campaign_doc,
    name: str,
    *,
    overrides: tuple[str, ...] = (),
    results: dict[tuple[str, int], tuple[str, tuple[float, ...]]] | None = None,
    finished: bool = True,
    **changes: Any,
) -> Path:
    """A regression check's directory: 2 built-in clips x 3 seeds, recorded results."""
    given = {"seeds": [1, 2, 3], "motions": list(MOTIONS), **changes}
    doc = campaign_doc(name="regression", over_seeds={"window_points": 2}, **given)
    spec = load_campaign(write_campaign(doc, f"{name}.yaml"), candidate_overrides=overrides)
    spec = dataclasses.replace(spec, directory=tmp_path / name)
    state = CampaignState.create(spec, "2.60.0")
    state.prepare_directory()
    state.begin_invocation(resumed=False, address=None)
    for cell in spec.cells:
        state.add_attempt(cell.id)
        verdict, values = (results or {}).get(
            (cell.motion, cell.seed), ("passed", GOOD.get(cell.seed, GOOD[1]))
        )
        status = "passed" if verdict == "passed" else "failed"
        reason = None if status == "passed" else "learning_regression: final behind best"
        fields = {"status": status, "reason": reason, **learning_result(verdict, *values)}
        state.end_attempt(cell.id, 1, fields)
    if finished:
        state.finish("finished")
    state.save()
    return spec.directory


@pytest.fixture
def check(tmp_path, write_campaign, campaign_doc):
    def make(name: str, **kwargs: Any) -> Path:
        return _check(tmp_path, write_campaign, campaign_doc, name, **kwargs)

    return make


def _compare(capsys, *args: Any) -> tuple[int, str, str]:
    code = cli.main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())


def test_a_candidate_no_worse_passes_with_an_80_column_table(check, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    base = check("base")
    # march a little worse: 15.5 -> 16.5 mm olympic is within the 2 mm tolerance
    worse = {("march", s): ("passed", tuple(v + 1.0 for v in GOOD[s])) for s in GOOD}
    cand = check("cand", overrides=("algo.lr_end=3e-5",), results=worse)
    code, out, err = _compare(capsys, base, cand)
    assert code == 0, err
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = {
        (cells[0], cells[1]): cells
        for line in lines
        if (cells := line.split())[:1] in (["synthetic"], ["march"]) and len(cells) == 7
    }
    assert rows[("march", "2")] == ["march", "2", "16.0", "15.0", "17.0", "16.0", "+1.0"]
    assert rows[("synthetic", "1")][-1] == "+0.0"
    flat = " ".join(out.split())
    assert "candidate passed 0/3 16.5 15.5–17.5 +1.0" in flat
    assert "(--override algo.lr_end=3e-5)" in flat
    assert flat.endswith(
        f"candidate passed: passed over seeds on every clip, olympic R-MPKPE at most "
        f"{DEFAULT_MARGIN:.0%} or {DEFAULT_TOLERANCE_MM:g} mm (whichever is more) above the "
        "baseline's (2 clip(s))"
    )


def test_a_candidate_worse_beyond_the_margin_on_one_clip_fails_naming_it(check, capsys) -> None:
    base = check("base")
    worse = {("march", s): ("passed", tuple(v + 5.0 for v in GOOD[s])) for s in GOOD}
    cand = check("cand", overrides=("algo.lr_end=3e-5",), results=worse)
    code, out, _ = _compare(capsys, base, cand)
    assert code == 1
    flat = " ".join(out.split())
    assert (
        "march: the candidate's olympic R-MPKPE 20.5 mm is more than 5% and more than 2 mm "
        "above the baseline's 15.5 mm" in flat
    )
    assert "candidate failed on march:" in flat and "synthetic:" not in flat


def test_a_candidate_that_failed_over_seeds_fails(check, capsys) -> None:
    base = check("base")
    failing = {
        ("synthetic", 1): ("regression", (10.0, 30.0, 14.0)),
        ("synthetic", 2): ("unverified", (40.0, 15.0, 16.0)),
    }
    cand = check("cand", overrides=("algo.lr_end=3e-5",), results=failing)
    code, out, _ = _compare(capsys, base, cand)
    assert code == 1
    flat = " ".join(out.split())
    assert "synthetic: the candidate failed over seeds (2 of 3 seeds failed" in flat
    assert "candidate failed on synthetic:" in flat


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"seeds": [1, 2, 4]}, "not the same seeds: only the baseline"),
        ({"motions": ["synthetic", "dance"]}, "not the same clips: only the baseline"),
        (
            {"sims": {"mujoco": {"num_envs": 4, "iterations": 6}}},
            "not the same budget (--iterations, cell base-s1-synthetic-mujoco): 5 in the baseline",
        ),
    ],
    ids=["seeds", "clips", "budget"],
)
def test_unlike_checks_are_refused_naming_the_difference(
    check, capsys, changes: dict[str, Any], named: str
) -> None:
    base = check("base")
    cand = check("cand", overrides=("algo.lr_end=3e-5",), **changes)
    code, out, err = _compare(capsys, base, cand)
    assert code == 2 and out == ""
    assert named in err, err
    assert err.count("error:") == 1


def test_a_different_save_interval_is_refused(check, capsys, campaign_doc) -> None:
    soak = campaign_doc()["soak"]
    base = check("base")
    extra = [*soak["extra_overrides"], "algo.save_interval=3"]
    cand = check("cand", soak={**soak, "extra_overrides": extra})
    code, _, err = _compare(capsys, base, cand)
    assert code == 2
    assert "not the same save interval (evaluation points): algo.save_interval unset in the " in err
    assert "algo.save_interval=3 in the candidate" in err


def test_an_unfinished_check_is_refused(check, capsys) -> None:
    base = check("base")
    cand = check("cand", finished=False)
    code, _, err = _compare(capsys, base, cand)
    assert code == 2
    assert f"the candidate {cand} is running, not finished" in err
    assert f"soak-campaign regression --directory {cand} --resume" in err


def test_a_directory_without_a_campaign_is_refused(check, capsys, tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    code, _, err = _compare(capsys, check("base"), tmp_path / "empty")
    assert code == 2 and "the candidate:" in err and "campaign.json does not exist" in err


def test_json_validates_against_its_schema(check, capsys) -> None:
    base = check("base")
    worse = {("march", s): ("passed", tuple(v + 5.0 for v in GOOD[s])) for s in GOOD}
    cand = check("cand", overrides=("algo.lr_end=3e-5",), results=worse)
    code, out, _ = _compare(capsys, base, cand, "--json")
    assert code == 1
    doc = json.loads(out)
    assert validate(doc, "campaign_compare.v1.json") == []
    assert doc["verdict"] == "failed" and len(doc["seeds"]) == 6
    assert doc["margin"] == DEFAULT_MARGIN and doc["tolerance_mm"] == DEFAULT_TOLERANCE_MM
    assert doc["candidate"]["candidate_overrides"] == ["algo.lr_end=3e-5"]
    assert doc["baseline"]["candidate_overrides"] == []
    march = next(clip for clip in doc["clips"] if clip["motion"] == "march")
    assert march["passed"] is False and march["difference_mm"] == pytest.approx(5.0)


def test_compare_help_shows_an_example(capsys) -> None:
    assert cli.main(["compare", "--help"]) == 0
    text = capsys.readouterr().out
    assert "Examples:" in text and "soak-campaign compare artifacts/campaigns/base" in text
