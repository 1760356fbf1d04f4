"""The Unitree G1 29-DoF scene: robot constants and our own MjSpec composition.

The robot is mjlab 1.6.0's ``g1.xml``, bundled in ``trainer/sim/unitree_g1/`` (docs/assets.md);
this module adds everything the training task relies on (docs/assets.md §the-g1-model-and-the-scene): a flat floor, 29
``<position>`` actuators in joint order, joint armature/friction, foot contact spheres, the
two IMU sensors the observations read and the ``stand`` keyframe. Visual meshes are dropped (training is headless), so the
scene compiles from primitive geoms alone and ``scene_flat.xml`` loads without mesh files.

The same scene feeds the CPU MuJoCo backend and MuJoCo Warp; ``nconmax``/``njmax`` in
:class:`SceneCfg` are the per-world MJWarp contact/constraint buffer sizes.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from trainer.assets import PACKAGE_ASSET_ROOT, AssetError
from trainer.assets import asset_roots as default_asset_roots

__all__ = [
    "ANCHOR_BODY",
    "ANCHOR_BODY_NAME",
    "ANCHOR_TRACKED_INDEX",
    "BUNDLED_G1_MJCF",
    "DEFAULT_JOINT_POS",
    "EE_BODY_NAMES",
    "EE_TRACKED_INDICES",
    "FOOT_BODY_NAMES",
    "G1_MJCF_ID",
    "JOINT_EFFORT",
    "JOINT_KP",
    "JOINT_KV",
    "JOINT_NAMES",
    "SCENE_FLAT_ID",
    "STAND_ROOT_HEIGHT",
    "TRACKED_BODY_NAMES",
    "UNDESIRED_CONTACT_BODY_NAMES",
    "UNDESIRED_CONTACT_TRACKED_INDICES",
    "SceneCfg",
    "body_ids",
    "body_kinematics",
    "build_g1_kinematics_model",
    "build_g1_model",
    "build_g1_spec",
    "locate_g1_mjcf",
    "materialize_scene",
    "scene_xml",
]

# ---------------------------------------------------------------------------------------------
# Robot constants (docs/assets.md §the-g1-model-and-the-scene, docs/task.md §tracked-bodies)
# ---------------------------------------------------------------------------------------------

_LEG = ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
_ARM = (
    "shoulder_pitch",
    "shoulder_roll",
    "shoulder_yaw",
    "elbow",
    "wrist_roll",
    "wrist_pitch",
    "wrist_yaw",
)

JOINT_NAMES: tuple[str, ...] = (
    *(f"left_{j}_joint" for j in _LEG),
    *(f"right_{j}_joint" for j in _LEG),
    "waist_yaw_joint",
    "waist_roll_joint",
    "waist_pitch_joint",
    *(f"left_{j}_joint" for j in _ARM),
    *(f"right_{j}_joint" for j in _ARM),
)
"""The 29 hinge joints in XML order: the column order of actions, observations and NPZs."""

_LEG_Q = (-0.312, 0.0, 0.0, 0.669, -0.363, 0.0)
_LEG_KP = (40.179, 99.098, 40.179, 99.098, 28.501, 28.501)
_LEG_KV = (2.558, 6.309, 2.558, 6.309, 1.814, 1.814)
_LEG_EFFORT = (88.0, 139.0, 88.0, 139.0, 50.0, 50.0)
_WAIST_KP = (40.179, 28.501, 28.501)
_WAIST_KV = (2.558, 1.814, 1.814)
_WAIST_EFFORT = (88.0, 50.0, 50.0)
_ARM_KP = (14.251,) * 5 + (16.778,) * 2
_ARM_KV = (0.907,) * 5 + (1.068,) * 2
_ARM_EFFORT = (25.0,) * 5 + (5.0,) * 2

DEFAULT_JOINT_POS: tuple[float, ...] = (
    *_LEG_Q,
    *_LEG_Q,
    0.0,
    0.0,
    0.0,
    0.2,
    0.2,
    0.0,
    0.6,
    0.0,
    0.0,
    0.0,
    0.2,
    -0.2,
    0.0,
    0.6,
    0.0,
    0.0,
    0.0,
)
"""Default joint positions (the ``stand`` keyframe and the action offset), rad."""

JOINT_KP: tuple[float, ...] = (*_LEG_KP, *_LEG_KP, *_WAIST_KP, *_ARM_KP, *_ARM_KP)
"""Position-actuator stiffness per joint, N·m/rad."""

JOINT_KV: tuple[float, ...] = (*_LEG_KV, *_LEG_KV, *_WAIST_KV, *_ARM_KV, *_ARM_KV)
"""Position-actuator damping per joint, N·m·s/rad."""

JOINT_EFFORT: tuple[float, ...] = (
    *_LEG_EFFORT,
    *_LEG_EFFORT,
    *_WAIST_EFFORT,
    *_ARM_EFFORT,
    *_ARM_EFFORT,
)
"""Actuator force clamp per joint, N·m (forcerange = ±effort)."""

TRACKED_BODY_NAMES: tuple[str, ...] = (
    "pelvis",
    "left_hip_roll_link",
    "left_knee_link",
    "left_ankle_roll_link",
    "right_hip_roll_link",
    "right_knee_link",
    "right_ankle_roll_link",
    "torso_link",
    "left_shoulder_roll_link",
    "left_elbow_link",
    "left_wrist_yaw_link",
    "right_shoulder_roll_link",
    "right_elbow_link",
    "right_wrist_yaw_link",
)
"""The 14 tracked bodies in docs/task.md §tracked-bodies order (i = 0..13)."""

ANCHOR_BODY_NAME = "torso_link"
ANCHOR_BODY = ANCHOR_BODY_NAME  # the spelling used in docs/architecture.md
ANCHOR_TRACKED_INDEX = TRACKED_BODY_NAMES.index(ANCHOR_BODY_NAME)  # 7

EE_BODY_NAMES: tuple[str, ...] = (
    "left_ankle_roll_link",
    "right_ankle_roll_link",
    "left_wrist_yaw_link",
    "right_wrist_yaw_link",
)
"""End-effector bodies of the ``ee_body_pos`` termination."""

UNDESIRED_CONTACT_BODY_NAMES: tuple[str, ...] = tuple(
    name for name in TRACKED_BODY_NAMES if name not in EE_BODY_NAMES
)
"""The 10 ``U`` bodies of the ``undesired_contacts`` height test."""

EE_TRACKED_INDICES: tuple[int, ...] = tuple(TRACKED_BODY_NAMES.index(n) for n in EE_BODY_NAMES)
UNDESIRED_CONTACT_TRACKED_INDICES: tuple[int, ...] = tuple(
    TRACKED_BODY_NAMES.index(n) for n in UNDESIRED_CONTACT_BODY_NAMES
)

STAND_ROOT_HEIGHT = 0.754
"""Pelvis height of the ``stand`` keyframe, m."""

G1_MJCF_ID = "robots/g1/g1.xml"
SCENE_FLAT_ID = "robots/g1/scene_flat.xml"
BUNDLED_G1_MJCF = Path(__file__).resolve().parent / "unitree_g1" / "g1.xml"
"""mjlab 1.6.0's G1 XML, shipped in the package: the last place :func:`locate_g1_mjcf` looks."""

