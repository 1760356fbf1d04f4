"""MuJoCo Warp backend: device-resident worlds, CUDA-graph replay, zero-copy torch views.

All state lives on the CUDA device in one ``mujoco_warp.Data`` of ``num_envs`` worlds. Three
Warp call sequences are captured once as CUDA graphs (``wp.ScopedCapture``) and replayed:

* **step** — ``decimation`` × ``mjw.step`` (no forward afterwards, docs/task.md §timing-and-step-order), then one
  kernel deriving body-origin velocities from ``cvel`` and one folding contact/constraint
  counts and MJWarp's overflow bits into a sticky device health record.
* **reset** — masked ``mjw.reset_data`` (clears ctrl, warm start, time of the selected
  worlds), a kernel writing the staged qpos/qvel/ctrl of the selected worlds, then the
  kinematics, COM velocity and velocity-sensor stages (all that the observations read) and
  the body-velocity kernel. The mask and the staged state are preallocated Warp arrays that
  ``reset_rows`` writes in place, so the graph never sees a new address.

Graph contract: a captured graph holds raw pointers. Never rebind a view or replace a Warp
array of ``Data``; write through ``view[:] = ...`` or ``copy_``. Torch and Warp share Warp's
stream (a ``torch.cuda.ExternalStream`` of it, or with ``stream_priority="high"`` a torch
stream that Warp borrows); ``step``/``reset_rows`` order themselves after the
caller's current stream and make the caller wait for them with stream events, never with a
host synchronization.

The stage refresh after a reset runs on every world because MJWarp's kinematics and sensor
kernels take no world mask. It is a pure function of qpos/qvel, and the next ``step`` starts
with a full forward, so unselected worlds evolve bitwise as if it had not run; only their body
and sensor views become current (instead of one substep old) until that step.

Without CUDA the constructor fails closed. Tests may build it on Warp's CPU device with
``warp_device="cpu", _allow_cpu_for_tests=True``; graphs are then disabled and the reason is
recorded in :meth:`diagnostics`.
"""

from __future__ import annotations

import gc
import logging
from contextlib import contextmanager, nullcontext
from typing import Any, Literal

import mujoco
import numpy as np
import torch
from torch import Tensor

from trainer.sim.backend import BackendFailure, DiagnosticEntry, sensor_slices
from trainer.sim.mjwarp_options import (
    DEFAULT_MJWARP_OPTIONS,
    STREAM_PRIORITIES,
    MjWarpOptions,
    StreamPriority,
)
from trainer.sim.scene import SceneCfg

__all__ = ["MjWarpBackend", "require_mjwarp_device"]

log = logging.getLogger(__name__)

# Health record layout (int32 device array): peak nacon, peak nefc of any world, OR of overflow.
_H_NACON, _H_NEFC, _H_OVERFLOW = 0, 1, 2

_CLOSED = "the mjwarp backend was closed; build a new one to step again"


def require_mjwarp_device(device: torch.device) -> None:
    """Fail closed unless ``device`` is a usable CUDA device (no CPU fallback).

    Raises:
        BackendFailure: naming the device and the fix.
    """
    if device.type != "cuda":
        msg = (
            f"sim backend 'mjwarp' needs a CUDA device, got device={str(device)!r}; "
            "run on a CUDA machine or use --sim mujoco"
        )
        raise BackendFailure(msg)
    if not torch.cuda.is_available():
        msg = "sim backend 'mjwarp' needs CUDA but torch.cuda.is_available() is False; use --sim mujoco"
        raise BackendFailure(msg)
    if torch.version.hip is not None:
        msg = f"sim backend 'mjwarp' needs NVIDIA CUDA, found ROCm/HIP {torch.version.hip}"
        raise BackendFailure(msg)


