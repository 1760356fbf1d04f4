"""The decline diagnostics: the overlay of runs, the best-vs-final table, the document, and
the failure paths of ``python -m harness.report.diagnostics``; the soak report's figure."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from contracts.jsonio import load_strict, loads_strict, write_json_atomic
from contracts.schemas import validate
from harness.metrics.events import ScalarEvent
from harness.report import diagnostics as D
from harness.report.rundata import RunData
from tests.harness.schemas.evaluation_builders import (
    DECLINING_CURVE,
    HEALTHY_CURVE,
    training_scalars,
    write_diagnostic_run,
    write_training_events,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _cli(capsys, *args: str | Path) -> tuple[int, str, str]:
    code = D.cli([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_two_runs_overlay_table_and_document(tmp_path: Path, capsys) -> None:
    base = write_diagnostic_run(tmp_path, "CLIP", DECLINING_CURVE)
    cand = write_diagnostic_run(tmp_path, "CLIP+h8192", HEALTHY_CURVE, scale_after_20=2.0)
    png, doc_path = tmp_path / "d.png", tmp_path / "d.json"
    code, out, err = _cli(capsys, base, cand, "--out", png, "--output", doc_path)
    assert code == 0
    assert err.count("reading ") == 2 and "CLIP+h8192/run/events.out.tfevents" in err
    assert png.read_bytes().startswith(PNG_MAGIC)
    assert "CLIP: best at iteration 10 (12.1 mm), final at 30 (78.1 mm)" in out
    doc = load_strict(doc_path)
    assert validate(doc, D.SCHEMA) == []
    declining, healthy = doc["runs"]
    assert [r["label"] for r in doc["runs"]] == ["CLIP", "CLIP+h8192"]
    assert declining["best"] == {"iteration": 10, "env_steps": 640, "r_mpkpe_mm": 12.1}
    # D moved between the best point and the final one in the baseline only
    assert declining["tags"]["Train/reward_scale"] == {"at_best": 2.0, "at_final": 3.0}
    assert healthy["tags"]["Train/reward_scale"] == {"at_best": 2.0, "at_final": 2.0}
    assert declining["tags"]["Train/bf16"] == {"at_best": 1.0, "at_final": 1.0}
    curve = declining["curves"]["Train/reward_scale"]
    # 30 writes, 1,856 env steps apart at most: each in a span of its own (span starts)
    assert len(curve) == 30 and curve[0] == [64, 2.0]
    assert [v for _, v in curve] == [2.0] * 20 + [3.0] * 10
    assert all(isinstance(step, int) for step, _ in curve)


def test_json_prints_only_the_document(tmp_path: Path, capsys) -> None:
    run = write_diagnostic_run(tmp_path, "A", HEALTHY_CURVE)
    code, out, _ = _cli(capsys, run, "--out", tmp_path / "a.png", "--json")
    assert code == 0
    doc = loads_strict(out)
    assert doc["tool"] == "decline_diagnostics" and doc["runs"][0]["label"] == "A"


def test_a_run_without_the_diagnostics_tags_fails_and_writes_nothing(
    tmp_path: Path, capsys
) -> None:
    old = tmp_path / "old" / "run"
    old.mkdir(parents=True)
    write_training_events(old, training_scalars(30))
    png = tmp_path / "d.png"
    code, _, err = _cli(
        capsys, write_diagnostic_run(tmp_path, "new", HEALTHY_CURVE), old, "--out", png
    )
    assert code == 1
    assert f"{old} holds none of the learner's diagnostics tags" in err
    assert not png.exists()


def test_usage_errors_exit_2_before_reading(tmp_path: Path, capsys) -> None:
    code, _, err = _cli(capsys, tmp_path / "nope", "--out", tmp_path / "d.png")
    assert code == 2 and f"run directory {tmp_path / 'nope'} does not exist" in err
    run = write_diagnostic_run(tmp_path, "A", HEALTHY_CURVE)
    code, _, err = _cli(capsys, run, "--out", tmp_path / "d.svg")
    assert code == 2 and "must end in .png" in err
    assert not (tmp_path / "d.svg").exists()


def test_an_invalid_evaluation_is_named(tmp_path: Path, capsys) -> None:
    run = write_diagnostic_run(tmp_path, "A", HEALTHY_CURVE)
    write_json_atomic(run / "evaluation.json", {"schema_version": 1})
    code, _, err = _cli(capsys, run, "--out", tmp_path / "d.png")
    assert code == 1 and "evaluation.json" in err
    assert not (tmp_path / "d.png").exists()


def test_an_event_dir_with_two_files_is_refused(tmp_path: Path, capsys) -> None:
    run = write_diagnostic_run(tmp_path, "A", HEALTHY_CURVE)
    (run / "events.out.tfevents.2.host.1.0").write_bytes(b"")
    code, _, err = _cli(capsys, run, "--out", tmp_path / "d.png")
    assert code == 1 and "holds 2 events.out.tfevents.* files, expected one" in err


def test_binned_averages_spans_and_drops_non_finite() -> None:
    events = [ScalarEvent(s, 0.0, v) for s, v in [(0, 1.0), (1, 3.0), (2, math.nan), (3, 5.0)]]
    assert D.binned(events, bins=2) == [(0, 2.0), (2, 5.0)]
    assert D.binned([ScalarEvent(0, 0.0, math.inf)]) == []


def test_value_at_is_a_trailing_window_mean() -> None:
    events = [ScalarEvent(s, 0.0, float(s)) for s in range(1001)]
    # 2 % of 1,000 steps: the mean of steps 480..500
    assert D.value_at(events, 500) == pytest.approx(490.0)
    assert D.value_at(events[10:], 5) is None


def test_the_soak_report_figure_or_the_reason_there_is_none(tmp_path: Path) -> None:
    run_dir = write_diagnostic_run(tmp_path, "A", DECLINING_CURVE)
    from harness.metrics.events import read_scalars

    scalars = read_scalars(next(run_dir.glob("events.out.tfevents.*")))
    data = RunData(
        run_dir, True, scalars=scalars, evaluation=load_strict(run_dir / "evaluation.json")
    )
    figure = D.diagnostics_figure(data, tmp_path)
    assert figure.path is not None and figure.path.read_bytes().startswith(PNG_MAGIC)
    bare = D.diagnostics_figure(RunData(run_dir, True, scalars={"Loss/critic": []}), tmp_path)
    assert bare.path is None and "predates them" in (bare.note or "")


def test_labels_are_short_and_distinct() -> None:
    check = [Path("/lc/CLIP/run"), Path("/lc/CLIP+h8192/run")]
    assert D.labels(check) == ["CLIP", "CLIP+h8192"]
    # a campaign's seeds: the shared attempt-1 goes, the cell names stay
    cells = [Path(f"/c/cells/default-s{k}-m-mjwarp/attempt-1/run") for k in (1, 2, 3)]
    assert D.labels(cells) == [f"default-s{k}-m-mjwarp" for k in (1, 2, 3)]
    # two attempts of one cell: the cell name is shared, so the attempts tell them apart
    attempts = [Path("/c/cells/x/attempt-1/run"), Path("/c/cells/x/attempt-2/run")]
    assert D.labels(attempts) == ["attempt-1", "attempt-2"]
    # every shared trailing part goes, however deep
    assert D.labels([Path("/a/run/x"), Path("/b/run/x")]) == ["a", "b"]
    # different last parts that repeat: as many parts as make them distinct
    assert D.labels([Path("/a/x/y"), Path("/b/x/z"), Path("/a/z/y")]) == ["x/y", "x/z", "z/y"]
    assert D.labels([Path("/tmp/quickstart-1/run")]) == ["quickstart-1"]
