"""support-matrix: levels from a synthetic repo tree (each level's criterion and monotonicity),
the generated block's --write/--check cycle, and the real repository's committed block."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from contracts.names import Backend
from harness.support.cli import REPO_ROOT, main
from harness.support.matrix import (
    BEGIN_MARKER,
    END_MARKER,
    LEVELS,
    SupportDataError,
    build_matrix,
)

OWNER = "flashsac/g1_motion_tracking/mujoco"
E2E = "tests/e2e/test_run.py::test_tiny_run"
SHA = "0" * 64
FACTS = [
    {
        "backend": name,
        "execution": "host_bridge" if name == "mujoco" else "device_resident",
        "device": "d",
        "reset_randomization": "none",
        "diagnostics_available": "no",
        "notes": "n",
    }
    for name in ("mjwarp", "mujoco")
]


def _errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _inventory(coverage=None, recommendations=None) -> dict:
    return {
        "schema_version": 1,
        "coverage": coverage
        if coverage is not None
        else [{"owner": OWNER, "tests": [{"test": E2E, "kind": "end_to_end", "ci": True}]}],
        "recommendations": recommendations or [],
        "platform_facts": copy.deepcopy(FACTS),
    }


def _manifest(
    decision="accepted", soak_status="passed", kinds=("soak_artifact", "run_dir", "probe_output")
) -> dict:
    evidence = []
    for kind in kinds:
        item = {"kind": kind, "location": f"s3://evidence/{kind}", "sha256": SHA}
        if kind in ("soak_artifact", "probe_output"):
            item.update(
                schema_version="0.3.0",
                status=soak_status if kind == "soak_artifact" else "passed",
                command="g1-soak ...",
            )
        evidence.append(item)
    return {
        "schema_version": 1,
        "owner": OWNER,
        "recorded_on": "2026-11-29",
        "host": {"gpu": "NVIDIA H200", "driver_version": "580.95.05"},
        "source": {"commit": "a" * 40, "dirty": False},
        "evidence": evidence,
        "summary": {"env_steps_per_s": 123456.0},
        "review": {"reviewer": "maintainer", "date": "2026-11-30", "decision": decision},
    }


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A minimal repository: one task with mujoco/mjwarp owners, an inventory, the listed e2e
    test and a docs page with empty markers (the backends are contracts.names.Backend)."""
    root = tmp_path / "repo"
    conf = root / "trainer/conf/flashsac/task/g1_motion_tracking"
    _write(conf / "base.yaml", "training:\n  task_name: G1MotionTracking\n")
    _write(conf / "mujoco.yaml", "training:\n  sim_backend: mujoco\n")
    _write(conf / "mjwarp.yaml", "inherits: mujoco\ntraining:\n  sim_backend: mjwarp\n")
    _write(root / "tests/e2e/test_run.py", "def test_tiny_run():\n    assert True\n")
    _write(root / "docs/evidence/validation_inventory.json", json.dumps(_inventory()))
    _write(root / "docs/support_matrix.md", f"# page\n\n{BEGIN_MARKER}\n{END_MARKER}\n\ntail\n")
    return root


def _levels(root: Path) -> dict[str, str]:
    return {row.owner: LEVELS[row.level] for row in build_matrix(root).rows}


def _set_inventory(root: Path, inventory: dict) -> None:
    _write(root / "docs/evidence/validation_inventory.json", json.dumps(inventory))


def _add_manifest(root: Path, manifest: dict, name: str = "m.json") -> None:
    _write(root / "docs/evidence/benchmarks" / name, json.dumps(manifest))


def test_tested_owner_and_configured_owner(tree: Path) -> None:
    assert _levels(tree) == {
        "flashsac/g1_motion_tracking/mjwarp": "Configured",
        OWNER: "Tested",
    }


def test_missing_owner_file_is_registered_only(tree: Path) -> None:
    (tree / "trainer/conf/flashsac/task/g1_motion_tracking/mjwarp.yaml").unlink()
    row = {r.sim: r for r in build_matrix(tree).rows}["mjwarp"]
    assert LEVELS[row.level] == "Registered" and "no owner file" in row.missing


def test_owner_declaring_another_backend_is_registered_only(tree: Path) -> None:
    _write(tree / "trainer/conf/flashsac/task/g1_motion_tracking/mjwarp.yaml", "inherits: mujoco\n")
    row = {r.sim: r for r in build_matrix(tree).rows}["mjwarp"]
    assert LEVELS[row.level] == "Registered"
    assert "training.sim_backend='mujoco'" in row.missing  # inherited value, not its own


