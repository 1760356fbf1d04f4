"""CPU MuJoCo backend: ``num_envs`` worlds in one :class:`mujoco.batch.Batch`.

The physics runs in MuJoCo's C++ thread pool: one ``Batch.step`` call advances every world
``decimation`` substeps with the GIL released, so no Python runs per world or per substep.
Each world's ``mjSTATE_INTEGRATION`` row (qpos, qvel, act, warm start, ctrl, ...) lives in the
batch; the derived fields (``xpos``, ``xquat``, ``cvel``, ``subtree_com``, ``sensordata``) are
copied out after every call, one substep behind the state as after ``mj_step``. MuJoCo
guarantees the results are bit-identical to stepping one ``MjData`` per world at any thread
count, which is what this backend did before (tests/trainer/sim/test_backends.py checks it
against that loop).

The torch views live on ``device`` and are slices of one packed state tensor. Each call moves
data across the host/device boundary in packed copies only (docs/contracts.md §backend-probe inventory):

==============  =========  ==============================================================
call            direction  payload
==============  =========  ==============================================================
``step``        d2h ×1     ``ctrl [N, nu]``
``step``        h2d ×1     packed state rows (qpos, qvel, xpos, xquat, cvel, subtree_com,
                           sensordata)
``reset_rows``  d2h ×1     packed ``[mask, qpos, qvel, ctrl]``
``reset_rows``  h2d ≤1     packed state (skipped when the mask is empty)
==============  =========  ==============================================================

On a CPU torch device the "transfers" are plain copies; they are counted all the same so
the probe's transfer inventory has one meaning on every machine. Every d2h copy is blocking
and counts as one host synchronization.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import mujoco
import numpy as np
import torch
from mujoco.batch import Batch, SimulationError
from torch import Tensor

from trainer.cpu_threads import affinity_cpus
from trainer.sim.backend import (
    BackendFailure,
    DiagnosticEntry,
    body_velocities_from_cvel,
    sensor_slices,
)
from trainer.sim.scene import SceneCfg

__all__ = ["MujocoCpuBackend"]

log = logging.getLogger(__name__)

# MjData fields of the packed state row, in row order.
_PACKED_FIELDS = ("qpos", "qvel", "xpos", "xquat", "cvel", "subtree_com", "sensordata")


class MujocoCpuBackend:
    """``num_envs`` CPU MuJoCo worlds with packed host↔device bridging (see module doc).

    Args:
        model: compiled G1 scene.
        num_envs: number of worlds.
        device: torch device of the views (CPU or CUDA).
        scene: ``env.scene``; its ``decimation`` is the physics substeps per ``step``.
        num_threads: physics threads (the calling thread included); default every CPU of
            this process's affinity mask, capped at ``num_envs``.
    """

    name: Literal["mujoco"] = "mujoco"

    def __init__(
        self,
        model: mujoco.MjModel,
        num_envs: int,
        device: torch.device,
        scene: SceneCfg,
        *,
        num_threads: int | None = None,
    ) -> None:
        self.model = model
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.decimation = scene.decimation
        self.nbody = model.nbody
        threads = num_threads if num_threads is not None else affinity_cpus()
        if threads < 1:
            msg = f"num_threads={threads} must be >= 1 (or None for every CPU)"
            raise ValueError(msg)
        self.num_threads = min(threads, num_envs)
        self._batch: Batch | None = Batch(model, num_envs, nthread=self.num_threads)
        # Outputs bound before the first call (a field bound later reads zero until then).
        self._fields = {key: self._batch.bind(key) for key in _PACKED_FIELDS}
        # Live views of the state rows: a write is that world's state at its next call.
        self._inputs = {key: self._batch.bind(key) for key in ("qpos", "qvel", "ctrl")}
        self._call(self._batch.reset, None, keyframe=0 if model.nkey > 0 else -1)

        nu, nb = model.nu, model.nbody
        self._layout: dict[str, slice] = {}
        offset = 0
        for key, values in self._fields.items():
            width = values[0].size
            self._layout[key] = slice(offset, offset + width)
            offset += width
        self._row_width = offset
        pin = self.device.type == "cuda"
        self._staging = torch.zeros((num_envs, offset), dtype=torch.float32, pin_memory=pin)
        self._host_state = self._staging.numpy()
        self._state = torch.zeros((num_envs, offset), dtype=torch.float32, device=self.device)

        lay = self._layout
        self.qpos = self._state[:, lay["qpos"]]
        self.qvel = self._state[:, lay["qvel"]]
        self.xpos = self._state[:, lay["xpos"]].view(num_envs, nb, 3)
        self.xquat = self._state[:, lay["xquat"]].view(num_envs, nb, 4)
        self._cvel = self._state[:, lay["cvel"]].view(num_envs, nb, 6)
        self._subtree_com = self._state[:, lay["subtree_com"]].view(num_envs, nb, 3)
        sensors = self._state[:, lay["sensordata"]]
        lin_slice, gyro_slice = sensor_slices(model)
        self.pelvis_lin_vel_b = sensors[:, lin_slice]
        self.torso_gyro_b = sensors[:, gyro_slice]
        self.ctrl = torch.zeros((num_envs, nu), dtype=torch.float32, device=self.device)
        self.body_lin_vel_w = torch.zeros((num_envs, nb, 3), device=self.device)
        self.body_ang_vel_w = torch.zeros((num_envs, nb, 3), device=self.device)
        self._body_rootid = torch.as_tensor(model.body_rootid, dtype=torch.long, device=device)
        self._extra_diagnostics: dict[str, DiagnosticEntry] = {}
        self._stats = dict.fromkeys(
            ("d2h_count", "h2d_count", "d2h_bytes", "h2d_bytes", "synchronization_count"), 0
        )
        self._publish()

    # ------------------------------------------------------------------ host-side helpers
    def _live_batch(self) -> Batch:
        if self._batch is None:
            msg = "the mujoco backend was closed; build a new one to step again"
            raise BackendFailure(msg)
        return self._batch

    def _call(self, method, ids: np.ndarray | None, **kwargs: Any) -> None:
        """Run one batch call; a MuJoCo error in any world becomes a BackendFailure."""
        try:
            method(ids, **kwargs)
        except SimulationError as err:
            raise BackendFailure(f"CPU MuJoCo: {err}") from err

    def _d2h(self, tensor: Tensor) -> np.ndarray:
        host = tensor.detach().to("cpu", copy=True)
        self._stats["d2h_count"] += 1
        self._stats["d2h_bytes"] += host.numel() * host.element_size()
        self._stats["synchronization_count"] += 1
        return host.numpy()

    def _publish(self) -> None:
        """Pack every world's fields (float64 -> float32, vectorised) and copy them over."""
        host, lay = self._host_state, self._layout
        for key, values in self._fields.items():
            host[:, lay[key]] = values.reshape(self.num_envs, -1)
        self._state.copy_(self._staging, non_blocking=self.device.type == "cuda")
        self._stats["h2d_count"] += 1
        self._stats["h2d_bytes"] += self._staging.numel() * self._staging.element_size()
        lin, ang = body_velocities_from_cvel(
            self._cvel, self.xpos, self._subtree_com, self._body_rootid
        )
        self.body_lin_vel_w.copy_(lin)
        self.body_ang_vel_w.copy_(ang)

    # ------------------------------------------------------------------ SimBackend API
    def step(self, ctrl: Tensor) -> None:
        """Advance every world ``decimation`` substeps under ``ctrl [N, nu]``."""
        self.ctrl.copy_(ctrl)
        host_ctrl = self._d2h(self.ctrl)
        if not np.isfinite(host_ctrl).all():
            bad = np.argwhere(~np.isfinite(host_ctrl))[0]
            msg = (
                f"non-finite ctrl at env {int(bad[0])}, actuator {int(bad[1])}; "
                "the policy produced NaN/Inf actions"
            )
            raise BackendFailure(msg)
        batch = self._live_batch()
        self._inputs["ctrl"][:] = host_ctrl
        self._call(batch.step, None, nstep=self.decimation)
        self._publish()

    def reset_rows(
        self, mask: Tensor, qpos: Tensor, qvel: Tensor, ctrl: Tensor | None = None
    ) -> None:
        """Reset the rows selected by ``mask`` to ``(qpos, qvel, ctrl)`` and forward them."""
        if ctrl is None:
            ctrl = torch.zeros_like(self.ctrl)
        packed = self._d2h(
            torch.cat(
                (mask.to(torch.float64)[:, None], qpos.double(), qvel.double(), ctrl.double()),
                dim=1,
            )
        )  # [N, 1 + nq + nv + nu], one packed copy
        rows = np.flatnonzero(packed[:, 0] > 0.5)
        if rows.size == 0:
            return
        batch, nq, nv = self._live_batch(), self.model.nq, self.model.nv
        # mj_resetData (clears ctrl, warm start, time, act, warnings), write, mj_forward.
        self._call(batch.reset, rows, stage=mujoco.mjtStage.mjSTAGE_NONE)
        selected = packed[rows]
        self._inputs["qpos"][rows] = selected[:, 1 : 1 + nq]
        self._inputs["qvel"][rows] = selected[:, 1 + nq : 1 + nq + nv]
        self._inputs["ctrl"][rows] = selected[:, 1 + nq + nv :]
        self._call(batch.forward, rows)
        self._publish()
        sel = torch.as_tensor(packed[:, 0] > 0.5, device=self.device)
        self.ctrl.copy_(torch.where(sel[:, None], ctrl.to(self.ctrl.dtype), self.ctrl))

    def staged(self) -> None:
        """No staged launches: every call bridges host and device (module docstring)."""
        return

    def set_diagnostic(self, name: str, entry: DiagnosticEntry) -> None:
        """Keep a caller-owned entry; :meth:`diagnostics` reports none (no device path)."""
        self._extra_diagnostics[name] = entry

    def health(self) -> None:
        """No device health record: :meth:`check_health` reads MuJoCo's own warning counters."""
        return

    def solver_iterations(self) -> None:
        """Not packed across the host bridge: None."""
        return

    def check_health(self) -> None:
        """Raise if a world reported a bad (non-finite) acceleration during the run."""
        if self._batch is None:
            return
        counts = self._batch.warning[:, mujoco.mjtWarning.mjWARN_BADQACC, 1]
        bad = np.flatnonzero(counts > 0)
        if bad.size:
            msg = f"env {int(bad[0])}: MuJoCo reported a non-finite acceleration (mjWARN_BADQACC)"
            raise BackendFailure(msg)

    def diagnostics(self) -> dict[str, Any]:
        """docs/contracts.md §backend-diagnostics: the CPU backend has no device-side diagnostics."""
        return {
            "available": False,
            "backend_type": "mujoco_cpu",
            "unavailable_reason": (
                "CPU MuJoCo backend: physics runs on host threads through a packed "
                "host/device bridge; no CUDA graph or device reset path exists"
            ),
        }

    def transfer_stats(self) -> dict[str, int]:
        """Cumulative packed-bridge counters since construction."""
        return dict(self._stats)

    def close(self) -> None:
        """Release the batch (its worker threads end once no array of it is referenced)."""
        self._batch = None
        self._fields = {}
        self._inputs = {}
