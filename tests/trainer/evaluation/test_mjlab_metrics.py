"""Our tracking metrics against mjlab 1.6.0's own metric functions on shared inputs.

``data/mjlab_metrics.npz`` holds random robot and reference states and what mjlab 1.6.0's
``compute_mpkpe``, ``compute_root_relative_mpkpe``, ``compute_joint_velocity_error``,
``compute_ee_position_error`` and ``compute_ee_orientation_error`` returned for them, after
its ``update_relative_body_poses`` re-anchored the reference on the pre-step robot
(``data/record_mjlab_metrics.py`` recorded it). Ours must agree to 1e-6 (m, rad, rad/s).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from trainer.evaluation.metrics import ERROR_NAMES, step_errors
from trainer.sim.scene import ANCHOR_TRACKED_INDEX, EE_TRACKED_INDICES, TRACKED_BODY_NAMES
from trainer.task.reference import relative_reference
from trainer.task.state import TrackedState

FIXTURE = Path(__file__).with_name("data") / "mjlab_metrics.npz"


@pytest.fixture(scope="module")
def recorded() -> dict[str, np.ndarray]:
    with np.load(FIXTURE) as npz:
        arrays = {k: npz[k] for k in npz.files}
    assert tuple(str(n) for n in arrays["body_names"]) == TRACKED_BODY_NAMES
    return arrays


def _state(pos: np.ndarray, quat: np.ndarray, joint_vel: np.ndarray) -> TrackedState:
    rows = pos.shape[0]
    zeros = torch.zeros(rows, 14, 3, dtype=torch.float64)
    return TrackedState(
        joint_pos=torch.zeros(rows, 29, dtype=torch.float64),
        joint_vel=torch.from_numpy(joint_vel),
        body_pos_w=torch.from_numpy(pos),
        body_quat_w=torch.from_numpy(quat),
        body_lin_vel_w=zeros,
        body_ang_vel_w=zeros,
    )


def test_our_metrics_equal_mjlabs_on_the_recorded_states(recorded: dict) -> None:
    a = ANCHOR_TRACKED_INDEX
    reference = _state(
        recorded["ref_body_pos_w"], recorded["ref_body_quat_w"], recorded["ref_joint_vel"]
    )
    pre = (
        torch.from_numpy(recorded["pre_body_pos_w"]),
        torch.from_numpy(recorded["pre_body_quat_w"]),
    )
    post = _state(
        recorded["post_body_pos_w"], recorded["post_body_quat_w"], recorded["post_joint_vel"]
    )
    relative = relative_reference(reference, pre[0][:, a], pre[1][:, a], a)
    errors = step_errors(
        post, reference, relative, anchor=a, ee_columns=torch.tensor(EE_TRACKED_INDICES)
    )
    ours = dict(zip(ERROR_NAMES, errors.unbind(-1), strict=True))
    pairs = {
        "mpkpe_mm": ("mjlab_mpkpe", 1e-3),
        "r_mpkpe_mm": ("mjlab_r_mpkpe", 1e-3),
        "joint_vel_error_rad_s": ("mjlab_joint_vel_error", 1.0),
        "end_effector_pos_error_mm": ("mjlab_ee_pos_error", 1e-3),
        "end_effector_ori_error_rad": ("mjlab_ee_ori_error", 1.0),
    }
    for name, (key, scale) in pairs.items():
        delta = np.abs(ours[name].numpy() * scale - recorded[key]).max()
        assert delta <= 1e-6, f"{name}: |ours - mjlab| = {delta:.3g}"
    assert float(recorded["mjlab_r_mpkpe"].mean()) < float(recorded["mjlab_mpkpe"].mean())