def test_an_inherits_cycle_is_an_error_naming_the_owner_file(tree: Path) -> None:
    conf = tree / "trainer/conf/flashsac/task/g1_motion_tracking"
    _write(conf / "mujoco.yaml", "inherits: mjwarp\ntraining:\n  sim_backend: mujoco\n")
    with pytest.raises(SupportDataError, match=r"broken inherits chain: .*inheritance cycle"):
        build_matrix(tree)


def test_unregistered_backend_and_task_are_missing(tree: Path) -> None:
    _write(
        tree / "trainer/conf/flashsac/task/g1_motion_tracking/isaac.yaml",
        "training:\n  sim_backend: isaac\n",
    )
    _write(
        tree / "trainer/conf/flashsac/task/walk/mujoco.yaml", "training:\n  sim_backend: mujoco\n"
    )
    levels = _levels(tree)
    assert levels["flashsac/g1_motion_tracking/isaac"] == "-"
    assert levels["flashsac/walk/mujoco"] == "-"  # no base.yaml declaring training.task_name


@pytest.mark.parametrize(
    ("tests", "reason"),
    [
        pytest.param(
            [{"test": "tests/e2e/test_run.py::test_gone", "kind": "end_to_end", "ci": True}],
            "does not exist",
            id="missing-function",
        ),
        pytest.param(
            [{"test": "tests/e2e/test_nope.py", "kind": "end_to_end", "ci": True}],
            "does not exist",
            id="missing-file",
        ),
        pytest.param(
            [{"test": E2E, "kind": "end_to_end", "ci": False}], "no CI end-to-end", id="not-in-ci"
        ),
        pytest.param([{"test": E2E, "kind": "unit", "ci": True}], "no CI end-to-end", id="not-e2e"),
        pytest.param(
            [
                {"test": E2E, "kind": "end_to_end", "ci": True},
                {"test": "tests/e2e/test_run.py::test_x", "kind": "unit", "ci": True},
            ],
            "test_x",
            id="one-listed-test-missing",
        ),
    ],
)
def test_tested_needs_an_existing_ci_end_to_end_test(tree: Path, tests: list, reason: str) -> None:
    _set_inventory(tree, _inventory(coverage=[{"owner": OWNER, "tests": tests}]))
    row = {r.owner: r for r in build_matrix(tree).rows}[OWNER]
    assert LEVELS[row.level] == "Configured" and reason in row.missing


def test_accepted_manifest_with_full_evidence_is_benchmarked(tree: Path) -> None:
    _add_manifest(tree, _manifest())
    assert _levels(tree)[OWNER] == "Benchmarked"


@pytest.mark.parametrize(
    ("manifest", "reason"),
    [
        pytest.param(
            _manifest(decision="pending"), "review decision is 'pending'", id="unreviewed"
        ),
        pytest.param(
            _manifest(soak_status="failed"), "soak_artifact did not pass", id="failed-soak"
        ),
        pytest.param(
            _manifest(kinds=("soak_artifact", "run_dir")), "lacks probe_output", id="no-probe"
        ),
    ],
)
def test_manifest_that_is_not_accepted_evidence_does_not_promote(
    tree: Path, manifest: dict, reason: str
) -> None:
    _add_manifest(tree, manifest)
    row = {r.owner: r for r in build_matrix(tree).rows}[OWNER]
    assert LEVELS[row.level] == "Tested" and reason in row.missing


def test_levels_are_monotone_recommendation_without_lower_levels_does_not_count(tree: Path) -> None:
    rec = {
        "owner": OWNER,
        "rationale": "fast",
        "review": {"reviewer": "m", "date": "2026-11-30", "decision": "accepted"},
    }
    _set_inventory(tree, _inventory(recommendations=[rec]))
    assert _levels(tree)[OWNER] == "Tested"  # no manifest: Recommended cannot skip Benchmarked
    _add_manifest(tree, _manifest())
    assert _levels(tree)[OWNER] == "Recommended"
    (tree / "tests/e2e/test_run.py").unlink()  # lose Tested: everything above falls with it
    assert _levels(tree)[OWNER] == "Configured"


def test_a_passing_soak_artifact_in_the_tree_promotes_nothing(tree: Path) -> None:
    artifact = {"schema_version": "0.3.0", "status": "passed"}
    _write(tree / "artifacts/soak.json", json.dumps(artifact))
    _write(tree / "docs/evidence/soak.json", json.dumps(artifact))
    assert _levels(tree)[OWNER] == "Tested"


