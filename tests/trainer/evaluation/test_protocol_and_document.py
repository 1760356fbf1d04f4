"""Start frames, episode lengths, the evaluation.json document (its per-joint errors
optional), its best point, the run summary section and the Eval/* scalars."""

from __future__ import annotations

import math

import numpy as np
import pytest

from contracts import rundir
from contracts.schemas import validate
from harness.metrics.registry import load_registry
from trainer.config.evaluation import EvalCfg
from trainer.evaluation.document import (
    EVAL_TAGS,
    best_point,
    build_document,
    eval_scalars,
    motion_record,
    summary_section,
)
from trainer.evaluation.metrics import JOINT_ERROR_FIELD, METRIC_NAMES
from trainer.evaluation.protocol import (
    Protocol,
    clip_start_frames,
    per_clip,
    possible_steps,
    start_frames,
)
from trainer.sim.scene import JOINT_NAMES

SECTION = {"$ref": "evaluation.v1.json#/$defs/summary_section"}
PROTOCOL = Protocol(4, 2, 500, "mujoco", "cpu")
MOTION = motion_record("motions/g1/synthetic_dance.npz", "a" * 64, 500, 50.0)


def test_uniform_start_i_of_n_is_floor_i_times_t_minus_one_over_n():
    assert start_frames("uniform", 4, 500) == [0, 124, 249, 374]
    assert start_frames("uniform", 3, 2) == [0, 0, 0]  # a 2-frame clip starts at frame 0 only
    assert start_frames("frame0", 3, 500) == [0, 0, 0]
    assert max(start_frames("uniform", 1000, 500)) == 498  # never the last frame
    with pytest.raises(ValueError, match="unknown start mode"):
        start_frames("random", 2, 500)


def test_possible_steps_end_at_the_time_limit_or_the_own_clips_last_frame():
    ends = np.array([100, 300])  # clips [0, 100) and [100, 300)
    assert possible_steps([0, 90, 100, 250], ends, 50) == [50, 10, 50, 50]
    assert possible_steps([0, 90, 100, 250], ends, 500) == [100, 10, 200, 50]


def test_eval_config_nulls_scale_with_num_envs():
    cfg = EvalCfg(enabled=True, uniform_episodes=None, frame0_episodes=None)
    assert cfg.episodes(1024) == (128, 16)
    assert cfg.episodes(16) == (16, 2)
    assert cfg.episodes(4) == (4, 1)
    assert EvalCfg(enabled=True, uniform_episodes=7, frame0_episodes=3).episodes(4) == (7, 3)
    with pytest.raises(ValueError, match=r"eval.frame0_episodes=0 must be null or an int"):
        EvalCfg(enabled=True, uniform_episodes=None, frame0_episodes=0)


def _metrics(success, r_mpkpe) -> dict:
    values = dict.fromkeys(METRIC_NAMES, 1.0) | {"success_rate": success, "r_mpkpe_mm": r_mpkpe}
    return {"episodes": 4, **values}


def _point(iteration: int, success, r_mpkpe, source="checkpoint") -> dict:
    return {
        "iteration": iteration,
        "env_steps": iteration * 100,
        "source": source,
        "checkpoint": f"model_{iteration}.pt",
        "eval_wall_time_s": 0.5,
        "modes": {"frame0": _metrics(1.0, 5.0), "uniform": _metrics(success, r_mpkpe)},
    }


def test_best_is_the_highest_uniform_success_then_the_lowest_r_mpkpe():
    points = [_point(1, 0.9, 5.0), _point(2, 1.0, 12.0), _point(3, 1.0, 11.0), _point(4, None, 1.0)]
    assert best_point(points)["iteration"] == 3
    assert best_point([_point(5, 1.0, 10.0), _point(6, 1.0, 10.0)])["iteration"] == 5
    assert best_point([_point(1, None, 3.0), _point(2, 1.0, None)]) is None


def test_the_document_is_schema_valid_ordered_and_round_trips(tmp_path):
    doc = build_document(PROTOCOL, MOTION, [_point(20, 1.0, 9.0, "final"), _point(10, 1.0, 8.0)])
    assert [p["iteration"] for p in doc["points"]] == [10, 20]
    assert doc["final_iteration"] == 20 and doc["best"]["iteration"] == 10
    assert validate(doc, "evaluation.v1.json") == []
    path = rundir.write(tmp_path / "evaluation.json", doc)
    assert rundir.read(path) == doc
    assert build_document(PROTOCOL, MOTION, [_point(10, 1.0, 8.0)])["final_iteration"] is None


