"""The g1-soak preflight (harness.soak.preflight): ``--motion`` names a clip, and the trainer's
``check-config`` judges the command line before the launch; its exit 2 is the soak's exit 2
with the trainer's own message, and nothing is launched or written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from contracts.errors import HarnessError, UsageError
from contracts.motions import MOTION_IDS
from harness.soak.preflight import check_argv, check_trainer_command, motion_arg

BIN = Path(sys.executable).parent


def _fake_python(tmp_path: Path, body: str) -> Path:
    """A stand-in interpreter: records its argv, then behaves as ``body`` says."""
    script = tmp_path / "fake-python"
    script.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/argv"\n{body}\n')
    script.chmod(0o755)
    return script


def _command(python: Path) -> list[str]:
    return [str(python), "-m", "trainer", "train", "--algo", "flashsac", "algo.num_envs=4"]


def test_the_check_gets_trains_arguments_and_its_json_is_returned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = _fake_python(
        tmp_path, 'echo "warning: HF_ENDPOINT failed over" >&2\necho \'{"status": "ok"}\''
    )
    assert check_trainer_command(_command(python)) == {"status": "ok"}
    argv = (tmp_path / "argv").read_text().split()
    assert argv == [
        "-m",
        "trainer",
        "check-config",
        "--algo",
        "flashsac",
        "algo.num_envs=4",
        "--json",
    ]
    assert capsys.readouterr().err == "warning: HF_ENDPOINT failed over\n"


@pytest.mark.parametrize(
    ("body", "kind", "message"),
    [
        pytest.param(
            "echo 'a log line' >&2\necho \"error: unknown config key 'algo.batchsize'\" >&2\nexit 2",
            UsageError,
            "unknown config key 'algo.batchsize'",
            id="bad-input",
        ),
        pytest.param(
            "echo 'error: cannot reach the Hugging Face hub' >&2\nexit 1",
            HarnessError,
            "cannot reach the Hugging Face hub",
            id="check-failed",
        ),
        pytest.param(
            "echo 'Segmentation fault' >&2\nexit 139",
            HarnessError,
            "the trainer's config check exited with status 139: Segmentation fault",
            id="crash",
        ),
        pytest.param(
            "echo 'not json'",
            HarnessError,
            "the trainer's config check printed no JSON result",
            id="no-json",
        ),
    ],
)
def test_each_outcome_of_the_check_maps_to_one_message(
    tmp_path: Path, body: str, kind: type[Exception], message: str
) -> None:
    with pytest.raises(kind) as info:
        check_trainer_command(_command(_fake_python(tmp_path, body)))
    assert type(info.value) is kind
    assert str(info.value).startswith(message)


def test_a_check_that_hangs_is_stopped(tmp_path: Path) -> None:
    python = _fake_python(tmp_path, "exec sleep 30")
    with pytest.raises(HarnessError, match="did not finish within 0.5 s"):
        check_trainer_command(_command(python), timeout_s=0.5)


def test_only_an_interpreter_pinned_train_command_is_checked() -> None:
    with pytest.raises(ValueError, match="not an interpreter-pinned train command"):
        check_argv(["python", "train.py"])


def test_motion_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "clip.npz").write_bytes(b"x")
    (tmp_path / "clips").mkdir()
    assert motion_arg("march", MOTION_IDS) == "motions/g1/synthetic_march.npz"
    assert motion_arg("clip.npz", MOTION_IDS) == str(tmp_path / "clip.npz")
    assert motion_arg("./clip.npz", MOTION_IDS) == str(tmp_path / "clip.npz")
    assert motion_arg("motions/g1/x.npz", MOTION_IDS) == "motions/g1/x.npz"
    assert motion_arg("motions/g1/x.CSV", MOTION_IDS) == "motions/g1/x.CSV"
    assert motion_arg("clips", MOTION_IDS) == str(tmp_path / "clips")  # a clip-set directory
    assert motion_arg("dance,clip.npz", MOTION_IDS) == (
        f"motions/g1/dance1_subject2_part.npz,{tmp_path / 'clip.npz'}"
    )
    with pytest.raises(UsageError, match=r"^--motion './gone.npz': no such file \("):
        motion_arg("./gone.npz", MOTION_IDS)
    with pytest.raises(UsageError, match=r"did you mean 'synthetic'\?$"):
        motion_arg("synthtic", MOTION_IDS)
    with pytest.raises(UsageError, match="^--motion ' ' has an empty item"):
        motion_arg(" ", MOTION_IDS)
    with pytest.raises(UsageError, match=r"^--motion 'dnace' is no clip"):
        motion_arg("synthetic,dnace", MOTION_IDS)


def _g1_soak(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(BIN / "g1-soak"), "--sim", "mujoco",
            "--log-dir", str(tmp_path / "run"), "--output", str(tmp_path / "soak.json"), *args,
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def _assert_rejected_before_launch(proc: subprocess.CompletedProcess[str], tmp_path: Path) -> str:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert not (tmp_path / "run").exists() and not (tmp_path / "soak.json").exists()
    return line


@pytest.mark.slow
def test_g1_soak_rejects_an_unknown_key_with_the_trainers_message(
    tmp_path: Path, isolated_cache
) -> None:
    proc = _g1_soak(tmp_path, "--motion", "synthetic", "--extra-override", "algo.batchsize=256")
    assert _assert_rejected_before_launch(proc, tmp_path) == (
        "error: unknown config key 'algo.batchsize' (override 'algo.batchsize=256'); "
        "did you mean 'algo.batch_size'?"
    )


@pytest.mark.slow
def test_g1_soak_rejects_a_misspelt_motion_without_the_hub(tmp_path: Path, isolated_cache) -> None:
    proc = _g1_soak(tmp_path, "--motion", "dnace")
    assert _assert_rejected_before_launch(proc, tmp_path) == (
        "error: --motion 'dnace' is no clip: pass one of synthetic, march, dance, an asset id "
        "ending in .npz or .csv, or an existing file; did you mean 'dance'?"
    )


@pytest.mark.slow
def test_g1_soak_rejects_a_clip_with_a_wrong_shape_with_the_trainers_message(
    tmp_path: Path, isolated_cache
) -> None:
    from trainer.config.defaults import default_scene_cfg
    from trainer.sim.scene import build_g1_model
    from trainer.task.motion import SYNTHETIC_MOTION_ID, generate_synthetic_clip

    arrays = generate_synthetic_clip(build_g1_model(default_scene_cfg()), SYNTHETIC_MOTION_ID)
    arrays["body_pos_w"] = arrays["body_pos_w"][:, :, :2]
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    proc = _g1_soak(tmp_path, "--motion", str(bad))
    line = _assert_rejected_before_launch(proc, tmp_path)
    assert line.startswith(f"error: motion file '{bad}': ") and "'body_pos_w'" in line
    check = subprocess.run(
        [sys.executable, "-m", "trainer", "check-config", "--algo", "flashsac",
         "--task", "g1_motion_tracking", "--sim", "mujoco",
         f"env.commands.motion.motion_file={bad}"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert check.returncode == 2 and check.stderr.splitlines() == [line]  # the trainer's words