_HINGE_ARMATURE = 0.01
_HINGE_FRICTIONLOSS = 0.3
_FLOOR_FRICTION = (1.0, 0.005, 0.0001)
_FOOT_FRICTION = (0.6, 0.005, 0.0001)
_FOOT_SPHERE_RADIUS = 0.005
# (x, y, z) in the ankle-roll frame; y is mirrored per side only by sign, so one table serves both.
_FOOT_SPHERE_POS = (
    (-0.05, 0.025, -0.03),
    (-0.05, -0.025, -0.03),
    (0.12, 0.03, -0.03),
    (0.12, -0.03, -0.03),
)
_COLLISION_GROUP = 3
_TORSO_GYRO_CUTOFF = 34.9


@dataclass(frozen=True, kw_only=True)
class SceneCfg:
    """``env.scene.*``: physics timing, MJWarp buffer sizes and the robot source of the G1
    scene. The owner YAML holds the values (no defaults here; outside a run use
    :func:`trainer.config.defaults.default_scene_cfg`)."""

    sim_dt: float
    """Physics timestep, s (1/150: 3 substeps per 50 Hz control step)."""
    decimation: int
    """Physics substeps per control step; ctrl_dt = sim_dt * decimation."""
    nconmax: int
    """MJWarp contact buffer per world (docs/assets.md §the-g1-model-and-the-scene)."""
    njmax: int
    """MJWarp constraint-row buffer per world; must be >= 4 * nconmax + 58."""
    robot_mjcf: str | None
    """Explicit robot MJCF path (``env.scene.robot_mjcf``); None searches the asset roots."""

    def __post_init__(self) -> None:
        if isinstance(self.decimation, bool) or not isinstance(self.decimation, int):
            msg = f"scene.decimation={self.decimation!r} must be an int >= 1; use e.g. 3"
            raise TypeError(msg)
        if self.decimation < 1:
            msg = f"scene.decimation={self.decimation} must be >= 1; use e.g. 3"
            raise ValueError(msg)
        if not (isinstance(self.sim_dt, float | int) and math.isfinite(self.sim_dt)) or (
            self.sim_dt <= 0
        ):
            msg = f"scene.sim_dt={self.sim_dt!r} must be a finite number > 0; use e.g. 1/150"
            raise ValueError(msg)
        if self.nconmax < 1:
            msg = f"scene.nconmax={self.nconmax} must be >= 1; use e.g. 64"
            raise ValueError(msg)
        min_njmax = 4 * self.nconmax + 58
        if self.njmax < min_njmax:
            msg = (
                f"scene.njmax={self.njmax} must be >= 4*nconmax+58={min_njmax} "
                f"(pyramidal contacts + frictionloss + limit rows); use e.g. {min_njmax}"
            )
            raise ValueError(msg)

    @property
    def ctrl_dt(self) -> float:
        """Control period, s: ``sim_dt * decimation``."""
        return self.sim_dt * self.decimation


