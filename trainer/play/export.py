"""The deployable actor: ONNX through ``torch.onnx.export``, checked against torch at export.

The graph is the actor's deterministic path, ``tanh(mu(obs))`` with every BatchNorm in eval
mode. The input BatchNorm of the trunk is the observation normalisation (its running mean and
variance from training), so the model takes raw observations: ``obs [batch, obs_dim]`` →
``actions [batch, action_dim]`` in [-1, 1] (the env's ``EnvSpec`` widths, recorded in the
checkpoint); the batch axis is dynamic.

Exporter: torch's default, the ``torch.export``-based (dynamo) exporter, which needs
``onnxscript``; the TorchScript exporter is deprecated since torch 2.9. Opset 20. The file is
bit-for-bit deterministic for the same checkpoint and metadata: nothing in it depends on the
time, the path or the process.

Every value in ``metadata_props`` is JSON text (``json.loads`` each one); docs/play.md lists
the keys. :func:`export_actor` runs the model in onnxruntime on a batch of real observations
from the rollout and fails with the maximum error when it differs from torch by more than
:data:`TOLERANCE`; nothing is written then.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from trainer.algo.networks import Actor

__all__ = [
    "INPUT_NAME",
    "OPSET",
    "OUTPUT_NAME",
    "TOLERANCE",
    "ExportMismatch",
    "ExportResult",
    "deployment_metadata",
    "export_actor",
    "preload_exporter",
]

INPUT_NAME = "obs"
OUTPUT_NAME = "actions"
OPSET = 20
TOLERANCE = 1e-5
"""Largest absolute difference between onnxruntime's and torch's actions (both fp32; actions
lie in [-1, 1]). Observed: below 1e-6."""
METADATA_FORMAT = "g1soak-policy/1"


def preload_exporter() -> None:
    """Import the exporter's compiled dependencies (``torch._dynamo``, which loads triton).

    Call before ``mujoco`` is imported: with ``MUJOCO_GL=osmesa`` MuJoCo loads Mesa, whose
    LLVM crashes triton's own LLVM when triton loads second (a segmentation fault); loaded
    first, both work.
    """
    import torch._dynamo  # noqa: F401


class ExportMismatch(RuntimeError):
    """onnxruntime's output differs from torch's by more than the tolerance."""


class DeployedActor(nn.Module):
    """``obs [B, obs_dim]`` → ``tanh(mu)`` ``[B, A]``: the actor's eval-mode mean action."""

    def __init__(self, actor: Actor) -> None:
        super().__init__()
        self.actor = actor

    def forward(self, obs: Tensor) -> Tensor:
        return self.actor.deterministic(obs)


@dataclass(frozen=True)
class ExportResult:
    path: Path
    max_abs_error: float
    """Largest |onnxruntime − torch| over the verification batch."""
    batch_rows: int
    """Observations in the verification batch."""
    export_s: float
    verify_s: float


