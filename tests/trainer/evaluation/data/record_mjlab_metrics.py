"""Record ``mjlab_metrics.npz``: mjlab 1.6.0's own tracking-metric functions on shared inputs.

Not a test and not imported by one: run by hand with the mjlab 1.6.0 wheel unpacked, e.g.

    pip download mjlab==1.6.0 --no-deps -d /tmp/w && unzip -q /tmp/w/mjlab-1.6.0-*.whl -d /tmp/mjlab
    uv run python tests/trainer/evaluation/data/record_mjlab_metrics.py /tmp/mjlab

mjlab's package ``__init__`` imports warp and tyro, so the two files the metrics need (its
math utilities and ``tasks/tracking/mdp/metrics.py``) are loaded as standalone modules, and
``MotionCommand.update_relative_body_poses`` (the re-anchoring) is taken from
``tasks/tracking/mdp/commands.py`` by its source and run on a stand-in command. The outputs
are what ``tests/trainer/evaluation/test_mjlab_metrics.py`` compares ours against.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import torch

BODY_NAMES = (
    "pelvis", "left_hip_roll_link", "left_knee_link", "left_ankle_roll_link",
    "right_hip_roll_link", "right_knee_link", "right_ankle_roll_link", "torso_link",
    "left_shoulder_roll_link", "left_elbow_link", "left_wrist_yaw_link",
    "right_shoulder_roll_link", "right_elbow_link", "right_wrist_yaw_link",
)  # fmt: skip
"""mjlab 1.6.0's G1 tracking bodies (tasks/tracking/config/g1/env_cfgs.py)."""
EE_NAMES = (
    "left_ankle_roll_link",
    "right_ankle_roll_link",
    "left_wrist_yaw_link",
    "right_wrist_yaw_link",
)
ANCHOR = "torso_link"
ROWS = 16


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _relative_poses_fn(commands: Path, math_mod: types.ModuleType):
    tree = ast.parse(commands.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "update_relative_body_poses":
            source = textwrap.dedent(ast.get_source_segment(commands.read_text(), node))
            scope = {name: getattr(math_mod, name) for name in dir(math_mod)}
            exec(source, scope)  # noqa: S102 - mjlab's own function, recorded once by hand
            return scope["update_relative_body_poses"]
    raise SystemExit("update_relative_body_poses not found in commands.py")


def _quat(gen: torch.Generator, *shape: int) -> torch.Tensor:
    q = torch.randn(*shape, 4, generator=gen, dtype=torch.float64)
    return q / q.norm(dim=-1, keepdim=True)


def main(root: str) -> None:
    base = Path(root) / "mjlab"
    for pkg in ("mjlab", "mjlab.utils", "mjlab.utils.lab_api", "mjlab.tasks",
                "mjlab.tasks.tracking", "mjlab.tasks.tracking.mdp"):  # fmt: skip
        sys.modules.setdefault(pkg, types.ModuleType(pkg))
    math_mod = _load("mjlab.utils.lab_api.math", base / "utils/lab_api/math.py")
    metrics = _load("mjlab.tasks.tracking.mdp.metrics", base / "tasks/tracking/mdp/metrics.py")
    relative = _relative_poses_fn(base / "tasks/tracking/mdp/commands.py", math_mod)
    gen = torch.Generator().manual_seed(20261206)
    a = BODY_NAMES.index(ANCHOR)
    ref_pos = torch.randn(ROWS, 14, 3, generator=gen, dtype=torch.float64) * 0.4
    ref_pos[..., 2] += 0.8
    ref_quat = _quat(gen, ROWS, 14)
    pre_pos = ref_pos + 0.05 * torch.randn(ROWS, 14, 3, generator=gen, dtype=torch.float64)
    pre_pos[..., :2] += torch.randn(ROWS, 1, 2, generator=gen, dtype=torch.float64)  # drift
    pre_quat = _quat(gen, ROWS, 14)
    post_pos = pre_pos + 0.03 * torch.randn(ROWS, 14, 3, generator=gen, dtype=torch.float64)
    post_quat = _quat(gen, ROWS, 14)
    ref_jv = torch.randn(ROWS, 29, generator=gen, dtype=torch.float64)
    robot_jv = ref_jv + 0.3 * torch.randn(ROWS, 29, generator=gen, dtype=torch.float64)
    cmd = types.SimpleNamespace(
        cfg=types.SimpleNamespace(body_names=BODY_NAMES),
        num_envs=ROWS,
        device="cpu",
        body_pos_w=ref_pos,
        body_quat_w=ref_quat,
        anchor_pos_w=ref_pos[:, a],
        anchor_quat_w=ref_quat[:, a],
        robot_anchor_pos_w=pre_pos[:, a].clone(),
        robot_anchor_quat_w=pre_quat[:, a],
    )
    relative(cmd)  # the pre-step re-anchoring, as the reward and mjlab's evaluation use it
    cmd.robot_body_pos_w, cmd.robot_body_quat_w = post_pos, post_quat
    cmd.joint_vel, cmd.robot_joint_vel = ref_jv, robot_jv
    out = {
        "mpkpe": metrics.compute_mpkpe(cmd),
        "r_mpkpe": metrics.compute_root_relative_mpkpe(cmd),
        "joint_vel_error": metrics.compute_joint_velocity_error(cmd),
        "ee_pos_error": metrics.compute_ee_position_error(cmd, EE_NAMES),
        "ee_ori_error": metrics.compute_ee_orientation_error(cmd, EE_NAMES),
    }
    arrays = {
        "body_names": np.asarray(BODY_NAMES),
        "ref_body_pos_w": ref_pos, "ref_body_quat_w": ref_quat, "ref_joint_vel": ref_jv,
        "pre_body_pos_w": pre_pos, "pre_body_quat_w": pre_quat,
        "post_body_pos_w": post_pos, "post_body_quat_w": post_quat, "post_joint_vel": robot_jv,
        **{f"mjlab_{k}": v for k, v in out.items()},
    }  # fmt: skip
    target = Path(__file__).with_name("mjlab_metrics.npz")
    np.savez_compressed(
        target,
        **{k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in arrays.items()},
        recorded_with=np.asarray("mjlab 1.6.0 (PyPI wheel)"),
    )
    print(f"wrote {target}")


if __name__ == "__main__":
    main(sys.argv[1])
