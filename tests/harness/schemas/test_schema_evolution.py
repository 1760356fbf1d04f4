"""Within a version a schema only gains optional keys (docs/schemas.md, "Schema evolution"):
a run summary recorded a week ago, valid v1 when it was written, still passes today's gate.
The soak of it runs ``--fault-repeats`` times with identical outcomes (tests/faults/repeat.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from contracts.jsonio import load_strict
from contracts.run_summary import validate_run_summary
from contracts.schemas import SchemaStore, validate
from harness.soak.verdict import judge_run_dir
from tests.faults.repeat import Outcome, repeated, soak_outcome
from tests.harness.schemas.builders import make_run_dir

DATA = Path(__file__).resolve().parent / "data"
SCHEMAS_OF_THEIR_TIME = DATA / "schemas-v1-2026-11-29"
RECORDED = sorted(DATA.glob("run_summary.v1.*.json"))
FAKE_TRAINER = Path(__file__).resolve().parents[2] / "faults" / "children" / "fake_trainer.py"
SOAK_RUN = "import sys; from harness.soak.cli import soak_run_main; soak_run_main()"


def test_there_is_a_recorded_summary_of_every_v1_shape() -> None:
    assert [p.name for p in RECORDED] == ["run_summary.v1.2026-11-29.json"]


@pytest.mark.parametrize("recorded", RECORDED, ids=lambda p: p.name)
def test_a_recorded_summary_was_valid_v1_when_written(recorded: Path) -> None:
    then = SchemaStore.read(SCHEMAS_OF_THEIR_TIME).validator("run_summary.v1.json")
    assert list(then.iter_errors(load_strict(recorded))) == []


@pytest.mark.parametrize("recorded", RECORDED, ids=lambda p: p.name)
def test_a_recorded_v1_summary_is_still_valid_v1(recorded: Path) -> None:
    summary = load_strict(recorded)
    assert validate(summary, "run_summary.v1.json") == []
    assert validate_run_summary(summary, completed=True) == []


def test_the_fields_added_since_stay_optional_in_v1() -> None:
    summary = load_strict(DATA / "run_summary.v1.2026-11-29.json")
    manifest = summary["runtime_manifest"]
    assert "collector_placement" not in manifest
    assert not {"fusion", "act_stream", "fallbacks"} & set(manifest["cuda_graph"]["learner"])


@pytest.mark.parametrize("recorded", RECORDED, ids=lambda p: p.name)
def test_a_recorded_v1_run_directory_passes_the_gate(tmp_path: Path, recorded: Path) -> None:
    run = make_run_dir(tmp_path / "run", load_strict(recorded))
    verdict = judge_run_dir(run, monitor_reasons=[], monitor_classification=None)
    assert (verdict.status, verdict.failure_reason) == ("passed", None)


@pytest.mark.slow  # a soak a repeat: 5 s on 2 cores
@repeated()
def test_a_soak_of_a_trainer_writing_the_recorded_summary_passes(tmp_path: Path) -> Outcome:
    artifact = tmp_path / "artifact.json"
    proc = subprocess.run(
        [
            sys.executable, "-c", SOAK_RUN, "--json", "--min-duration-seconds", "0",
            "--sample-interval-seconds", "0.1", "--post-shutdown-grace-seconds", "0.2",
            "--log-dir", str(tmp_path / "run"), "--output", str(artifact), "--",
            sys.executable, str(FAKE_TRAINER), "{log_dir}", "recorded_v1_2026_11_29",
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    doc = load_strict(artifact)
    assert proc.returncode == 0, doc["failure_reason"]
    assert validate(doc, "soak_artifact.0.3.0.json") == []
    assert (doc["status"], doc["failure_classification"]) == ("passed", None)
    assert doc["post_shutdown"]["residual_processes"] == []
    return soak_outcome(doc, exit_code=proc.returncode, root=tmp_path, survivors=[])
