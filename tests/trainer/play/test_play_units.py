"""``play``'s small seams: the summary section and its schema, what counts as an explicit
request, the MUJOCO_GL choice, output paths, and the input errors that exit 2.

In-process ``play`` calls set ``MUJOCO_GL=disable``: this process must not load Mesa's
OSMesa (its LLVM crashes triton when triton loads later, see trainer.play.export)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from contracts.jsonio import write_json_atomic
from contracts.schemas import validate
from trainer.config.loader import parse_override
from trainer.play import render
from trainer.play.cli import main
from trainer.play.hook import after_training, play_exit_code, play_requested
from trainer.play.record import PlayRecord, record_play, skipped, summary_rows
from trainer.play.render import GlChoice, choose_gl_backend, filmstrip_indices
from trainer.play.session import default_outputs

SHA = "0" * 64


def _ok_record() -> PlayRecord:
    return PlayRecord(
        checkpoint="/r/model_4.pt",
        motion_id="motions/g1/synthetic_dance.npz",
        motion_sha256=SHA,
        frames=60,
        gl_backend="osmesa",
        video="/r/play.mp4",
        filmstrip="/r/play_filmstrip.png",
        onnx="/r/policy.onnx",
        onnx_max_abs_error=8e-7,
        onnx_tolerance=1e-5,
        mean_body_pos_error_m=0.4,
        timings_s={"rollout": 1.23456, "total": 2.0},
    )


def _summary_with(play: dict) -> dict:
    shutdown = {
        "classification": "learner_failure",
        "owner": "learner",
        "phase": "startup/begin",
        "exception": None,
        "cleanup": {"errors": []},
    }
    return {
        "status": "failed",
        "metric_schema_version": 1,
        "runtime_manifest": {"schema_version": 1, "shutdown": shutdown},
        "error_type": "X",
        "error": "y",
        "play": play,
    }


def test_sections_follow_the_failures_and_validate() -> None:
    record = _ok_record()
    ok = record.section()
    assert (ok["status"], ok["reason"], ok["timings_s"]["rollout"]) == ("ok", None, 1.235)
    assert validate(_summary_with(ok), "run_summary.v1.json") == []
    record.video = record.filmstrip = None
    record.fail("video", "cannot render with MUJOCO_GL=glfw")
    failed = record.section()
    assert failed["status"] == "failed" and failed["reason"].startswith("video: cannot render")
    assert failed["onnx"] == "/r/policy.onnx"  # what was written stays listed
    assert validate(_summary_with(failed), "run_summary.v1.json") == []
    skip = skipped("training.no_play=true")
    assert (skip["status"], skip["video"]) == ("skipped", None)
    assert validate(_summary_with(skip), "run_summary.v1.json") == []


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"reason": "done"}, "$.play.reason"),  # ok carries no reason
        ({"status": "failed"}, "$.play.reason"),  # failed needs one
        ({"video": None}, "$.play.video"),  # ok lists every output
        ({"frames": 0}, "$.play.frames"),
        ({"extra": 1}, "$.play"),
    ],
)
def test_the_schema_rejects_inconsistent_sections(change: dict, path: str) -> None:
    violations = validate(
        _summary_with({**_ok_record().section(), **change}), "run_summary.v1.json"
    )
    assert path in {v.path for v in violations}, violations


def test_record_play_updates_the_summary_and_leaves_a_missing_one_alone(tmp_path: Path) -> None:
    assert record_play(tmp_path, _ok_record().section()) is None
    assert not (tmp_path / "run_summary.json").exists()
    write_json_atomic(tmp_path / "run_summary.json", _summary_with(skipped("x")))
    assert record_play(tmp_path, _ok_record().section()) == tmp_path / "run_summary.json"
    bad = {**_ok_record().section(), "frames": -1}
    with pytest.raises(ValueError, match=r"\$\.play\.frames"):
        record_play(tmp_path, bad)
    rows = dict(summary_rows(_summary_with(_ok_record().section())))
    assert rows == {"play": "ok", "play video": "/r/play.mp4", "play onnx": "/r/policy.onnx"}


def test_only_an_explicit_false_override_requests_play() -> None:
    assert play_requested([parse_override("training.no_play=false")])
    assert not play_requested([parse_override("training.no_play=true")])
    assert not play_requested([parse_override("algo.num_envs=4")])
    assert not play_requested([])


def test_a_failed_play_fails_a_completed_run_only_on_request() -> None:
    assert play_exit_code(0, "failed", requested=False) == 0
    assert play_exit_code(0, "failed", requested=True) == 1
    assert play_exit_code(0, "ok", requested=True) == 0
    assert play_exit_code(1, "ok", requested=False) == 1  # a failed run stays failed


def test_after_training_leaves_runs_that_did_not_complete_alone(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / "run_summary.json", _summary_with(skipped("x")))
    before = (tmp_path / "run_summary.json").read_bytes()
    requested = [parse_override("training.no_play=false")]
    assert after_training(tmp_path, no_play=False, overrides=requested, code=1) == 1
    assert after_training(tmp_path, no_play=False, overrides=requested, code=0) == 0
    assert (tmp_path / "run_summary.json").read_bytes() == before  # nothing spawned or written


def test_gl_choice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert choose_gl_backend({"MUJOCO_GL": "EGL"}) == GlChoice("egl", "MUJOCO_GL")
    with pytest.raises(ValueError, match="MUJOCO_GL=vulkan is not an OpenGL platform"):
        choose_gl_backend({"MUJOCO_GL": "vulkan"})
    monkeypatch.delitem(sys.modules, "mujoco", raising=False)
    driver = tmp_path / "version"
    monkeypatch.setattr(render, "NVIDIA_DRIVER_FILE", driver)
    env: dict[str, str] = {}
    assert choose_gl_backend(env) == GlChoice("osmesa", "default") and env["MUJOCO_GL"] == "osmesa"
    driver.write_text("NVRM version: 580")
    env = {}
    assert choose_gl_backend(env) == GlChoice("egl", "default") and env["MUJOCO_GL"] == "egl"


def test_gl_choice_after_mujoco_was_imported_reports_mujocos_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mujoco", sys.modules.get("mujoco") or object())
    env: dict[str, str] = {}
    assert choose_gl_backend(env) == GlChoice("glfw", "mujoco-default") and env == {}


def test_outputs_default_to_the_run_directory(tmp_path: Path, monkeypatch) -> None:
    out = default_outputs(tmp_path)
    assert (out.video, out.filmstrip, out.onnx) == (
        tmp_path / "play.mp4",
        tmp_path / "play_filmstrip.png",
        tmp_path / "policy.onnx",
    )
    monkeypatch.chdir(tmp_path)
    given = default_outputs(tmp_path / "run", Path("v/clip.mp4"), Path("p.onnx"))
    assert given.filmstrip == tmp_path / "v" / "clip_filmstrip.png"
    assert given.onnx == tmp_path / "p.onnx"


def test_filmstrip_indices_span_the_clip() -> None:
    assert filmstrip_indices(500) == [0, 71, 143, 214, 285, 356, 428, 499]
    assert filmstrip_indices(3) == [0, 1, 2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{tmp}/missing"], "does not exist; pass a run directory"),
        (["{tmp}"], "holds no model_<iter>.pt"),
        (["{tmp}/model_3.pt"], "has no run_config.json"),
        (["{tmp}/notes.txt"], "is not a model_<iter>.pt"),
        (["{tmp}", "--width", "641"], "--width 641 must be an even number"),
    ],
)
def test_bad_input_exits_2_with_one_error_line(
    args: list[str], message: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("MUJOCO_GL", "disable")
    (tmp_path / "model_3.pt").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("x")
    if "holds no" in message:
        (tmp_path / "model_3.pt").unlink()
    assert main([a.format(tmp=tmp_path) for a in args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1]


def test_an_unknown_mujoco_gl_is_a_usage_error(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("MUJOCO_GL", "vulkan")
    assert main([str(tmp_path)]) == 2
    assert "MUJOCO_GL=vulkan is not an OpenGL platform" in capsys.readouterr().err


def test_help_shows_an_example(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "Example: play" in out and "--onnx" in out


def test_training_runs_without_gl_and_play_gets_the_callers_setting(monkeypatch) -> None:
    from trainer.play import hook

    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    with hook.headless_training():
        assert os.environ["MUJOCO_GL"] == "disable"
        assert hook._child_env()["MUJOCO_GL"] == "osmesa"
    assert os.environ["MUJOCO_GL"] == "osmesa"
    monkeypatch.delenv("MUJOCO_GL")
    with hook.headless_training():
        assert "MUJOCO_GL" not in hook._child_env()  # play then picks its default
    assert "MUJOCO_GL" not in os.environ
