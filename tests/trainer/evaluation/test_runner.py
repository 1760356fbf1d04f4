"""The evaluator end to end on the CPU backend: replay scores zero, an offset scores itself
(a root offset in the body errors, a joint offset in that joint's error alone), rollouts are
deterministic and independent of how episodes are packed, divergence is null."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from rich.console import Console

from contracts.schemas import validate
from trainer.algo.networks import Actor
from trainer.evaluation.cli import render
from trainer.evaluation.document import build_document, motion_record
from trainer.evaluation.metrics import FAILURE_FRAMES_FIELD, JOINT_ERROR_FIELD
from trainer.evaluation.policy import PolicyPoint
from trainer.evaluation.protocol import Protocol, possible_steps, start_frames
from trainer.evaluation.runner import evaluate_points
from trainer.sim.scene import JOINT_NAMES

JOINT, TURN = "left_wrist_yaw_joint", 0.25
"""The joint the offset tests turn, and by how much (rad): its tracked body (the left wrist's
link) turns about its own origin, so no body position moves and no termination fires."""


class ConstantPolicy:
    """Stands in for an actor: the same action for every row (NaN to test divergence)."""

    def __init__(self, value: float) -> None:
        self.value = value

    def deterministic(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.full((obs.shape[0], 29), self.value)


def _point(iteration: int, actor, source: str = "checkpoint") -> PolicyPoint:
    return PolicyPoint(iteration, 10 * iteration, source, f"model_{iteration}.pt", None, actor)


def _protocol(env, uniform: int = 6, frame0: int = 2) -> Protocol:
    return Protocol(uniform, frame0, env.max_episode_steps, "mujoco", "cpu")


def _assert_joint_mean_identity(metrics: dict) -> None:
    """The per-joint errors are floats keyed by the model's joint names, in its order, and
    their mean is the mean joint error (the same steps and episodes, per joint)."""
    by_joint = metrics[JOINT_ERROR_FIELD]
    assert list(by_joint) == list(JOINT_NAMES)
    assert all(type(v) is float for v in by_joint.values())
    mean = sum(by_joint.values()) / len(by_joint)
    assert mean == pytest.approx(metrics["joint_pos_error_rad"], rel=1e-6, abs=1e-9)


def test_exact_replay_scores_zero_error_and_full_success(make_replay_env, short_clip):
    env = make_replay_env(8)
    protocol = _protocol(env)
    (record,) = evaluate_points(env, [_point(5, ConstantPolicy(0.0), "final")], protocol)
    for mode in ("frame0", "uniform"):
        m = record["modes"][mode]
        assert m["success_rate"] == 1.0 and m["completed_fraction"] == 1.0, mode
        for name in ("mpkpe_mm", "anchor_pos_error_mm"):
            assert m[name] < 0.05, (mode, name, m[name])  # float32 forward kinematics
        # Re-anchored on the pre-step robot (mjlab's pairing), an exact replay still scores
        # the root's travel of one 20 ms step: about 1 mm on this slow clip.
        for name in ("r_mpkpe_mm", "end_effector_pos_error_mm"):
            assert m[name] < 2.0, (mode, name, m[name])
        assert m["joint_pos_error_rad"] < 1e-6 and m["anchor_ori_error_rad"] < 1e-3
        assert max(m[JOINT_ERROR_FIELD].values()) < 1e-6, m[JOINT_ERROR_FIELD]
        _assert_joint_mean_identity(m)
    frames = start_frames("uniform", 6, short_clip.num_frames)
    lengths = possible_steps(frames, short_clip.clip_ends, env.max_episode_steps)
    assert max(lengths) == env.max_episode_steps == 50 and min(lengths) < 50  # both ends
    assert record["modes"]["uniform"]["mean_episode_steps"] == pytest.approx(np.mean(lengths))
    assert record["modes"]["frame0"]["mean_episode_steps"] == 50


def test_a_constant_root_offset_scores_that_offset(make_replay_env):
    env = make_replay_env(8, offset=(0.03, -0.04, 0.0))  # 50 mm, horizontal
    (record,) = evaluate_points(env, [_point(1, ConstantPolicy(0.0))], _protocol(env))
    m = record["modes"]["uniform"]
    for name in ("mpkpe_mm", "anchor_pos_error_mm"):
        assert m[name] == pytest.approx(50.0, abs=0.05), name
    # Re-anchored, the offset counts only on an episode's first step (it starts on the
    # reference, then jumps 50 mm): under 3 mm over episodes of 10-50 steps.
    for name in ("r_mpkpe_mm", "end_effector_pos_error_mm"):
        assert m[name] < 3.0, name
    assert m["success_rate"] == 1.0  # terminations test heights only


def test_one_joint_offset_scores_that_joint_alone(make_replay_env):
    env = make_replay_env(8, joint_offset={JOINT: TURN})
    (record,) = evaluate_points(env, [_point(1, ConstantPolicy(0.0))], _protocol(env))
    for mode, m in record["modes"].items():
        by_joint = m[JOINT_ERROR_FIELD]
        assert by_joint[JOINT] == pytest.approx(TURN, abs=1e-6), mode
        others = [v for name, v in by_joint.items() if name != JOINT]
        assert len(others) == 28 and max(others) < 1e-6, (mode, by_joint)
        assert m["joint_pos_error_rad"] == pytest.approx(TURN / 29, abs=1e-7)
        _assert_joint_mean_identity(m)
        assert m["success_rate"] == 1.0 and m["mpkpe_mm"] < 0.05  # no body moved


@pytest.mark.slow  # two full evaluations
def test_two_evaluations_give_identical_numbers(make_g1_env):
    env = make_g1_env(num_envs=6, num_threads=1, compile_backend=None)
    torch.manual_seed(3)
    points = [_point(1, Actor(160, 29, 32, 1).eval()), _point(2, Actor(160, 29, 32, 1).eval())]
    protocol = _protocol(env, uniform=4, frame0=2)
    first = evaluate_points(env, points, protocol)
    env.step(torch.zeros(6, 29))  # training-style steps in between change nothing
    second = evaluate_points(env, points, protocol)
    strip = [{**r, "eval_wall_time_s": 0} for r in first]
    assert strip == [{**r, "eval_wall_time_s": 0} for r in second]


def _flat(metrics: dict) -> dict:
    """A mode's metrics with the per-joint errors as ``field/joint`` keys (for approx; the
    failure frames are integers, compared exactly apart)."""
    by_joint = metrics[JOINT_ERROR_FIELD]
    flat = {k: v for k, v in metrics.items() if k not in (JOINT_ERROR_FIELD, FAILURE_FRAMES_FIELD)}
    return flat | {f"{JOINT_ERROR_FIELD}/{name}": v for name, v in by_joint.items()}


def test_packing_episodes_into_more_rollouts_changes_no_number(make_replay_env):
    points = [_point(k, ConstantPolicy(0.0)) for k in (1, 2, 3)]
    wide, narrow = make_replay_env(24, offset=(0.01, 0, 0)), make_replay_env(5, offset=(0.01, 0, 0))
    a = evaluate_points(wide, points, _protocol(wide))  # one rollout
    b = evaluate_points(narrow, points, _protocol(narrow))  # five, points split across them
    for wide_record, narrow_record in zip(a, b, strict=True):
        for mode, metrics in wide_record["modes"].items():  # SIMD tails differ by row count
            narrow_metrics = _flat(narrow_record["modes"][mode])
            assert narrow_metrics == pytest.approx(_flat(metrics), rel=1e-7, abs=1e-9)
            failed = narrow_record["modes"][mode][FAILURE_FRAMES_FIELD]
            assert failed == metrics[FAILURE_FRAMES_FIELD]
    assert [r["iteration"] for r in b] == [1, 2, 3]


def test_points_are_reported_as_soon_as_their_last_rollout_ends(make_replay_env):
    env = make_replay_env(8)
    seen: list[int] = []
    points = [_point(k, ConstantPolicy(0.0)) for k in (10, 20, 30)]
    records = evaluate_points(
        env, points, _protocol(env), on_point=lambda r: seen.append(r["iteration"])
    )
    assert seen == [10, 20, 30] == [r["iteration"] for r in records]
    assert sum(r["eval_wall_time_s"] for r in records) > 0


def test_a_policy_that_outputs_nan_gets_null_metrics_not_a_crash(make_g1_env, g1_clip):
    env = make_g1_env(num_envs=4, num_threads=1, compile_backend=None)
    good = Actor(160, 29, 32, 1).eval()
    records = evaluate_points(
        env, [_point(1, ConstantPolicy(math.nan)), _point(2, good, "final")], _protocol(env, 2, 1)
    )
    bad, fine = (r["modes"] for r in records)
    for mode in ("frame0", "uniform"):
        frames = bad[mode].pop(FAILURE_FRAMES_FIELD)  # where they ended is still known
        assert all(type(f) is int for f in frames)
        assert set(bad[mode].values()) == {bad[mode]["episodes"], None}, bad[mode]
        assert bad[mode][JOINT_ERROR_FIELD] is None
        assert fine[mode]["success_rate"] is not None
        assert fine[mode]["joint_pos_error_rad"] > 0.01  # an untrained actor, real physics
        _assert_joint_mean_identity(fine[mode])
    doc = build_document(
        _protocol(env, 2, 1), motion_record("synthetic", g1_clip.sha256, 500, 50.0), records
    )
    assert validate(doc, "evaluation.v1.json") == []
    assert doc["best"]["iteration"] == 2 and doc["final_iteration"] == 2


def test_failed_episodes_are_placed_on_the_frame_they_ended(make_replay_env, short_clip):
    """From frame 40 on the replayed robot floats 0.5 m above the reference, so every episode
    fails where it first meets frame 40 or later: at that frame or the next (which of the
    task's terminations fires first, and when, is the task's business, not the record's)."""
    env = make_replay_env(8, offset=(0.0, 0.0, 0.5), offset_from=40)
    protocol = _protocol(env)
    (record,) = evaluate_points(env, [_point(1, ConstantPolicy(0.0), "final")], protocol)
    uniform, frame0 = record["modes"]["uniform"], record["modes"]["frame0"]
    starts = start_frames("uniform", 6, short_clip.num_frames)
    assert starts == [0, 13, 26, 39, 52, 65]  # the ones before 40 reach it within 50 steps
    assert uniform["success_rate"] == 0.0 and frame0["success_rate"] == 0.0
    for mode, firsts in ((uniform, starts), (frame0, [0, 0])):
        onsets = sorted(max(40, start) for start in firsts)
        frames = mode[FAILURE_FRAMES_FIELD]
        assert len(frames) == len(onsets)
        assert all(onset <= f <= onset + 1 for f, onset in zip(frames, onsets, strict=True))
    document = build_document(
        protocol, motion_record("short", short_clip.sha256, short_clip.num_frames, 50.0), [record]
    )
    assert validate(document, "evaluation.v1.json") == []
    console = Console(record=True, width=100)
    render(document, console)
    text = console.export_text()
    assert "where the failed episodes ended" in text and "clip time (most failures" in text
    cells = [line.replace("│", " ").split() for line in text.splitlines()]
    assert ["frame0", "2", "of", "2", "0.8", "s", "×2"] in cells  # frame 40 or 41 at 50 fps
    assert ["uniform", "6", "of", "6", "0.8–1.3", "s", "×6"] in cells  # 0.24 s gaps: one span


def test_an_interrupt_abandons_the_evaluation(make_replay_env):
    env = make_replay_env(4)

    def stop() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        evaluate_points(env, [_point(1, ConstantPolicy(0.0))], _protocol(env), interrupt=stop)
    assert env.observation_noise is True  # the evaluation mode was left cleanly


def test_a_clip_set_is_evaluated_clip_by_clip_and_summarised(make_replay_env, two_clip_set):
    env = make_replay_env(
        8, offset=(0.03, -0.04, 0.0), clip=two_clip_set, offset_from=40, joint_offset={JOINT: TURN}
    )
    (record,) = evaluate_points(env, [_point(3, ConstantPolicy(0.0))], _protocol(env))
    first, second = record["clips"]
    assert (first["clip"], second["clip"]) == ("first", "second")
    for clip in (first, second):
        assert (
            clip["modes"]["uniform"]["episodes"] == 3 and clip["modes"]["frame0"]["episodes"] == 1
        )
        assert clip["modes"]["uniform"]["success_rate"] == 1.0
        for metrics in clip["modes"].values():
            _assert_joint_mean_identity(metrics)
    assert max(first["modes"]["uniform"][JOINT_ERROR_FIELD].values()) < 1e-6
    # Failure frames are clip frames, so each clip has its own; the aggregate has none.
    assert first["modes"]["uniform"][FAILURE_FRAMES_FIELD] == []
    assert second["modes"]["frame0"][FAILURE_FRAMES_FIELD] == []
    assert FAILURE_FRAMES_FIELD not in record["modes"]["uniform"]
    assert second["modes"]["uniform"][JOINT_ERROR_FIELD][JOINT] == pytest.approx(TURN, abs=1e-6)
    # The whole evaluation's per-joint error is the mean over both clips' episodes.
    overall = record["modes"]["uniform"][JOINT_ERROR_FIELD]
    assert overall[JOINT] == pytest.approx(TURN / 2, abs=1e-6)
    assert first["modes"]["uniform"]["mpkpe_mm"] < 0.05
    assert second["modes"]["uniform"]["mpkpe_mm"] == pytest.approx(50.0, abs=0.05)
    summary = record["clip_summary"]
    assert summary["mpkpe_mm"]["worst_clip"] == "second"
    assert summary["mpkpe_mm"]["worst"] == pytest.approx(50.0, abs=0.05)
    assert summary["mpkpe_mm"]["mean"] == pytest.approx(25.0, abs=0.05)
    assert summary["success_rate"]["worst"] == 1.0
    assert record["modes"]["uniform"]["episodes"] == 6
    document = build_document(
        _protocol(env), motion_record("set", "0" * 64, two_clip_set.num_frames, 50), [record]
    )
    assert validate(document, "evaluation.v1.json") == []
    console = Console(record=True, width=120)
    render(document, console)
    text = console.export_text()
    clips = text[text.index("clips (uniform starts") : text.index("over 2 clips")]
    rows = [line.split()[0] for line in clips.splitlines() if line.split()[1:2] == ["3"]]
    assert rows == ["second", "first"]  # worst first (R-MPKPE ties, then MPKPE)
    assert "over 2 clips (uniform starts)" in text and "joint velocity error" in text
    worst = text[text.index("worst joints (mean absolute") : text.index("clips (uniform starts")]
    rank_1 = next(line for line in worst.splitlines() if "left_wrist_yaw" in line)
    assert rank_1.replace("│", " ").split() == ["1", *["left_wrist_yaw", "0.125"] * 2]
    by_clip = text[text.index("worst joints by clip") :].splitlines()
    (second_row,) = [line for line in by_clip if line.startswith("second ")]
    assert "left_wrist_yaw 0.250, left_hip_pitch 0.000, left_hip_roll 0.000" in second_row

    # At 80 columns a library's clip names stay whole (they were cut to "J_ShortD…").
    long = {"first": "J_ShortDance13_SingleLadies", "second": "B_CrazyChopsKarate_Long"}
    for clip in document["points"][0]["clips"]:
        clip["clip"] = long[clip["clip"]]
    for stats in document["points"][0]["clip_summary"].values():
        if isinstance(stats, dict):
            stats["worst_clip"] = long[stats["worst_clip"]]
    console = Console(record=True, width=80)
    render(document, console)
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in "".join(lines)
    joints = lines[next(i for i, line in enumerate(lines) if "worst joints by clip" in line) :]
    (row,) = [i for i, line in enumerate(joints) if line.startswith(f"{long['second']} ")]
    assert "left_wrist_yaw 0.250," in joints[row]  # the entries wrap whole, never mid-entry
    assert joints[row + 1].split() == ["left_hip_roll", "0.000"]
    assert sum(line.startswith(f"{long['second']} ") for line in lines) == 2  # clips, joints
    assert sum(line.rstrip().endswith(f" {long['second']}") for line in lines) >= 1  # worst
