"""contracts/rundir.py: the run directory's file names, checkpoints by one pattern, the event file."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts import rundir
from contracts.errors import StrictJsonError
from contracts.jsonio import write_json_atomic
from tests.harness.schemas.builders import make_completed_summary
from tests.harness.schemas.evaluation_builders import HEALTHY_CURVE, make_evaluation


def test_checkpoint_names_round_trip_and_nothing_else_parses() -> None:
    assert rundir.checkpoint_name(65000) == "model_65000.pt"
    assert rundir.checkpoint_iteration("model_65000.pt") == 65000
    for other in ("model_.pt", "model_1.pt.tmp", "model_-1.pt", "xmodel_1.pt", "model_1.onnx"):
        assert rundir.checkpoint_iteration(other) is None
    assert Path("model_7.pt").match(rundir.CHECKPOINT_GLOB)


def test_checkpoint_files_are_the_model_files_by_iteration(tmp_path: Path) -> None:
    for name in ("model_20.pt", "model_3.pt", "model_100.pt", "model_x.pt", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "model_5.pt").mkdir()
    assert rundir.checkpoint_files(tmp_path) == [
        (3, tmp_path / "model_3.pt"),
        (20, tmp_path / "model_20.pt"),
        (100, tmp_path / "model_100.pt"),
    ]


def test_event_files_are_those_at_the_root(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "events.out.tfevents.1.host").write_bytes(b"")
    assert rundir.event_files(tmp_path) == []
    for name in ("events.out.tfevents.2.host", "events.out.tfevents.1.host"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in rundir.event_files(tmp_path)] == [
        "events.out.tfevents.1.host",
        "events.out.tfevents.2.host",
    ]


def test_read_gives_a_valid_document_and_says_why_not_otherwise(tmp_path: Path) -> None:
    doc = make_evaluation(HEALTHY_CURVE)
    path = rundir.write(tmp_path / rundir.EVALUATION, doc)
    assert rundir.read(path) == doc
    problems = {}
    for name, text in (("nan.json", '{"a": NaN}'), ("empty.json", "{}"), ("gone.json", None)):
        if text is not None:
            (tmp_path / name).write_text(text)
        with pytest.raises(rundir.DocumentError) as info:
            rundir.read(tmp_path / name, rundir.EVALUATION)
        problems[name] = info.value.problem
        assert str(info.value).startswith(f"{tmp_path / name}: ")
    assert problems == {"nan.json": "unreadable", "empty.json": "invalid", "gone.json": "missing"}


def test_a_lenient_read_is_strict_json_alone(tmp_path: Path) -> None:
    """What a report or a table reads: whatever the run left, if it is strict JSON."""
    path = tmp_path / rundir.RUN_SUMMARY
    path.write_text('{"status": "failed"}')
    with pytest.raises(rundir.DocumentError) as info:
        rundir.read(path)
    assert info.value.problem == "invalid"
    assert rundir.read(path, lenient=True) == {"status": "failed"}
    path.write_text("[1]")
    assert rundir.read(path, lenient=True) == [1]
    path.write_text('{"a": NaN}')
    with pytest.raises(rundir.DocumentError) as info:
        rundir.read(path, lenient=True)
    assert info.value.problem == "unreadable" and "non-finite" in info.value.detail
    with pytest.raises(rundir.DocumentError) as info:
        rundir.read(tmp_path / rundir.RUN_CONFIG, lenient=True)
    assert info.value.problem == "missing"


def test_write_never_writes_an_invalid_document(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^evaluation\.v1\.json: "):
        rundir.write(tmp_path / rundir.EVALUATION, {"points": []})
    assert not (tmp_path / rundir.EVALUATION).exists()
    with pytest.raises(ValueError, match="no JSON document of the run directory"):
        rundir.write(tmp_path / "notes.json", {})


SKIPPED_PLAY = {
    **dict.fromkeys(
        ("checkpoint", "motion_id", "motion_sha256", "frames", "gl_backend", "video"), None
    ),
    **dict.fromkeys(("filmstrip", "onnx", "onnx_max_abs_error", "onnx_tolerance"), None),
    "status": "skipped",
    "reason": "training.no_play=true",
    "mean_body_pos_error_m": None,
    "timings_s": {},
}


def test_a_summary_section_is_set_validated_or_left_alone(tmp_path: Path) -> None:
    assert rundir.set_summary_section(tmp_path, "play", SKIPPED_PLAY) is None
    assert not (tmp_path / rundir.RUN_SUMMARY).exists()  # a run still training
    summary = make_completed_summary()
    write_json_atomic(tmp_path / rundir.RUN_SUMMARY, summary)
    path = rundir.set_summary_section(tmp_path, "play", SKIPPED_PLAY)
    assert rundir.read(path) == {**summary, "play": SKIPPED_PLAY}
    before = path.read_bytes()
    with pytest.raises(ValueError, match=r"with the play section violates .*\$\.play\.frames"):
        rundir.set_summary_section(tmp_path, "play", {**SKIPPED_PLAY, "frames": -1})
    assert path.read_bytes() == before
    path.write_text("[]")
    with pytest.raises(StrictJsonError, match="is not a JSON object"):
        rundir.set_summary_section(tmp_path, "play", SKIPPED_PLAY)