@contextmanager
def _suspend_gc():
    # A GC pass during capture could finalize an old Warp graph and record its destructor's
    # frees into the new graph.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _build_kernels():
    """Define the backend's own Warp kernels (imports warp lazily)."""
    import warp as wp

    @wp.kernel(enable_backward=False)
    def body_velocity(
        cvel: wp.array2d(dtype=wp.spatial_vector),
        xpos: wp.array2d(dtype=wp.vec3),
        subtree_com: wp.array2d(dtype=wp.vec3),
        body_rootid: wp.array(dtype=int),
        lin_out: wp.array2d(dtype=wp.vec3),
        ang_out: wp.array2d(dtype=wp.vec3),
    ):
        world, body = wp.tid()
        v = cvel[world, body]
        ang = wp.spatial_top(v)
        offset = xpos[world, body] - subtree_com[world, body_rootid[body]]
        lin_out[world, body] = wp.spatial_bottom(v) + wp.cross(ang, offset)
        ang_out[world, body] = ang

    @wp.kernel(enable_backward=False)
    def write_rows(
        mask: wp.array(dtype=bool),
        qpos_in: wp.array2d(dtype=float),
        qvel_in: wp.array2d(dtype=float),
        ctrl_in: wp.array2d(dtype=float),
        qpos: wp.array2d(dtype=float),
        qvel: wp.array2d(dtype=float),
        ctrl: wp.array2d(dtype=float),
    ):
        world = wp.tid()
        if not mask[world]:
            return
        for i in range(qpos.shape[1]):
            qpos[world, i] = qpos_in[world, i]
        for i in range(qvel.shape[1]):
            qvel[world, i] = qvel_in[world, i]
        for i in range(ctrl.shape[1]):
            ctrl[world, i] = ctrl_in[world, i]

    @wp.kernel(enable_backward=False)
    def track_health(
        nacon: wp.array(dtype=int),
        nefc: wp.array(dtype=int),
        overflow: wp.array(dtype=int),
        health: wp.array(dtype=int),
    ):
        world = wp.tid()
        if world == 0:
            wp.atomic_max(health, _H_NACON, nacon[0])
        wp.atomic_max(health, _H_NEFC, nefc[world])
        if overflow[world] != 0:
            wp.atomic_or(health, _H_OVERFLOW, overflow[world])

    return body_velocity, write_rows, track_health


