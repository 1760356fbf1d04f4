"""Step-5 semantics, the run-dir choice and the seed record."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from trainer.config.checks import check_semantics, resolve_log_dir
from trainer.config.errors import ConfigError
from trainer.config.loader import load_config
from trainer.config.schema import SeedInfo

ALGO, TASK = "flashsac", "g1_motion_tracking"
NOW = dt.datetime(2026, 11, 29, 8, 30, 5, tzinfo=dt.UTC)


def _check(sim: str, *overrides: str) -> None:
    check_semantics(load_config(ALGO, TASK, sim, list(overrides)))


@pytest.mark.parametrize("sim", ["mjwarp", "mujoco"])
def test_owner_defaults_pass(sim: str) -> None:
    _check(sim)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["training.inference_slot_capacity=0"],
            "training.inference_slot_capacity=0 must be in 1..16",
        ),
        (["training.inference_slot_capacity=17"], "must be in 1..16"),
        (["training.replay_ingress_depth=17"], "training.replay_ingress_depth=17 must be in 1..16"),
        (["training.replay_ingress_slot_rows=0"], "must be null or an int >= 1"),
        (
            ["algo.num_envs=1024", "training.replay_ingress_slot_rows=3"],
            "training.replay_ingress_slot_rows=3 must divide algo.num_envs=1024; use e.g. 2",
        ),
        (["training.collector_metrics_interval=0"], "must be in 1..10000"),
        (["training.collector_metrics_interval=10001"], "must be in 1..10000"),
        # closed sets are Literal fields: the loader rejects them naming the allowed values
        (
            ["training.cuda_process_sharing=nccl"],
            'training.cuda_process_sharing="nccl" must be one of "mps", null',
        ),
        (["algo.n_step=3"], "only algo.n_step=1 is implemented"),
        (["training.device=tpu"], 'training.device="tpu" must be one of "auto", "cpu", "cuda"'),
        (["training.env_steps_per_sync=2"], "lock-step"),
        (
            ["training.collector_stream_priority=high"],
            "training.collector_stream_priority=high applies to --sim mjwarp only",
        ),
        (
            ["training.collector_stream_priority=urgent"],
            'training.collector_stream_priority="urgent" must be one of "default", "high"',
        ),
        (
            ["training.collector_placement=thread", "training.cuda_process_sharing=mps"],
            "training.cuda_process_sharing=mps has no second process to share the GPU with",
        ),
        (
            ["training.collector_placement=fiber"],
            'training.collector_placement="fiber" must be one of "process", "thread"',
        ),
        (["training.log_interval=0"], "training.log_interval=0 must be >= 1"),
        (["training.motion_hub=always"], 'must be one of "auto", "skip", "require"'),
        (
            ["env.scene.model_file=robots/g1/other.xml"],
            "env.scene.model_file='robots/g1/other.xml' is not supported",
        ),
        (["algo.amp_dtype=fp16"], 'algo.amp_dtype="fp16" must be one of "auto", "bf16", "fp32"'),
        (["algo.batch_size=999999999"], "exceeds the replay capacity"),
        (["algo.num_envs=0"], "algo.num_envs=0 must be a positive integer"),
        (
            ["training.duration_seconds=0"],
            "training.duration_seconds=0 must be null or a number of seconds > 0",
        ),
        (["training.duration_seconds=-5"], "must be null or a number of seconds > 0"),
        (["training.duration_seconds=1e999"], "must be null or a number of seconds > 0"),
        (
            ["algo.max_iterations=null"],
            "algo.max_iterations=null needs a time budget; set training.duration_seconds=S",
        ),
    ],
)
def test_semantic_violation_is_a_config_error(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _check("mujoco", *overrides)
    assert message in str(info.value)


def test_cpu_device_cannot_drive_mjwarp() -> None:
    with pytest.raises(ConfigError, match="cannot run --sim mjwarp"):
        _check("mjwarp", "training.device=cpu")
    _check("mujoco", "training.device=cpu")


def test_slot_rows_dividing_num_envs_pass() -> None:
    _check("mujoco", "algo.num_envs=1024", "training.replay_ingress_slot_rows=256")


def _resolve(tmp_path: Path, *overrides: str, environ: dict[str, str] | None = None) -> Path:
    loaded = load_config(ALGO, TASK, "mujoco", list(overrides))
    return resolve_log_dir(loaded, now=NOW, cwd=tmp_path, environ=environ or {})


def test_default_log_dir_is_logs_algo_task_utc_stamp_sim(tmp_path: Path) -> None:
    path = _resolve(tmp_path)
    assert path == tmp_path / "logs" / ALGO / TASK / "2026-11-29T08-30-05Z_mujoco"
    assert not path.exists()
    path.mkdir(parents=True)
    assert _resolve(tmp_path).name == "2026-11-29T08-30-05Z_mujoco-1"  # stays fresh


def test_relative_log_dir_is_taken_from_cwd(tmp_path: Path) -> None:
    assert _resolve(tmp_path, "training.log_dir=runs/a") == tmp_path / "runs" / "a"


def test_log_dir_holding_only_the_soak_console_log_is_accepted(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "soak-console.log").write_text("started\n")
    assert _resolve(tmp_path, f"training.log_dir={run}") == run


@pytest.mark.parametrize("entry", ["run_config.json", "events.out.tfevents.1", ".hidden"])
def test_log_dir_holding_anything_else_is_rejected(tmp_path: Path, entry: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "soak-console.log").write_text("")
    (run / entry).write_text("{}")
    with pytest.raises(ConfigError, match=f"is not empty \\(holds {entry}\\)"):
        _resolve(tmp_path, f"training.log_dir={run}")


def test_log_dir_that_is_a_file_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError, match="exists and is not a directory"):
        _resolve(tmp_path, f"training.log_dir={tmp_path / 'f'}")


def test_soak_run_log_dir_env_is_used_when_log_dir_is_null(tmp_path: Path) -> None:
    run = tmp_path / "from-env"
    assert _resolve(tmp_path, environ={"G1SOAK_LOG_DIR": str(run)}) == run
    assert (
        _resolve(
            tmp_path, f"training.log_dir={tmp_path / 'x'}", environ={"G1SOAK_LOG_DIR": str(run)}
        )
        == tmp_path / "x"
    )


@pytest.mark.parametrize(
    ("configured", "overridden", "expected"),
    [
        (1, False, SeedInfo(configured_seed=1, configured_seed_source="config", effective_seed=1)),
        (7, True, SeedInfo(configured_seed=7, configured_seed_source="override", effective_seed=7)),
    ],
)
def test_configured_seed_is_used_and_its_source_recorded(
    configured: int, overridden: bool, expected: SeedInfo
) -> None:
    assert SeedInfo.resolve(configured, overridden=overridden, now_ns=123) == expected


def test_null_seed_is_generated_from_the_clock() -> None:
    a = SeedInfo.resolve(None, overridden=True, now_ns=1_700_000_000_123_456_789)
    b = SeedInfo.resolve(None, overridden=True, now_ns=1_700_000_000_123_457_789)
    assert a.configured_seed is None and a.configured_seed_source == "generated"
    assert 0 <= a.effective_seed < 2**31 and a.effective_seed != b.effective_seed


# --- training.resume_from ---------------------------------------------------------------


def _checkpoint(path: Path, iteration: int) -> Path:
    import torch

    from trainer.rundir.checkpoint import save_checkpoint

    path.mkdir(parents=True, exist_ok=True)
    return save_checkpoint(
        path, iteration=iteration, total_env_steps=64, learner_state={"w": torch.zeros(2)}
    )


def test_resume_from_defaults_to_null() -> None:
    assert load_config(ALGO, TASK, "mujoco").training.resume_from is None


def test_resume_from_a_checkpoint_with_iterations_left_passes(tmp_path: Path) -> None:
    ckpt = _checkpoint(tmp_path / "old", 4)
    _check("mujoco", f"training.resume_from={ckpt}", "algo.max_iterations=5")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{tmp}/nope/model_4.pt", "is not an existing file; pass an existing model_<iter>.pt"),
        ("{tmp}", "is a directory; pass one of its model_<iter>.pt files"),
        ('""', "training.resume_from='' is empty"),
    ],
    ids=["missing", "directory", "empty"],
)
def test_resume_from_that_is_not_a_file_is_a_config_error(
    tmp_path: Path, value: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _check("mujoco", f"training.resume_from={value.format(tmp=tmp_path)}")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("max_iterations", [3, 4])
def test_resume_from_at_or_past_max_iterations_is_a_config_error(
    tmp_path: Path, max_iterations: int
) -> None:
    ckpt = _checkpoint(tmp_path / "old", 4)
    with pytest.raises(ConfigError) as info:
        _check("mujoco", f"training.resume_from={ckpt}", f"algo.max_iterations={max_iterations}")
    assert f"is at iteration 4 but algo.max_iterations={max_iterations} is the total" in str(
        info.value
    )
    assert "raise algo.max_iterations above 4" in str(info.value)


def test_resume_from_an_unreadable_file_is_left_to_startup(tmp_path: Path) -> None:
    # Not a usage error: startup fails it closed with a learner_failure summary (exit 1).
    junk = tmp_path / "model_3.pt"
    junk.write_bytes(b"not a checkpoint")
    _check("mujoco", f"training.resume_from={junk}")


def test_resume_from_relative_path_is_taken_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _checkpoint(tmp_path / "old", 2)
    monkeypatch.chdir(tmp_path)
    _check("mujoco", "training.resume_from=old/model_2.pt")
    with pytest.raises(ConfigError, match=str(tmp_path / "old" / "model_9.pt")):
        _check("mujoco", "training.resume_from=old/model_9.pt")


@pytest.mark.parametrize(
    "overrides",
    [
        ["training.duration_seconds=600"],
        ["training.duration_seconds=0.5", "algo.max_iterations=null", "algo.lr_decay_steps=500000"],
        ["training.duration_seconds=1800", "algo.max_iterations=210000"],
    ],
)
def test_a_time_budget_with_or_without_an_iteration_cap_passes(overrides: list[str]) -> None:
    loaded = load_config(ALGO, TASK, "mujoco", overrides)
    check_semantics(loaded)
    assert loaded.training.duration_seconds == float(overrides[0].split("=")[1])


def test_resume_without_an_iteration_cap_always_has_iterations_left(tmp_path: Path) -> None:
    from trainer.config.checks import check_resume_from
    from trainer.rundir.checkpoint import save_checkpoint

    path = save_checkpoint(tmp_path, iteration=50, total_env_steps=400, learner_state={})
    check_resume_from(str(path), max_iterations=None, cwd=tmp_path)
