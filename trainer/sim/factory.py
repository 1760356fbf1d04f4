"""``make_backend``: the one place that knows every :class:`~trainer.sim.backend.SimBackend`.

It imports both implementations; they import only :mod:`trainer.sim.backend` (the Protocols
and shared helpers), so the modules form no import cycle. ``mujoco_warp`` and ``warp``
themselves load only when an mjwarp backend is built.
"""

from __future__ import annotations

import mujoco
import torch

from contracts.names import Backend
from trainer.sim.backend import BACKEND_NAMES, SimBackend
from trainer.sim.mjwarp import MjWarpBackend
from trainer.sim.mjwarp_options import DEFAULT_MJWARP_OPTIONS, MjWarpOptions, StreamPriority
from trainer.sim.mujoco_cpu import MujocoCpuBackend
from trainer.sim.scene import SceneCfg

__all__ = ["make_backend"]


def make_backend(
    name: str,
    model: mujoco.MjModel,
    num_envs: int,
    device: torch.device | str,
    scene: SceneCfg,
    *,
    num_threads: int | None = None,
    stream_priority: StreamPriority = "default",
    mjwarp_options: MjWarpOptions | None = None,
) -> SimBackend:
    """Build the named backend for ``num_envs`` worlds of ``model``.

    Args:
        name: ``"mjwarp"`` (CUDA only) or ``"mujoco"`` (CPU physics, tensors on ``device``).
        model: compiled G1 scene (:func:`trainer.sim.scene.build_g1_model` of ``scene``).
        num_envs: number of worlds, ≥ 1.
        device: torch device of the views.
        scene: ``env.scene``: substeps per step and (mjwarp) the contact/constraint buffers.
        num_threads: CPU MuJoCo physics threads (None = every CPU of the affinity mask);
            must be None for mjwarp, whose physics runs on the device.
        stream_priority: mjwarp's stream, ``default`` or ``high`` (the device's highest
            priority); the CPU physics has no stream and takes only ``default``.
        mjwarp_options: MJWarp's broadphase and solver start (None: MJWarp's defaults);
            mjwarp only.

    Raises:
        ValueError: unknown name, bad ``num_envs``, or ``num_threads`` for mjwarp.
        BackendFailure: mjwarp requested without CUDA (no CPU fallback).
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        msg = f"num_envs={num_envs!r} must be an int >= 1; use e.g. 2048"
        raise ValueError(msg)
    device = torch.device(device)
    if name == Backend.MJWARP:
        if num_threads is not None:
            msg = f"num_threads={num_threads} applies to --sim mujoco only; mjwarp runs on the GPU"
            raise ValueError(msg)
        options = DEFAULT_MJWARP_OPTIONS if mjwarp_options is None else mjwarp_options
        return MjWarpBackend(
            model, num_envs, device, scene, stream_priority=stream_priority, options=options
        )
    if name == Backend.MUJOCO:
        if stream_priority != "default":
            msg = f"stream_priority={stream_priority!r} applies to mjwarp only; use 'default'"
            raise ValueError(msg)
        if mjwarp_options is not None:
            msg = "mjwarp_options apply to mjwarp only; --sim mujoco runs MuJoCo's own pipeline"
            raise ValueError(msg)
        return MujocoCpuBackend(model, num_envs, device, scene, num_threads=num_threads)
    msg = f"unknown sim backend {name!r}; valid backends: {list(BACKEND_NAMES)}"
    raise ValueError(msg)
