"""`soak-campaign regression --override`: the candidate's overrides reach every cell after its
override set's own entries, show in the plan and campaign.json, are checked before anything
starts, and `--resume` refuses a different list (no Ray, no GPU)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rich.console import Console

from contracts.schemas import validate
from harness.campaign import cli
from harness.campaign.candidate import check_candidate, directory_tag
from harness.campaign.plan import plan_document, print_plan
from harness.campaign.spec import load_campaign
from harness.campaign.state import CampaignState

CANDIDATE = ("algo.lr_end=3e-5", "algo.gamma=0.98")


@pytest.fixture
def spec_file(write_campaign, campaign_doc) -> Path:
    """A CPU regression spec: 2 built-in clips x 3 seeds, two override sets."""
    doc = campaign_doc(
        name="regression",
        seeds=[1, 2, 3],
        motions=["synthetic", "march"],
        overrides={"base": [], "small": ["algo.batch_size=4"]},
        over_seeds={"window_points": 2},
    )
    return write_campaign(doc)


def _extra(args: tuple[str, ...] | list[str]) -> list[str]:
    return [args[i + 1] for i, flag in enumerate(args) if flag == "--extra-override"]


def test_the_overrides_follow_each_override_set_in_every_cell(spec_file, tmp_path) -> None:
    spec = load_campaign(spec_file, candidate_overrides=check_candidate(CANDIDATE))
    assert len(spec.cells) == 12
    for cell in spec.cells:
        own = ["algo.batch_size=4"] if cell.override == "small" else []
        expected = ["algo.batch_size=8", "algo.learning_starts=2", *own, *CANDIDATE]
        assert _extra(cell.args) == [*expected, f"algo.seed={cell.seed}"]
    # the hash judges the file only: --resume names the override list, not a changed file
    assert spec.spec_sha256 == load_campaign(spec_file).spec_sha256

    state = CampaignState.create(dataclasses.replace(spec, directory=tmp_path / "c"), "2.60.0")
    state.prepare_directory()
    state.begin_invocation(resumed=False, address=None)
    state.save()
    doc = json.loads((tmp_path / "c" / "campaign.json").read_text(encoding="utf-8"))
    assert validate(doc, "campaign_result.v1.json") == []
    assert doc["candidate_overrides"] == list(CANDIDATE)
    assert all(_extra(cell["g1_soak_args"])[-3:-1] == list(CANDIDATE) for cell in doc["cells"])

    plan = plan_document(spec, 2)
    assert plan["candidate_overrides"] == list(CANDIDATE)
    console = Console(width=80, record=True)
    print_plan(spec, 2, console)
    text = " ".join(console.export_text().split())
    assert "candidate overrides (after each override set's own, in every cell): " in text
    assert "algo.lr_end=3e-5 algo.gamma=0.98" in text


def test_the_default_directory_differs_for_a_candidate() -> None:
    assert directory_tag(()) == ""
    assert directory_tag(CANDIDATE) != directory_tag(CANDIDATE[:1])
    assert len(directory_tag(CANDIDATE)) == 9


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("algo.lr_end", "--override 'algo.lr_end': must look like KEY=VALUE"),
        ("algo.seed=4", "the check sets 'algo.seed' per cell"),
        ("algo.num_envs=64", "'algo.num_envs' is a soak-owned override"),
        ("algo.save_interval=500", "'algo.save_interval' is the check's evaluation protocol"),
        ("eval.uniform_episodes=8", "'eval.uniform_episodes' is the check's evaluation protocol"),
        (  # a value only the trainer's config check refuses, in the preflight
            "algo.policy_average_rate=2",
            "must lie in [0, 1] (0: off); use e.g. 0.002; fix the campaign file or the --override list",
        ),
    ],
)
def test_a_bad_override_exits_2_before_anything_starts(
    spec_file, tmp_path, capsys, bad: str, said: str
) -> None:
    target = tmp_path / "check"
    argv = ["regression", "--spec", str(spec_file), "--directory", str(target)]
    assert cli.main([*argv, "--override", "algo.gamma=0.98", "--override", bad]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1
    assert said in " ".join(err.split())
    assert not target.exists()


def test_resume_refuses_a_different_override_list(spec_file, tmp_path, capsys) -> None:
    target = tmp_path / "check"
    spec = load_campaign(spec_file, candidate_overrides=CANDIDATE[:1])
    state = CampaignState.create(dataclasses.replace(spec, directory=target), "2.60.0")
    state.prepare_directory()
    state.begin_invocation(resumed=False, address=None)
    state.save()
    before = (target / "campaign.json").read_text(encoding="utf-8")
    argv = ["regression", "--spec", str(spec_file), "--directory", str(target), "--resume"]
    for overrides in ([], ["--override", CANDIDATE[0], "--override", CANDIDATE[1]]):
        assert cli.main([*argv, *overrides]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"cannot resume {target}: it was started with --override [algo.lr_end=3e-5]" in err
        assert "pass the same --override list or start a new directory" in err
    assert (target / "campaign.json").read_text(encoding="utf-8") == before


def test_dry_run_plans_every_cell_with_the_overrides(spec_file, tmp_path, capsys) -> None:
    target = tmp_path / "check"
    argv = ["regression", "--spec", str(spec_file), "--directory", str(target), "--dry-run"]
    assert cli.main([*argv, "--json", "--override", CANDIDATE[0]]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["candidate_overrides"] == [CANDIDATE[0]]
    assert all(_extra(cell["g1_soak_args"])[-2] == CANDIDATE[0] for cell in plan["cells"])
    assert not target.exists()
