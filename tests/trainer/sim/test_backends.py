"""Both physics backends: construction rules, transfer counters, masked resets, and
MJWarp (on Warp's CPU device) against CPU MuJoCo on a short rollout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainer.config.defaults import default_scene_cfg
from trainer.sim.backend import (
    BackendFailure,
    DiagnosticEntry,
    body_velocities_from_cvel,
    sensor_slices,
)
from trainer.sim.factory import make_backend
from trainer.sim.mujoco_cpu import MujocoCpuBackend
from trainer.sim.scene import build_g1_model

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
    return build_g1_model(default_scene_cfg())


@pytest.fixture(scope="module")
def warp_cpu(model):
    """One MJWarp backend on Warp's CPU device for the module (kernel compile ~1 min cold)."""
    pytest.importorskip("mujoco_warp")
    from trainer.sim.mjwarp import MjWarpBackend

    return MjWarpBackend(
        model,
        NUM_ENVS,
        torch.device("cpu"),
        default_scene_cfg(),
        warp_device="cpu",
        _allow_cpu_for_tests=True,
    )


def _ctrl(model, step: int) -> torch.Tensor:
    base = torch.as_tensor(model.key_ctrl[0], dtype=torch.float32)
    phase = torch.arange(NUM_ENVS, dtype=torch.float32)[:, None] + step * 0.01
    return base + 0.05 * torch.sin(phase + torch.arange(29) * 0.3)


def test_make_backend_rejects_unknown_names_and_bad_sizes(model):
    with pytest.raises(ValueError, match="valid backends"):
        make_backend("isaac", model, 2, "cpu", default_scene_cfg())
    with pytest.raises(ValueError, match="num_envs"):
        make_backend("mujoco", model, 0, "cpu", default_scene_cfg())
    with pytest.raises(ValueError, match="applies to --sim mujoco only"):
        make_backend("mjwarp", model, 2, "cpu", default_scene_cfg(), num_threads=2)


def test_mjwarp_without_cuda_fails_closed_before_construction(model):
    with pytest.raises(BackendFailure, match="needs a CUDA device"):
        make_backend("mjwarp", model, 2, "cpu", default_scene_cfg())


def test_cpu_backend_counts_one_packed_copy_each_way_per_step(model):
    backend = MujocoCpuBackend(
        model, NUM_ENVS, torch.device("cpu"), default_scene_cfg(), num_threads=2
    )
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

    backend = MujocoCpuBackend(model, 1, torch.device("cpu"), default_scene_cfg(), num_threads=1)
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


class _ReferenceLoop:
    """The straightforward CPU MuJoCo semantics: one ``MjData`` per env, ``mj_step`` per
    substep, ``mj_resetData`` + writes + ``mj_forward`` per reset row, float32 outputs."""

    def __init__(self, model, num_envs: int, decimation: int = 3) -> None:
        import mujoco

        self.mujoco, self.model, self.decimation = mujoco, model, decimation
        self.datas = [mujoco.MjData(model) for _ in range(num_envs)]
        for data in self.datas:
            mujoco.mj_resetDataKeyframe(model, data, 0)
            mujoco.mj_forward(model, data)

    def step(self, ctrl: torch.Tensor) -> None:
        for data, row in zip(self.datas, ctrl.double().numpy(), strict=True):
            data.ctrl[:] = row
            for _ in range(self.decimation):
                self.mujoco.mj_step(self.model, data)

    def reset_rows(self, mask, qpos, qvel, ctrl) -> None:
        for i in np.flatnonzero(mask.numpy()):
            data = self.datas[i]
            self.mujoco.mj_resetData(self.model, data)
            data.qpos[:] = qpos[i].double().numpy()
            data.qvel[:] = qvel[i].double().numpy()
            data.ctrl[:] = ctrl[i].double().numpy()
            self.mujoco.mj_forward(self.model, data)

    def field(self, name: str) -> torch.Tensor:
        rows = [np.asarray(getattr(d, name), dtype=np.float32) for d in self.datas]
        return torch.from_numpy(np.stack(rows))


