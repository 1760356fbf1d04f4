"""The G1 scene matches docs/assets.md §the-g1-model-and-the-scene, docs/task.md §tracked-bodies: sizes, gains, joints, sensors, keyframe, body ids."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import mujoco
import numpy as np
import pytest

from trainer.assets import AssetError
from trainer.config.defaults import default_scene_cfg
from trainer.sim import scene
from trainer.sim.scene import (
    DEFAULT_JOINT_POS,
    JOINT_NAMES,
    TRACKED_BODY_NAMES,
    body_ids,
    build_g1_model,
    locate_g1_mjcf,
    materialize_scene,
)


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return build_g1_model(default_scene_cfg(), asset_roots=())


def test_scene_has_contract_sizes_and_mass(model: mujoco.MjModel) -> None:
    assert (model.nq, model.nv, model.nu, model.nbody) == (36, 35, 29, 31)
    assert model.ngeom == 42  # 33 primitives + 8 foot spheres + floor
    assert model.nmesh == 0
    assert float(model.body_mass.sum()) == pytest.approx(33.34, abs=0.01)


def test_option_is_implicitfast_at_sim_dt_with_mujoco_defaults(model: mujoco.MjModel) -> None:
    assert model.opt.timestep == 1.0 / 150.0
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert model.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON
    assert model.opt.iterations == 100
    assert model.opt.ls_iterations == 50
    assert model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
    np.testing.assert_allclose(model.opt.gravity, [0.0, 0.0, -9.81])


def test_joint_order_matches_xml_and_constants(model: mujoco.MjModel) -> None:
    assert len(JOINT_NAMES) == 29
    names = tuple(model.joint(i).name for i in range(1, model.njnt))
    assert names == JOINT_NAMES
    assert all(name.endswith("_joint") for name in names)
    assert len(DEFAULT_JOINT_POS) == len(scene.JOINT_KP) == len(scene.JOINT_KV) == 29


@pytest.mark.parametrize(
    ("joint", "kp", "kv", "effort"),
    [
        pytest.param("left_hip_pitch_joint", 40.179, 2.558, 88.0, id="hip_pitch"),
        pytest.param("right_knee_joint", 99.098, 6.309, 139.0, id="knee"),
        pytest.param("waist_roll_joint", 28.501, 1.814, 50.0, id="waist_roll"),
        pytest.param("left_elbow_joint", 14.251, 0.907, 25.0, id="elbow"),
        pytest.param("right_wrist_yaw_joint", 16.778, 1.068, 5.0, id="wrist_yaw"),
    ],
)
def test_position_actuator_gains_and_force_clamp(
    model: mujoco.MjModel, joint: str, kp: float, kv: float, effort: float
) -> None:
    act = model.actuator(joint)
    assert act.trnid[0] == model.joint(joint).id
    assert act.gainprm[0] == pytest.approx(kp)
    np.testing.assert_allclose(act.biasprm[:3], [0.0, -kp, -kv])
    assert model.actuator_biastype[act.id] == mujoco.mjtBias.mjBIAS_AFFINE
    assert not model.actuator_ctrllimited[act.id]
    assert model.actuator_forcelimited[act.id]
    np.testing.assert_allclose(act.forcerange, [-effort, effort])


def test_actuators_follow_joint_order(model: mujoco.MjModel) -> None:
    targets = [model.joint(model.actuator(i).trnid[0]).name for i in range(model.nu)]
    assert tuple(targets) == JOINT_NAMES


def test_hinges_have_armature_and_frictionloss_free_joint_none(model: mujoco.MjModel) -> None:
    hinge_dofs = slice(6, 35)
    np.testing.assert_allclose(model.dof_armature[hinge_dofs], 0.01)
    np.testing.assert_allclose(model.dof_frictionloss[hinge_dofs], 0.3)
    np.testing.assert_allclose(model.dof_damping, 0.0)
    np.testing.assert_allclose(model.dof_armature[:6], 0.0)
    np.testing.assert_allclose(model.dof_frictionloss[:6], 0.0)


def test_collision_geoms_self_collide_and_feet_have_spheres(model: mujoco.MjModel) -> None:
    assert (model.geom_contype == 1).all() and (model.geom_conaffinity == 1).all()
    assert (model.geom_condim == 3).all()
    floor = model.geom("floor")
    np.testing.assert_allclose(floor.friction, [1.0, 0.005, 0.0001])
    np.testing.assert_allclose(floor.size, [0.0, 0.0, 0.05])
    for side in ("left", "right"):
        foot = model.body(f"{side}_ankle_roll_link").id
        for i in range(4):
            sphere = model.geom(f"{side}_foot_contact_{i}_geom")
            assert sphere.bodyid[0] == foot
            assert sphere.priority[0] == 1
            assert sphere.size[0] == pytest.approx(0.005)
            assert sphere.friction[0] == pytest.approx(0.6)
        for i in range(1, 8):
            capsule = model.geom(f"{side}_foot{i}_collision")
            assert capsule.priority[0] == 0
            assert capsule.friction[0] == pytest.approx(0.6)


def test_only_the_two_imu_sensors_remain(model: mujoco.MjModel) -> None:
    assert model.nsensor == 2
    vel = model.sensor("pelvis_local_linvel")
    gyro = model.sensor("torso_gyro")
    assert vel.type[0] == mujoco.mjtSensor.mjSENS_VELOCIMETER
    assert model.site(vel.objid[0]).name == "imu_in_pelvis"
    assert gyro.type[0] == mujoco.mjtSensor.mjSENS_GYRO
    assert model.site(gyro.objid[0]).name == "imu_in_torso"
    assert gyro.cutoff[0] == pytest.approx(34.9)


def test_stand_keyframe_sets_root_and_default_pose(model: mujoco.MjModel) -> None:
    key = model.key("stand")
    np.testing.assert_allclose(key.qpos[:7], [0, 0, 0.754, 1, 0, 0, 0])
    np.testing.assert_allclose(key.qpos[7:], DEFAULT_JOINT_POS)
    np.testing.assert_allclose(key.ctrl, DEFAULT_JOINT_POS)


def test_standing_contacts_fit_the_mjwarp_buffers(model: mujoco.MjModel) -> None:
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("stand").id)
    mujoco.mj_forward(model, data)
    cfg = default_scene_cfg()
    assert 0 < data.ncon <= cfg.nconmax
    assert data.nefc <= cfg.njmax


def test_tracked_body_ids_match_the_contract_table(model: mujoco.MjModel) -> None:
    expected = [1, 3, 5, 7, 9, 11, 13, 16, 18, 20, 23, 25, 27, 30]
    assert body_ids(model, TRACKED_BODY_NAMES).tolist() == expected
    assert scene.ANCHOR_TRACKED_INDEX == 7
    assert body_ids(model, [scene.ANCHOR_BODY_NAME]).tolist() == [16]
    assert len(scene.UNDESIRED_CONTACT_BODY_NAMES) == 10
    with pytest.raises(KeyError, match="no_such_link"):
        body_ids(model, ["no_such_link"])


def test_materialized_scene_loads_back_to_the_same_model(tmp_path: Path) -> None:
    cfg = default_scene_cfg()
    path = materialize_scene(cfg, tmp_path, asset_roots=())
    assert path == tmp_path / "robots/g1/scene_flat.xml"
    first = path.read_text(encoding="utf-8")
    mtime = path.stat().st_mtime_ns
    assert materialize_scene(cfg, tmp_path, asset_roots=()).read_text(encoding="utf-8") == first
    assert path.stat().st_mtime_ns == mtime  # unchanged content is not rewritten
    loaded = mujoco.MjModel.from_xml_path(str(path))
    built = build_g1_model(cfg, asset_roots=())
    for field in ("nq", "nv", "nu", "nbody", "ngeom", "nsensor", "nkey"):
        assert getattr(loaded, field) == getattr(built, field), field
    assert loaded.opt.timestep == built.opt.timestep
    np.testing.assert_allclose(loaded.actuator_gainprm, built.actuator_gainprm)
    np.testing.assert_allclose(loaded.body_mass, built.body_mass)
    np.testing.assert_allclose(loaded.key_qpos, built.key_qpos)


def test_scene_cfg_rejects_bad_timing() -> None:
    assert default_scene_cfg().ctrl_dt == pytest.approx(0.02)
    with pytest.raises(ValueError, match="decimation=0"):
        default_scene_cfg(decimation=0)
    with pytest.raises(ValueError, match="sim_dt"):
        default_scene_cfg(sim_dt=0.0)
    with pytest.raises(ValueError, match="njmax=100"):
        default_scene_cfg(njmax=100)


MJLAB_1_6_0_G1_SHA256 = "febdcbeffbbf84051556ae41a5ac1b43fb479a5d76bdb3f54824dbc2721c20aa"
"""sha256 of ``mjlab/asset_zoo/robots/unitree_g1/xmls/g1.xml`` in the mjlab 1.6.0 wheel."""


def test_bundled_model_is_mjlab_1_6_0_g1_xml_byte_for_byte() -> None:
    # docs/assets.md states this provenance; a changed file changes every physics number.
    digest = hashlib.sha256(scene.BUNDLED_G1_MJCF.read_bytes()).hexdigest()
    assert digest == MJLAB_1_6_0_G1_SHA256
    assert (scene.BUNDLED_G1_MJCF.parent / "LICENSE").is_file()


def test_locate_prefers_explicit_then_asset_root_then_bundled(tmp_path: Path) -> None:
    bundled = scene.BUNDLED_G1_MJCF
    assert locate_g1_mjcf(default_scene_cfg(), asset_roots=(tmp_path,)) == bundled
    copied = tmp_path / "robots/g1/g1.xml"
    copied.parent.mkdir(parents=True)
    shutil.copyfile(bundled, copied)
    assert locate_g1_mjcf(default_scene_cfg(), asset_roots=(tmp_path / "none", tmp_path)) == copied
    explicit = tmp_path / "mine.xml"
    shutil.copyfile(bundled, explicit)
    assert (
        locate_g1_mjcf(default_scene_cfg(robot_mjcf=str(explicit)), asset_roots=(tmp_path,))
        == explicit
    )
    with pytest.raises(AssetError, match="robot_mjcf"):
        locate_g1_mjcf(default_scene_cfg(robot_mjcf=str(tmp_path / "missing.xml")))


def test_locate_without_the_bundled_model_says_reinstall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scene, "BUNDLED_G1_MJCF", tmp_path / "gone" / "g1.xml")
    with pytest.raises(AssetError, match=r"reinstall g1soak \(uv sync\)") as err:
        locate_g1_mjcf(default_scene_cfg(), asset_roots=(tmp_path,))
    assert str(tmp_path / "gone" / "g1.xml") in str(err.value)
