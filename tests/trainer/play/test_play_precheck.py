"""``play``'s input checks: paths and clips are checked before torch or mujoco is imported,
a mistyped ``--motion`` gets the nearest known name, a damaged checkpoint is never answered
with torch's advice to load it unsafely, and outputs sent elsewhere leave the run's
``run_summary.json`` alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.jsonio import write_json_atomic
from tests.harness.schemas.builders import make_completed_summary
from trainer.config.loader import load_config
from trainer.play import session
from trainer.play.cli import main
from trainer.play.precheck import PlayInputError, motion_choice
from trainer.play.record import PlayRecord

UNSAFE = ("weights_only", "arbitrary code", "allow_pickle")
# A pickle that would run os.system: what a checkpoint from an untrusted source can hold.
HOSTILE_PICKLE = b"\x80\x02cos\nsystem\nq\x00."
# Runs play's CLI and reports, beside its exit code, whether torch or mujoco got imported.
PLAY_AND_REPORT_IMPORTS = """
import sys
from trainer.play.cli import main
code = main(sys.argv[1:])
print("imported:", sorted(m for m in ("torch", "mujoco") if m in sys.modules), file=sys.stderr)
sys.exit(code)
"""


def _play(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MUJOCO_GL="disable")
    argv = [sys.executable, "-c", PLAY_AND_REPORT_IMPORTS, *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)


def _run_dir(tmp_path: Path, checkpoint: bytes = b"not a checkpoint") -> Path:
    run = tmp_path / "run"
    run.mkdir()
    config = load_config("flashsac", "g1_motion_tracking", "mujoco").config
    (run / "run_config.json").write_text(json.dumps({"config": config}), encoding="utf-8")
    (run / "model_3.pt").write_bytes(checkpoint)
    return run


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{tmp}/missing"], "missing does not exist; pass a run directory"),
        (["{tmp}/run/model_9.pt"], "model_9.pt does not exist"),
        (["{tmp}/run", "--motion", "synthetc"], "did you mean 'synthetic'? g1-motion list"),
    ],
)
def test_bad_paths_and_clips_fail_before_torch_or_mujoco_is_imported(
    args: list[str], message: str, tmp_path: Path
) -> None:
    _run_dir(tmp_path)
    proc = _play(*(a.format(tmp=tmp_path) for a in args))
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-2].startswith("error: ") and message in lines[-2]
    assert lines[-1] == "imported: []"


@pytest.mark.slow  # play in a subprocess: 12 s on 2 cores
def test_a_damaged_checkpoint_is_refused_without_unsafe_advice(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, checkpoint=HOSTILE_PICKLE)
    proc = _play(str(run))
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-2]
    assert line.startswith(
        f"error: {run / 'model_3.pt'} cannot be loaded (UnpicklingError: not a checkpoint train "
        "wrote (Trying to load unsupported GLOBAL os.system"
    )
    assert line.endswith("; pass a model_<iter>.pt written by train")
    assert not any(word in proc.stderr for word in UNSAFE)


def test_short_names_become_asset_ids_and_clip_like_values_pass_through() -> None:
    assert motion_choice(None) is None
    assert motion_choice("synthetic") == "motions/g1/synthetic_dance.npz"
    assert motion_choice("motions/g1/other.csv") == "motions/g1/other.csv"
    assert motion_choice("a.npz,b.npz") == "a.npz,b.npz"
    with pytest.raises(PlayInputError, match=r"'xyzzy' is no clip.*; g1-motion list"):
        motion_choice("xyzzy")


def _fake_play(source, outputs, options, gl, log) -> PlayRecord:
    del options, gl, log
    return PlayRecord(
        checkpoint=str(source.checkpoint),
        motion_id="motions/g1/synthetic_dance.npz",
        motion_sha256="0" * 64,
        frames=40,
        gl_backend="disable",
        video=str(outputs.video),
        filmstrip=str(outputs.filmstrip),
        onnx=str(outputs.onnx),
        onnx_max_abs_error=0.0,
        onnx_tolerance=1e-4,
        mean_body_pos_error_m=0.1,
    )


def test_play_elsewhere_leaves_the_run_summary_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path)
    summary = run / "run_summary.json"
    write_json_atomic(summary, make_completed_summary(str(run)))
    before = summary.read_bytes()
    monkeypatch.setenv("MUJOCO_GL", "disable")
    monkeypatch.setattr(session, "run_play", _fake_play)
    assert main([str(run), "--video", str(tmp_path / "elsewhere.mp4")]) == 0
    assert summary.read_bytes() == before
    assert "not changed: --video or --onnx wrote outside" in capsys.readouterr().out
    assert main([str(run)]) == 0
    assert json.loads(summary.read_text())["play"]["video"] == str(run.resolve() / "play.mp4")
