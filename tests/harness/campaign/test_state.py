"""campaign.json bookkeeping, --resume rules, the lock, and `soak-campaign status` (no Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.errors import HarnessError, UsageError
from contracts.jsonio import load_strict
from contracts.schemas import validate
from harness.campaign import cli
from harness.campaign.spec import load_campaign
from harness.campaign.state import (
    HTML_FILE,
    STATE_FILE,
    CampaignState,
    acquire_lock,
    driver_running,
    load_state,
)


@pytest.fixture
def spec(write_campaign, campaign_doc):
    return load_campaign(write_campaign(campaign_doc(seeds=[1, 2, 3])))


def _passed_fields(rel: str) -> dict:
    return {
        "status": "passed",
        "host": "node-a",
        "artifact": f"{rel}/soak.json",
        "report": f"{rel}/report/report.html",
        "log": f"{rel}/g1-soak.log",
        "wall_time_s": 61.5,
        "residual_process_count": 0,
        "throughput": {
            "final_env_steps_per_sec": 9.0,
            "tail_env_steps_per_sec": 9.5,
            "steady_env_steps_per_sec": 9.25,
            "total_env_steps": 28,
            "completed_iterations": 5,
        },
    }


def _three_cells(spec) -> CampaignState:
    """s1 passed, s2 failed, s3 submitted when the driver was killed."""
    state = CampaignState.create(spec, "2.60.0")
    state.prepare_directory()
    state.begin_invocation(resumed=False, address=None)
    ids = [cell.id for cell in spec.cells]
    for cell_id in ids:
        state.add_attempt(cell_id)
    state.end_attempt(ids[0], 1, _passed_fields(f"cells/{ids[0]}/attempt-1"))
    state.end_attempt(
        ids[1], 1, {"status": "failed", "reason": "resource_leak: 1 residual process"}
    )
    state.save()
    return state


def test_resume_keeps_verdicts_and_reruns_what_the_killed_driver_left(spec) -> None:
    _three_cells(spec)
    doc = load_strict(spec.directory / STATE_FILE)
    assert validate(doc, "campaign_result.v1.json") == []
    assert doc["status"] == "running" and doc["counts"]["pending"] == 1

    resumed = CampaignState.resume(spec, "2.60.0")
    resumed.begin_invocation(resumed=True, address="127.0.0.1:6379")
    ids = [cell.id for cell in spec.cells]
    assert [cell["id"] for cell in resumed.cells_to_run()] == [ids[2]]
    abandoned = resumed.cell(ids[2])["attempts"][0]
    assert abandoned["status"] == "interrupted" and "driver stopped" in abandoned["reason"]
    assert resumed.add_attempt(ids[2]) == 2
    resumed.end_attempt(ids[2], 2, _passed_fields(f"cells/{ids[2]}/attempt-2"))
    resumed.finish("finished")
    resumed.save()
    final = load_state(spec.directory)
    assert (final["status"], final["verdict"]) == ("finished", "failed")
    assert final["counts"] == {
        "passed": 2, "failed": 1, "lost": 0, "error": 0, "interrupted": 0, "pending": 0,
    }  # fmt: skip
    assert [inv["resumed"] for inv in final["invocations"]] == [False, True]
    assert final["cells"][0]["attempts"][0]["status"] == "passed"  # kept as it was


def test_resume_refuses_a_changed_file_and_new_refuses_a_used_directory(
    spec, write_campaign, campaign_doc
) -> None:
    _three_cells(spec)
    with pytest.raises(UsageError, match="not empty; pass --resume"):
        CampaignState.create(spec, "2.60.0")
    changed = load_campaign(write_campaign(campaign_doc(seeds=[1, 2, 4])))
    with pytest.raises(UsageError, match="changed since the campaign started"):
        CampaignState.resume(changed, "2.60.0")
    fresh = load_campaign(write_campaign(campaign_doc(directory="elsewhere"), "other.yaml"))
    with pytest.raises(UsageError, match="cannot resume.*does not exist"):
        CampaignState.resume(fresh, "2.60.0")


def test_one_driver_at_a_time(spec) -> None:
    state = _three_cells(spec)
    assert not driver_running(state.directory)
    handle = acquire_lock(state.directory)
    try:
        assert driver_running(state.directory)
        with pytest.raises(HarnessError, match="in use by another soak-campaign run"):
            acquire_lock(state.directory)
    finally:
        handle.close()
    assert not driver_running(state.directory)


def test_status_tables_the_cells_and_links_them_in_html(spec, capsys) -> None:
    state = _three_cells(spec)
    ids = [cell.id for cell in spec.cells]
    (state.directory / f"cells/{ids[2]}/attempt-1").mkdir(parents=True)
    (state.directory / f"cells/{ids[2]}/attempt-1/started.json").write_text("{}")

    assert cli.main(["status", str(state.directory)]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("base-s")]
    table = {cells[0]: cells[1] for cells in rows if not cells[0].endswith(":")}
    assert table == {ids[0]: "passed", ids[1]: "failed", ids[2]: "running"}
    passed = next(cells for cells in rows if cells[0] == ids[0])
    assert "9.2" in passed and "9.5" not in passed  # steps/s is the steady rate, not the tail
    assert f"{ids[1]}: resource_leak: 1 residual process" in out
    assert "no soak-campaign run is driving this campaign" in out  # running, no lock held

    assert cli.main(["status", str(state.directory), "--json"]) == 0
    assert load_strict(state.directory / STATE_FILE) == json.loads(capsys.readouterr().out)
    page = (state.directory / HTML_FILE).read_text(encoding="utf-8")
    assert f'href="cells/{ids[0]}/attempt-1/report/report.html"' in page
    assert f'href="cells/{ids[0]}/attempt-1/soak.json"' in page


def _evaluated(success: float, r_mpkpe: float) -> dict:
    figures = {"iteration": 5, "success_rate": success, "r_mpkpe_mm": r_mpkpe, "mpkpe_mm": 99.0}
    return {"status": "evaluated", "points": 1, "final": figures, "best": figures}


def test_status_gives_each_configuration_the_range_over_its_seeds(spec, capsys) -> None:
    state = _three_cells(spec)  # s1 passed, s2 failed, s3 unfinished
    ids = [cell.id for cell in spec.cells]
    state.cell(ids[0])["attempts"][0]["evaluation"] = _evaluated(0.25, 80.0)
    state.end_attempt(
        ids[2],
        1,
        _passed_fields(f"cells/{ids[2]}/attempt-1") | {"evaluation": _evaluated(0.75, 60.0)},
    )
    state.save()
    assert validate(load_strict(state.directory / STATE_FILE), "campaign_result.v1.json") == []

    assert cli.main(["status", str(state.directory)]) == 0
    out = capsys.readouterr().out
    assert "over seeds" in out
    spread_row = next(line.split() for line in out.splitlines() if "2/3" in line.split())
    # 2 of 3 cells evaluated; success 0.25 and 0.75; R-MPKPE 80 and 60 mm; both at 9.25 steps/s
    assert spread_row[-6:] == ["2/3", "0.500", "0.250–0.750", "70.0", "60.0–80.0", "9.2"]
    page = (state.directory / HTML_FILE).read_text(encoding="utf-8")
    assert "<h2>over seeds" in page and "<td>0.250–0.750</td>" in page


def test_a_campaign_of_one_seed_per_configuration_has_no_spread_table(
    write_campaign, campaign_doc, capsys
) -> None:
    one = load_campaign(write_campaign(campaign_doc(seeds=[1])))
    state = CampaignState.create(one, "2.60.0")
    state.prepare_directory()
    state.begin_invocation(resumed=False, address=None)
    state.save()
    assert cli.main(["status", str(state.directory)]) == 0
    assert "over seeds" not in capsys.readouterr().out
    assert "<h2>" not in (state.directory / HTML_FILE).read_text(encoding="utf-8")


def test_status_fails_on_a_broken_campaign_json(tmp_path: Path, capsys) -> None:
    (tmp_path / STATE_FILE).write_text('{"schema_version": 1}', encoding="utf-8")
    assert cli.main(["status", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not a valid campaign.json" in err
    assert cli.main(["status", str(tmp_path / "missing")]) == 2