# ---------------------------------------------------------------------------------------------
# Model location (docs/contracts.md §assets-and-motion)
# ---------------------------------------------------------------------------------------------


def locate_g1_mjcf(cfg: SceneCfg, asset_roots: Sequence[Path] | None = None) -> Path:
    """Find the G1 robot MJCF in docs/contracts.md §assets-and-motion order.

    Order: (1) ``cfg.robot_mjcf``; (2) ``<root>/robots/g1/g1.xml`` for each asset root;
    (3) the model bundled in the package, :data:`BUNDLED_G1_MJCF`.

    Args:
        cfg: scene configuration.
        asset_roots: asset roots to search; defaults to :func:`trainer.assets.asset_roots`.

    Returns:
        Path of the robot XML.

    Raises:
        AssetError: an explicit path is missing, or no source holds the model.
    """
    if cfg.robot_mjcf is not None:
        explicit = Path(cfg.robot_mjcf).expanduser()
        if not explicit.is_file():
            msg = (
                f"env.scene.robot_mjcf={cfg.robot_mjcf!r} does not exist; "
                "point it at a g1.xml, or set it to null to use the bundled model"
            )
            raise AssetError(msg)
        return explicit
    return _search_g1_mjcf(asset_roots)


def _search_g1_mjcf(asset_roots: Sequence[Path] | None) -> Path:
    """Steps (2) and (3) of :func:`locate_g1_mjcf`: the asset roots, then the bundled model."""
    searched: list[str] = []
    for root in default_asset_roots() if asset_roots is None else asset_roots:
        candidate = Path(root) / G1_MJCF_ID
        if candidate.is_file():
            return candidate
        searched.append(str(candidate))
    if BUNDLED_G1_MJCF.is_file():
        return BUNDLED_G1_MJCF
    searched.append(str(BUNDLED_G1_MJCF))
    msg = (
        f"G1 model not found (searched: {', '.join(searched)}); "
        "the package's bundled model is missing: reinstall g1soak (uv sync), "
        "or set env.scene.robot_mjcf"
    )
    raise AssetError(msg)


