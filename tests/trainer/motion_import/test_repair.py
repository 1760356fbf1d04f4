"""Named joint discontinuities (wrap, spike, step), the explicit repairs, and the calibrated
checks: a kick or a jump is not a defect, a long float is; nothing is repaired unasked."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import g1soak_motion_writers as writers
import numpy as np
import pytest

from trainer.motion_import.checks import run_checks
from trainer.motion_import.conventions import read_source
from trainer.motion_import.convert import convert, convert_file
from trainer.motion_import.repair import apply_repairs, find_discontinuities, parse_repairs
from trainer.sim.scene import JOINT_NAMES

FPS = 60.0
ELBOW = JOINT_NAMES.index("left_elbow_joint")


def _smooth(frames: int = 120) -> np.ndarray:
    t = np.arange(frames) / FPS
    return 0.3 * np.sin(2.0 * math.pi * 0.5 * t)[:, None] * np.ones((1, len(JOINT_NAMES)))


def test_a_wrap_a_spike_and_a_step_are_named_by_shape() -> None:
    q = _smooth()
    q[40:, 3] += 2.0 * math.pi  # an angle written modulo 2π
    q[60, 5] += 1.2  # one frame out and back
    q[90:, 7] += 1.0  # a jump that stays
    found = {(d.kind, d.joint, d.frame) for d in find_discontinuities(q, FPS)}
    assert found == {("wrap", 3, 39), ("spike", 5, 59), ("step", 7, 89)}


def test_fast_smooth_motion_is_not_a_discontinuity() -> None:
    t = np.arange(120) / FPS
    q = np.zeros((120, len(JOINT_NAMES)))
    q[:, ELBOW] = 1.2 * np.sin(2.0 * math.pi * 4.0 * t)  # a 4 Hz swing: 30 rad/s peak
    assert find_discontinuities(q, FPS) == []


def test_repairs_remove_exactly_the_kinds_asked_for(synthetic30: dict, tmp_path: Path) -> None:
    src = read_source(writers.write_csv(synthetic30, tmp_path / "c.csv"), fps_in=30)
    q = src.joint_pos.copy()
    q[100:, 3] += 2.0 * math.pi
    q[150, 5] += 1.5
    q[200:, ELBOW] += 1.2
    broken = dataclasses.replace(src, joint_pos=q)
    only_spikes, done = apply_repairs(broken, ("despike",))
    assert [d.kind for d in done] == ["spike"]
    left = {d.kind for d in find_discontinuities(only_spikes.joint_pos, src.fps)}
    assert left == {"wrap", "step"}
    fixed, done = apply_repairs(broken, ("unwrap", "despike", "blend-steps"))
    assert sorted(d.kind for d in done) == ["spike", "step", "wrap"]
    assert find_discontinuities(fixed.joint_pos, src.fps) == []
    np.testing.assert_allclose(fixed.joint_pos[:90], src.joint_pos[:90], atol=1e-12)
    assert np.abs(np.diff(fixed.joint_pos[:, ELBOW])).max() * src.fps < 25.0


def test_nothing_is_repaired_unasked_and_repairs_are_recorded(
    synthetic30: dict, tmp_path: Path
) -> None:
    src = read_source(writers.write_csv(synthetic30, tmp_path / "c.csv"), fps_in=30)
    q = src.joint_pos.copy()
    q[150, 5] += 1.5
    broken = dataclasses.replace(src, joint_pos=q)
    plain = convert(broken, "0" * 64)
    assert [d.kind for d in plain.discontinuities] == ["spike"]
    assert plain.arrays["import_repairs"].tolist() == []
    checks = {c.name: c for c in run_checks(plain)}
    assert not checks["joint_discontinuities"].passed
    assert "spike" in checks["joint_discontinuities"].detail
    assert "--repair despike" in checks["joint_discontinuities"].detail
    assert checks["joint_speed_max"].passed  # the named spike is not counted twice
    repaired = convert(broken, "0" * 64, ("despike",))
    assert repaired.discontinuities == ()
    assert repaired.arrays["import_repairs"].tolist() == [
        f"spike {JOINT_NAMES[5]} frame 149 (+1.50 rad)"
    ]
    assert all(c.passed for c in run_checks(repaired))


def _lifted(synthetic30: dict, seconds: float, height: float) -> dict:
    """The clip with the whole body raised ``height`` m for ``seconds`` from frame 60."""
    arrays = {k: np.array(v) for k, v in synthetic30.items()}
    frames = slice(60, 60 + round(seconds * 30))
    arrays["body_pos_w"][frames, :, 2] += height
    return arrays


def test_a_short_jump_passes_and_a_float_fails(synthetic30: dict, tmp_path: Path) -> None:
    jump = convert_file(
        writers.write_csv(_lifted(synthetic30, 0.3, 0.2), tmp_path / "j.csv"), fps_in=30
    )
    checks = {c.name: c for c in run_checks(jump)}
    assert checks["airborne_max_s"].passed and 0.25 <= checks["airborne_max_s"].value <= 0.35
    floating = convert_file(
        writers.write_csv(_lifted(synthetic30, 2.0, 0.2), tmp_path / "f.csv"), fps_in=30
    )
    checks = {c.name: c for c in run_checks(floating)}
    assert not checks["airborne_max_s"].passed and checks["airborne_max_s"].value >= 1.9


def test_parse_repairs_names_the_valid_ones() -> None:
    assert parse_repairs("blend-steps, unwrap") == ("unwrap", "blend-steps")
    assert parse_repairs(None) == ()
    with pytest.raises(ValueError, match="unknown repair 'smooth'; valid repairs: unwrap"):
        parse_repairs("smooth")
