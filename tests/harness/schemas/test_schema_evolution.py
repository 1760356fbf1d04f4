"""Within a version a schema only gains optional keys (docs/schemas.md, "Schema evolution"):
a run summary recorded a week ago, valid v1 when it was written, still passes today's gate,
and so does an evaluation.json written before its metrics gained the per-joint errors.
The soak of it runs ``--fault-repeats`` times with identical outcomes (tests/faults/repeat.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from contracts.jsonio import load_strict
from contracts.run_summary import validate_run_summary
from contracts.schemas import SchemaStore, load_schema, validate
from harness.soak.learning import LearningCfg
from harness.soak.verdict import judge_run_dir
from tests.faults.repeat import Outcome, repeated, soak_outcome
from tests.harness.schemas.builders import make_completed_summary, make_run_dir
from tests.harness.schemas.evaluation_builders import (
    summary_section,
    training_scalars,
    write_evaluation,
    write_training_events,
)

DATA = Path(__file__).resolve().parent / "data"
SCHEMAS_OF_THEIR_TIME = DATA / "schemas-v1-2026-11-29"
RECORDED = sorted(DATA.glob("run_summary.v1.*.json"))
EVALUATIONS_OF_THEIR_TIME = DATA / "schemas-v1-2026-12-07"
RECORDED_EVALUATIONS = sorted(DATA.glob("evaluation.v1.*.json"))
SECTION = {"$ref": "evaluation.v1.json#/$defs/summary_section"}
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


def _metrics_records(doc: dict) -> list[dict]:
    """Every start mode's metrics of every point and clip of an evaluation document."""
    points = doc["points"]
    holders = [*points, *(clip for p in points for clip in p.get("clips", []))]
    return [modes for holder in holders for modes in holder["modes"].values()]


def test_there_is_a_recorded_evaluation_of_every_v1_shape() -> None:
    assert [p.name for p in RECORDED_EVALUATIONS] == ["evaluation.v1.2026-12-07.json"]


@pytest.mark.parametrize("recorded", RECORDED_EVALUATIONS, ids=lambda p: p.name)
def test_a_recorded_evaluation_was_valid_v1_when_written(recorded: Path) -> None:
    then = SchemaStore.read(EVALUATIONS_OF_THEIR_TIME)
    doc = load_strict(recorded)
    assert list(then.validator("evaluation.v1.json").iter_errors(doc)) == []
    assert list(then.adhoc(SECTION).iter_errors(summary_section(doc))) == []


@pytest.mark.parametrize("recorded", RECORDED_EVALUATIONS, ids=lambda p: p.name)
def test_a_recorded_v1_evaluation_is_still_valid_v1(recorded: Path) -> None:
    doc = load_strict(recorded)
    assert validate(doc, "evaluation.v1.json") == []
    assert validate(summary_section(doc), "evaluation.v1.json", schema=SECTION) == []


def test_the_metrics_added_since_stay_optional_in_v1() -> None:
    """The per-joint errors (2026-12-07) are a key the recorded metrics lack, never required."""
    then = SchemaStore.read(EVALUATIONS_OF_THEIR_TIME).document("evaluation.v1.json")
    now = load_schema("evaluation.v1.json")
    added = set(now["$defs"]["metrics"]["properties"]) - set(then["$defs"]["metrics"]["properties"])
    assert "joint_pos_error_rad_by_joint" in added
    assert not added & set(now["$defs"]["metrics"]["required"])
    doc = load_strict(DATA / "evaluation.v1.2026-12-07.json")
    records = _metrics_records(doc)
    assert len(records) == 3 * 2 * 3  # 3 points x (the point + 2 clips) x 2 start modes
    assert not any(added & set(metrics) for metrics in records)


@pytest.mark.parametrize("recorded", RECORDED_EVALUATIONS, ids=lambda p: p.name)
def test_a_recorded_v1_evaluation_passes_the_learning_verdict(
    tmp_path: Path, recorded: Path
) -> None:
    doc = load_strict(recorded)
    summary = make_completed_summary(str(tmp_path / "run"))
    summary["evaluation"] = summary_section(doc)
    run = make_run_dir(tmp_path / "run", summary)
    write_training_events(run, training_scalars())
    write_evaluation(run, doc)
    verdict = judge_run_dir(
        run, monitor_reasons=[], monitor_classification=None, learning=LearningCfg(mode="enforce")
    )
    assert (verdict.status, verdict.failure_reason) == ("passed", None)
    assert verdict.learning is not None and verdict.learning["findings"] == []
    assert [c["clip"] for c in verdict.learning["evaluation"]["clips"]] == ["first", "second"]