class MjWarpBackend:
    """``num_envs`` MuJoCo Warp worlds on one CUDA device (see the module docstring).

    Args:
        model: compiled G1 scene.
        num_envs: number of worlds.
        device: torch device of the views; must be CUDA.
        scene: ``env.scene``: ``decimation`` (physics substeps per ``step``), ``nconmax``
            (contacts per world; MJWarp shares ``nconmax·num_envs``) and ``njmax`` (constraint
            rows per world).
        use_cuda_graph: capture step/reset as CUDA graphs (always requested in production).
        stream_priority: ``"high"`` steps on a stream of the device's highest priority and
            makes it Warp's current stream of the device; ``"default"`` steps on Warp's
            stream of the device (docs/runtime.md §collector-stream).
        options: MJWarp's broadphase and solver start (:class:`MjWarpOptions`; its defaults
            are MJWarp's).
        warp_device: Warp device; defaults to the torch device.
        _allow_cpu_for_tests: permit ``warp_device="cpu"`` (tests only; graphs off).

    Raises:
        BackendFailure: CUDA is unavailable (and CPU was not explicitly allowed for tests).
    """

    name: Literal["mjwarp"] = "mjwarp"
    num_threads = None  # the physics runs on the device, no host threads

    def __init__(
        self,
        model: mujoco.MjModel,
        num_envs: int,
        device: torch.device,
        scene: SceneCfg,
        *,
        use_cuda_graph: bool = True,
        stream_priority: StreamPriority = "default",
        options: MjWarpOptions = DEFAULT_MJWARP_OPTIONS,
        warp_device: str | None = None,
        _allow_cpu_for_tests: bool = False,
    ) -> None:
        device = torch.device(device)
        cpu_test = _allow_cpu_for_tests and warp_device == "cpu"
        if not cpu_test:
            require_mjwarp_device(device)
        elif device.type != "cpu":
            msg = f"warp_device='cpu' needs torch device 'cpu', got {str(device)!r}"
            raise BackendFailure(msg)
        import mujoco_warp as mjw
        import warp as wp
        from mujoco_warp._src import smooth

        self._wp, self._mjw, self._smooth = wp, mjw, smooth
        self.model = model
        self.num_envs = num_envs
        self.device = device
        self.decimation = scene.decimation
        self.nbody = model.nbody
        self.nconmax, self.njmax = scene.nconmax, scene.njmax
        self.options = options
        self._closed = False
        if cpu_test:
            self._wp_device = wp.get_device("cpu")
        else:
            index = device.index if device.index is not None else torch.cuda.current_device()
            self.device = torch.device("cuda", index)
            self._wp_device = wp.get_device(f"cuda:{index}")
        self._kernels = _build_kernels()
        host_data = self._put_worlds()
        self._bind_streams(stream_priority)
        self._bind_views()
        self._key_qpos = torch.as_tensor(host_data.qpos, dtype=torch.float32, device=self.device)
        self._key_ctrl = torch.as_tensor(host_data.ctrl, dtype=torch.float32, device=self.device)

        self._extra_diagnostics: dict[str, DiagnosticEntry] = {}
        self._graph_entry = self._capture_graphs(use_cuda_graph)
        # Leave every world at the keyframe (warm-up/capture ran the sequences once).
        all_rows = torch.ones(num_envs, dtype=torch.bool, device=self.device)
        self.reset_rows(
            all_rows,
            self._key_qpos.expand(num_envs, -1),
            torch.zeros_like(self.qvel),
            self._key_ctrl.expand(num_envs, -1),
        )
        self._health_wp.zero_()

    def _put_worlds(self) -> mujoco.MjData:
        """Upload the model and ``num_envs`` keyframe worlds, allocate the fixed Warp inputs
        and outputs of the captured sequences; returns the host keyframe data."""
        wp, mjw, model, n = self._wp, self._mjw, self.model, self.num_envs
        host_data = mujoco.MjData(model)
        if model.nkey > 0:
            mujoco.mj_resetDataKeyframe(model, host_data, 0)
        mujoco.mj_forward(model, host_data)
        with wp.ScopedDevice(self._wp_device):
            self._m = mjw.put_model(model)
            self.options.apply(self._m.opt)
            self._d = mjw.put_data(
                model, host_data, nworld=n, nconmax=self.nconmax, njmax=self.njmax
            )
            nq, nv, nu, nb = model.nq, model.nv, model.nu, model.nbody
            self._mask_wp = wp.zeros(n, dtype=bool)
            self._qpos_in_wp = wp.zeros((n, nq), dtype=float)
            self._qvel_in_wp = wp.zeros((n, nv), dtype=float)
            self._ctrl_in_wp = wp.zeros((n, nu), dtype=float)
            self._lin_wp = wp.zeros((n, nb), dtype=wp.vec3)
            self._ang_wp = wp.zeros((n, nb), dtype=wp.vec3)
            self._rootid_wp = wp.array(model.body_rootid.astype(np.int32), dtype=int)
            self._health_wp = wp.zeros(3, dtype=int)
        return host_data

    def _bind_streams(self, priority: StreamPriority) -> None:
        """Warp's stream and its torch twin (both None on Warp's CPU test device)."""
        if priority not in STREAM_PRIORITIES:
            msg = f"stream_priority={priority!r} must be one of {list(STREAM_PRIORITIES)}"
            raise ValueError(msg)
        self.stream_priority = priority
        if not self._wp_device.is_cuda:
            self._wp_stream = None
            self._torch_stream = None
            return
        if priority == "default":
            self._wp_stream = self._wp.get_stream(self._wp_device)
            self._torch_stream = torch.cuda.ExternalStream(
                self._wp_stream.cuda_stream, device=self.device
            )
            return
        # torch owns the stream; Warp borrows its handle.
        _, highest = torch.cuda.Stream.priority_range()
        self._torch_stream = torch.cuda.Stream(device=self.device, priority=highest)
        self._wp_stream = self._wp.Stream(
            self._wp_device, cuda_stream=self._torch_stream.cuda_stream
        )
        # Warp launches, allocates and captures on the device's current stream, whatever
        # stream a capture names, so ours must be that stream. sync: it waits for the
        # uploads that ran on the previous one.
        self._wp.set_stream(self._wp_stream, device=self._wp_device, sync=True)

    def _bind_views(self) -> None:
        """Zero-copy torch views of the Warp arrays (fixed for the backend's life)."""
        to_torch, d = self._wp.to_torch, self._d
        self.qpos = to_torch(d.qpos)  # [N, nq]
        self.qvel = to_torch(d.qvel)  # [N, nv]
        self.ctrl = to_torch(d.ctrl)  # [N, nu]
        self.xpos = to_torch(d.xpos)  # [N, nbody, 3]
        self.xquat = to_torch(d.xquat)  # [N, nbody, 4] wxyz (MuJoCo order)
        self.body_lin_vel_w = to_torch(self._lin_wp)  # [N, nbody, 3]
        self.body_ang_vel_w = to_torch(self._ang_wp)  # [N, nbody, 3]
        sensors = to_torch(d.sensordata)  # [N, nsensordata]
        lin_slice, gyro_slice = sensor_slices(self.model)
        self.pelvis_lin_vel_b = sensors[:, lin_slice]
        self.torso_gyro_b = sensors[:, gyro_slice]
        self._mask = to_torch(self._mask_wp)
        self._qpos_in = to_torch(self._qpos_in_wp)
        self._qvel_in = to_torch(self._qvel_in_wp)
        self._ctrl_in = to_torch(self._ctrl_in_wp)

    # ------------------------------------------------------------------ captured sequences
    def _launch_step(self) -> None:
        wp, mjw = self._wp, self._mjw
        body_velocity, _, track_health = self._kernels
        m, d = self._m, self._d
        for _ in range(self.decimation):
            mjw.step(m, d)
        self._launch_body_velocity(body_velocity)
        wp.launch(
            track_health,
            dim=self.num_envs,
            inputs=[d.nacon, d.nefc, d.overflow, self._health_wp],
        )

    def _launch_reset(self) -> None:
        wp, mjw, smooth = self._wp, self._mjw, self._smooth
        body_velocity, write_rows, _ = self._kernels
        m, d = self._m, self._d
        mjw.reset_data(m, d, reset=self._mask_wp)
        wp.launch(
            write_rows,
            dim=self.num_envs,
            inputs=[self._mask_wp, self._qpos_in_wp, self._qvel_in_wp, self._ctrl_in_wp],
            outputs=[d.qpos, d.qvel, d.ctrl],
        )
        # The stages the observations read (docs/task.md §reset step 4 "forward for the row"): body
        # poses, COM velocities, velocity sensors. Collision and the solver run in the next
        # step's own forward.
        mjw.fwd_kinematics(m, d)
        smooth.com_vel(m, d)
        mjw.sensor_vel(m, d)
        self._launch_body_velocity(body_velocity)

    def _launch_body_velocity(self, body_velocity) -> None:
        d = self._d
        self._wp.launch(
            body_velocity,
            dim=(self.num_envs, self.nbody),
            inputs=[d.cvel, d.xpos, d.subtree_com, self._rootid_wp],
            outputs=[self._lin_wp, self._ang_wp],
        )

    def _capture_graphs(self, requested: bool) -> DiagnosticEntry:
        wp = self._wp
        self._step_graph = None
        self._reset_graph = None
        with wp.ScopedDevice(self._wp_device):
            # Eager warm-up compiles and loads every kernel before any capture.
            self._mask_wp.zero_()
            self._launch_reset()
            self._launch_step()
            if not requested:
                return DiagnosticEntry(False, False, "use_cuda_graph=False was requested")
            if not self._wp_device.is_cuda:
                return DiagnosticEntry(
                    True,
                    False,
                    "warp device is CPU (test-only construction); CUDA graphs need CUDA",
                )
            if not wp.is_mempool_enabled(self._wp_device):
                return DiagnosticEntry(
                    True,
                    False,
                    f"warp memory pool disabled on {self._wp_device}; graph capture needs it",
                )
            with _suspend_gc():
                with wp.ScopedCapture(device=self._wp_device, stream=self._wp_stream) as cap:
                    self._launch_step()
                self._step_graph = cap.graph
                with wp.ScopedCapture(device=self._wp_device, stream=self._wp_stream) as cap:
                    self._launch_reset()
                self._reset_graph = cap.graph
        return DiagnosticEntry(True, True, None)

    def _stream_scope(self):
        if self._torch_stream is None:
            return nullcontext()
        # Work the caller queued (actions, reset targets) must finish before ours starts.
        self._torch_stream.wait_stream(torch.cuda.current_stream(self.device))
        return torch.cuda.stream(self._torch_stream)

    def _release_to_caller(self) -> None:
        if self._torch_stream is not None:
            torch.cuda.current_stream(self.device).wait_stream(self._torch_stream)

    # ------------------------------------------------------------------ staged launches
    @property
    def torch_stream(self) -> torch.cuda.Stream | None:
        """Warp's stream as a torch stream (None on Warp's CPU test device).

        :meth:`launch_step` and :meth:`launch_reset` enqueue on this stream without any event
        wait, so a caller that runs its torch work (or replays its torch CUDA graphs) on it gets
        one ordered stream: the task env does, see ``G1TrackingEnv.step``.
        """
        return self._torch_stream

    @property
    def reset_staging(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The reset graph's fixed inputs ``(mask [N] bool, qpos [N, nq], qvel [N, nv],
        ctrl [N, nu])``; write them in place (``copy_``), then call :meth:`launch_reset`."""
        return self._mask, self._qpos_in, self._qvel_in, self._ctrl_in

    def launch_step(self) -> None:
        """Advance with the ``ctrl`` already written into :attr:`ctrl` (replay the step graph).

        No stream waits: the caller must already be on :attr:`torch_stream` (or on the CPU test
        device), e.g. inside ``torch.cuda.stream(backend.torch_stream)``.
        """
        if self._closed:
            raise BackendFailure(_CLOSED)
        if self._step_graph is not None:
            self._wp.capture_launch(self._step_graph, stream=self._wp_stream)
        else:
            with self._wp.ScopedDevice(self._wp_device):
                self._launch_step()

    def launch_reset(self) -> None:
        """Reset the worlds of the staged mask from :attr:`reset_staging` (replay the reset
        graph); same stream rule as :meth:`launch_step`."""
        if self._closed:
            raise BackendFailure(_CLOSED)
        if self._reset_graph is not None:
            self._wp.capture_launch(self._reset_graph, stream=self._wp_stream)
        else:
            with self._wp.ScopedDevice(self._wp_device):
                self._launch_reset()

    def staged(self) -> MjWarpBackend:
        """Every MJWarp backend has staged launches: itself."""
        return self

    def set_diagnostic(self, name: str, entry: DiagnosticEntry) -> None:
        """Add a caller-owned entry (the task's ``task_cuda_graph``) to :meth:`diagnostics`."""
        self._extra_diagnostics[name] = entry

    # ------------------------------------------------------------------ SimBackend API
    def step(self, ctrl: Tensor) -> None:
        """Write ``ctrl [N, nu]`` and replay the step graph; no host synchronization."""
        with self._stream_scope():
            self.ctrl.copy_(ctrl)
            self.launch_step()
        self._release_to_caller()

    def reset_rows(
        self, mask: Tensor, qpos: Tensor, qvel: Tensor, ctrl: Tensor | None = None
    ) -> None:
        """Stage the masked rows' state in place and replay the reset graph (no sync).

        An empty mask leaves every world's state unchanged (the refresh stages are pure).
        """
        with self._stream_scope():
            self._mask.copy_(mask)
            self._qpos_in.copy_(qpos)
            self._qvel_in.copy_(qvel)
            if ctrl is None:
                self._ctrl_in.zero_()
            else:
                self._ctrl_in.copy_(ctrl)
            self.launch_reset()
        self._release_to_caller()

    def health(self) -> dict[str, int]:
        """Peak contacts, peak constraint rows of any world and the OR of MJWarp overflow bits
        since construction (one small device-to-host copy: call once per log interval)."""
        with self._stream_scope():
            values = self._health_wp.numpy()
        return {
            "peak_nacon": int(values[_H_NACON]),
            "naconmax": int(self._d.naconmax),
            "peak_nefc": int(values[_H_NEFC]),
            "njmax": int(self.njmax),
            "overflow_bits": int(values[_H_OVERFLOW]),
        }

    def check_health(self) -> None:
        """Raise :class:`BackendFailure` if contacts or constraint rows ever overflowed."""
        h = self.health()
        if h["overflow_bits"] or h["peak_nacon"] > h["naconmax"] or h["peak_nefc"] > h["njmax"]:
            msg = (
                f"mjwarp contact/constraint overflow: peak nacon {h['peak_nacon']} of "
                f"{h['naconmax']}, peak nefc {h['peak_nefc']} of njmax {h['njmax']}, "
                f"overflow bits {h['overflow_bits']:#x}; raise env.scene.nconmax/njmax"
            )
            raise BackendFailure(msg)

    def diagnostics(self) -> dict[str, Any]:
        """docs/contracts.md §backend-diagnostics ``backend_diagnostics`` for mjwarp."""
        refresh = DiagnosticEntry(True, True, None).to_json()
        refresh["scope"] = "all_worlds"  # kinematics/sensor kernels take no world mask
        return {
            "available": True,
            "backend_type": "mjwarp",
            "diagnostics": {
                **{name: entry.to_json() for name, entry in self._extra_diagnostics.items()},
                "cuda_graph": self._graph_entry.to_json(),
                "selected_reset_sensor_refresh": refresh,
                "device_reset_randomization": DiagnosticEntry(
                    False,
                    False,
                    "the G1 tracking task is DR-free (docs/contracts.md §owner-routing): reset noise is drawn by the "
                    "task's seeded torch generator, no model randomization",
                ).to_json(),
            },
            "warp_device": str(self._wp_device),
            "nconmax": self.nconmax,
            "njmax": self.njmax,
        }

    def solver_iterations(self) -> torch.Tensor:
        """MJWarp's per-world ``solver_niter`` of the last substep. Under CUDA graphs the
        solver loop ends when every world has converged (or hit ``opt.iterations``), so the
        slowest world sets the cost of each substep."""
        with self._stream_scope():
            counts = self._wp.to_torch(self._d.solver_niter).clone()
        self._release_to_caller()  # the copy ran on warp's stream; the caller reads on its own
        return counts

    def transfer_stats(self) -> None:
        """Device-resident: no host bridge, so no counters (docs/contracts.md §backend-probe)."""
        return

    def close(self) -> None:
        """Drop the captured graphs; the device arrays go with the last reference to them."""
        self._closed = True
        self._step_graph = None
        self._reset_graph = None
