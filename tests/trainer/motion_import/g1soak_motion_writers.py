"""Our synthetic clip written in the foreign conventions the importer reads (round-trip tests).

Each writer takes the arrays of ``generate_synthetic_dance`` (world-inclusive, 31 bodies with
``body_names``) and writes them the way another tool would: names shuffled, a 51-body
superset with hand links, root pose inside ``joint_pos``, an mjlab NPZ without names, a
retargeted CSV. The G1's joints and bodies keep their values; only layout and naming change.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainer.motion_import.model import g1_model
from trainer.sim.scene import FOOT_BODY_NAMES, JOINT_NAMES, body_kinematics
from trainer.task.motion import synthetic

BODY_KEYS = ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
EXTRA_BODIES = (
    *(
        f"{side}_hand_{part}_link"
        for side in ("left", "right")
        for part in (
            "palm", "thumb_0", "thumb_1", "thumb_2", "index_0",
            "index_1", "middle_0", "middle_1", "ring_0", "ring_1",
        )
    ),
    "head_link",
)  # fmt: skip
"""21 bodies a producer's model may have and ours has not: 30 G1 bodies + these = 51."""
EXTRA_JOINTS = tuple(
    f"{side}_hand_{finger}_joint"
    for side in ("left", "right")
    for finger in ("thumb_0", "thumb_1", "index_0", "middle_0")
)


def synthetic_at(fps: int, num_frames: int) -> dict[str, np.ndarray]:
    """The synthetic clip's motion sampled at another rate, built the way the generator builds
    it (level pelvis, feet centred on the origin, lowest foot point at z = 0; joint and root
    velocities by central differences), so each frame is the 50 fps clip's motion at k / fps."""
    model = g1_model()
    dt = 1.0 / fps
    joint_pos = synthetic._synthetic_joint_pos(num_frames, fps)
    qpos = np.zeros((num_frames, model.nq))
    qpos[:, 3] = 1.0
    qpos[:, 7:] = joint_pos
    rooted = body_kinematics(model, qpos, np.zeros((num_frames, model.nv)))
    feet = [model.body(name).id for name in FOOT_BODY_NAMES]
    qpos[:, 0:2] = -rooted["body_pos_w"][:, feet, :2].mean(axis=1)
    qpos[:, 2] = -rooted["foot_min_z"]
    qvel = np.zeros((num_frames, model.nv))
    qvel[:, 0:3] = np.gradient(qpos[:, 0:3], dt, axis=0)
    qvel[:, 6:] = np.gradient(joint_pos, dt, axis=0)
    states = body_kinematics(model, qpos, qvel)
    f32 = np.float32
    return {
        "fps": np.asarray(fps, dtype=np.int64),
        "joint_pos": joint_pos.astype(f32),
        "joint_vel": qvel[:, 6:].astype(f32),
        **{key: states[key].astype(f32) for key in BODY_KEYS},
        "joint_names": np.asarray(JOINT_NAMES),
        "body_names": np.asarray([model.body(b).name for b in range(model.nbody)]),
    }


def _rng(seed: int = 7) -> np.random.Generator:
    return np.random.default_rng(seed)


def _bodies(arrays: dict[str, np.ndarray], with_world: bool) -> tuple[list[str], dict]:
    names = [str(n) for n in arrays["body_names"]]
    cols = slice(0, None) if with_world else slice(1, None)
    return names[cols], {k: arrays[k][:, cols] for k in BODY_KEYS}


def _superset(names: list[str], bodies: dict, frames: int, rng: np.random.Generator) -> tuple:
    """Append 21 extra bodies (to 51 with the 30 G1 bodies) with random unit states."""
    extra = len(EXTRA_BODIES)
    quats = rng.normal(size=(frames, extra, 4))
    quats /= np.linalg.norm(quats, axis=-1, keepdims=True)
    add = {
        "body_pos_w": rng.normal(size=(frames, extra, 3)),
        "body_quat_w": quats,
        "body_lin_vel_w": rng.normal(size=(frames, extra, 3)),
        "body_ang_vel_w": rng.normal(size=(frames, extra, 3)),
    }
    out = {
        k: np.concatenate((bodies[k], add[k].astype(bodies[k].dtype)), axis=1) for k in BODY_KEYS
    }
    return names + list(EXTRA_BODIES), out


def _shuffle_bodies(names: list[str], bodies: dict, rng: np.random.Generator) -> tuple:
    perm = rng.permutation(len(names))
    return [names[i] for i in perm], {k: v[:, perm] for k, v in bodies.items()}