def test_write_then_check_cycle(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check", "--root", str(tree)]) == 1
    errors = _errors(capsys.readouterr().err)
    assert len(errors) == 1 and "stale" in errors[0] and "support-matrix --write" in errors[0]
    assert main(["--write", "--root", str(tree)]) == 0
    page = (tree / "docs/support_matrix.md").read_text()
    assert page.startswith("# page\n\n" + BEGIN_MARKER) and page.endswith(END_MARKER + "\n\ntail\n")
    assert "| flashsac | g1_motion_tracking | mujoco | Tested (3) |" in page
    assert main(["--check", "--root", str(tree)]) == 0
    _add_manifest(tree, _manifest())  # evidence changed: the committed block is stale again
    assert main(["--check", "--root", str(tree)]) == 1


def test_write_without_markers_fails(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tree / "docs/support_matrix.md", "# no markers\n")
    assert main(["--write", "--root", str(tree)]) == 1
    assert "markers" in _errors(capsys.readouterr().err)[0]


def test_write_and_check_together_is_a_usage_error(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--write", "--check", "--root", str(tree)]) == 2
    assert len(_errors(capsys.readouterr().err)) == 1


def test_malformed_evidence_is_an_error_naming_the_file(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _manifest()
    bad["evidence"][0]["sha256"] = "not-a-hash"
    _add_manifest(tree, bad, "bad.json")
    assert main(["--root", str(tree)]) == 1
    (error,) = _errors(capsys.readouterr().err)
    assert "docs/evidence/benchmarks/bad.json violates benchmark_manifest.v1.json" in error


def test_evidence_for_an_unknown_owner_is_an_error(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = _inventory()
    inventory["coverage"].append(
        {
            "owner": "flashsac/g1_motion_trackin/mujoco",
            "tests": [{"test": E2E, "kind": "unit", "ci": True}],
        }
    )
    _set_inventory(tree, inventory)
    assert main(["--root", str(tree)]) == 1
    assert "g1_motion_trackin" in _errors(capsys.readouterr().err)[0]


def test_json_and_table_output(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "--root", str(tree)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(r["owner"], r["level"], r["level_value"]) for r in doc["rows"]] == [
        ("flashsac/g1_motion_tracking/mjwarp", "Configured", 2),
        (OWNER, "Tested", 3),
    ]
    assert [f["backend"] for f in doc["platform_facts"]] == ["mjwarp", "mujoco"]
    assert main(["--root", str(tree)]) == 0
    out = capsys.readouterr().out
    assert "| flashsac | g1_motion_tracking | mujoco | Tested" in re.sub(r" {2,}", " ", out)


# --------------------------------------------------------------------------- the real repository
def test_committed_support_matrix_block_is_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    """CI staleness gate: fails when docs/support_matrix.md was not regenerated."""
    rc = main(["--check"])
    assert rc == 0, capsys.readouterr().err


def test_repository_levels_follow_the_contract() -> None:
    levels = _levels(REPO_ROOT)
    # docs/contracts.md §support-matrix
    assert levels["flashsac/g1_motion_tracking/mjwarp"] == "Configured"
    assert levels["flashsac/g1_motion_tracking/mujoco"] == "Tested"  # CPU e2e test in CI


def test_platform_facts_agree_with_the_backends() -> None:
    from trainer.config.defaults import default_scene_cfg
    from trainer.sim.backend import BACKEND_NAMES
    from trainer.sim.factory import make_backend
    from trainer.sim.scene import build_g1_model

    facts = {f["backend"]: f for f in build_matrix(REPO_ROOT).platform_facts}
    assert set(facts) == set(BACKEND_NAMES)
    assert BACKEND_NAMES == tuple(
        b.value for b in Backend
    )  # the matrix's registry is the trainer's
    scene = default_scene_cfg()
    backend = make_backend("mujoco", build_g1_model(scene), 1, "cpu", scene, num_threads=1)
    try:
        assert backend.diagnostics()["available"] is False
    finally:
        backend.close()
    assert facts["mujoco"]["diagnostics_available"].startswith("no")
    assert facts["mujoco"]["execution"] == "host_bridge"
    assert facts["mjwarp"]["execution"] == "device_resident"
    assert facts["mjwarp"]["diagnostics_available"].startswith("yes")
