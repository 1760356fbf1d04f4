"""The v1 metric registry: every docs/contracts.md §metric-schema tag, the open patterns, legacy prefixes, owners."""

from __future__ import annotations

import copy

import pytest

from contracts.jsonio import load_strict
from contracts.schemas import schema_path, validate
from harness.metrics.registry import (
    LEGACY_PREFIXES,
    is_legacy_tag,
    is_registered,
    load_registry,
    lookup,
)


def _expand(template: str, names: str) -> list[str]:
    return [template.format(n) for n in names.split(",")]


# docs/contracts.md §metric-schema table, written out by hand so a registry edit cannot silently drop a tag.
CONTRACT_TAGS = [
    "Train/iteration",
    "Train/mean_reward",
    "Train/mean_episode_length",
    "Episode/timeout_rate",
    "Train/reward_scale_std",
    *_expand("Train/replay_ingress_{}", "depth,occupancy,high_water"),
    "Train/replay_ingress_backpressure_wait_ms",
    "Train/replay_ingress_dropped_batches",
    *_expand("Loss/{}", "critic,actor,entropy,temperature"),
    "Policy/temperature",
    "Perf/total_fps",
    "Perf/iteration_time",
    "Perf/learning_time",
    *_expand(
        "Perf/learner_{}_ms",
        "collector_wait,inference,collector_release,replay_batch_wait,replay_sample,inference_h2d,inference_forward,inference_d2h",
    ),
    "Perf/replay_ingress_h2d_submit_ms",
    *_expand(
        "Perf/collector_{}_ms",
        "inference_request,learner_action_wait,env_step,transition_extract,replay_write,metrics_publish",
    ),
    *_expand(
        "Perf/collector_env_step_{}_ms",
        "action_validate,apply_action,action_backend,backend,update_state,reset_done",
    ),
    *_expand(
        "Perf/collector_inference_{}",
        "queue_depth,action_backlog,max_action_backlog,in_flight,max_in_flight,publication_lag,max_publication_lag",
    ),
]


# The fixed-protocol evaluation (docs/evaluation.md): every metric of both start modes.
EVAL_TAGS = [
    f"Eval/{mode}_{metric}"
    for mode in ("frame0", "uniform")
    for metric in (
        "success_rate",
        "completed_fraction",
        "mpkpe_mm",
        "r_mpkpe_mm",
        "joint_pos_error_rad",
        "anchor_pos_error_mm",
        "anchor_ori_error_rad",
        "end_effector_pos_error_mm",
        "joint_vel_error_rad_s",
        "end_effector_ori_error_rad",
        "mean_step_reward",
        "mean_episode_steps",
    )
]


# The learner's diagnostics of a late-run decline (docs/metrics.md, docs/flashsac.md).
LEARNER_DIAGNOSTIC_TAGS = [
    *_expand("Critic/{}", "q_mean,q_target_mean,batch_reward_scaled,return_estimate"),
    *_expand("Train/lr_{}", "actor,critic,temperature"),
    *_expand("Policy/obs_bn_{}", "mean_shift,var_shift"),
    *_expand("Train/reward_{}", "return_mean,return_abs_max,scale"),
    *_expand("Train/replay_{}", "sample_age,fill"),
    "Train/bf16",
]


def test_registry_holds_exactly_the_contract_and_evaluation_tags() -> None:
    expected = CONTRACT_TAGS + EVAL_TAGS + LEARNER_DIAGNOSTIC_TAGS
    assert sorted(load_registry().tags) == sorted(expected)
    assert len(CONTRACT_TAGS) == 46 and len(EVAL_TAGS) == 24


@pytest.mark.parametrize(
    "tag", ["reward/track_anchor_pos", "reward/action_rate_l2", "Loss/aux_bc", "Loss/aux_q.norm"]
)
def test_open_patterns_register_matching_tags(tag: str) -> None:
    assert is_registered(tag)


@pytest.mark.parametrize(
    "tag",
    [
        "reward/mean",
        "reward/mean_ep100",
        "reward/",
        "reward/a/b",
        "Loss/aux_",
        "Loss/critic2",
        "perf/iter_ms",
        "timing/learner_train_ms",
        "train/iteration",
        "Perf/iteration_time_ms",
        "Train/Iteration",
        "",
    ],
)
def test_unknown_tags_are_not_registered(tag: str) -> None:
    assert not is_registered(tag)


def test_pattern_exclusions_agree_with_their_regex() -> None:
    for pattern in load_registry().patterns:
        for name in pattern.excluded_names:
            assert not pattern.matches(pattern.prefix + name)
        assert pattern.matches(pattern.prefix + "x")


def test_legacy_prefixes_are_case_sensitive() -> None:
    assert LEGACY_PREFIXES == ("perf/", "timing/", "train/") == load_registry().legacy_prefixes
    assert is_legacy_tag("train/iteration") and not is_legacy_tag("Train/iteration")


def test_logger_owned_tags_are_not_learner_owned() -> None:
    # The learner metric map cannot inject logger-owned tags (docs/contracts.md §metric-schema).
    for tag in ("Train/iteration", "Perf/total_fps", "Perf/iteration_time", "Perf/learning_time"):
        assert lookup(tag).owner == "logger"
    assert all(
        lookup(t).owner == "collector" for t in CONTRACT_TAGS if t.startswith("Perf/collector_")
    )
    assert lookup("Loss/aux_x").owner == "learner" and lookup("reward/x").owner == "collector"


def test_time_tags_are_in_seconds() -> None:
    assert lookup("Perf/iteration_time").unit == "s" and lookup("Perf/learning_time").unit == "s"


def test_registry_file_validates_against_its_own_meta_schema() -> None:
    doc = load_strict(schema_path("metric_registry.v1.json"))
    assert validate(doc, "metric_registry.v1.json") == []
    bad = copy.deepcopy(doc)
    bad["tags"]["Perf/total_fps"]["owner"] = "env"
    bad["tags"]["Loss/new"] = {"owner": "learner", "unit": "u", "aggregation": "last"}
    paths = {v.path for v in validate(bad, "metric_registry.v1.json")}
    assert {"$.tags.Perf/total_fps.owner", "$.tags.Loss/new"} <= paths
