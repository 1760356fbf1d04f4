"""The G1 model conversion works on: the one ``train`` builds from the default scene config.

Forward kinematics only needs the kinematic tree (body offsets, joint axes), which comes from
the robot MJCF that :func:`trainer.sim.scene.locate_g1_mjcf` finds; the scene's timestep and
actuators do not matter here. The model is built once per process. Also here: the tree's
breadth-first order (how PhysX-based tools number bodies and joints) and plain forward
kinematics for residuals.
"""

from __future__ import annotations

import functools
from collections import deque

import mujoco
import numpy as np

from trainer.config.defaults import default_scene_cfg
from trainer.sim.scene import JOINT_NAMES, build_g1_model

__all__ = ["breadth_first_names", "forward_poses", "g1_body_names", "g1_model"]


@functools.cache
def g1_model() -> mujoco.MjModel:
    """The G1 scene model of the owner YAML's ``env.scene`` (cached; treat it as read-only)."""
    model = build_g1_model(default_scene_cfg())
    hinges = tuple(model.joint(j).name for j in range(1, model.njnt))
    if hinges != JOINT_NAMES:
        msg = f"G1 model hinge joints {hinges[:3]}... differ from the 29-DoF order; rebuild the asset cache (g1-pull-assets --robot g1)"
        raise RuntimeError(msg)
    return model


@functools.cache
def g1_body_names() -> tuple[str, ...]:
    """Every body of the model in MuJoCo id order, world included (31)."""
    model = g1_model()
    return tuple(model.body(b).name for b in range(model.nbody))


@functools.cache
def breadth_first_names() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(bodies, hinge joints)`` of the G1 in breadth-first order of the kinematic tree.

    MuJoCo numbers bodies depth-first (left leg, right leg, waist and arms); PhysX-based
    tools (Isaac Lab) number an articulation breadth-first, level by level, siblings in
    model order: pelvis, left_hip_pitch_link, right_hip_pitch_link, waist_yaw_link, ...
    The world body is not included.
    """
    model = g1_model()
    children: dict[int, list[int]] = {b: [] for b in range(model.nbody)}
    for b in range(1, model.nbody):
        children[int(model.body_parentid[b])].append(b)
    order: list[int] = []
    queue = deque(children[0])
    while queue:
        body = queue.popleft()
        order.append(body)
        queue.extend(children[body])
    joints = [
        model.joint(j).name
        for b in order
        for j in range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b])
        if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE
    ]
    return tuple(model.body(b).name for b in order), tuple(joints)


def forward_poses(
    root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """World ``(positions [T, nbody, 3], orientations [T, nbody, 4] wxyz)`` of every body for
    root poses and joint angles in G1 order (kinematics only, no velocities)."""
    model = g1_model()
    data = mujoco.MjData(model)
    frames = joint_pos.shape[0]
    pos = np.empty((frames, model.nbody, 3))
    rot = np.empty((frames, model.nbody, 4))
    for k in range(frames):
        data.qpos[:] = np.concatenate((root_pos[k], root_quat[k], joint_pos[k]))
        mujoco.mj_kinematics(model, data)
        pos[k] = data.xpos
        rot[k] = data.xquat
    return pos, rot
