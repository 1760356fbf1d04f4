"""`soak-campaign` for real, without Ray: every g1-soak flag, the preflight of every cell
before Ray starts, `--dry-run`, the library root, the 80-column table, and the regression
check's plan and tables (on recorded results: a real run is in test_campaign_ray.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from contracts.jsonio import load_strict
from contracts.schemas import validate
from harness.campaign.spec import LIST_FLAGS, SCALAR_FLAGS, load_campaign
from harness.campaign.state import STATE_FILE, CampaignState
from harness.soak.cli import g1_soak_app
from tests.harness.campaign.recorded import learning_result

BIN = Path(sys.executable).parent
LIBRARY = Path(__file__).parents[3] / ".." / "shared" / "motions" / "g1-moves"
CLIP = "dance/J_Dance18_TikTok.csv"
# g1-soak options a campaign sets itself (per cell or per attempt), or that only shape output.
CAMPAIGN_OWNED = {"log_dir", "output", "overwrite", "sim", "motion", "json_out", "check_only"}
needs_library = pytest.mark.skipif(
    not (LIBRARY / CLIP).is_file(), reason=f"the motion library is not at {LIBRARY}"
)


def _soak_campaign(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(
        [str(BIN / "soak-campaign"), *args],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_a_campaign_takes_every_g1_soak_flag() -> None:
    params = typer.main.get_command(g1_soak_app).params
    soak_flags = {p.name for p in params} - CAMPAIGN_OWNED
    plural = {"trend_threshold": "trend_thresholds", "extra_override": "extra_overrides"}
    expected = {plural.get(name, name) for name in soak_flags}
    assert set(SCALAR_FLAGS) | set(LIST_FLAGS) == expected
    schema = load_strict(Path(__file__).parents[3] / "schemas" / "campaign.v1.json")
    assert set(schema["$defs"]["soak_flags"]["properties"]) == expected


def test_an_override_typo_fails_in_the_preflight_before_ray(
    write_campaign, campaign_doc, tmp_path
) -> None:
    path = write_campaign(campaign_doc(overrides={"typo": ["algo.batch_sise=3"]}))
    proc = _soak_campaign("run", str(path))
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"error: campaign file {path}: cell typo-s1-synthetic-mujoco: ")
    assert "did you mean 'algo.batch_size'" in line
    assert not (tmp_path / "out").exists()  # nothing written: Ray was never started


def test_a_time_budget_and_learning_flags_reach_every_cell_and_dry_run_starts_nothing(
    write_campaign, campaign_doc, tmp_path
) -> None:
    doc = campaign_doc(seeds=[1, 2])
    doc["soak"].update(duration_seconds=30, learning_mode="report", learning_tolerance_mm=3)
    del doc["sims"]["mujoco"]["iterations"]
    proc = _soak_campaign("run", str(write_campaign(doc)), "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["preflight_checked"] == 1  # the two seeds share one check
    for cell in plan["cells"]:
        args = cell["g1_soak_args"]
        assert args[args.index("--duration-seconds") + 1] == "30"
        assert args[args.index("--learning-mode") + 1] == "report"
        assert args[args.index("--learning-tolerance-mm") + 1] == "3"
    assert not (tmp_path / "out").exists()

    doc["soak"]["min_duration_seconds"] = 60  # longer than the budget: g1-soak refuses it
    proc = _soak_campaign("run", str(write_campaign(doc)), "--dry-run")
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert "cell base-s1-synthetic-mujoco" in line
    assert "--min-duration-seconds=60 exceeds --duration-seconds=30" in line


def test_a_missing_library_root_is_one_line(write_campaign, campaign_doc, tmp_path) -> None:
    path = write_campaign(campaign_doc(motions=[f"library:{CLIP}"]))
    missing = tmp_path / "no-library"
    proc = _soak_campaign("run", str(path), "--library-root", str(missing), "--dry-run")
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"error: motion library {missing} does not exist")
    assert "--library-root" in line


@needs_library
def test_a_misspelled_library_clip_names_the_closest(write_campaign, campaign_doc) -> None:
    path = write_campaign(campaign_doc(motions=["library:dance/J_Dance18_TikTak.csv"]))
    proc = _soak_campaign("run", str(path), "--library-root", str(LIBRARY), "--dry-run")
    assert proc.returncode == 2
    assert f"did you mean 'library:{CLIP}'?" in proc.stderr


def _tiny_regression(campaign_doc, seeds=(1, 2, 3)) -> dict[str, Any]:
    return campaign_doc(
        name="regression",
        seeds=list(seeds),
        motions=[f"library:{CLIP}"],
        over_seeds={"window_points": 2},
    )


@needs_library
def test_regression_dry_run_plans_and_preflights_a_cpu_spec(
    write_campaign, campaign_doc, tmp_path
) -> None:
    spec = write_campaign(_tiny_regression(campaign_doc))
    target = tmp_path / "check"
    proc = _soak_campaign(
        "regression", "--spec", str(spec), "--library-root", str(LIBRARY),
        "--directory", str(target), "--dry-run",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for seed in (1, 2, 3):
        assert f"base-s{seed}-j-dance18-tiktok-mujoco" in out
    assert "preflight: 1 distinct cell(s) passed g1-soak --check-only" in " ".join(out.split())
    assert "dry run: nothing was started" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert not target.exists()


def test_regression_refuses_a_spec_not_judged_over_seeds(write_campaign, campaign_doc) -> None:
    proc = _soak_campaign("regression", "--spec", str(write_campaign(campaign_doc())), "--dry-run")
    assert proc.returncode == 2 and "over_seeds is missing" in proc.stderr


def test_the_project_regression_spec_is_two_library_clips_by_three_seeds(tmp_path: Path) -> None:
    from harness.campaign.cli import REGRESSION_SPEC

    library = LIBRARY if LIBRARY.is_dir() else _stand_in_library(tmp_path, REGRESSION_SPEC)
    spec = load_campaign(REGRESSION_SPEC, library)
    assert spec.over_seeds is not None and spec.mps_requested
    assert len(spec.cells) == 6 and {cell.gpus for cell in spec.cells} == {0.25}
    assert all("--duration-seconds" in cell.args for cell in spec.cells)
    # 512 episodes a point: at 128 a success rate's noise is nearly the verdict's margin
    assert all("eval.uniform_episodes=512" in cell.args for cell in spec.cells)
    text = REGRESSION_SPEC.read_text(encoding="utf-8")
    assert "G1 Moves, Mitch Chaiet, CC-BY-4.0, experientialtech/g1-moves" in text


def _stand_in_library(root: Path, spec: Path) -> Path:
    """Empty files at the spec's library paths, where a checkout has no ../shared library."""
    for line in spec.read_text(encoding="utf-8").splitlines():
        entry = line.split("#")[0].strip()
        if entry.startswith("- library:"):
            clip = root / entry.removeprefix("- library:")
            clip.parent.mkdir(parents=True, exist_ok=True)
            clip.touch()
    return root