def _assert_bitwise_equal(backend: MujocoCpuBackend, ref: _ReferenceLoop, when: str) -> None:
    for name in ("qpos", "qvel", "xpos", "xquat"):
        assert torch.equal(getattr(backend, name), ref.field(name)), f"{name} {when}"
    sensors = ref.field("sensordata")
    lin_slice, gyro_slice = sensor_slices(ref.model)
    assert torch.equal(backend.pelvis_lin_vel_b, sensors[:, lin_slice]), f"linvel {when}"
    assert torch.equal(backend.torso_gyro_b, sensors[:, gyro_slice]), f"gyro {when}"
    lin, ang = body_velocities_from_cvel(
        ref.field("cvel"),
        ref.field("xpos"),
        ref.field("subtree_com"),
        torch.as_tensor(ref.model.body_rootid, dtype=torch.long),
    )
    assert torch.equal(backend.body_lin_vel_w, lin), f"body_lin_vel_w {when}"
    assert torch.equal(backend.body_ang_vel_w, ang), f"body_ang_vel_w {when}"


@pytest.mark.parametrize("num_threads", [1, 3])
def test_cpu_backend_is_bitwise_equal_to_a_per_env_mj_step_loop(model, num_threads):
    """The batched stepping (any thread count) gives exactly the per-env loop's outputs,
    including the derived fields one substep behind the state, across masked resets."""
    num_envs = 5
    backend = MujocoCpuBackend(
        model, num_envs, torch.device("cpu"), default_scene_cfg(), num_threads=num_threads
    )
    ref = _ReferenceLoop(model, num_envs)
    _assert_bitwise_equal(backend, ref, "after construction")
    gen = torch.Generator().manual_seed(3)
    base = torch.as_tensor(model.key_ctrl[0], dtype=torch.float32)
    for step in range(8):
        ctrl = base + 0.4 * torch.randn(num_envs, model.nu, generator=gen)
        backend.step(ctrl)
        ref.step(ctrl)
        _assert_bitwise_equal(backend, ref, f"after step {step}")
        if step in (2, 5):
            mask = torch.tensor([step == 2, True, False, False, step == 5])
            qpos = backend.qpos.clone()
            qpos[:, 0] += 0.25
            qvel = 0.1 * torch.randn(num_envs, model.nv, generator=gen)
            reset_ctrl = base.expand(num_envs, -1).clone()
            backend.reset_rows(mask, qpos, qvel, reset_ctrl)
            ref.reset_rows(mask, qpos, qvel, reset_ctrl)
            _assert_bitwise_equal(backend, ref, f"after reset at step {step}")
            assert torch.equal(backend.ctrl[mask], reset_ctrl[mask])
    backend.check_health()
    backend.close()