def _joints_with_extras(arrays: dict, rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    """The 29 G1 joints plus 8 hand joints, shuffled, with their names."""
    names = [str(n) for n in arrays["joint_names"]] + list(EXTRA_JOINTS)
    frames = arrays["joint_pos"].shape[0]
    values = np.concatenate(
        (arrays["joint_pos"], rng.normal(size=(frames, len(EXTRA_JOINTS))).astype(np.float32)), 1
    )
    perm = rng.permutation(len(names))
    return [names[i] for i in perm], values[:, perm]


def write_named_shuffled(arrays: dict, path: Path) -> Path:
    """``named``: 29 joints and 30 bodies, both shuffled, with name arrays."""
    rng = _rng(1)
    names, bodies = _shuffle_bodies(*_bodies(arrays, with_world=False), rng)
    jperm = rng.permutation(29)
    joint_names = [str(arrays["joint_names"][i]) for i in jperm]
    np.savez(
        path,
        fps=arrays["fps"],
        joint_pos=arrays["joint_pos"][:, jperm],
        joint_vel=arrays["joint_vel"][:, jperm],
        joint_names=np.asarray(joint_names),
        body_names=np.asarray(names),
        **bodies,
    )
    return path


def write_superset(arrays: dict, path: Path) -> Path:
    """``named``: 51 bodies (30 G1 + 21 hand/extra links) and 37 joints, all shuffled."""
    rng = _rng(2)
    frames = arrays["joint_pos"].shape[0]
    names, bodies = _shuffle_bodies(*_superset(*_bodies(arrays, False), frames, rng), rng)
    joint_names, joint_pos = _joints_with_extras(arrays, rng)
    np.savez(
        path,
        fps=arrays["fps"],
        joint_pos=joint_pos,
        joint_vel=np.gradient(joint_pos, axis=0),
        joint_names=np.asarray(joint_names),
        body_names=np.asarray(names),
        **bodies,
    )
    return path


def write_root_included(arrays: dict, path: Path, *, flip_signs: bool = False) -> Path:
    """``root-included``: joint_pos [T, 7 + 29] (root pos, root quat wxyz, joints shuffled),
    joint_vel [T, 6 + 29], a 51-body superset with names. ``flip_signs`` negates the root
    quaternion on every other frame (the same rotations, discontinuous signs)."""
    rng = _rng(3)
    frames = arrays["joint_pos"].shape[0]
    root_pos = arrays["body_pos_w"][:, 1]
    root_quat = arrays["body_quat_w"][:, 1].copy()
    if flip_signs:
        root_quat[1::2] *= -1.0
    jperm = rng.permutation(29)
    names, bodies = _shuffle_bodies(*_superset(*_bodies(arrays, False), frames, rng), rng)
    np.savez(
        path,
        fps=np.asarray([float(arrays["fps"])]),
        joint_pos=np.concatenate((root_pos, root_quat, arrays["joint_pos"][:, jperm]), axis=1),
        joint_vel=np.concatenate(
            (
                arrays["body_lin_vel_w"][:, 1],
                arrays["body_ang_vel_w"][:, 1],
                arrays["joint_vel"][:, jperm],
            ),
            axis=1,
        ),
        joint_names=np.asarray([str(arrays["joint_names"][i]) for i in jperm]),
        body_names=np.asarray(names),
        **bodies,
    )
    return path


def write_mjlab(arrays: dict, path: Path) -> Path:
    """``mjlab``: no names, 29 joints in G1 order, 30 bodies (world excluded) in MuJoCo order."""
    _, bodies = _bodies(arrays, with_world=False)
    np.savez(
        path,
        fps=arrays["fps"],
        joint_pos=arrays["joint_pos"],
        joint_vel=arrays["joint_vel"],
        **bodies,
    )
    return path


def write_csv(arrays: dict, path: Path, *, order: str = "xyzw", header: bool = False) -> Path:
    """``csv``: root pos, root quat in ``order``, 29 joints per row (header names optional)."""
    quat = arrays["body_quat_w"][:, 1]
    if order == "xyzw":
        quat = quat[:, [1, 2, 3, 0]]
    rows = np.concatenate((arrays["body_pos_w"][:, 1], quat, arrays["joint_pos"]), axis=1)
    head = ""
    if header:
        root = ["x", "y", "z", *(f"q{c}" for c in order)]
        head = ",".join(root + [str(n) for n in arrays["joint_names"]])
    np.savetxt(path, rows, delimiter=",", fmt="%.9g", header=head, comments="")
    return path


def write_physx_order(arrays: dict, path: Path) -> Path:
    """An mjlab-shaped NPZ without names whose joints and bodies are in the breadth-first
    order PhysX-based tools (Isaac Lab) use: pelvis, left_hip_pitch, right_hip_pitch, waist..."""
    from trainer.motion_import.model import breadth_first_names

    bodies_bfs, joints_bfs = breadth_first_names()
    names, bodies = _bodies(arrays, with_world=False)
    body_cols = [names.index(n) for n in bodies_bfs]
    joint_cols = [[str(n) for n in arrays["joint_names"]].index(n) for n in joints_bfs]
    np.savez(
        path,
        fps=arrays["fps"],
        joint_pos=arrays["joint_pos"][:, joint_cols],
        joint_vel=arrays["joint_vel"][:, joint_cols],
        **{k: v[:, body_cols] for k, v in bodies.items()},
    )
    return path
