"""The real thing on CPU: a tiny ``train`` run plays itself (OSMesa), and ``play`` on its
checkpoint; the MP4, the ONNX and the summary are read back. Render failures use a real
GL platform that cannot work here (GLFW without a display)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from contracts.jsonio import load_strict
from contracts.schemas import validate
from harness.report.play import play_html
from tests.trainer.play.clips import write_short_clip
from tests.trainer.runtime.train_cmd import train_argv
from trainer.config.loader import parse_override
from trainer.play.cli import main as play_main
from trainer.play.export import INPUT_NAME, TOLERANCE, DeployedActor
from trainer.play.hook import after_training
from trainer.play.rollout import run_rollout
from trainer.play.source import load_actor, resolve_source
from trainer.play.video import probe_mp4
from trainer.sim.scene import JOINT_NAMES, build_g1_model
from trainer.task.motion import load_motion, npz_sha256

pytestmark = pytest.mark.slow

FRAMES = 40
TINY = (
    "algo.num_envs=4",
    "algo.max_iterations=4",
    "algo.batch_size=8",
    "algo.learning_starts=2",
    "algo.save_interval=2",
    "training.replay_ingress_slot_rows=2",
)


def _env(root: Path, gl: str) -> dict[str, str]:
    env = dict(os.environ, MUJOCO_GL=gl, XDG_CACHE_HOME=str(root / "cache"))
    env.pop("G1SOAK_ASSET_DIR", None)
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    return env


def _play(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "trainer", "play", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900, check=False)


def _train(root: Path, run: Path, clip: Path, *extra: str, gl: str):
    argv = train_argv(run, *TINY, f"env.commands.motion.motion_file={clip}", *extra)
    return subprocess.run(
        argv, capture_output=True, text=True, env=_env(root, gl), timeout=1200, check=False
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """(run dir, clip, train stdout) of a completed run with play on (the default)."""
    root = tmp_path_factory.mktemp("play")
    clip = write_short_clip(root / "short.npz", FRAMES)
    proc = _train(root, root / "run", clip, gl="osmesa")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root / "run", clip, proc.stdout


def test_train_plays_its_run_into_a_checked_mp4(trained: tuple[Path, Path, str]) -> None:
    run, clip, stdout = trained
    summary = load_strict(run / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    assert summary["status"] == "completed"
    play = summary["play"]
    assert (play["status"], play["reason"], play["frames"]) == ("ok", None, FRAMES)
    assert play["checkpoint"] == str(run / "model_4.pt") and play["gl_backend"] == "osmesa"
    assert play["motion_sha256"] == npz_sha256(clip)
    assert play["video"] == str(run / "play.mp4") and play["onnx"] == str(run / "policy.onnx")
    info = probe_mp4(run / "play.mp4")
    assert (info.codec, info.width, info.height, info.fps) == ("h264", 640, 360, 50.0)
    assert info.frames == FRAMES
    assert info.first_frame.std() > 10.0  # not blank: floor, sky, two robots, text
    assert Path(play["filmstrip"]).read_bytes().startswith(b"\x89PNG")
    assert "play video" in stdout and str(run / "play.mp4") in stdout
    block = play_html({"run_summary": {"log_dir": str(run)}})
    assert "Policy playback" in block and "data:image/png;base64," in block


def test_the_exported_onnx_matches_torch_and_its_metadata_round_trips(
    trained: tuple[Path, Path, str],
) -> None:
    run, clip, _ = trained
    source = resolve_source(run)
    actor, iteration, weights = load_actor(source)
    model = build_g1_model(source.task_cfg.scene)
    rollout = run_rollout(actor.deterministic, source.task_cfg, model, load_motion(clip, model))
    session = ort.InferenceSession(str(run / "policy.onnx"), providers=["CPUExecutionProvider"])
    got = session.run(None, {INPUT_NAME: rollout.observations})[0]
    with torch.no_grad():
        want = DeployedActor(actor)(torch.from_numpy(rollout.observations)).numpy()
    assert np.abs(got - want).max() <= TOLERANCE
    meta = {p.key: json.loads(p.value) for p in onnx.load(run / "policy.onnx").metadata_props}
    run_config = load_strict(run / "run_config.json")
    assert meta["joint_names"] == list(JOINT_NAMES) and meta["observation_dim"] == 160
    assert (meta["clip_id"], meta["clip_sha256"]) == (str(clip), npz_sha256(clip))
    assert meta["checkpoint_iteration"] == iteration == 4
    assert meta["checkpoint_weights"] == weights == "actor"  # the run kept no averaged policy
    assert meta["project_commit"] == run_config["run"]["git"]["commit"]
    assert meta["control_dt"] == pytest.approx(0.02) and meta["action_scale"] == 2.0


def test_the_onnxruntime_example_in_docs_runs_on_the_export(
    trained: tuple[Path, Path, str],
) -> None:
    run, _, _ = trained
    page = (Path(__file__).resolve().parents[3] / "docs" / "play.md").read_text(encoding="utf-8")
    section = page.split("## Load the ONNX policy", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=run, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert f"'{JOINT_NAMES[0]}': " in proc.stdout


def test_play_on_the_checkpoint_reproduces_the_onnx_bit_for_bit_and_leaves_the_summary(
    trained: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """Outputs written outside the run directory leave its run_summary.json untouched: the
    recorded play section describes the run's own play.mp4 and policy.onnx (docs/play.md)."""
    run, _, _ = trained
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    recorded = load_strict(copy / "run_summary.json")["play"]
    onnx_path, video = tmp_path / "again.onnx", tmp_path / "again.mp4"
    proc = _play(
        str(copy / "model_4.pt"), "--onnx", str(onnx_path), "--video", str(video), "--json",
        env=_env(tmp_path, "osmesa"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert onnx_path.read_bytes() == (run / "policy.onnx").read_bytes()
    section = json.loads(proc.stdout)
    assert (section["onnx"], section["video"]) == (str(onnx_path), str(video))
    assert load_strict(copy / "run_summary.json")["play"] == recorded
    assert (recorded["onnx"], recorded["video"]) == (
        str(run / "policy.onnx"),
        str(run / "play.mp4"),
    )
    assert (tmp_path / "again_filmstrip.png").is_file()


def test_a_requested_play_that_cannot_render_fails_train_and_names_mujoco_gl(
    trained: tuple[Path, Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd
) -> None:
    """train's hook, play asked for explicitly (training.no_play=false), on a GL platform
    that cannot open here: exit 1, the failure recorded, the ONNX exported regardless.
    (Without the explicit request the same play leaves exit 0: test_play_units.)"""
    run, _, _ = trained
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    for name in ("play.mp4", "play_filmstrip.png", "policy.onnx"):
        (copy / name).unlink()
    for key, value in _env(tmp_path, "glfw").items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    requested = [parse_override("training.no_play=false")]
    assert after_training(copy, no_play=False, overrides=requested, code=0) == 1
    err = capfd.readouterr().err
    assert "error: play failed: video: cannot render with MUJOCO_GL=glfw" in err
    assert "try MUJOCO_GL=osmesa" in err
    play = load_strict(copy / "run_summary.json")["play"]
    assert play["status"] == "failed" and play["reason"].startswith("video: cannot render")
    assert (play["video"], play["filmstrip"]) == (None, None)
    assert play["onnx"] == str(copy / "policy.onnx")
    assert (copy / "policy.onnx").read_bytes() == (run / "policy.onnx").read_bytes()
    assert not (copy / "play.mp4").exists()  # no partial video either
    assert [p.name for p in copy.iterdir() if p.name.startswith(".")] == []


def test_a_corrupt_checkpoint_is_an_input_error(
    trained: tuple[Path, Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    run, _, _ = trained
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "model_4.pt").write_bytes(b"not a checkpoint")
    monkeypatch.setenv("MUJOCO_GL", "disable")  # in process: never load Mesa here
    assert play_main([str(copy)]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"error: {copy / 'model_4.pt'} cannot be loaded")
    recorded = load_strict(copy / "run_summary.json")["play"]
    assert recorded == load_strict(run / "run_summary.json")["play"]  # nothing recorded
