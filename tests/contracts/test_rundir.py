"""contracts/rundir.py: the run directory's file names, checkpoints by one pattern, the event file."""

from __future__ import annotations

from pathlib import Path

from contracts import rundir


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
