"""CPU MuJoCo backend: one ``MjData`` per env, stepped over a thread pool.

The physics runs on host threads (MuJoCo releases the GIL inside ``mj_step``); the torch
views live on ``device`` and are slices of one packed state tensor. Each call moves data
across the host/device boundary in packed copies only (CONTRACTS §10 inventory):

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

import itertools
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import mujoco
import numpy as np
import torch
from torch import Tensor

from trainer.sim.backend import BackendFailure, body_velocities_from_cvel, sensor_slices

__all__ = ["MujocoCpuBackend"]

log = logging.getLogger(__name__)


class MujocoCpuBackend:
    """``num_envs`` CPU MuJoCo worlds with packed host↔device bridging (see module doc).

    Args:
        model: compiled G1 scene.
        num_envs: number of worlds.
        device: torch device of the views (CPU or CUDA).
        num_threads: worker threads; default ``os.cpu_count()`` capped at ``num_envs``.
        decimation: physics substeps per ``step``; default from ``model`` is not stored, so
            pass the scene's value (3).
    """

    name = "mujoco"

    def __init__(
        self,
        model: mujoco.MjModel,
        num_envs: int,
        device: torch.device,
        *,
        num_threads: int | None = None,
        decimation: int = 3,
    ) -> None:
        self.model = model
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.decimation = decimation
        self.nbody = model.nbody
        self._datas = [mujoco.MjData(model) for _ in range(num_envs)]
        if model.nkey > 0:
            for data in self._datas:
                mujoco.mj_resetDataKeyframe(model, data, 0)
        for data in self._datas:
            mujoco.mj_forward(model, data)

        nq, nv, nu, nb = model.nq, model.nv, model.nu, model.nbody
        widths = {
            "qpos": nq,
            "qvel": nv,
            "xpos": nb * 3,
            "xquat": nb * 4,
            "cvel": nb * 6,
            "subtree_com": nb * 3,
            "sensordata": model.nsensordata,
        }
        self._layout: dict[str, slice] = {}
        offset = 0
        for key, width in widths.items():
            self._layout[key] = slice(offset, offset + width)
            offset += width
        self._row_width = offset
        self._host_state = np.zeros((num_envs, offset), dtype=np.float32)
        self._host_ctrl = np.zeros((num_envs, nu), dtype=np.float64)
        pin = self.device.type == "cuda"
        self._staging = torch.zeros((num_envs, offset), dtype=torch.float32, pin_memory=pin)
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

        threads = num_threads if num_threads is not None else (os.cpu_count() or 1)
        self.num_threads = max(1, min(threads, num_envs))
        bounds = np.linspace(0, num_envs, self.num_threads + 1).astype(int)
        self._chunks = [(int(a), int(b)) for a, b in itertools.pairwise(bounds)]
        self._pool = ThreadPoolExecutor(self.num_threads, thread_name_prefix="mujoco-cpu")
        self._stats = dict.fromkeys(
            ("d2h_count", "h2d_count", "d2h_bytes", "h2d_bytes", "synchronization_count"), 0
        )
        for i in range(num_envs):
            self._pack_row(i)
        self._publish()

    # ------------------------------------------------------------------ host-side helpers
    def _pack_row(self, i: int) -> None:
        data, row, lay = self._datas[i], self._host_state[i], self._layout
        row[lay["qpos"]] = data.qpos
        row[lay["qvel"]] = data.qvel
        row[lay["xpos"]] = data.xpos.ravel()
        row[lay["xquat"]] = data.xquat.ravel()
        row[lay["cvel"]] = data.cvel.ravel()
        row[lay["subtree_com"]] = data.subtree_com.ravel()
        row[lay["sensordata"]] = data.sensordata

    def _step_chunk(self, lo: int, hi: int) -> None:
        model, steps = self.model, self.decimation
        for i in range(lo, hi):
            data = self._datas[i]
            data.ctrl[:] = self._host_ctrl[i]
            for _ in range(steps):
                mujoco.mj_step(model, data)
            self._pack_row(i)

    def _reset_chunk(self, lo: int, hi: int, rows: np.ndarray, packed: np.ndarray) -> None:
        model, nq, nv = self.model, self.model.nq, self.model.nv
        for i in rows[(rows >= lo) & (rows < hi)]:
            data = self._datas[i]
            mujoco.mj_resetData(model, data)  # clears ctrl, warm start, time, act
            data.qpos[:] = packed[i, 1 : 1 + nq]
            data.qvel[:] = packed[i, 1 + nq : 1 + nq + nv]
            data.ctrl[:] = packed[i, 1 + nq + nv :]
            mujoco.mj_forward(model, data)
            self._pack_row(i)

    def _run_chunks(self, fn, *args) -> None:
        futures = [self._pool.submit(fn, lo, hi, *args) for lo, hi in self._chunks]
        for future in futures:
            future.result()

    def _d2h(self, tensor: Tensor) -> np.ndarray:
        host = tensor.detach().to("cpu", copy=True)
        self._stats["d2h_count"] += 1
        self._stats["d2h_bytes"] += host.numel() * host.element_size()
        self._stats["synchronization_count"] += 1
        return host.numpy()

    def _publish(self) -> None:
        self._staging.numpy()[:] = self._host_state
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
        self._host_ctrl[:] = host_ctrl
        self._run_chunks(self._step_chunk)
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
        self._run_chunks(self._reset_chunk, rows, packed)
        self._publish()
        sel = torch.as_tensor(packed[:, 0] > 0.5, device=self.device)
        self.ctrl.copy_(torch.where(sel[:, None], ctrl.to(self.ctrl.dtype), self.ctrl))

    def check_health(self) -> None:
        """Raise if a world reported a bad (non-finite) acceleration during the run."""
        for i, data in enumerate(self._datas):
            if data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number > 0:
                msg = f"env {i}: MuJoCo reported a non-finite acceleration (mjWARN_BADQACC)"
                raise BackendFailure(msg)

    def diagnostics(self) -> dict[str, Any]:
        """CONTRACTS §4.3: the CPU backend has no device-side diagnostics."""
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
        """Stop the worker threads."""
        self._pool.shutdown(wait=True)

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