# ---------------------------------------------------------------------------------------------
# Scene composition (docs/assets.md §the-g1-model-and-the-scene)
# ---------------------------------------------------------------------------------------------


def _drop_visuals_and_sensors(spec: mujoco.MjSpec) -> None:
    """Delete mesh geoms, mesh/material assets and the XML's own sensors (headless scene)."""
    for geom in list(spec.geoms):
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH:
            spec.delete(geom)
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    for material in list(spec.materials):
        spec.delete(material)
    for sensor in list(spec.sensors):
        spec.delete(sensor)


def _configure_collisions(spec: mujoco.MjSpec) -> None:
    """All primitives collide with everything (self-collision on), condim 3, docs/task.md frictions."""
    for geom in spec.geoms:
        geom.contype = 1
        geom.conaffinity = 1
        geom.condim = 3
        geom.priority = 0
        if "_foot" in geom.name and geom.name.endswith("_collision"):
            geom.friction = _FOOT_FRICTION
        else:
            geom.friction = _FLOOR_FRICTION


def _add_foot_spheres(spec: mujoco.MjSpec) -> None:
    """Add the 4 contact spheres per foot (priority 1, so their friction 0.6 wins)."""
    for side in ("left", "right"):
        body = spec.body(f"{side}_ankle_roll_link")
        if body is None:
            msg = f"robot MJCF lacks body '{side}_ankle_roll_link'; use the G1 29-DoF rev 1.0 model"
            raise AssetError(msg)
        for i, pos in enumerate(_FOOT_SPHERE_POS):
            name = f"{side}_foot_contact_{i}_geom"
            if spec.geom(name) is not None:
                continue
            body.add_geom(
                name=name,
                type=mujoco.mjtGeom.mjGEOM_SPHERE,
                size=[_FOOT_SPHERE_RADIUS, 0.0, 0.0],
                pos=list(pos),
                friction=list(_FOOT_FRICTION),
                priority=1,
                condim=3,
                contype=1,
                conaffinity=1,
                group=_COLLISION_GROUP,
                rgba=[0.2, 0.6, 0.2, 0.3],
            )


def _configure_joints_and_actuators(spec: mujoco.MjSpec) -> None:
    hinges = [j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_HINGE]
    names = tuple(j.name for j in hinges)
    if names != JOINT_NAMES:
        msg = (
            f"robot MJCF hinge joints {names} differ from the G1 29-DoF order; "
            f"use the G1 29-DoF rev 1.0 model bundled at {BUNDLED_G1_MJCF}"
        )
        raise AssetError(msg)
    for joint in hinges:
        joint.armature = _HINGE_ARMATURE
        joint.frictionloss = _HINGE_FRICTIONLOSS
        joint.damping = np.zeros(3)
    for actuator in list(spec.actuators):
        spec.delete(actuator)
    for name, kp, kv, effort in zip(JOINT_NAMES, JOINT_KP, JOINT_KV, JOINT_EFFORT, strict=True):
        gain = np.zeros(10)
        gain[0] = kp
        bias = np.zeros(10)
        bias[1] = -kp
        bias[2] = -kv
        spec.add_actuator(
            name=name,
            target=name,
            trntype=mujoco.mjtTrn.mjTRN_JOINT,
            gaintype=mujoco.mjtGain.mjGAIN_FIXED,
            gainprm=gain,
            biastype=mujoco.mjtBias.mjBIAS_AFFINE,
            biasprm=bias,
            ctrllimited=mujoco.mjtLimited.mjLIMITED_FALSE,
            forcelimited=mujoco.mjtLimited.mjLIMITED_TRUE,
            forcerange=[-effort, effort],
        )


