"""Round trips: our synthetic clip written in each foreign convention converts back to itself.

Tolerances are the ones docs/assets.md ("Tolerances") justifies: at the same frame rate the
conversion is exact up to float32 storage; after 30 → 50 fps resampling the joints are within
the linear-interpolation bound h²/8 · max|q̈| and the rest within the stated bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import g1soak_motion_writers as writers
import numpy as np
import pytest

from trainer.motion_import import quat
from trainer.motion_import.checks import run_checks
from trainer.motion_import.convert import PROVENANCE_KEYS, convert_file
from trainer.motion_import.model import g1_model
from trainer.sim.scene import JOINT_NAMES, TRACKED_BODY_NAMES
from trainer.task.motion import load_motion

SAME_FPS_TOL = {
    "body_pos_w": 1e-6,  # m
    "body_quat_w": 1e-6,  # rad (angle between orientations)
    "joint_vel": 1e-5,  # rad/s
    "body_lin_vel_w": 1e-5,  # m/s
    "body_ang_vel_w": 1e-5,  # rad/s
}
"""float32 inputs (≈6e-8 relative) and finite differences over 2·0.02 s (docs/assets.md)."""

RESAMPLED_TOL = {
    "body_pos_w": 1e-3,
    "body_quat_w": 5e-3,
    "body_lin_vel_w": 0.02,
    "body_ang_vel_w": 0.1,
}
"""Stated bounds after 30 → 50 fps (docs/assets.md); joints use the analytic bound."""

H_IN = 1.0 / 30.0


def _max_joint_accel(arrays: dict[str, np.ndarray]) -> float:
    """max |q̈| of the original clip by second differences (interior frames)."""
    q = arrays["joint_pos"].astype(np.float64)
    return float(np.abs(np.diff(q, n=2, axis=0)).max() * 50.0**2)


def _error(key: str, got: np.ndarray, want: np.ndarray) -> float:
    got, want = got.astype(np.float64), want.astype(np.float64)
    if key == "body_quat_w":
        return float(quat.angle_between(got, want).max())
    return float(np.abs(got - want).max())


def _assert_same_clip(arrays: dict, original: dict, tol: dict[str, float], frames: int) -> None:
    assert [str(n) for n in arrays["joint_names"]] == list(JOINT_NAMES)
    assert [str(n) for n in arrays["body_names"]] == [str(n) for n in original["body_names"]]
    for key, bound in tol.items():
        err = _error(key, arrays[key][:frames], original[key][:frames])
        assert err <= bound, f"{key}: max error {err:.3g} > {bound:.3g}"


def test_the_resampling_source_is_the_generators_motion(synthetic: dict[str, np.ndarray]) -> None:
    """The 30 fps source is built like the offline clip: at 50 fps it is the offline clip."""
    again = writers.synthetic_at(50, 500)
    for key, value in again.items():
        np.testing.assert_array_equal(value, synthetic[key], err_msg=key)


SAME_FPS_WRITERS: dict[str, Callable[[dict, Path], Path]] = {
    "named_shuffled": lambda a, d: writers.write_named_shuffled(a, d / "named.npz"),
    "superset_51": lambda a, d: writers.write_superset(a, d / "superset.npz"),
    "root_included": lambda a, d: writers.write_root_included(a, d / "root.npz"),
    "root_included_sign_flips": lambda a, d: writers.write_root_included(
        a, d / "flips.npz", flip_signs=True
    ),
    "csv_wxyz_header_50fps": lambda a, d: writers.write_csv(
        a, d / "clip.csv", order="wxyz", header=True
    ),
    "physx_order_no_names": lambda a, d: writers.write_physx_order(a, d / "isaac.npz"),
}
CONVENTION = {
    "named_shuffled": "named",
    "superset_51": "named",
    "root_included": "root-included",
    "root_included_sign_flips": "root-included",
    "csv_wxyz_header_50fps": "csv",
    "physx_order_no_names": "mjlab",
}


@pytest.mark.parametrize("variant", sorted(SAME_FPS_WRITERS))
def test_same_fps_conventions_convert_back_exactly(
    variant: str, synthetic: dict[str, np.ndarray], tmp_path: Path
) -> None:
    path = SAME_FPS_WRITERS[variant](synthetic, tmp_path)
    fps_in = 50.0 if variant.startswith("csv") else None
    conv = convert_file(path, fps_in=fps_in)
    assert conv.source.convention == CONVENTION[variant]
    assert not conv.source.native
    assert conv.num_frames == 500
    np.testing.assert_array_equal(conv.arrays["joint_pos"], synthetic["joint_pos"])
    _assert_same_clip(conv.arrays, synthetic, SAME_FPS_TOL, 500)
    if conv.source.bodies is not None:  # names mapped right: their bodies equal our FK
        assert len(conv.residual) == 30
        assert max(r.pos_m for r in conv.residual) < 1e-6
        assert max(r.ori_rad for r in conv.residual) < 1e-6


def test_superset_ignores_the_extra_bodies_and_joints(
    synthetic: dict[str, np.ndarray], tmp_path: Path
) -> None:
    conv = convert_file(writers.write_superset(synthetic, tmp_path / "s.npz"))
    assert sorted(conv.source.ignored_bodies) == sorted(writers.EXTRA_BODIES)
    assert sorted(conv.source.ignored_joints) == sorted(writers.EXTRA_JOINTS)
    assert len(conv.source.bodies.names) + len(conv.source.ignored_bodies) == 51


def test_a_nameless_file_takes_the_tree_order_our_forward_kinematics_matches(
    synthetic: dict[str, np.ndarray], tmp_path: Path
) -> None:
    mujoco_order = convert_file(writers.write_mjlab(synthetic, tmp_path / "m.npz"))
    assert mujoco_order.source.tree_order == "depth-first (MuJoCo) (matches forward kinematics)"
    physx = convert_file(writers.write_physx_order(synthetic, tmp_path / "p.npz"))
    assert physx.source.tree_order.startswith("breadth-first (PhysX) (detected: forward kinematics")
    np.testing.assert_array_equal(physx.arrays["joint_pos"], mujoco_order.arrays["joint_pos"])
    named = convert_file(writers.write_named_shuffled(synthetic, tmp_path / "n.npz"))
    assert named.source.tree_order == "by name"


def test_root_included_detects_wxyz_from_the_pelvis_body(
    synthetic: dict[str, np.ndarray], tmp_path: Path
) -> None:
    conv = convert_file(writers.write_root_included(synthetic, tmp_path / "r.npz"))
    assert conv.source.quat_order == "wxyz"
    assert conv.source.quat_order_source == "detected: matches the pelvis body"


RESAMPLED_WRITERS: dict[str, Callable[[dict, Path], Path]] = {
    "csv_xyzw_30fps": lambda a, d: writers.write_csv(a, d / "clip.csv", order="xyzw"),
    "mjlab_30fps": lambda a, d: writers.write_mjlab(a, d / "mjlab.npz"),
    "physx_order_30fps": lambda a, d: writers.write_physx_order(a, d / "isaac.npz"),
}


@pytest.mark.parametrize("variant", sorted(RESAMPLED_WRITERS))
def test_30fps_sources_resample_to_the_50fps_original_within_the_stated_bounds(
    variant: str,
    synthetic: dict[str, np.ndarray],
    synthetic30: dict[str, np.ndarray],
    tmp_path: Path,
) -> None:
    conv = convert_file(RESAMPLED_WRITERS[variant](synthetic30, tmp_path))
    assert conv.source.fps == 30.0
    assert conv.num_frames == 501  # (301 − 1) · 50 / 30 + 1
    accel = _max_joint_accel(synthetic)
    joint_err = _error("joint_pos", conv.arrays["joint_pos"][:500], synthetic["joint_pos"])
    assert joint_err <= H_IN**2 / 8.0 * accel + 1e-6  # linear interpolation error bound
    vel_err = _error("joint_vel", conv.arrays["joint_vel"][:500], synthetic["joint_vel"])
    assert vel_err <= H_IN / 2.0 * accel  # slope of the interpolant vs the derivative
    _assert_same_clip(conv.arrays, synthetic, RESAMPLED_TOL, 500)


def test_csv_quaternion_order_is_stated_or_detected(
    synthetic: dict[str, np.ndarray], tmp_path: Path
) -> None:
    # The level pelvis written wxyz is upside down when read as xyzw: detected.
    wxyz = convert_file(writers.write_csv(synthetic, tmp_path / "w.csv", order="wxyz"), fps_in=50)
    assert (wxyz.source.quat_order, wxyz.source.quat_order_source) == (
        "wxyz",
        "detected: upright pelvis",
    )
    # Written xyzw, it reads upright both ways (a 180° yaw): the CSV convention's xyzw holds.
    xyzw = convert_file(writers.write_csv(synthetic, tmp_path / "x.csv", order="xyzw"), fps_in=50)
    assert xyzw.source.quat_order == "xyzw"
    assert xyzw.source.quat_order_source.startswith("stated by the convention")
    np.testing.assert_allclose(xyzw.arrays["body_pos_w"], wxyz.arrays["body_pos_w"], atol=1e-7)
    forced = convert_file(tmp_path / "w.csv", fps_in=50, quat_order="wxyz")
    assert forced.source.quat_order_source == "--quat-order"


def test_turning_root_is_slerped_and_its_angular_velocity_recovered(tmp_path: Path) -> None:
    """A pelvis yawing at a constant rate: slerp at 50 fps is exact and so is ω."""
    rate, frames_in = 0.8, 91  # rad/s, 3 s at 30 fps
    t_in = np.arange(frames_in) / 30.0
    half = 0.5 * rate * t_in
    root_quat = np.stack((np.cos(half), 0 * half, 0 * half, np.sin(half)), axis=1)
    rows = np.concatenate(
        (np.tile([0.0, 0.0, 0.8], (frames_in, 1)), root_quat, np.zeros((frames_in, 29))), axis=1
    )
    path = tmp_path / "turn.csv"
    np.savetxt(path, rows, delimiter=",", fmt="%.12g")
    conv = convert_file(path, quat_order="wxyz")
    t_out = np.arange(conv.num_frames) / 50.0
    want = np.stack(
        (np.cos(0.5 * rate * t_out), 0 * t_out, 0 * t_out, np.sin(0.5 * rate * t_out)), 1
    )
    pelvis = [str(n) for n in conv.arrays["body_names"]].index("pelvis")
    assert (
        quat.angle_between(conv.arrays["body_quat_w"][:, pelvis].astype(float), want).max() < 1e-6
    )
    np.testing.assert_allclose(conv.arrays["body_ang_vel_w"][:, pelvis, 2], rate, atol=1e-5)


def test_converted_file_loads_and_records_its_provenance(
    synthetic30: dict[str, np.ndarray], tmp_path: Path
) -> None:
    src = writers.write_csv(synthetic30, tmp_path / "walk.csv")
    conv = convert_file(src)
    out = tmp_path / "walk.npz"
    np.savez(out, **conv.arrays)
    clip = load_motion(out, g1_model())
    assert clip.num_frames == 501 and clip.body_pos_w.shape == (501, len(TRACKED_BODY_NAMES), 3)
    with np.load(out) as npz:
        assert set(PROVENANCE_KEYS) <= set(npz.files)
        assert str(npz["import_convention"]) == "csv"
        assert float(npz["import_fps_in"]) == 30.0
        assert str(npz["import_fps_source"]) == "CSV default (30)"
        assert str(npz["import_quat_order"]) == "xyzw"
        import hashlib

        assert str(npz["import_source_sha256"]) == hashlib.sha256(src.read_bytes()).hexdigest()


def test_checks_pass_on_the_synthetic_clip_and_flag_a_bad_mapping(
    synthetic: dict[str, np.ndarray], tmp_path: Path
) -> None:
    good = run_checks(convert_file(writers.write_mjlab(synthetic, tmp_path / "ok.npz")))
    assert all(c.passed for c in good), [c for c in good if not c.passed]
    # An mjlab file whose joint columns come in another producer's order: by count it looks
    # like ours, but its body poses disagree with our FK of those joints.
    wrong = dict(synthetic)
    wrong["joint_pos"] = synthetic["joint_pos"][:, ::-1].copy()
    rows = {
        c.name: c for c in run_checks(convert_file(writers.write_mjlab(wrong, tmp_path / "x.npz")))
    }
    assert not rows["fk_residual_pos"].passed and rows["fk_residual_pos"].value > 0.05