def test_cpu_backend_health_reports_the_env_with_a_bad_acceleration(model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo appends its warnings to ./MUJOCO_LOG.TXT
    backend = MujocoCpuBackend(model, 3, torch.device("cpu"), default_scene_cfg(), num_threads=2)
    qpos = backend.qpos.clone()
    qvel = torch.zeros(3, model.nv)
    qvel[2] = 1e4  # MuJoCo auto-resets the world and counts mjWARN_BADQACC
    mask = torch.tensor([False, False, True])
    backend.reset_rows(mask, qpos, qvel)
    backend.step(torch.as_tensor(model.key_ctrl[0], dtype=torch.float32).expand(3, -1))
    with pytest.raises(BackendFailure, match="env 2: .*mjWARN_BADQACC"):
        backend.check_health()
    # A reset clears the world's warning counters, as mj_resetData does.
    backend.reset_rows(mask, qpos, torch.zeros(3, model.nv))
    backend.check_health()
    backend.close()
    with pytest.raises(BackendFailure, match="closed"):
        backend.step(torch.zeros(3, model.nu))


def test_cpu_backend_defaults_to_every_cpu_of_the_affinity_mask(model):
    import os

    backend = MujocoCpuBackend(model, 64, torch.device("cpu"), default_scene_cfg())
    assert backend.num_threads == min(64, len(os.sched_getaffinity(0)))
    backend.close()
    assert (
        MujocoCpuBackend(
            model, 1, torch.device("cpu"), default_scene_cfg(), num_threads=8
        ).num_threads
        == 1
    )


@pytest.mark.slow
def test_mjwarp_on_warp_cpu_matches_cpu_mujoco_on_a_short_rollout(model, warp_cpu):
    cpu = MujocoCpuBackend(model, NUM_ENVS, torch.device("cpu"), default_scene_cfg(), num_threads=2)
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
    niter = warp_cpu.solver_iterations()
    assert niter.shape == (NUM_ENVS,) and not niter.is_floating_point()
    assert 0 < int(niter.min()) and int(niter.max()) <= model.opt.iterations
    assert cpu.solver_iterations() is None
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


def _protocol_members(proto: type) -> set[str]:
    own = set(vars(proto).get("__annotations__", {}))
    own |= {k for k, v in vars(proto).items() if not k.startswith("_") and callable(v)}
    own |= {k for k, v in vars(proto).items() if isinstance(v, property)}
    return own


def test_every_backend_implements_the_whole_protocol_and_declares_its_capability(model):
    from trainer.sim.backend import SimBackend, StagedSimBackend
    from trainer.sim.mjwarp import MjWarpBackend

    members = _protocol_members(SimBackend)
    staged_members = _protocol_members(StagedSimBackend)
    assert {"staged", "health", "set_diagnostic", "close", "num_threads"} <= members
    cpu = MujocoCpuBackend(model, 1, torch.device("cpu"), default_scene_cfg(), num_threads=1)
    missing = {m for m in members if not hasattr(cpu, m)}
    assert missing == set()
    assert cpu.staged() is None and cpu.health() is None and cpu.transfer_stats() is not None
    entry = DiagnosticEntry(True, False, "no CUDA")
    cpu.set_diagnostic("task_cuda_graph", entry)
    assert "diagnostics" not in cpu.diagnostics()  # the CPU document has no entries map
    cpu.close()
    # MJWarp's members exist on the class (instances need mujoco_warp and a device).
    assert {m for m in members | staged_members if not hasattr(MjWarpBackend, m)} <= {
        "model", "num_envs", "device", "decimation", "nbody", "qpos", "qvel", "ctrl", "xpos", "xquat",
        "body_lin_vel_w", "body_ang_vel_w", "pelvis_lin_vel_b", "torso_gyro_b",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((True, True, "x"), "enabled diagnostic entry must have disable_reason None"),
        ((True, False, ""), "needs a non-empty disable_reason"),
        ((True, True, None, True), "only a requested, disabled entry can have fallen back"),
        ((False, False, "off", True), "only a requested, disabled entry can have fallen back"),
    ],
)
def test_a_diagnostic_entry_off_its_contract_is_refused(args, message) -> None:
    with pytest.raises(ValueError, match=message):
        DiagnosticEntry(*args)


def test_only_a_fallback_writes_the_fell_back_key() -> None:
    assert "fell_back" not in DiagnosticEntry(True, False, "no CUDA").to_json()
    entry = DiagnosticEntry(True, False, "capture failed: E", fell_back=True).to_json()
    assert entry == {
        "requested": True, "enabled": False, "disable_reason": "capture failed: E", "fell_back": True,
    }  # fmt: skip


def test_backend_constructors_take_the_scene_values_from_the_config_not_defaults():
    import inspect

    from trainer.sim.mjwarp import MjWarpBackend

    for cls in (MjWarpBackend, MujocoCpuBackend):
        params = inspect.signature(cls).parameters
        assert params["scene"].default is inspect.Parameter.empty
        assert not {"decimation", "nconmax", "njmax"} & set(params), cls.__name__


