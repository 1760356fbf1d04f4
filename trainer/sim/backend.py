"""The physics-backend contract the G1 task runs on: Protocols and shared helpers.

A :class:`SimBackend` owns ``num_envs`` MuJoCo worlds of one model and exposes their state as
torch tensors on ``device`` (docs/assets.md §the-g1-model-and-the-scene). Two implementations exist, built by
:func:`trainer.sim.factory.make_backend` (this module imports neither, so no cycle):

* ``mjwarp`` (:mod:`trainer.sim.mjwarp`): MuJoCo Warp; every array lives on the CUDA device,
  the views are zero-copy, ``step`` replays one CUDA graph and never syncs with the host. It
  also has staged launches (:class:`StagedSimBackend`).
* ``mujoco`` (:mod:`trainer.sim.mujoco_cpu`): CPU MuJoCo over a thread pool; one packed
  device→host copy of ``ctrl`` and one packed host→device copy of the state per call, with
  counters (docs/contracts.md §backend-probe).

Every backend implements the whole :class:`SimBackend` Protocol; the one optional capability,
staged launches, is reached through :meth:`SimBackend.staged` (typed, never ``hasattr``).

View semantics (both backends): after ``step`` (3 × ``mj_step``, no forward afterwards),
``qpos``/``qvel`` are current while body poses, velocities and sensors are one substep old,
exactly as MuJoCo leaves them. After ``reset_rows`` the selected rows are forwarded, so their
views describe the written state. Views are fixed tensors: read them, never rebind them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import torch
from torch import Tensor

from contracts.names import Backend

if TYPE_CHECKING:
    import mujoco

__all__ = [
    "BACKEND_NAMES",
    "BackendFailure",
    "BackendName",
    "DiagnosticEntry",
    "SimBackend",
    "StagedSimBackend",
    "body_velocities_from_cvel",
    "sensor_slices",
]

BackendName = Literal["mjwarp", "mujoco"]
"""The simulator backends (``--sim``, ``training.sim_backend``) as a static type; the same
set as :class:`contracts.names.Backend` (tests/trainer/config/test_defaults.py checks it)."""

BACKEND_NAMES: tuple[str, ...] = tuple(b.value for b in Backend)
"""The simulator backend names in their reported order, from :class:`contracts.names.Backend`."""


class BackendFailure(RuntimeError):
    """The physics backend cannot continue (no CUDA for mjwarp, contact overflow, ...)."""


@dataclass(frozen=True)
class DiagnosticEntry:
    """One ``backend_diagnostics.diagnostics`` entry (docs/contracts.md §backend-diagnostics).

    ``fell_back``: the feature was attempted and failed, so the run goes on without it (the
    soak fails on it); unavailable or switched-off features are not fallbacks. Only a
    fallback writes the key (``"fell_back": true``).
    """

    requested: bool
    enabled: bool
    disable_reason: str | None
    fell_back: bool = False

    def __post_init__(self) -> None:
        if self.enabled and self.disable_reason is not None:
            raise ValueError("an enabled diagnostic entry must have disable_reason None")
        if not self.enabled and not self.disable_reason:
            raise ValueError("a disabled diagnostic entry needs a non-empty disable_reason")
        if self.fell_back and (self.enabled or not self.requested):
            raise ValueError("only a requested, disabled entry can have fallen back")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "requested": self.requested,
            "enabled": self.enabled,
            "disable_reason": self.disable_reason,
        }
        if self.fell_back:
            out["fell_back"] = True
        return out


class SimBackend(Protocol):
    """Batched MuJoCo worlds with torch views (see the module docstring for semantics)."""

    name: BackendName
    num_envs: int
    device: torch.device
    decimation: int
    nbody: int
    num_threads: int | None
    """Host threads stepping the physics (CPU MuJoCo), None for a device-resident backend."""

    model: mujoco.MjModel  # the compiled scene the worlds run
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

    def staged(self) -> StagedSimBackend | None:
        """This backend's staged launches (itself, on mjwarp), or None when it has none."""
        ...

    def diagnostics(self) -> dict[str, Any]:
        """``runtime_manifest.backend_diagnostics`` (docs/contracts.md §backend-diagnostics); a cold-path call."""
        ...

    def set_diagnostic(self, name: str, entry: DiagnosticEntry) -> None:
        """Record a caller-owned entry (the task's ``task_cuda_graph``); a backend whose
        :meth:`diagnostics` has no ``diagnostics`` map (CPU MuJoCo) keeps it unreported."""
        ...

    def transfer_stats(self) -> dict[str, int] | None:
        """Packed-bridge counters (CPU backend) or None (device-resident backend)."""
        ...

    def health(self) -> dict[str, int] | None:
        """Peak contact/constraint counts against the buffers of a device-resident backend
        (syncs), or None when the backend keeps no such record (CPU MuJoCo)."""
        ...

    def solver_iterations(self) -> Tensor | None:
        """Constraint-solver iterations of each world's last substep (``[N]`` int32, a copy),
        or None when the backend does not expose them (CPU MuJoCo)."""
        ...

    def check_health(self) -> None:
        """Raise :class:`BackendFailure` on contact/constraint overflow; syncs, so call it only
        once per log interval."""
        ...

    def close(self) -> None:
        """Release the worlds; a later ``step``/``reset_rows`` raises :class:`BackendFailure`."""
        ...


class StagedSimBackend(SimBackend, Protocol):
    """A backend whose step and reset are fixed launches over preallocated inputs, so a caller
    can run them inside its own CUDA graphs' stream without any host synchronization."""

    @property
    def torch_stream(self) -> torch.cuda.Stream | None:
        """The stream the launches enqueue on (None on a CPU test device)."""
        ...

    @property
    def reset_staging(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The reset's fixed inputs ``(mask [N] bool, qpos [N, nq], qvel [N, nv], ctrl
        [N, nu])``; write them in place, then call :meth:`launch_reset`."""
        ...

    def launch_step(self) -> None:
        """Advance with the ``ctrl`` already written into ``ctrl`` (no stream waits)."""
        ...

    def launch_reset(self) -> None:
        """Reset the staged rows from :attr:`reset_staging` (no stream waits)."""
        ...


def sensor_slices(model: mujoco.MjModel) -> tuple[slice, slice]:
    """Slices of ``pelvis_local_linvel`` and ``torso_gyro`` in ``sensordata``.

    Raises:
        BackendFailure: a sensor is missing (the model is not the G1 scene of docs/assets.md §the-g1-model-and-the-scene).
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

    ``cvel = (ω, v)`` is the spatial velocity at ``subtree_com[rootid]`` (docs/assets.md §the-g1-model-and-the-scene), so the
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
