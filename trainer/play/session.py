"""One ``play``: load, roll out, export the ONNX actor, render the video, in that order.

Input problems (no checkpoint, an unloadable actor, a motion clip that cannot be found)
raise :class:`~trainer.play.source.PlayInputError` before anything is written. After that,
each output is attempted on its own and a failure is recorded in the returned
:class:`~trainer.play.record.PlayRecord` instead of stopping the others: the ONNX export
comes first (it needs no OpenGL), then the video and its filmstrip, so a machine without a
working ``MUJOCO_GL`` still gets its deployable policy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from trainer.play.record import PlayRecord
from trainer.play.render import GlChoice, RenderError
from trainer.play.source import PlayInputError, PlaySource, load_actor

if TYPE_CHECKING:
    import mujoco

    from trainer.algo.networks import Actor
    from trainer.play.rollout import Rollout
    from trainer.task.motion import MotionClip

__all__ = ["PlayOptions", "PlayOutputs", "default_outputs", "run_play"]

VIDEO_NAME = "play.mp4"
ONNX_NAME = "policy.onnx"
VERIFY_ROWS = 1024
"""At most this many rollout observations (evenly spaced) check the ONNX export."""

Log = Callable[[str], None]


def _describe(err: BaseException) -> str:
    return " ".join(f"{type(err).__name__}: {err}".split())[:500]


@dataclass(frozen=True)
class PlayOutputs:
    video: Path
    filmstrip: Path
    onnx: Path


def default_outputs(
    run_dir: Path, video: Path | None = None, onnx: Path | None = None
) -> PlayOutputs:
    """``<run_dir>/play.mp4``, its ``<stem>_filmstrip.png`` beside it, ``<run_dir>/policy.onnx``."""
    video = Path(video).absolute() if video is not None else run_dir / VIDEO_NAME
    onnx = Path(onnx).absolute() if onnx is not None else run_dir / ONNX_NAME
    return PlayOutputs(video, video.with_name(f"{video.stem}_filmstrip.png"), onnx)


@dataclass(frozen=True)
class PlayOptions:
    motion: str | None = None
    """A motion id or path to play instead of the run's ``env.commands.motion.motion_file``."""
    width: int = 640
    height: int = 360


def _load_motion(source: PlaySource, motion_id: str, model: mujoco.MjModel) -> MotionClip:
    from trainer.motion_import.resolve import install_motion_importer
    from trainer.task.motion import MotionError, load_motion, resolve_motion

    install_motion_importer()
    try:
        resolved = resolve_motion(
            motion_id, hub_repo=source.task_cfg.hub_repo, hub=source.training.motion_hub
        )
        return load_motion(resolved.path, model)
    except MotionError as err:
        raise PlayInputError(str(err)) from err


