"""The physics-backend contract the G1 task runs on, and ``make_backend``.

A :class:`SimBackend` owns ``num_envs`` MuJoCo worlds of one model and exposes their state as
torch tensors on ``device`` (TASK.md §2). Two implementations exist:

* ``mjwarp`` (:mod:`trainer.sim.mjwarp`): MuJoCo Warp; every array lives on the CUDA device,
  the views are zero-copy, ``step`` replays one CUDA graph and never syncs with the host.
* ``mujoco`` (:mod:`trainer.sim.mujoco_cpu`): CPU MuJoCo over a thread pool; one packed
  device→host copy of ``ctrl`` and one packed host→device copy of the state per call, with
  counters (CONTRACTS §10).

View semantics (both backends): after ``step`` (3 × ``mj_step``, no forward afterwards),
``qpos``/``qvel`` are current while body poses, velocities and sensors are one substep old,
exactly as MuJoCo leaves them. After ``reset_rows`` the selected rows are forwarded, so their
views describe the written state. Views are fixed tensors: read them, never rebind them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import torch
from torch import Tensor

if TYPE_CHECKING:
    import mujoco

__all__ = [
    "BACKEND_NAMES",
    "BackendFailure",
    "DiagnosticEntry",
    "SimBackend",
    "body_velocities_from_cvel",
    "make_backend",
    "sensor_slices",
]

BACKEND_NAMES = ("mjwarp", "mujoco")
BackendName = Literal["mjwarp", "mujoco"]


class BackendFailure(RuntimeError):
    """The physics backend cannot continue (no CUDA for mjwarp, contact overflow, ...)."""


@dataclass(frozen=True)
class DiagnosticEntry:
    """One ``backend_diagnostics.diagnostics`` entry (CONTRACTS §4.3)."""

    requested: bool
    enabled: bool
    disable_reason: str | None

    def __post_init__(self) -> None:
        if self.enabled and self.disable_reason is not None:
            raise ValueError("an enabled diagnostic entry must have disable_reason None")
        if not self.enabled and not self.disable_reason:
            raise ValueError("a disabled diagnostic entry needs a non-empty disable_reason")

    def to_json(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "enabled": self.enabled,
            "disable_reason": self.disable_reason,
        }


@runtime_checkable
class SimBackend(Protocol):
    """Batched MuJoCo worlds with torch views (see the module docstring for semantics)."""

    name: str
    num_envs: int
    device: torch.device
    decimation: int
    nbody: int

    qpos: Tensor  # [N, nq]
    qvel: Tensor  # [N, nv]
    ctrl: Tensor  # [N, nu]
    xpos: Tensor  # [N, nbody, 3]
    xquat: Tensor  # [N, nbody, 4] wxyz
    body_lin_vel_w: Tensor  # [N, nbody, 3] world velocity of each body origin
    body_ang_vel_w: Tensor  # [N, nbody, 3] world angular velocity
    pelvis_lin_vel_b: Tensor  # [N, 3] velocimeter `pelvis_local_linvel` (site frame)
    torso_gyro_b: Tensor  # [N, 3] gyro `torso_gyro` (site frame)

    def step(self, ctrl: Tensor) -> None:
        """Write ``ctrl [N, nu]`` and advance ``decimation`` physics substeps (no forward)."""
        ...

    def reset_rows(
        self, mask: Tensor, qpos: Tensor, qvel: Tensor, ctrl: Tensor | None = None
    ) -> None:
        """For rows where ``mask [N]`` is true: clear ctrl, warm start and time, write
        ``qpos [N, nq]``/``qvel [N, nv]`` (and ``ctrl`` if given), then forward. Other rows keep
        their state bitwise."""
        ...

    def diagnostics(self) -> dict[str, Any]:
        """``runtime_manifest.backend_diagnostics`` (CONTRACTS §4.3); a cold-path call."""
        ...

    def transfer_stats(self) -> dict[str, int] | None:
        """Packed-bridge counters (CPU backend) or None (device-resident backend)."""
        ...

    def check_health(self) -> None:
        """Raise :class:`BackendFailure` on contact/constraint overflow; syncs, so call it only
        once per log interval."""
        ...


def sensor_slices(model: mujoco.MjModel) -> tuple[slice, slice]:
    """Slices of ``pelvis_local_linvel`` and ``torso_gyro`` in ``sensordata``.

    Raises:
        BackendFailure: a sensor is missing (the model is not the G1 scene of TASK.md §2).
    """
    import mujoco

    out = []
    for name in ("pelvis_local_linvel", "torso_gyro"):
        sid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, name)
        if sid < 0:
            msg = f"model lacks sensor {name!r}; build it with trainer.sim.scene.build_g1_model"
            raise BackendFailure(msg)
        adr = int(model.sensor_adr[sid])
        out.append(slice(adr, adr + 3))
    return out[0], out[1]


def body_velocities_from_cvel(
    cvel: Tensor, xpos: Tensor, subtree_com: Tensor, body_rootid: Tensor
) -> tuple[Tensor, Tensor]:
    """World origin velocity and angular velocity of every body from MuJoCo's ``cvel``.

    ``cvel = (ω, v)`` is the spatial velocity at ``subtree_com[rootid]`` (TASK.md §2), so the
    body origin moves with ``v + ω × (xpos − subtree_com[root])``, the same quantity as
    ``mj_objectVelocity(mjOBJ_XBODY, local=0)``.

    Args:
        cvel: [N, nbody, 6]
        xpos: [N, nbody, 3]
        subtree_com: [N, nbody, 3]
        body_rootid: [nbody] long

    Returns:
        ``(lin_vel_w [N, nbody, 3], ang_vel_w [N, nbody, 3])``.
    """
    ang = cvel[..., :3]
    offset = xpos - subtree_com.index_select(1, body_rootid)
    return cvel[..., 3:] + torch.linalg.cross(ang, offset, dim=-1), ang


def make_backend(
    name: str, model: mujoco.MjModel, num_envs: int, device: torch.device | str, **kwargs: Any
) -> SimBackend:
    """Build the named backend for ``num_envs`` worlds of ``model``.

    Args:
        name: ``"mjwarp"`` (CUDA only) or ``"mujoco"`` (CPU physics, tensors on ``device``).
        model: compiled G1 scene (:func:`trainer.sim.scene.build_g1_model`).
        num_envs: number of worlds, ≥ 1.
        device: torch device of the views.
        **kwargs: backend-specific options (``nconmax``/``njmax`` for mjwarp,
            ``num_threads`` for mujoco).

    Raises:
        ValueError: unknown name or bad ``num_envs``.
        BackendFailure: mjwarp requested without CUDA (no CPU fallback).
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        msg = f"num_envs={num_envs!r} must be an int >= 1; use e.g. 2048"
        raise ValueError(msg)
    device = torch.device(device)
    if name == "mjwarp":
        from trainer.sim.mjwarp import MjWarpBackend

        return MjWarpBackend(model, num_envs, device, **kwargs)
    if name == "mujoco":
        from trainer.sim.mujoco_cpu import MujocoCpuBackend

        return MujocoCpuBackend(model, num_envs, device, **kwargs)
    msg = f"unknown sim backend {name!r}; valid backends: {list(BACKEND_NAMES)}"
    raise ValueError(msg)