def test_per_joint_errors_are_optional_and_exactly_the_29_joints():
    point = _point(10, 1.0, 8.0, "final")
    doc = build_document(PROTOCOL, MOTION, [point])
    assert validate(doc, "evaluation.v1.json") == []  # written before them: still valid
    uniform = doc["points"][0]["modes"]["uniform"]
    uniform[JOINT_ERROR_FIELD] = dict.fromkeys(JOINT_NAMES, 0.1)
    doc["points"][0]["modes"]["frame0"][JOINT_ERROR_FIELD] = None  # a diverged mode
    assert validate(doc, "evaluation.v1.json") == []
    section = summary_section(doc=doc, path="evaluation.json")
    assert validate(section, "evaluation.v1.json", schema=SECTION) == []
    for broken in (
        dict.fromkeys(JOINT_NAMES[:-1], 0.1),  # a joint missing
        dict.fromkeys(JOINT_NAMES, 0.1) | {"left_toe_joint": 0.1},  # one too many
        {**dict.fromkeys(JOINT_NAMES[:-1], 0.1), "waist_yaw": 0.1},  # not a joint name
        dict.fromkeys(JOINT_NAMES, "0.1"),  # not a number
    ):
        uniform[JOINT_ERROR_FIELD] = broken
        assert validate(doc, "evaluation.v1.json") != [], broken


def test_an_invalid_document_is_never_written(tmp_path):
    doc = build_document(PROTOCOL, MOTION, [_point(10, 1.5, 8.0, "final")])  # success > 1
    with pytest.raises(ValueError, match="evaluation.v1.json"):
        rundir.write(tmp_path / "evaluation.json", doc)
    assert not (tmp_path / "evaluation.json").exists()
    with pytest.raises(ValueError, match="repeat an iteration"):
        build_document(PROTOCOL, MOTION, [_point(10, 1.0, 8.0), _point(10, 1.0, 8.0)])


def test_summary_sections_validate_and_say_what_happened():
    doc = build_document(PROTOCOL, MOTION, [_point(10, 1.0, 8.0), _point(20, 0.5, 9.0, "final")])
    evaluated = summary_section(doc=doc, path="evaluation.json", wall_time_s=3.25)
    assert evaluated["status"] == "evaluated" and evaluated["points"] == 2
    assert evaluated["final"]["iteration"] == 20 and evaluated["best"]["iteration"] == 10
    diverged_doc = build_document(PROTOCOL, MOTION, [_point(20, None, None, "final")])
    diverged = summary_section(doc=diverged_doc, path="evaluation.json")
    assert diverged["status"] == "failed" and "diverged" in diverged["reason"]
    assert diverged["final"]["iteration"] == 20 and diverged["best"] is None
    failed = summary_section(failure="BackendFailure: mjwarp contact overflow")
    skipped = summary_section(skipped="disabled by eval.enabled=false")
    for section in (evaluated, diverged, failed, skipped):
        assert validate(section, "evaluation.v1.json", schema=SECTION) == [], section
    assert (failed["status"], skipped["status"]) == ("failed", "skipped")


def test_eval_scalars_are_registered_and_a_null_metric_is_written_as_nan():
    scalars = eval_scalars(_point(10, None, 8.0))
    assert set(scalars) == set(EVAL_TAGS) and len(EVAL_TAGS) == 24
    registry = load_registry()
    assert all(registry.is_registered(tag) for tag in scalars)
    assert math.isnan(scalars["Eval/uniform_success_rate"])
    assert scalars["Eval/uniform_r_mpkpe_mm"] == 8.0


def test_a_clip_set_gets_its_own_episodes_per_clip_and_none_on_a_last_frame():
    ends = np.array([40, 80, 200])
    protocol = Protocol(16, 2, 500, "mujoco", "cpu")
    episodes = protocol.episodes(200, ends)
    frame0 = [(ep.clip, ep.frame) for ep in episodes if ep.mode == "frame0"]
    assert frame0 == [(0, 0), (1, 40), (2, 80)]  # every clip starts at its own frame 0
    uniform = [ep for ep in episodes if ep.mode == "uniform"]
    assert [sum(ep.clip == c for ep in uniform) for c in range(3)] == [6, 6, 6]
    last = {int(e) - 1 for e in ends}
    assert all(ep.frame not in last for ep in episodes)  # no one-step "success"
    assert all(ep.possible >= 2 for ep in episodes)
    assert clip_start_frames("uniform", 4, np.array([40, 80])) == [
        (0, 0),
        (0, 19),
        (1, 40),
        (1, 59),
    ]
    assert per_clip(16, 48) == 1 and per_clip(128, 48) == 3
