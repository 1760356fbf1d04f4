"""The rollout play records (CPU MuJoCo physics, no OpenGL) and the ONNX export of the actor:
onnxruntime against torch on the rollout's real observations, metadata, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from tests.trainer.play.clips import write_short_clip
from trainer.algo.networks import Actor
from trainer.config.defaults import default_scene_cfg, default_task_cfg
from trainer.play.export import (
    INPUT_NAME,
    OUTPUT_NAME,
    TOLERANCE,
    DeployedActor,
    ExportMismatch,
    deployment_metadata,
    export_actor,
)
from trainer.play.rollout import Rollout, run_rollout
from trainer.sim.scene import (
    DEFAULT_JOINT_POS,
    JOINT_KP,
    JOINT_KV,
    JOINT_NAMES,
    build_g1_model,
)
from trainer.task.motion import MotionClip, load_motion
from trainer.task.observations import ACTOR_OBS_LAYOUT

FRAMES = 100


@pytest.fixture(scope="module")
def actor() -> Actor:
    torch.manual_seed(3)
    return Actor(160, 29, 64, 1).eval()


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> MotionClip:
    path = write_short_clip(tmp_path_factory.mktemp("clip") / "short.npz", FRAMES)
    return load_motion(path, build_g1_model(default_scene_cfg()))


@pytest.fixture(scope="module")
def rollout(actor: Actor, clip: MotionClip) -> Rollout:
    return run_rollout(
        actor.deterministic, default_task_cfg(), build_g1_model(default_scene_cfg()), clip
    )


def test_rollout_plays_every_frame_from_the_reference_start(
    rollout: Rollout, actor: Actor, clip: MotionClip
) -> None:
    assert rollout.num_frames == FRAMES and rollout.observations.shape == (FRAMES, 160)
    np.testing.assert_allclose(rollout.ref_qpos[:, 7:], clip.joint_pos)
    np.testing.assert_allclose(rollout.ref_qpos[:, :3], clip.body_pos_w[:, 0])
    np.testing.assert_allclose(rollout.robot_qpos[0], rollout.ref_qpos[0], atol=1e-6)
    assert rollout.body_pos_error_m[0] < 1e-5  # no reset noise
    # An untrained policy falls; play never resets it (no root jump between frames).
    assert rollout.body_pos_error_m[-1] > 0.3
    assert np.abs(np.diff(rollout.robot_qpos[:, :3], axis=0)).max() < 0.1
    again = run_rollout(
        actor.deterministic, default_task_cfg(), build_g1_model(default_scene_cfg()), clip
    )
    np.testing.assert_array_equal(again.observations, rollout.observations)  # no obs noise
    np.testing.assert_array_equal(again.robot_qpos, rollout.robot_qpos)


def _metadata(clip: MotionClip) -> dict:
    return deployment_metadata(
        task_cfg=default_task_cfg(),
        clip_id="short.npz",
        clip_sha256=clip.sha256,
        checkpoint_iteration=7,
        checkpoint_weights="policy_average",
        git={"commit": "abc123", "dirty": False},
    )


@pytest.mark.slow
def test_export_matches_torch_and_carries_the_deployment_metadata(
    actor: Actor, clip: MotionClip, rollout: Rollout, tmp_path: Path
) -> None:
    path = tmp_path / "policy.onnx"
    result = export_actor(actor, path, metadata=_metadata(clip), observations=rollout.observations)
    assert result.max_abs_error <= TOLERANCE and result.batch_rows == FRAMES
    model = onnx.load(path)
    onnx.checker.check_model(model)
    meta = {p.key: json.loads(p.value) for p in model.metadata_props}
    assert meta == json.loads(json.dumps(_metadata(clip)))
    assert meta["joint_names"] == list(JOINT_NAMES)
    assert meta["default_joint_pos"] == list(DEFAULT_JOINT_POS)
    assert (meta["joint_stiffness"], meta["joint_damping"]) == (list(JOINT_KP), list(JOINT_KV))
    assert meta["observation_layout"] == [
        {"name": n, "offset": o, "size": s} for n, o, s in ACTOR_OBS_LAYOUT
    ]
    assert (meta["action_scale"], meta["control_dt"]) == (2.0, pytest.approx(0.02))
    assert (meta["clip_sha256"], meta["project_commit"]) == (clip.sha256, "abc123")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,), (out,) = session.get_inputs(), session.get_outputs()
    assert (inp.name, out.name) == (INPUT_NAME, OUTPUT_NAME)
    assert isinstance(inp.shape[0], str) and inp.shape[1] == 160  # dynamic batch
    for rows in (rollout.observations[:1], rollout.observations):
        got = session.run(None, {INPUT_NAME: rows})[0]
        with torch.no_grad():
            want = DeployedActor(actor)(torch.from_numpy(rows)).numpy()
        assert np.abs(got - want).max() <= TOLERANCE


@pytest.mark.slow
def test_export_is_deterministic_and_a_mismatch_writes_nothing(
    actor: Actor, clip: MotionClip, rollout: Rollout, tmp_path: Path
) -> None:
    first, second = tmp_path / "a.onnx", tmp_path / "b.onnx"
    for path in (first, second):
        export_actor(actor, path, metadata=_metadata(clip), observations=rollout.observations)
    assert first.read_bytes() == second.read_bytes()
    strict = tmp_path / "strict.onnx"
    with pytest.raises(ExportMismatch, match=r"max \|onnxruntime - torch\| = .* exceeds"):
        export_actor(
            actor, strict, metadata=_metadata(clip), observations=rollout.observations,
            tolerance=1e-12,
        )  # fmt: skip
    assert sorted(tmp_path.iterdir()) == sorted([first, second])  # no strict.onnx, no temp file