@pytest.mark.slow
def test_mjwarp_sizes_its_buffers_from_the_scene_and_fails_closed_once_closed(model):
    pytest.importorskip("mujoco_warp")
    from trainer.sim.mjwarp import MjWarpBackend

    scene = default_scene_cfg(njmax=700)
    backend = MjWarpBackend(
        model, 1, torch.device("cpu"), scene, warp_device="cpu", _allow_cpu_for_tests=True
    )
    assert backend.staged() is backend and backend.num_threads is None
    assert backend.diagnostics()["njmax"] == 700 == backend.health()["njmax"]
    assert backend.diagnostics()["nconmax"] == scene.nconmax
    backend.close()
    with pytest.raises(BackendFailure, match="closed"):
        backend.step(torch.zeros(1, model.nu))
    with pytest.raises(BackendFailure, match="closed"):
        backend.launch_reset()


def test_a_high_stream_priority_is_refused_for_the_cpu_physics(model):
    with pytest.raises(ValueError, match="applies to mjwarp only"):
        make_backend("mujoco", model, 1, "cpu", default_scene_cfg(), stream_priority="high")


@pytest.mark.slow
def test_mjwarp_refuses_an_unknown_stream_priority(model):
    pytest.importorskip("mujoco_warp")
    from trainer.sim.mjwarp import MjWarpBackend

    with pytest.raises(ValueError, match="stream_priority='urgent' must be one of"):
        MjWarpBackend(
            model,
            1,
            torch.device("cpu"),
            default_scene_cfg(),
            stream_priority="urgent",
            warp_device="cpu",
            _allow_cpu_for_tests=True,
        )


@pytest.mark.gpu
def test_mjwarp_on_the_high_priority_stream_steps_the_worlds_the_default_one_does(model):
    """Warp must launch, allocate and capture on the high stream (a capture on a stream that
    is not Warp's current one fails), and the worlds must evolve as on the default stream."""
    pytest.importorskip("mujoco_warp")
    states = {}
    for priority in ("default", "high"):
        backend = make_backend(
            "mjwarp", model, NUM_ENVS, "cuda", default_scene_cfg(), stream_priority=priority
        )
        assert backend.stream_priority == priority
        assert backend.diagnostics()["diagnostics"]["cuda_graph"]["enabled"] is True
        if priority == "high":
            assert backend.torch_stream.priority == torch.cuda.Stream.priority_range()[1]
        for step in range(5):
            backend.step(_ctrl(model, step).cuda())
        states[priority] = (backend.qpos.cpu(), backend.qvel.cpu())
        backend.close()
    for default, high in zip(states["default"], states["high"], strict=True):
        torch.testing.assert_close(high, default, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_mjwarp_options_change_how_contacts_are_found_not_the_worlds(model):
    """The SAP broadphases and a solver start without qacc_smooth must step the worlds the
    defaults do (same contacts, same converged constraint forces)."""
    pytest.importorskip("mujoco_warp")
    from trainer.sim.mjwarp_options import MjWarpOptions

    states = {}
    variants = {
        "default": MjWarpOptions(),
        "sap_tile": MjWarpOptions(broadphase="sap_tile"),
        "sap_segmented": MjWarpOptions(broadphase="sap_segmented"),
        "no_qacc_smooth": MjWarpOptions(qacc_smooth=False),
    }
    for name, options in variants.items():
        backend = make_backend(
            "mjwarp", model, NUM_ENVS, "cuda", default_scene_cfg(), mjwarp_options=options
        )
        assert backend.options == options
        assert backend.diagnostics()["diagnostics"]["cuda_graph"]["enabled"] is True
        for step in range(5):
            backend.step(_ctrl(model, step).cuda())
        states[name] = (backend.qpos.cpu(), backend.qvel.cpu())
        backend.close()
    for name in variants:
        for ref, got in zip(states["default"], states[name], strict=True):
            torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4, msg=name)