def deployment_metadata(
    *,
    task_cfg: Any,
    clip_id: str,
    clip_sha256: str,
    checkpoint_iteration: int,
    checkpoint_weights: str,
    git: Mapping[str, Any],
) -> dict[str, Any]:
    """What a deployment needs to drive the robot with the policy (values before JSON)."""
    from importlib.metadata import PackageNotFoundError, version

    from trainer.sim.scene import (
        DEFAULT_JOINT_POS,
        JOINT_EFFORT,
        JOINT_KP,
        JOINT_KV,
        JOINT_NAMES,
    )
    from trainer.task.observations import ACTOR_OBS_DIM, ACTOR_OBS_LAYOUT

    try:
        project_version = version("g1soak")
    except PackageNotFoundError:
        project_version = None
    return {
        "format": METADATA_FORMAT,
        "observation_dim": ACTOR_OBS_DIM,
        "observation_layout": [
            {"name": name, "offset": offset, "size": size}
            for name, offset, size in ACTOR_OBS_LAYOUT
        ],
        "observation_normalization": "in_graph",
        "action_dim": len(JOINT_NAMES),
        "joint_names": list(JOINT_NAMES),
        "default_joint_pos": list(DEFAULT_JOINT_POS),
        "action_scale": float(task_cfg.action_scale),
        "joint_stiffness": list(JOINT_KP),
        "joint_damping": list(JOINT_KV),
        "joint_effort_limit": list(JOINT_EFFORT),
        "control_dt": float(task_cfg.ctrl_dt),
        "simulate_action_latency": bool(task_cfg.simulate_action_latency),
        "clip_id": clip_id,
        "clip_sha256": clip_sha256,
        "checkpoint_iteration": int(checkpoint_iteration),
        "checkpoint_weights": checkpoint_weights,
        "project_version": project_version,
        "project_commit": git.get("commit"),
        "project_tree_dirty": git.get("dirty"),
    }


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """The exporter logs a warning per optional op library it cannot find (torchvision)."""
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "onnxscript")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _to_onnx_bytes(actor: Actor, metadata: Mapping[str, Any]) -> bytes:
    module = DeployedActor(actor).eval()
    example = torch.zeros(2, actor.obs_dim)  # batch 2: size 1 would be specialised
    with _quiet_exporter(), torch.no_grad():
        program = torch.onnx.export(
            module,
            (example,),
            dynamo=True,
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_shapes={"obs": {0: torch.export.Dim("batch")}},
            opset_version=OPSET,
            external_data=False,
            optimize=True,
            verbose=False,
        )
    proto = program.model_proto
    del proto.metadata_props[:]
    for key in sorted(metadata):
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, json.dumps(metadata[key], sort_keys=True)
    proto.doc_string = (
        f"g1soak FlashSAC actor for Unitree G1 motion tracking: obs [batch, {actor.obs_dim}] "
        f"(raw) -> actions [batch, {actor.action_dim}] in [-1, 1]; joint position target = "
        "default_joint_pos + action_scale * actions. Metadata values are JSON; see docs/play.md."
    )
    return proto.SerializeToString(deterministic=True)


def _max_error(onnx_bytes: bytes, actor: Actor, observations: np.ndarray) -> float:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
    got = session.run([OUTPUT_NAME], {INPUT_NAME: observations})[0]
    with torch.no_grad():
        want = DeployedActor(actor).eval()(torch.from_numpy(observations)).numpy()
    if got.shape != want.shape:
        msg = f"onnxruntime returned actions {got.shape}, torch {want.shape}"
        raise ExportMismatch(msg)
    error = float(np.max(np.abs(got.astype(np.float64) - want)))
    return error if math.isfinite(error) else math.inf


def export_actor(
    actor: Actor,
    path: Path,
    *,
    metadata: Mapping[str, Any],
    observations: np.ndarray,
    tolerance: float = TOLERANCE,
) -> ExportResult:
    """Export ``actor`` to ``path`` and check it in onnxruntime on ``observations``.

    Args:
        actor: the trained actor (CPU, eval mode).
        path: the ``.onnx`` file, replaced atomically.
        metadata: :func:`deployment_metadata`.
        observations: [rows, obs_dim] float32 real observations (the rollout's).
        tolerance: the largest accepted |onnxruntime − torch|.

    Raises:
        ExportMismatch: the outputs differ by more than ``tolerance`` (the message has the
            maximum error); nothing is written.
    """
    actor = actor.cpu().eval()
    start = time.perf_counter()
    onnx_bytes = _to_onnx_bytes(actor, metadata)
    exported = time.perf_counter()
    batch = np.ascontiguousarray(observations, dtype=np.float32)
    error = _max_error(onnx_bytes, actor, batch)
    if not error <= tolerance:
        msg = (
            f"the ONNX actor differs from torch: max |onnxruntime - torch| = {error:.3g} over "
            f"{batch.shape[0]} observations exceeds the tolerance {tolerance:g}; nothing written"
        )
        raise ExportMismatch(msg)
    verified = time.perf_counter()
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_bytes(onnx_bytes)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return ExportResult(
        path=path,
        max_abs_error=error,
        batch_rows=int(batch.shape[0]),
        export_s=exported - start,
        verify_s=verified - exported,
    )
