"""Both physics backends: construction rules, transfer counters, masked resets, and
MJWarp (on Warp's CPU device) against CPU MuJoCo on a short rollout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainer.sim.backend import BackendFailure, make_backend
from trainer.sim.mujoco_cpu import MujocoCpuBackend
from trainer.sim.scene import SceneCfg, build_g1_model

NUM_ENVS = 2
STEPS = 6
# mjwarp runs float32, CPU MuJoCo float64. Between contact events the two agree to ~2e-7 in
# qpos; a foot sphere whose floor distance sits at ~0 can switch its contact on in one
# precision a substep before the other, which moves qvel by up to ~1e-3 at once (measured on
# this 6-step standing rollout: qpos 8e-6, qvel 6.4e-4; a longer rollout hit a second event at
# step 8 and reached 7e-4 / 3.6e-2). The bounds keep >= 8x headroom over the measurement and
# still catch any semantic mismatch (wrong quaternion order, missed substep, skipped reset,
# different gains or friction all exceed 1e-2 within a step or two).
QPOS_ATOL = 1e-4
QVEL_ATOL = 5e-3
BODY_ATOL = 1e-4


@pytest.fixture(scope="module")
def model():
    return build_g1_model(SceneCfg())


@pytest.fixture(scope="module")
def warp_cpu(model):
    """One MJWarp backend on Warp's CPU device for the module (kernel compile ~1 min cold)."""
    pytest.importorskip("mujoco_warp")
    from trainer.sim.mjwarp import MjWarpBackend

    return MjWarpBackend(
        model, NUM_ENVS, torch.device("cpu"), warp_device="cpu", _allow_cpu_for_tests=True
    )


def _ctrl(model, step: int) -> torch.Tensor:
    base = torch.as_tensor(model.key_ctrl[0], dtype=torch.float32)
    phase = torch.arange(NUM_ENVS, dtype=torch.float32)[:, None] + step * 0.01
    return base + 0.05 * torch.sin(phase + torch.arange(29) * 0.3)


def test_make_backend_rejects_unknown_names_and_bad_sizes(model):
    with pytest.raises(ValueError, match="valid backends"):
        make_backend("isaac", model, 2, "cpu")
    with pytest.raises(ValueError, match="num_envs"):
        make_backend("mujoco", model, 0, "cpu")


def test_mjwarp_without_cuda_fails_closed_before_construction(model):
    with pytest.raises(BackendFailure, match="needs a CUDA device"):
        make_backend("mjwarp", model, 2, "cpu")


def test_cpu_backend_counts_one_packed_copy_each_way_per_step(model):
    backend = MujocoCpuBackend(model, NUM_ENVS, torch.device("cpu"), num_threads=2)
    start = backend.transfer_stats()
    backend.step(_ctrl(model, 0))
    stats = backend.transfer_stats()
    assert stats["d2h_count"] - start["d2h_count"] == 1
    assert stats["h2d_count"] - start["h2d_count"] == 1
    assert stats["synchronization_count"] - start["synchronization_count"] == 1
    assert stats["d2h_bytes"] - start["d2h_bytes"] == NUM_ENVS * model.nu * 4
    empty = torch.zeros(NUM_ENVS, dtype=torch.bool)
    backend.reset_rows(empty, backend.qpos.clone(), backend.qvel.clone())
    after = backend.transfer_stats()
    assert after["d2h_count"] - stats["d2h_count"] == 1  # the packed reset commit
    assert after["h2d_count"] == stats["h2d_count"]  # nothing to publish
    assert backend.diagnostics()["available"] is False
    backend.close()


def test_cpu_backend_views_match_mujoco_after_step(model):
    import mujoco

    backend = MujocoCpuBackend(model, 1, torch.device("cpu"), num_threads=1)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    ctrl = _ctrl(model, 0)[:1]
    backend.step(ctrl)
    data.ctrl[:] = ctrl[0].numpy()
    for _ in range(3):
        mujoco.mj_step(model, data)
    assert np.allclose(backend.qpos[0].numpy(), data.qpos, atol=1e-6)
    vel = np.zeros(6)
    torso = model.body("torso_link").id
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, torso, vel, 0)
    assert np.allclose(backend.body_lin_vel_w[0, torso].numpy(), vel[3:], atol=1e-5)
    assert np.allclose(backend.body_ang_vel_w[0, torso].numpy(), vel[:3], atol=1e-5)
    backend.close()


