"""The campaign file: the matrix it expands to, and one-line errors naming the bad key.

No Ray is started here: a campaign file is checked before anything is launched or written.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.campaign import cli
from harness.campaign.spec import CampaignFileError, load_campaign


@pytest.fixture
def run(capsys):
    def invoke(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def test_cells_are_the_matrix_with_their_g1_soak_flags(write_campaign, campaign_doc) -> None:
    doc = campaign_doc(
        seeds=[1, 2],
        motions=["synthetic", "./clips/My Walk.npz"],
        sims={
            "mujoco": {"num_envs": 4, "iterations": 5},
            "mjwarp": {"num_envs": 1024, "extra_overrides": ["training.cuda_process_sharing=mps"]},
        },
        overrides={"base": [], "lowlr": ["algo.actor_lr=1e-4"]},
        gpus_per_cell=0.5,
        max_retries=3,
    )
    doc["soak"]["iterations"] = 9  # the sim's own flag wins
    path = write_campaign(doc)
    spec = load_campaign(path)

    assert len(spec.cells) == 2 * 2 * 2 * 2 and spec.max_retries == 3
    assert spec.directory == path.parent / "out"
    ids = [cell.id for cell in spec.cells]
    assert len(set(ids)) == len(ids)
    assert ids[:4] == [
        "base-s1-synthetic-mujoco",
        "base-s1-synthetic-mjwarp",
        "base-s1-my-walk-mujoco",
        "base-s1-my-walk-mjwarp",
    ]
    cell = next(c for c in spec.cells if c.id == "lowlr-s2-my-walk-mjwarp")
    clip = str(path.parent / "clips" / "My Walk.npz")
    assert cell.args == (
        "--sim", "mjwarp", "--motion", clip,
        "--num-envs", "1024", "--iterations", "9",
        "--min-duration-seconds", "0", "--sample-interval-seconds", "0.5",
        "--post-shutdown-grace-seconds", "0.5",
        "--extra-override", "algo.batch_size=8", "--extra-override", "algo.learning_starts=2",
        "--extra-override", "training.cuda_process_sharing=mps",
        "--extra-override", "algo.actor_lr=1e-4", "--extra-override", "algo.seed=2",
    )  # fmt: skip
    assert (cell.gpus, cell.cpus, cell.mps) == (0.5, 1.0, True)
    cpu_cell = next(c for c in spec.cells if c.id == "base-s1-synthetic-mujoco")
    assert (cpu_cell.gpus, cpu_cell.mps) == (0.0, False) and "--iterations" in cpu_cell.args
    assert cpu_cell.args[cpu_cell.args.index("--iterations") + 1] == "5"
    assert spec.mps_requested


def test_spec_hash_ignores_the_directory_only(write_campaign, campaign_doc) -> None:
    first = load_campaign(write_campaign(campaign_doc(), "a.yaml")).spec_sha256
    moved = load_campaign(write_campaign(campaign_doc(directory="/x"), "b.yaml")).spec_sha256
    other = load_campaign(write_campaign(campaign_doc(seeds=[2]), "c.yaml")).spec_sha256
    assert first == moved != other


BAD_FILES = [
    pytest.param({"seeds": [-1]}, "seeds[0]", id="negative-seed"),
    pytest.param({"seeds": [1.0]}, "seeds[0]", id="float-seed"),
    pytest.param({"sims": {"mujoco": {"num_env": 4}}}, "num_env", id="unknown-flag"),
    pytest.param({"sims": {"mujocco": {}}}, "mujocco", id="unknown-sim"),
    pytest.param({"name": "Tiny"}, "name", id="bad-name"),
    pytest.param({"motions": []}, "motions", id="no-motion"),
    pytest.param({"max_retries": -1}, "max_retries", id="negative-retries"),
    pytest.param({"gpus_per_cell": 2}, "gpus_per_cell", id="multi-gpu-gate"),
    pytest.param({"overrides": {"x": ["algo.seed=3"]}}, "overrides.x[0]", id="seed-override"),
    pytest.param({"overrides": {"x": ["nokey"]}}, "overrides.x[0]", id="not-key-value"),
    pytest.param({"overrides": {"x": ["algo.num_envs=3"]}}, "overrides.x[0]", id="soak-owned"),
    pytest.param(
        {"soak": {"trend_thresholds": ["nope=1"]}}, "soak.trend_thresholds", id="bad-threshold"
    ),
    pytest.param(
        {"overrides": {"m": ["training.cuda_process_sharing=mps"]}}, "sims.mujoco", id="mps-cpu"
    ),
]


@pytest.mark.parametrize(("change", "key"), BAD_FILES)
def test_bad_campaign_file_is_one_line_naming_the_key(
    run, write_campaign, campaign_doc, tmp_path: Path, change, key
) -> None:
    path = write_campaign(campaign_doc(**change))
    code, out, err = run("run", str(path))
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: campaign file {path}: ")
    assert key in lines[0]
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param({"name": "My Campaign"}, "lowercase letters, digits, dashes", id="name"),
        pytest.param(
            {"overrides": {"a-much-too-long-override-set-name": []}},
            "letters, digits and underscores, at most 24 characters",
            id="override-set-name",
        ),
    ],
)
def test_a_pattern_violation_says_what_the_value_should_be(
    run, write_campaign, campaign_doc, change, expected
) -> None:
    code, _, err = run("run", str(write_campaign(campaign_doc(**change))))
    assert code == 2 and len(err.splitlines()) == 1
    assert "; expected " in err and expected in err and "see docs/campaign.md" not in err


def test_yaml_problems_name_the_line(run, write_campaign, campaign_doc) -> None:
    doc = "schema_version: 1\nname: tiny\nname: again\n"
    code, _, err = run("run", str(write_campaign(doc)))
    assert code == 2 and "line 3" in err and "duplicate key 'name'" in err
    code, _, err = run("run", str(write_campaign("seeds: [1\n")))
    assert code == 2 and "not valid YAML" in err and len(err.splitlines()) == 1


def test_missing_file_and_required_key(run, write_campaign, campaign_doc, tmp_path) -> None:
    code, _, err = run("run", str(tmp_path / "nope.yaml"))
    assert code == 2 and "does not exist" in err
    doc = campaign_doc()
    del doc["seeds"]
    with pytest.raises(CampaignFileError, match="top level: 'seeds' is a required property"):
        load_campaign(write_campaign(doc))


def test_single_soak_and_campaign_status_never_import_ray() -> None:
    code = (
        "import sys, harness.soak.cli, harness.campaign.cli, harness.campaign.state, "
        "harness.campaign.table, harness.campaign.cell; "
        "sys.exit(1 if any(m == 'ray' or m.startswith('ray.') for m in sys.modules) else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr or "ray was imported"