def build_g1_spec(cfg: SceneCfg, asset_roots: Sequence[Path] | None = None) -> mujoco.MjSpec:
    """Compose the flat-ground G1 scene as an ``MjSpec`` (docs/assets.md §the-g1-model-and-the-scene).

    Args:
        cfg: scene configuration (timestep, robot source).
        asset_roots: asset roots for :func:`locate_g1_mjcf`; defaults to the package and cache roots.

    Returns:
        An uncompiled spec; ``spec.compile()`` gives the model.

    Raises:
        AssetError: the robot model cannot be found or is not the G1 29-DoF model.
    """
    spec = _compose_g1_spec(locate_g1_mjcf(cfg, asset_roots))
    spec.option.timestep = cfg.sim_dt
    return spec


def build_g1_kinematics_model(asset_roots: Sequence[Path] | None = None) -> mujoco.MjModel:
    """The scene of :func:`build_g1_spec` for forward kinematics alone, without a scene config.

    The robot is found as with ``env.scene.robot_mjcf: null`` (the asset roots, then the
    bundled model) and composed the same way (bodies, joints, foot spheres, floor); only the
    timestep is MuJoCo's default, which kinematics never reads. The built-in clips are
    generated on it (:mod:`trainer.task.motion.synthetic`), so they need no owner file.
    """
    return _compose_g1_spec(_search_g1_mjcf(asset_roots)).compile()


def _compose_g1_spec(robot_mjcf: Path) -> mujoco.MjSpec:
    """The G1 scene around ``robot_mjcf``, every part but the timestep (see :func:`build_g1_spec`)."""
    spec = mujoco.MjSpec.from_file(str(robot_mjcf))
    _drop_visuals_and_sensors(spec)

    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST

    _configure_collisions(spec)
    _add_foot_spheres(spec)
    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0.0, 0.0, 0.05],
        friction=list(_FLOOR_FRICTION),
        contype=1,
        conaffinity=1,
        condim=3,
    )
    _configure_joints_and_actuators(spec)

    for site_name in ("imu_in_pelvis", "imu_in_torso"):
        if spec.site(site_name) is None:
            msg = f"robot MJCF lacks site '{site_name}'; use the G1 29-DoF rev 1.0 model"
            raise AssetError(msg)
    spec.add_sensor(
        name="pelvis_local_linvel",
        type=mujoco.mjtSensor.mjSENS_VELOCIMETER,
        objtype=mujoco.mjtObj.mjOBJ_SITE,
        objname="imu_in_pelvis",
    )
    spec.add_sensor(
        name="torso_gyro",
        type=mujoco.mjtSensor.mjSENS_GYRO,
        objtype=mujoco.mjtObj.mjOBJ_SITE,
        objname="imu_in_torso",
        cutoff=_TORSO_GYRO_CUTOFF,
    )

    for key in list(spec.keys):
        spec.delete(key)
    qpos = [0.0, 0.0, STAND_ROOT_HEIGHT, 1.0, 0.0, 0.0, 0.0, *DEFAULT_JOINT_POS]
    spec.add_key(name="stand", qpos=qpos, ctrl=list(DEFAULT_JOINT_POS))
    return spec


def build_g1_model(cfg: SceneCfg, asset_roots: Sequence[Path] | None = None) -> mujoco.MjModel:
    """Compile the scene of :func:`build_g1_spec` into an ``MjModel``."""
    return build_g1_spec(cfg, asset_roots).compile()


def scene_xml(cfg: SceneCfg, asset_roots: Sequence[Path] | None = None) -> str:
    """Return the standalone MJCF text of the scene (no mesh assets, loads on its own)."""
    spec = build_g1_spec(cfg, asset_roots)
    spec.compile()
    # MuJoCo's XML writer keeps 6 significant digits; write the timestep exactly so the
    # materialised scene steps with the same dt as the in-memory model.
    text, count = re.subn(r'timestep="[^"]*"', f'timestep="{float(cfg.sim_dt)!r}"', spec.to_xml())
    assert count == 1, "MjSpec.to_xml() wrote no <option timestep>"
    return text


