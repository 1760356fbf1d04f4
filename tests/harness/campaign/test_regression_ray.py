"""`soak-campaign regression` end to end on a local Ray instance (2 CPUs): one library clip x
3 seeds of the CPU trainer at a tiny size, judged over seeds, with the table of final vs best
per clip and seed. The learning bounds are loose on purpose: 6 iterations learn nothing, and
this checks the plumbing (verdicts, points, the olympic score), not the recipe."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from contracts.jsonio import load_strict
from contracts.schemas import validate

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
LIBRARY = Path(__file__).parents[3] / ".." / "shared" / "motions" / "g1-moves"
CLIP = "dance/J_Dance18_TikTok.csv"
RAY_TEST_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
}
TINY_CHECK = {
    "schema_version": 1,
    "name": "tiny-regression",
    "directory": "unused",
    "seeds": [1, 2, 3],
    "motions": [f"library:{CLIP}"],
    "sims": {"mujoco": {"num_envs": 4, "iterations": 6}},
    "soak": {
        "min_duration_seconds": 0,
        "sample_interval_seconds": 0.5,
        "post_shutdown_grace_seconds": 0.5,
        "learning_margin": 0.99,
        "learning_tolerance_mm": 10000,
        "extra_overrides": ["algo.batch_size=8", "algo.learning_starts=2", "algo.save_interval=2"],
    },
    "over_seeds": {"window_points": 2},
}


@pytest.mark.skipif(not (LIBRARY / CLIP).is_file(), reason=f"no motion library at {LIBRARY}")
def test_the_regression_check_runs_three_seeds_and_tables_final_vs_best(tmp_path) -> None:
    pytest.importorskip("ray", reason="the campaign extra (Ray) is not installed")
    spec = tmp_path / "check.yaml"
    spec.write_text(yaml.safe_dump(TINY_CHECK), encoding="utf-8")
    directory = tmp_path / "check"
    temp = Path(tempfile.mkdtemp(dir="/tmp", prefix="rr"))
    env = {**os.environ, **RAY_TEST_ENV, "RAY_TMPDIR": str(temp), "COLUMNS": "80"}
    try:
        proc = subprocess.run(
            [
                str(BIN / "soak-campaign"), "regression", "--spec", str(spec),
                "--library-root", str(LIBRARY), "--directory", str(directory), "--num-cpus", "2",
            ],
            env=env, capture_output=True, text=True, timeout=1500, check=False,
        )  # fmt: skip
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = load_strict(directory / "campaign.json")
    assert validate(doc, "campaign_result.v1.json") == []
    (config,) = doc["over_seeds"]["configurations"]
    assert config["verdict"] == "passed"
    assert [seed["outcome"] for seed in config["seeds"]] == ["passed"] * 3
    for seed in config["seeds"]:
        assert seed["final_r_mpkpe_mm"] is not None and seed["best_iteration"] in (2, 4, 6)
    for cell in doc["cells"]:
        points = cell["attempts"][-1]["learning"]["points"]
        assert [p["iteration"] for p in points] == [2, 4, 6]  # every checkpoint, then the final
    rows = [line.split() for line in proc.stdout.splitlines()]
    seeds = [row[1] for row in rows if row[:1] == ["j-dance18-tiktok"] and row[2] == "passed"]
    assert seeds == ["1", "2", "3"]
    assert "judged over seeds: 1 of 1 configuration(s) passed" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    status = subprocess.run(
        [str(BIN / "soak-campaign"), "status", str(directory), "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert json.loads(status.stdout) == doc