def _export(actor: Actor, rollout: Rollout, metadata: dict, path: Path, record: PlayRecord) -> None:
    from trainer.play.export import TOLERANCE, export_actor

    step = max(1, -(-rollout.num_frames // VERIFY_ROWS))
    result = export_actor(actor, path, metadata=metadata, observations=rollout.observations[::step])
    record.onnx, record.onnx_max_abs_error = str(path), result.max_abs_error
    record.onnx_tolerance = TOLERANCE
    record.timings_s.update(export=result.export_s, verify=result.verify_s)


def _render(
    source: PlaySource,
    rollout: Rollout,
    outputs: PlayOutputs,
    options: PlayOptions,
    gl: GlChoice,
    title: str,
    record: PlayRecord,
) -> None:
    from trainer.play.render import (
        FrameText,
        PlayRenderer,
        draw_overlay,
        filmstrip,
        filmstrip_indices,
        render_model,
    )
    from trainer.play.video import Mp4Writer

    model = render_model(source.task_cfg.scene, options.width, options.height)
    renderer = PlayRenderer(model, options.width, options.height, gl)
    render_s = encode_s = 0.0
    picks, strip = set(filmstrip_indices(rollout.num_frames)), []
    try:
        fps = round(1.0 / rollout.ctrl_dt)  # one frame per control step: 50 for ctrl_dt 0.02 s
        with Mp4Writer(outputs.video, options.width, options.height, fps) as writer:
            for k in range(rollout.num_frames):
                t0 = time.perf_counter()
                image = renderer.frame(rollout.robot_qpos[k], rollout.ref_qpos[k])
                if k in picks:
                    strip.append(image)
                text = FrameText(
                    k,
                    rollout.num_frames,
                    k * rollout.ctrl_dt,
                    float(rollout.body_pos_error_m[k]),
                    title,
                )
                image = draw_overlay(image, text)
                t1 = time.perf_counter()
                writer.write(image)
                render_s += t1 - t0
                encode_s += time.perf_counter() - t1
    finally:
        renderer.close()
    record.video = str(outputs.video)
    record.filmstrip = str(filmstrip(strip, outputs.filmstrip))
    record.timings_s.update(render=render_s, encode=encode_s)


def run_play(
    source: PlaySource,
    outputs: PlayOutputs,
    options: PlayOptions,
    gl: GlChoice,
    log: Log,
) -> PlayRecord:
    """Play ``source`` into ``outputs``; return what happened (see the module docstring).

    Raises:
        PlayInputError: the checkpoint or the motion clip cannot be used.
    """
    from trainer.play.export import deployment_metadata
    from trainer.play.rollout import run_rollout
    from trainer.sim.backend import BackendFailure
    from trainer.sim.scene import build_g1_model

    start = time.perf_counter()
    record = PlayRecord(checkpoint=str(source.checkpoint), gl_backend=gl.backend)
    actor, iteration, weights = load_actor(source)
    motion_id = options.motion or source.task_cfg.motion_file
    model = build_g1_model(source.task_cfg.scene)
    motion = _load_motion(source, motion_id, model)
    record.motion_id, record.motion_sha256 = motion_id, motion.sha256
    for path in (outputs.video, outputs.onnx):
        path.parent.mkdir(parents=True, exist_ok=True)
    record.timings_s["load"] = time.perf_counter() - start

    log(
        f"rolling out {source.checkpoint.name} over {int(motion.clip_ends[0])} frames of {motion_id}"
    )
    t0 = time.perf_counter()
    try:
        rollout = run_rollout(actor.deterministic, source.task_cfg, model, motion)
    except BackendFailure as err:
        record.fail("rollout", f"the physics diverged ({err}); no video or ONNX")
        record.timings_s["total"] = time.perf_counter() - start
        return record
    record.timings_s["rollout"] = time.perf_counter() - t0
    record.frames = rollout.num_frames
    record.mean_body_pos_error_m = float(np.mean(rollout.body_pos_error_m))

    metadata = deployment_metadata(
        task_cfg=source.task_cfg,
        clip_id=motion_id,
        clip_sha256=motion.sha256,
        checkpoint_iteration=iteration,
        checkpoint_weights=weights,
        git=source.git,
    )
    log(f"exporting the actor to {outputs.onnx}")
    try:
        _export(actor, rollout, metadata, outputs.onnx, record)
    except Exception as err:  # noqa: BLE001 - recorded as the onnx failure; the video still runs
        record.fail("onnx", _describe(err))
    log(f"rendering {rollout.num_frames} frames with MUJOCO_GL={gl.backend} to {outputs.video}")
    title = f"{source.checkpoint.name} (iteration {iteration})  {Path(motion_id).name}"
    try:
        _render(source, rollout, outputs, options, gl, title, record)
    except RenderError as err:  # names the MUJOCO_GL to try
        record.fail("video", " ".join(str(err).split())[:500])
    except Exception as err:  # noqa: BLE001 - recorded as the video failure
        record.fail("video", _describe(err))
    record.timings_s["total"] = time.perf_counter() - start
    return record
