"""``python -m trainer check-config``: train's own checks and the clip's contents, torch-free,
writing nothing; exit 2 for bad input with train's message, 1 when the check cannot be made.
``train`` itself rejects a bad clip at preflight, in one line, before any process starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trainer.check_config import main
from trainer.config.defaults import default_scene_cfg
from trainer.sim.scene import build_g1_model
from trainer.task.motion import SYNTHETIC_MOTION_ID, generate_synthetic_clip

OWNER = ["--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mujoco"]
SYNTHETIC = f"env.commands.motion.motion_file={SYNTHETIC_MOTION_ID}"


@pytest.fixture(scope="module")
def clip() -> dict[str, np.ndarray]:
    return generate_synthetic_clip(build_g1_model(default_scene_cfg()), SYNTHETIC_MOTION_ID)


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def _save(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    np.savez(path, **arrays)
    return path


def test_a_good_config_passes_and_names_the_clip(
    tmp_path: Path, isolated_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    code = main([*OWNER, SYNTHETIC, f"training.log_dir={run}", "algo.batch_size=8", "--json"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["owner"] == "flashsac/g1_motion_tracking/mujoco"
    assert doc["overrides"] == [SYNTHETIC, f"training.log_dir={run}", "algo.batch_size=8"]
    assert doc["log_dir"] == str(run) and not run.exists()
    motion = doc["motion"]
    assert (motion["id"], motion["source"], motion["frames"], motion["fps"]) == (
        SYNTHETIC_MOTION_ID,
        "generated",
        500,
        50,
    )
    assert len(motion["arrays_sha256"]) == 64


def test_an_unknown_key_is_trains_own_message_and_nothing_is_written(
    tmp_path: Path, isolated_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([*OWNER, f"training.log_dir={tmp_path / 'run'}", "algo.batchsize=256"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.splitlines() == [
        (
            "error: unknown config key 'algo.batchsize' (override 'algo.batchsize=256'); "
            "did you mean 'algo.batch_size'?"
        )
    ]
    assert list(tmp_path.iterdir()) == []
    assert not isolated_cache.exists()


def test_a_misspelt_motion_name_is_rejected_without_the_hub(
    tmp_path: Path, isolated_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([*OWNER, "env.commands.motion.motion_file=dnace"])
    err = capsys.readouterr().err
    assert code == 2
    (line,) = err.splitlines()
    assert line.startswith("error: motion file 'dnace' not found (searched: dnace, ")
    assert (
        "it is no path and no asset id (those end in .npz or .csv), so the hub was not asked"
        in line
    )


@pytest.mark.parametrize(
    ("change", "key"),
    [
        pytest.param(lambda a: {k: v for k, v in a.items() if k != "fps"}, "fps", id="missing-key"),
        pytest.param(
            lambda a: {**a, "body_pos_w": a["body_pos_w"][:, :, :2]}, "body_pos_w", id="wrong-shape"
        ),
        pytest.param(
            lambda a: {**a, "body_quat_w": a["body_quat_w"] * 2.0},
            "body_quat_w",
            id="not-unit-quaternions",
        ),
    ],
)
def test_bad_clip_contents_are_one_line_exit_2(
    tmp_path: Path,
    isolated_cache: Path,
    clip: dict[str, np.ndarray],
    capsys: pytest.CaptureFixture[str],
    change,
    key: str,
) -> None:
    """The line is the loader's own (docs/assets.md words each rule); it names file and key."""
    bad = _save(tmp_path / "bad.npz", change(dict(clip)))
    code = main([*OWNER, f"env.commands.motion.motion_file={bad}"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"error: motion file '{bad}': ") and f"'{key}'" in line


def test_an_unreachable_hub_is_exit_1_not_bad_input(
    tmp_path: Path, isolated_cache: Path, monkeypatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from trainer import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://nonexistent.invalid")
    monkeypatch.setattr(hub, "PUBLIC_HF_ENDPOINT", "http://nonexistent.invalid")
    code = main([*OWNER])  # the owner's default clip comes from the hub
    err = capsys.readouterr().err
    assert code == 1
    assert "hub download failed: HubUnreachable: cannot reach the Hugging Face hub" in err


def test_flags_must_come_together(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sim", "mujoco"]) == 2
    assert capsys.readouterr().err == "error: --algo, --task and --sim must be given together\n"


@pytest.mark.slow
def test_the_real_command_imports_neither_torch_nor_warp(tmp_path: Path, isolated_cache) -> None:
    """``python -X importtime`` lists every module the command imported."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "trainer", "check-config", *OWNER, SYNTHETIC],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "mujoco" in imported and "omegaconf" in imported  # the listing is real
    assert not imported & {"torch", "warp", "mujoco_warp", "triton"}
    assert "config                ok" in proc.stdout


@pytest.mark.slow
def test_train_rejects_a_bad_clip_at_preflight_in_one_line(
    tmp_path: Path, isolated_cache, clip: dict[str, np.ndarray]
) -> None:
    bad = _save(tmp_path / "bad.npz", {k: v for k, v in clip.items() if k != "fps"})
    run = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable, "-m", "trainer", "train", *OWNER,
            f"training.log_dir={run}", f"env.commands.motion.motion_file={bad}",
            "algo.num_envs=4", "algo.batch_size=8", "algo.learning_starts=2",
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    (line,) = _errors(proc.stderr)
    assert line.startswith(
        f"error: preflight failed (startup/begin): motion file '{bad}': missing key 'fps'"
    )
    summary = json.loads((run / "run_summary.json").read_text())
    exception = summary["runtime_manifest"]["shutdown"]["exception"]
    assert exception["type"] == "MotionError"
    assert exception["message"].startswith(f"motion file '{bad}': missing key 'fps'")