def materialize_scene(
    cfg: SceneCfg, cache_root: Path, asset_roots: Sequence[Path] | None = None
) -> Path:
    """Write ``<cache_root>/robots/g1/scene_flat.xml`` deterministically.

    The file is rewritten (atomically) only when its content differs, so repeated calls
    leave it untouched.

    Args:
        cfg: scene configuration.
        cache_root: writable asset cache root.
        asset_roots: asset roots for locating the robot; defaults to the package root and ``cache_root``.

    Returns:
        Path of ``scene_flat.xml``.
    """
    roots = (PACKAGE_ASSET_ROOT, Path(cache_root)) if asset_roots is None else asset_roots
    text = scene_xml(cfg, roots)
    path = Path(cache_root) / SCENE_FLAT_ID
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".scene_flat.", suffix=".xml", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def body_ids(model: mujoco.MjModel, names: Sequence[str]) -> np.ndarray:
    """Return MuJoCo body ids for ``names`` (int64 array, same order).

    Raises:
        KeyError: a name is not a body of ``model``.
    """
    ids = []
    for name in names:
        body_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
        if body_id < 0:
            msg = f"body {name!r} is not in the model; use a G1 29-DoF rev 1.0 scene"
            raise KeyError(msg)
        ids.append(body_id)
    return np.asarray(ids, dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# Kinematics for offline motion work (the synthetic clip); mujoco stays inside trainer/sim
# ---------------------------------------------------------------------------------------------

FOOT_BODY_NAMES: tuple[str, ...] = ("left_ankle_roll_link", "right_ankle_roll_link")


def body_kinematics(
    model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray
) -> dict[str, np.ndarray]:
    """Forward kinematics and body velocities for a sequence of states (float64).

    Velocities follow docs/assets.md §the-g1-model-and-the-scene: the world velocity of each body-frame origin and the world
    angular velocity (``mj_objectVelocity`` on ``XBODY`` with ``flg_local=0``).

    Args:
        model: the G1 model.
        qpos: ``[T, nq]`` joint positions (free joint quaternion wxyz).
        qvel: ``[T, nv]`` joint velocities (free joint: world linear, body-frame angular).

    Returns:
        ``body_pos_w``/``body_lin_vel_w``/``body_ang_vel_w`` ``[T, nbody, 3]``,
        ``body_quat_w`` ``[T, nbody, 4]`` (wxyz) and ``foot_min_z`` ``[T]``, the lowest point
        of any collision geom on the two ankle-roll bodies.
    """
    num_frames = qpos.shape[0]
    data = mujoco.MjData(model)
    foot_ids = set(body_ids(model, FOOT_BODY_NAMES).tolist())
    foot_geoms = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in foot_ids]
    out = {
        "body_pos_w": np.zeros((num_frames, model.nbody, 3)),
        "body_quat_w": np.zeros((num_frames, model.nbody, 4)),
        "body_lin_vel_w": np.zeros((num_frames, model.nbody, 3)),
        "body_ang_vel_w": np.zeros((num_frames, model.nbody, 3)),
        "foot_min_z": np.zeros(num_frames),
    }
    vel6 = np.zeros(6)
    for k in range(num_frames):
        data.qpos[:] = qpos[k]
        data.qvel[:] = qvel[k]
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_comVel(model, data)
        out["body_pos_w"][k] = data.xpos
        out["body_quat_w"][k] = data.xquat
        for b in range(model.nbody):
            mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, b, vel6, 0)
            out["body_ang_vel_w"][k, b] = vel6[:3]
            out["body_lin_vel_w"][k, b] = vel6[3:]
        out["foot_min_z"][k] = min(_geom_min_z(model, data, g) for g in foot_geoms)
    return out


def _geom_min_z(model: mujoco.MjModel, data: mujoco.MjData, geom: int) -> float:
    """Lowest world z of a sphere or capsule geom."""
    radius = float(model.geom_size[geom, 0])
    center_z = float(data.geom_xpos[geom, 2])
    if model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_CAPSULE:
        # The capsule axis is the geom's local z; its endpoints lie half-length away.
        axis_z = float(data.geom_xmat[geom].reshape(3, 3)[2, 2])
        return center_z - abs(axis_z) * float(model.geom_size[geom, 1]) - radius
    if model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_SPHERE:
        return center_z - radius
    msg = f"foot geom {model.geom(geom).name!r} has type {int(model.geom_type[geom])}; expected sphere/capsule"
    raise AssetError(msg)
