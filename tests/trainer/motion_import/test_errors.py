"""Every bad input gets one line naming the key and the fix; the CLI exits 2 with it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import g1soak_motion_writers as writers
import numpy as np
import pytest

from trainer.motion_import.cli import main
from trainer.motion_import.conventions import read_source
from trainer.task.motion import MotionError


def _short(arrays: dict[str, np.ndarray], frames: int = 6) -> dict[str, np.ndarray]:
    return {k: (v[:frames].copy() if v.ndim >= 2 else v.copy()) for k, v in arrays.items()}


def _npz(path: Path, **arrays: np.ndarray) -> Path:
    np.savez(path, **arrays)
    return path


def _named(tmp: Path, arrays: dict) -> dict[str, np.ndarray]:
    with np.load(writers.write_named_shuffled(_short(arrays), tmp / "src.npz")) as npz:
        return {k: npz[k] for k in npz.files}


def missing_joint_name(tmp: Path, arrays: dict) -> Path:
    named = _named(tmp, arrays)
    names = named["joint_names"].copy()
    names[list(names).index("waist_yaw_joint")] = "torso_joint"
    return _npz(tmp / "bad.npz", **{**named, "joint_names": names})


def duplicate_body_name(tmp: Path, arrays: dict) -> Path:
    named = _named(tmp, arrays)
    names = named["body_names"].copy()
    names[3] = names[5]
    return _npz(tmp / "bad.npz", **{**named, "body_names": names})


def duplicate_joint_name(tmp: Path, arrays: dict) -> Path:
    named = _named(tmp, arrays)
    names = named["joint_names"].copy()
    names[0] = names[1]
    return _npz(tmp / "bad.npz", **{**named, "joint_names": names})


def nan_frame(tmp: Path, arrays: dict) -> Path:
    named = _named(tmp, arrays)
    joint_pos = named["joint_pos"].copy()
    joint_pos[3, 2] = np.nan
    return _npz(tmp / "bad.npz", **{**named, "joint_pos": joint_pos})


def one_frame(tmp: Path, arrays: dict) -> Path:
    return writers.write_named_shuffled(_short(arrays, 1), tmp / "bad.npz")


def unknown_keys(tmp: Path, arrays: dict) -> Path:
    return _npz(tmp / "bad.npz", positions=np.zeros((4, 29)), rate=np.asarray(30))


def unknown_widths(tmp: Path, arrays: dict) -> Path:
    short = _short(arrays)
    return _npz(
        tmp / "bad.npz",
        fps=short["fps"],
        joint_pos=np.zeros((6, 23)),
        joint_vel=np.zeros((6, 23)),
        body_pos_w=np.zeros((6, 24, 3)),
        body_quat_w=np.tile([1.0, 0, 0, 0], (6, 24, 1)),
    )


def non_unit_root_quat(tmp: Path, arrays: dict) -> Path:
    path = writers.write_root_included(_short(arrays), tmp / "src.npz")
    with np.load(path) as npz:
        data = {k: npz[k] for k in npz.files}
    data["joint_pos"][2, 3:7] *= 1.1
    return _npz(tmp / "bad.npz", **data)


def non_unit_csv_quat(tmp: Path, arrays: dict) -> Path:
    path = writers.write_csv(_short(arrays), tmp / "bad.csv", order="wxyz")
    rows = np.loadtxt(path, delimiter=",")
    rows[4, 3:7] *= 0.5
    np.savetxt(path, rows, delimiter=",")
    return path


def root_columns_without_names(tmp: Path, arrays: dict) -> Path:
    path = writers.write_root_included(_short(arrays), tmp / "src.npz")
    with np.load(path) as npz:
        data = {k: npz[k] for k in npz.files if k not in ("joint_names", "body_names")}
    return _npz(tmp / "bad.npz", **data)


def no_fps(tmp: Path, arrays: dict) -> Path:
    named = _named(tmp, arrays)
    named.pop("fps")
    return _npz(tmp / "bad.npz", **named)


def no_pelvis(tmp: Path, arrays: dict) -> Path:
    named = _named(tmp, arrays)
    names = list(named["body_names"])
    keep = [i for i, n in enumerate(names) if n != "pelvis"]
    bodies = {k: named[k][:, keep] for k in writers.BODY_KEYS}
    return _npz(tmp / "bad.npz", **{**named, **bodies, "body_names": named["body_names"][keep]})


def ragged_csv(tmp: Path, arrays: dict) -> Path:
    path = writers.write_csv(_short(arrays), tmp / "bad.csv")
    lines = path.read_text().splitlines()
    lines[2] = ",".join(lines[2].split(",")[:-1])
    path.write_text("\n".join(lines) + "\n")
    return path


def pickled_names(tmp: Path, arrays: dict) -> Path:
    named = _named(tmp, arrays)
    named["joint_names"] = np.asarray(list(named["joint_names"]), dtype=object)
    path = tmp / "bad.npz"
    np.savez(path, **named)  # savez pickles object arrays; the importer never unpickles
    return path


CASES: dict[str, tuple[Callable[[Path, dict], Path], tuple[str, ...]]] = {
    "missing_names": (
        missing_joint_name,
        ("key 'joint_names' lacks G1 joints ['waist_yaw_joint']", "['torso_joint']", "rename"),
    ),
    "duplicate_body_names": (duplicate_body_name, ("key 'body_names' names", "twice", "unique")),
    "duplicate_joint_names": (duplicate_joint_name, ("key 'joint_names' names", "twice")),
    "nan_frame": (nan_frame, ("key 'joint_pos' has NaN/inf at frame 3", "drop or fill")),
    "one_frame": (one_frame, ("key 'joint_pos' has T=1 frames", "at least 2")),
    "unknown_keys": (unknown_keys, ("unknown convention: no key 'joint_pos'", "mjlab/BeyondMimic")),
    "unknown_widths": (
        unknown_widths,
        ("unknown convention", "23 columns", "add 'joint_names' and 'body_names'"),
    ),
    "non_unit_root_quat": (
        non_unit_root_quat,
        ("key 'joint_pos' has a quaternion of norm 1.1", "normalise"),
    ),
    "non_unit_csv_quat": (non_unit_csv_quat, ("columns 3-6 (root quaternion)", "norm 0.5", "unit")),
    "root_columns_without_names": (
        root_columns_without_names,
        ("key 'joint_pos' has 36 columns", "no key 'joint_names'", "add the 29 joint names"),
    ),
    "no_fps": (no_fps, ("missing key 'fps'", "--fps-in")),
    "no_pelvis": (no_pelvis, ("key 'body_names' has no 'pelvis'",)),
    "ragged_csv": (ragged_csv, ("line 3 has 35 columns", "every row needs 36")),
    "pickled_names": (
        pickled_names,
        ("key 'joint_names' holds Python objects, which are never unpickled", "dtype=str"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_naming_the_key_and_the_fix(
    case: str, synthetic: dict[str, np.ndarray], tmp_path: Path
) -> None:
    build, pieces = CASES[case]
    path = build(tmp_path, synthetic)
    with pytest.raises(MotionError) as info:
        read_source(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"motion file '{path}': ")
    for piece in pieces:
        assert piece in message, message


def test_cli_exits_2_with_one_error_line(
    synthetic: dict[str, np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = nan_frame(tmp_path, synthetic)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: motion file ") and "NaN/inf" in err[0]


def test_fps_flag_must_agree_with_the_file(
    synthetic: dict[str, np.ndarray], tmp_path: Path
) -> None:
    path = writers.write_named_shuffled(_short(synthetic), tmp_path / "n.npz")
    with pytest.raises(
        MotionError, match=r"key 'fps'=50 disagrees with --fps-in 30; drop --fps-in"
    ):
        read_source(path, fps_in=30)
    assert read_source(path, fps_in=50).fps == 50.0


def test_a_folder_is_not_told_it_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (
        ["inspect", str(tmp_path)],
        ["convert", str(tmp_path), str(tmp_path / "o.npz")],
    ):
        assert main(command) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line == (
            f"error: motion file '{tmp_path}': is a folder; pass one .npz or .csv clip "
            "(g1-motion import checks a library folder)"
        )
