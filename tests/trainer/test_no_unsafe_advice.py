"""A file that cannot be loaded safely is refused with what is wrong and what to pass instead,
never with a library's advice to load it unsafely (torch's ``weights_only=False``, numpy's
``allow_pickle``). Each case runs the real command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BIN = Path(sys.executable).parent
UNSAFE = ("weights_only", "arbitrary code", "allow_pickle", "pickle.load")
HOSTILE_PICKLE = b"\x80\x02cos\nsystem\nq\x00."


def _run(*argv: str) -> tuple[int, str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.slow  # evaluate in a subprocess: 6 s each on 2 cores
@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (HOSTILE_PICKLE, "not a checkpoint train wrote (Trying to load unsupported GLOBAL"),
        (bytes(range(256)) * 4, "not a checkpoint train wrote (Unsupported operand 0)"),
    ],
)
def test_evaluate_refuses_a_foreign_checkpoint_without_unsafe_advice(
    payload: bytes, why: str, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "model_5.pt"
    checkpoint.write_bytes(payload)
    code, out = _run(str(BIN / "evaluate"), str(checkpoint))
    assert code == 2, out[-2000:]
    line = out.strip().splitlines()[-1]
    assert line.startswith(f"error: {checkpoint} cannot be loaded (UnpicklingError: {why}")
    assert line.endswith("; pass a model_<iter>.pt written by train")
    assert not any(word in out for word in UNSAFE)


def test_g1_motion_inspect_says_which_formats_it_reads(tmp_path: Path) -> None:
    tsv = tmp_path / "clip.tsv"
    tsv.write_text("a\tb\n1\t2\n", encoding="utf-8")
    code, out = _run(str(BIN / "g1-motion"), "inspect", str(tsv))
    assert code == 2, out[-2000:]
    assert out.strip().splitlines()[-1] == (
        f"error: motion file '{tsv}': is a '.tsv' file; g1-motion reads .npz and .csv clips, "
        "pass one of them"
    )
    assert not any(word in out for word in UNSAFE)


def test_g1_motion_inspect_refuses_a_random_npz_without_unsafe_advice(tmp_path: Path) -> None:
    fake = tmp_path / "clip.npz"
    fake.write_bytes(HOSTILE_PICKLE * 40)
    code, out = _run(str(BIN / "g1-motion"), "inspect", str(fake))
    assert code == 2, out[-2000:]
    assert out.strip().splitlines()[-1] == (
        f"error: motion file '{fake}': is not an .npz archive; re-export it with numpy.savez"
    )
    assert not any(word in out for word in UNSAFE)


def test_g1_motion_inspect_never_unpickles_an_object_array(tmp_path: Path) -> None:
    clip = tmp_path / "names.npz"
    np.savez(clip, joint_names=np.array([{"a": 1}], dtype=object))
    code, out = _run(str(BIN / "g1-motion"), "inspect", str(clip))
    assert code == 2, out[-2000:]
    assert "key 'joint_names' holds Python objects, which are never unpickled" in out
    assert not any(word in out for word in UNSAFE)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("objects", "is not a readable .npz (it holds Python objects, which are never unpickled)"),
        ("pickle", "is not an .npz archive"),
    ],
)
def test_train_refuses_a_clip_it_cannot_read_safely_without_unsafe_advice(
    content: str, why: str, tmp_path: Path
) -> None:
    clip = tmp_path / "clip.npz"
    if content == "objects":
        np.savez(clip, joint_pos=np.array([{"a": 1}], dtype=object))
    else:
        clip.write_bytes(HOSTILE_PICKLE * 40)
    code, out = _check_config_with_clip(clip)
    assert code == 2, out[-2000:]
    assert out.strip().splitlines()[-1] == (
        f"error: motion file '{clip}' {why}; re-export it with numpy.savez"
    )
    assert not any(word in out for word in UNSAFE)


def test_train_names_a_clip_of_a_format_it_does_not_read(tmp_path: Path) -> None:
    tsv = tmp_path / "clip.tsv"
    tsv.write_text("a\tb\n1\t2\n", encoding="utf-8")
    code, out = _check_config_with_clip(tsv)
    assert code == 2, out[-2000:]
    assert out.strip().splitlines()[-1] == (
        f"error: motion file '{tsv}' is a '.tsv' file; clips are .npz or .csv, pass one"
    )
    assert not any(word in out for word in UNSAFE)


def _check_config_with_clip(clip: Path) -> tuple[int, str]:
    """``python -m trainer check-config`` of the CPU owner with ``clip`` as its motion file."""
    return _run(
        sys.executable, "-m", "trainer", "check-config",
        "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mujoco",
        f"env.commands.motion.motion_file={clip}",
    )  # fmt: skip