@pytest.mark.slow
def test_mjwarp_on_warp_cpu_matches_cpu_mujoco_on_a_short_rollout(model, warp_cpu):
    cpu = MujocoCpuBackend(model, NUM_ENVS, torch.device("cpu"), num_threads=2)
    assert warp_cpu.qpos.shape == cpu.qpos.shape == (NUM_ENVS, model.nq)
    assert warp_cpu.xpos.shape == cpu.xpos.shape == (NUM_ENVS, model.nbody, 3)
    key_q = torch.as_tensor(model.key_qpos[0], dtype=torch.float32).expand(NUM_ENVS, -1)
    everyone = torch.ones(NUM_ENVS, dtype=torch.bool)
    for b in (warp_cpu, cpu):
        b.reset_rows(everyone, key_q, torch.zeros(NUM_ENVS, model.nv))
    assert torch.allclose(warp_cpu.xquat, cpu.xquat, atol=1e-6)
    for step in range(STEPS):
        ctrl = _ctrl(model, step)
        warp_cpu.step(ctrl)
        cpu.step(ctrl)
    assert torch.allclose(warp_cpu.qpos, cpu.qpos, atol=QPOS_ATOL)
    assert torch.allclose(warp_cpu.qvel, cpu.qvel, atol=QVEL_ATOL)
    for name in ("xpos", "xquat", "body_lin_vel_w", "body_ang_vel_w"):
        assert torch.allclose(
            getattr(warp_cpu, name),
            getattr(cpu, name),
            atol=QVEL_ATOL if "vel" in name else BODY_ATOL,
        ), name
    for name in ("pelvis_lin_vel_b", "torso_gyro_b"):
        assert torch.allclose(getattr(warp_cpu, name), getattr(cpu, name), atol=QVEL_ATOL), name
    warp_cpu.check_health()
    health = warp_cpu.health()
    assert 0 < health["peak_nacon"] <= health["naconmax"]
    cpu.close()


@pytest.mark.slow
def test_mjwarp_reset_rows_writes_only_selected_worlds_and_forwards_them(model, warp_cpu):
    warp_cpu.step(_ctrl(model, 0))
    before = [t.clone() for t in (warp_cpu.qpos, warp_cpu.qvel, warp_cpu.ctrl)]
    qpos = torch.as_tensor(model.key_qpos[0], dtype=torch.float32).repeat(NUM_ENVS, 1)
    qpos[:, 0] += 1.5
    qvel = torch.zeros(NUM_ENVS, model.nv)
    qvel[:, 0] = 0.25
    mask = torch.tensor([False, True])
    warp_cpu.reset_rows(mask, qpos, qvel)
    for b, a in zip(before, (warp_cpu.qpos, warp_cpu.qvel, warp_cpu.ctrl), strict=True):
        assert torch.equal(b[0], a[0])
    assert torch.equal(warp_cpu.qpos[1], qpos[1])
    assert torch.equal(warp_cpu.ctrl[1], torch.zeros(model.nu))
    pelvis = model.body("pelvis").id
    assert torch.allclose(warp_cpu.xpos[1, pelvis], qpos[1, :3], atol=1e-6)  # forwarded
    assert torch.allclose(warp_cpu.body_lin_vel_w[1, pelvis], qvel[1, :3], atol=1e-6)
    # An empty mask changes no state.
    snapshot = [t.clone() for t in (warp_cpu.qpos, warp_cpu.qvel, warp_cpu.ctrl)]
    warp_cpu.reset_rows(torch.zeros(NUM_ENVS, dtype=torch.bool), qpos * 0, qvel * 0)
    for b, a in zip(snapshot, (warp_cpu.qpos, warp_cpu.qvel, warp_cpu.ctrl), strict=True):
        assert torch.equal(b, a)


@pytest.mark.slow
def test_mjwarp_diagnostics_follow_contracts_4_3(warp_cpu):
    diag = warp_cpu.diagnostics()
    assert diag["available"] is True and diag["backend_type"]
    entries = diag["diagnostics"]
    for name in ("cuda_graph", "selected_reset_sensor_refresh", "device_reset_randomization"):
        entry = entries[name]
        assert isinstance(entry["requested"], bool) and isinstance(entry["enabled"], bool)
        assert (entry["disable_reason"] is None) == entry["enabled"]
    assert entries["cuda_graph"]["requested"] is True
    assert entries["cuda_graph"]["enabled"] is False
    assert "CPU" in entries["cuda_graph"]["disable_reason"]
    assert warp_cpu.transfer_stats() is None