# -- tables on recorded results -------------------------------------------------------------
def _recorded(spec, results: dict[int, tuple[str, dict[str, Any]]]) -> CampaignState:
    state = CampaignState.create(spec, "2.60.0")
    state.prepare_directory()
    state.begin_invocation(resumed=False, address=None)
    for cell in spec.cells:
        state.add_attempt(cell.id)
        status, fields = results[cell.seed]
        reason = None if status == "passed" else "learning_regression: final behind best"
        state.end_attempt(
            cell.id, 1, {"status": status, "reason": reason, "host": "node-a", **fields}
        )
    state.finish("finished")
    state.save()
    return state


@needs_library
def test_the_regression_table_shows_final_vs_best_per_clip_and_seed(
    write_campaign, campaign_doc
) -> None:
    spec = load_campaign(write_campaign(_tiny_regression(campaign_doc)), LIBRARY)
    state = _recorded(
        spec,
        {
            1: ("passed", learning_result("passed", 40.0, 13.0, 14.0)),
            2: ("failed", learning_result("regression", 40.0, 12.9, 28.0)),
            3: ("passed", learning_result("passed", 45.0, 15.0, 15.5)),
        },
    )
    doc = load_strict(state.directory / STATE_FILE)
    assert validate(doc, "campaign_result.v1.json") == []
    assert doc["verdict"] == "passed"  # one failing seed of three is allowed
    (config,) = doc["over_seeds"]["configurations"]
    assert config["olympic_r_mpkpe_mm"] == pytest.approx(15.25)  # windows 13.5, 20.45, 15.25

    proc = _soak_campaign("status", str(state.directory))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = {
        cells[1]: cells for line in lines if (cells := line.split())[:1] == ["j-dance18-tiktok"]
    }
    assert rows["2"] == [
        "j-dance18-tiktok", "2", "regression", "28.0", "12.9", "2,000", "20.4", "1.000",
    ]  # fmt: skip
    verdict = next(cells for cells in rows.values() if cells[1] == "passed")
    assert verdict[2:5] == ["1/3", "15.2", "13.5–20.4"]
    assert "judged over seeds: 1 of 1 configuration(s) passed" in proc.stdout

    wide = _soak_campaign("status", str(state.directory), "--wide", columns=200)
    assert "node-a" in wide.stdout and "node-a" not in proc.stdout  # host: --wide only
    page = (state.directory / "index.html").read_text(encoding="utf-8")
    assert "<h2>per seed" in page and "<td>regression</td>" in page


def test_two_failing_seeds_fail_the_campaign_and_say_which(write_campaign, campaign_doc) -> None:
    doc = campaign_doc(seeds=[1, 2, 3], over_seeds={})
    spec = load_campaign(write_campaign(doc))
    state = _recorded(
        spec,
        {
            1: ("failed", learning_result("regression", 10.0, 30.0)),
            2: ("failed", learning_result("unverified", 10.0, 11.0)),
            3: ("passed", learning_result("passed", 10.0, 10.0)),
        },
    )
    assert state.doc["verdict"] == "failed"
    proc = _soak_campaign("status", str(state.directory))
    flat = " ".join(proc.stdout.split())
    assert "2 of 3 seeds failed (s1 regression, s2 unverified); at most 1 may" in flat


def test_the_cell_table_fits_80_columns_with_long_cell_names(write_campaign, campaign_doc) -> None:
    long_motion = "./clips/a-rather-long-clip-name-from-the-library-of-motions.npz"
    doc = campaign_doc(seeds=[1, 2], motions=[long_motion], overrides={"long_override_set": []})
    spec = load_campaign(write_campaign(doc))
    state = _recorded(spec, {s: ("passed", learning_result("passed", 10.0)) for s in (1, 2)})
    proc = _soak_campaign("status", str(state.directory))
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    assert "passed" in proc.stdout and "R-MPKPE" in proc.stdout


def test_a_used_directory_is_refused_before_the_preflight(write_campaign, campaign_doc, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "campaign.json").write_text("{}", encoding="utf-8")
    doc = campaign_doc(overrides={"typo": ["algo.batch_sise=3"]})  # the preflight would refuse
    proc = _soak_campaign("run", str(write_campaign(doc)))
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert (
        line
        == f"error: campaign directory {tmp_path / 'out'} is not empty; pass --resume to continue it"
    )
