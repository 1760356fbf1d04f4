"""``g1-soak rejudge`` never takes a failed artifact's word for it: a hand-edited artifact
stays failed, because the run directory is judged again and the artifact's seal
(``content_sha256``) must still match (docs/soak.md, "Re-judging an artifact"). Each rejudge
runs ``--fault-repeats`` times (default 3) with identical outcomes (tests/faults/repeat.py),
side by side: each repeat reads the shared failed soak and writes only its own files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.jsonio import load_strict, write_json_atomic
from contracts.schemas import validate
from harness.soak.integrity import DIGEST_KEY, seal
from tests.faults.repeat import Outcome, normalize, repeated

CHILDREN = Path(__file__).resolve().parents[2] / "faults" / "children"
SOAK_RUN = "import sys; from harness.soak.cli import soak_run_main; soak_run_main()"
REJUDGE = "import sys; from harness.soak.cli import g1_soak_main; g1_soak_main()"
pytestmark = pytest.mark.slow
"""A real soak, then rejudge subprocesses ``--fault-repeats`` times a test: 3.5-5 s each on
2 cores, like the fault suite (tests/faults)."""


@pytest.fixture(scope="module")
def failed_soak(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real soak of a trainer that completes without its model_20.pt: schema_violation."""
    root = tmp_path_factory.mktemp("failed")
    output = root / "soak.json"
    proc = subprocess.run(
        [sys.executable, "-c", SOAK_RUN, "--json", "--min-duration-seconds", "0",
         "--sample-interval-seconds", "0.1", "--post-shutdown-grace-seconds", "0.2",
         "--log-dir", str(root / "run"), "--output", str(output), "--",
         sys.executable, str(CHILDREN / "fake_trainer.py"), "{log_dir}", "missing_checkpoint"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    doc = load_strict(output)
    assert doc["failure_classification"] == "schema_violation"
    assert doc["post_shutdown"]["residual_processes"] == []
    return output


def _hand_edited(source: Path, target: Path, *, reseal: bool) -> Path:
    """``source`` edited into a pass: no run-dir finding, passed status, clean summary."""
    doc = load_strict(source)
    doc["judgement"]["run_dir_findings"] = []
    doc.update(status="passed", failure_reason=None, failure_classification=None)
    if reseal:  # a careful forger recomputes the seal too
        seal(doc)
    write_json_atomic(target, doc)
    return target


def _rejudge(source: Path, output: Path) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-c", REJUDGE, "rejudge", str(source), "--output", str(output), "--json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout)


def _outcome(code: int, doc: dict, tmp_path: Path) -> Outcome:
    return {
        "code": code,
        "status": doc["status"],
        "classification": doc["failure_classification"],
        "reason": normalize(doc["failure_reason"], root=tmp_path),
        "schema_errors": [str(v) for v in validate(doc, "soak_artifact.0.3.0.json")],
    }


@repeated(side_by_side=True)
def test_an_untouched_failed_artifact_is_sealed_and_rejudges_to_itself(
    failed_soak, tmp_path
) -> Outcome:
    original = load_strict(failed_soak)
    assert len(original[DIGEST_KEY]) == 64
    code, result = _rejudge(failed_soak, tmp_path / "again.json")
    again = load_strict(tmp_path / "again.json")
    assert code == 1 and result["status"] == "failed"
    assert (again["failure_reason"], again["failure_classification"]) == (
        original["failure_reason"],
        "schema_violation",
    )
    assert validate(again, "soak_artifact.0.3.0.json") == []
    return _outcome(code, again, tmp_path)


@repeated(side_by_side=True)
def test_a_hand_edited_failed_artifact_stays_failed_naming_the_run_directory(
    failed_soak: Path, tmp_path: Path
) -> Outcome:
    edited = _hand_edited(failed_soak, tmp_path / "edited.json", reseal=True)
    code, result = _rejudge(edited, tmp_path / "rejudged.json")
    doc = load_strict(tmp_path / "rejudged.json")
    assert code == 1 and result["status"] == "failed"
    assert validate(doc, "soak_artifact.0.3.0.json") == []
    assert doc["failure_classification"] == "schema_violation"  # the run directory's own
    run_dir = failed_soak.parent / "run"
    assert "run directory is missing required artifacts: model_20.pt" in doc["failure_reason"]
    assert (
        f"the artifact disagrees with the run directory {run_dir}: judged again it gives "
        "1 finding(s) (classification schema_violation), the artifact records no finding"
    ) in doc["failure_reason"]
    assert DIGEST_KEY not in doc["failure_reason"]  # resealed: only the run dir gives it away
    return _outcome(code, doc, tmp_path)


@repeated(side_by_side=True)
def test_an_edit_without_the_seal_is_named_even_without_the_run_directory(
    failed_soak: Path, tmp_path: Path
) -> Outcome:
    doc = load_strict(failed_soak)
    doc["console_log"] = str(tmp_path / "gone" / "soak-console.log")  # judged on another host
    write_json_atomic(tmp_path / "copy.json", seal(doc))
    edited = _hand_edited(tmp_path / "copy.json", tmp_path / "edited.json", reseal=False)
    code, _ = _rejudge(edited, tmp_path / "rejudged.json")
    out = load_strict(tmp_path / "rejudged.json")
    assert code == 1 and out["status"] == "failed"
    assert validate(out, "soak_artifact.0.3.0.json") == []
    assert out["failure_reason"] == (
        f"the artifact disagrees with its {DIGEST_KEY}: it was edited after the soak wrote it, "
        "so none of its numbers can be trusted"
    )
    assert out["failure_classification"] == "unknown_failure"
    return _outcome(code, out, tmp_path)
