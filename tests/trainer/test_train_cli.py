"""`train` (docs/contracts.md §train): usage errors exit 2 writing nothing; preflight failures write
run_config.json plus a failed run_summary.json and exit 1; a passing preflight hands a
fully resolved RunContext to the runtime."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.jsonio import load_strict, write_json_atomic
from contracts.schemas import validate
from trainer import cli
from trainer.__main__ import dispatch
from trainer.config.schema import RunContext

OWNER = ["--algo", "flashsac", "--task", "g1_motion_tracking"]
REPO = Path(__file__).resolve().parents[2]
SMALL = [
    "algo.num_envs=16",
    "algo.batch_size=64",
    "algo.replay_buffer_n=8",
    "algo.learning_starts=4",
]
SYNTHETIC = "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz"
REMOVED = (
    "was removed (no alias): tensor execution is a runtime invariant and the device follows "
    "the backend data plane and the rank device; delete the key"
)
CLI_OWNED = "is selected by --algo/--task/--sim and declared by the owner; it cannot be overridden"


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--algo", "flashsac", "--task", "g1_motion_tracking"],
            "--algo, --task and --sim must be given together",
            id="no-sim",
        ),
        pytest.param(
            ["--sim", "mujoco"], "--algo, --task and --sim must be given together", id="sim-only"
        ),
        pytest.param(
            [*OWNER, "--sim", "isaac"],
            "available owners (algo/task/sim): flashsac/g1_motion_tracking/mjwarp",
            id="unknown-sim",
        ),
        pytest.param(
            ["--algo", "ppo", "--task", "g1_motion_tracking", "--sim", "mujoco"],
            "available owners",
            id="unknown-algo",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "env.tensor_runtime=torch"],
            f"env.tensor_runtime {REMOVED}",
            id="removed-key",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "env.tensor_runtime_device=cuda:0"],
            f"env.tensor_runtime_device {REMOVED}",
            id="removed-device-key",
        ),
        pytest.param([*OWNER, "--sim", "mujoco", "+algo.seed=3"], "leading '+'", id="plus-prefix"),
        pytest.param([*OWNER, "--sim", "mujoco", "~algo.seed"], "leading '~'", id="tilde-prefix"),
        pytest.param([*OWNER, "--sim", "mujoco", "algo.seed"], "is not KEY=VALUE", id="no-equals"),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "algo=sac"], f"'algo' {CLI_OWNED}", id="cli-owned-algo"
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "task=x"], f"'task' {CLI_OWNED}", id="cli-owned-task"
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "training.sim_backend=mjwarp"],
            f"'training.sim_backend' {CLI_OWNED}",
            id="cli-owned-backend",
        ),
        pytest.param(
            [*OWNER, "--sim", "mjwarp", "training.play_only=true"],
            f"'training.play_only' {CLI_OWNED}",
            id="cli-owned-play",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "algo.num_env=8"],
            "unknown config key 'algo.num_env'",
            id="unknown-key",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "algo.num_envs=1.5"],
            "has type float; expected int",
            id="float-for-int",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "algo.num_envs=true"],
            "has type bool; expected int",
            id="bool-for-int",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "training.inference_slot_capacity=17"],
            "must be in 1..16",
            id="slot-capacity",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "training.replay_ingress_depth=0"],
            "must be in 1..16",
            id="ingress-depth",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "training.replay_ingress_slot_rows=3"],
            "must divide algo.num_envs=2048",
            id="slot-rows",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "training.collector_metrics_interval=10001"],
            "must be in 1..10000",
            id="metrics-interval",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "training.cuda_process_sharing=nccl"],
            'training.cuda_process_sharing="nccl" must be one of "mps", null',
            id="sharing",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "algo.n_step=3"], "only algo.n_step=1", id="n-step"
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "algo.amp_dtype=fp16"],
            'algo.amp_dtype="fp16" must be one of "auto", "bf16", "fp32"',
            id="fp16",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "algo.batch_size=99999999"],
            "exceeds the replay capacity",
            id="batch-over-capacity",
        ),
        pytest.param(
            [*OWNER, "--sim", "mjwarp", "training.device=cpu"],
            "cannot run --sim mjwarp",
            id="mjwarp-on-cpu",
        ),
        pytest.param(
            [*OWNER, "--sim", "mujoco", "--bogus"], "No such option: --bogus", id="unknown-flag"
        ),
    ],
)
def test_usage_error_exits_2_with_one_error_line_and_writes_nothing(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_dir = tmp_path / "run"
    code = cli.main([*args, f"training.log_dir={log_dir}"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert len(_error_lines(captured.err)) == 1
    assert message in captured.err
    assert not log_dir.exists()
    assert not (tmp_path / "logs").exists()


def test_non_empty_log_dir_is_a_usage_error_and_is_left_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "model_10.pt").write_bytes(b"x")
    code = cli.main([*OWNER, "--sim", "mujoco", f"training.log_dir={run}"])
    err = capsys.readouterr().err
    assert code == 2 and len(_error_lines(err)) == 1 and "is not empty (holds model_10.pt)" in err
    assert sorted(p.name for p in run.iterdir()) == ["model_10.pt"]


def test_python_m_trainer_without_a_command_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert dispatch([]) == 2
    assert dispatch(["play"]) == 2
    assert len(_error_lines(capsys.readouterr().err)) == 2


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--algo" in out and "KEY=VALUE" in out


@pytest.mark.slow
def test_mjwarp_without_cuda_fails_preflight_with_a_failed_summary(tmp_path: Path) -> None:
    """The soak's launch form; CUDA_VISIBLE_DEVICES='' makes it fail on GPU hosts too."""
    run = tmp_path / "run"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "trainer", "train", *OWNER, "--sim", "mjwarp", *SMALL, SYNTHETIC, f"training.log_dir={run}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    errors = _error_lines(done.stderr)
    assert len(errors) == 1 and "--sim mjwarp needs CUDA" in errors[0]
    assert sorted(p.name for p in run.iterdir()) == ["run_config.json", "run_summary.json"]

    run_config = load_strict(run / "run_config.json")
    assert validate(run_config, "run_config.v1.json") == []
    assert run_config["run"]["sim_backend"] == "mjwarp"
    assert run_config["run"]["log_dir"] == str(run)
    assert run_config["run"]["devices"]["learner"] == "cuda:0"
    assert run_config["config"]["training"]["log_dir"] == str(run)
    assert run_config["config"]["training"]["collector_metrics_interval"] == 100
    assert run_config["overrides"] == [*SMALL, SYNTHETIC, f"training.log_dir={run}"]

    summary = load_strict(run / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    assert summary["status"] == "failed"
    assert (summary["algo"], summary["sim_backend"], summary["log_dir"]) == (
        "flashsac",
        "mjwarp",
        str(run),
    )
    assert (
        summary["configured_seed"],
        summary["configured_seed_source"],
        summary["effective_seed"],
    ) == (1, "config", 1)
    assert "--sim mjwarp needs CUDA" in summary["error"]
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert (shutdown["classification"], shutdown["owner"], shutdown["phase"]) == (
        "learner_failure", "learner", "startup/cuda_preflight",
    )  # fmt: skip
    assert summary["runtime_manifest"]["cuda_process_sharing"]["configured"] is None


@pytest.mark.slow
def test_unresolvable_motion_offline_fails_preflight_naming_the_offline_alternative(
    tmp_path: Path,
    isolated_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = tmp_path / "run"
    args = [*OWNER, "--sim", "mujoco", *SMALL, "training.device=cpu",
            "env.commands.motion.motion_file=motions/g1/not_a_clip.npz", f"training.log_dir={run}"]  # fmt: skip
    code = cli.main(args)
    err = capsys.readouterr().err
    assert code == 1
    assert len(_error_lines(err)) == 1
    assert "motion file 'motions/g1/not_a_clip.npz' not found" in err
    assert "hub download disabled by HF_HUB_OFFLINE" in err
    assert (
        "offline alternative: env.commands.motion.motion_file=motions/g1/synthetic_dance.npz" in err
    )
    summary = load_strict(run / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert (shutdown["classification"], shutdown["phase"]) == ("learner_failure", "startup/begin")
    assert shutdown["exception"]["type"] == "MotionError"
    assert validate(load_strict(run / "run_config.json"), "run_config.v1.json") == []


@pytest.fixture
def captured_run(monkeypatch: pytest.MonkeyPatch) -> list[RunContext]:
    """Replace the runtime with a recorder so a test sees the RunContext train hands over."""
    from trainer.runtime import learner_loop

    seen: list[RunContext] = []

    def fake_run_training(ctx: RunContext) -> int:
        seen.append(ctx)
        return 0

    monkeypatch.setattr(learner_loop, "run_training", fake_run_training)
    return seen


def test_passing_preflight_hands_a_resolved_run_context_to_the_runtime(
    tmp_path: Path,
    isolated_cache: Path,
    captured_run: list[RunContext],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("G1SOAK_LOG_DIR", raising=False)
    code = cli.main([*OWNER, "--sim", "mujoco", *SMALL, SYNTHETIC, "training.device=cpu", "algo.seed=7",
                     "training.replay_ingress_slot_rows=8"])  # fmt: skip
    assert code == 0
    (ctx,) = captured_run
    runs = list((tmp_path / "logs" / "flashsac" / "g1_motion_tracking").iterdir())
    assert [ctx.run_dir] == runs and ctx.run_dir.name.endswith("_mujoco")
    assert sorted(p.name for p in ctx.run_dir.iterdir()) == ["run_config.json"]
    assert (ctx.learner_device, ctx.collector_device, ctx.sim_backend) == ("cpu", "cpu", "mujoco")
    assert (ctx.configured_seed, ctx.configured_seed_source, ctx.effective_seed) == (
        7,
        "override",
        7,
    )
    assert ctx.training.log_dir == str(ctx.run_dir) and ctx.config["training"]["log_dir"] == str(
        ctx.run_dir
    )
    assert ctx.algo_cfg.num_envs == 16 and ctx.replay_ingress_slot_rows == 8
    assert ctx.motion_id == "motions/g1/synthetic_dance.npz" and ctx.motion_source == "generated"
    assert ctx.motion_path.is_file() and len(ctx.motion_sha256) == 64
    assert ctx.scene_xml.name == "scene_flat.xml" and ctx.scene_xml.is_file()
    assert (
        ctx.cuda_process_sharing["effective"] is None
        and ctx.memory_estimate_bytes > 16 * 8 * 930 * 4
    )
    run_config = load_strict(ctx.run_dir / "run_config.json")
    assert validate(run_config, "run_config.v1.json") == []
    assert run_config["run"]["configured_seed_source"] == "override"
    # evaluate reads the run config train wrote through the contract, schema-checked
    from contracts.errors import UsageError
    from trainer.evaluation.offline import resolve_target

    (ctx.run_dir / "model_1.pt").write_bytes(b"")
    target = resolve_target(ctx.run_dir)
    assert target.run_config == {
        "algo": "flashsac", "task": "g1_motion_tracking", "sim": "mujoco",
        "overrides": run_config["overrides"],
    }  # fmt: skip
    del run_config["run"]["hostname"]
    write_json_atomic(ctx.run_dir / "run_config.json", run_config)
    with pytest.raises(UsageError, match=r"not a run_config\.json written by train .*hostname"):
        resolve_target(ctx.run_dir)


def test_sigint_before_training_exits_130_with_an_external_cancellation_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted_preflight(*args: object, **kwargs: object) -> None:
        kwargs["on_phase"]("startup/begin")  # type: ignore[operator]
        os.kill(os.getpid(), signal.SIGINT)
        raise AssertionError("the SIGINT handler should have cancelled the startup")

    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when pytest runs as a background job
    monkeypatch.setattr(cli, "run_preflight", interrupted_preflight)
    run = tmp_path / "run"
    code = cli.main([*OWNER, "--sim", "mujoco", *SMALL, f"training.log_dir={run}"])
    err = capsys.readouterr().err
    assert code == 128 + signal.SIGINT
    assert _error_lines(err) == ["error: cancelled: received SIGINT before training started"]
    summary = load_strict(run / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert (shutdown["classification"], shutdown["owner"], shutdown["phase"]) == (
        "external_cancellation", "external", "startup/begin",
    )  # fmt: skip
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored


def _mujoco_args(run: Path) -> list[str]:
    return [*OWNER, "--sim", "mujoco", *SMALL, SYNTHETIC, "training.device=cpu",
            f"training.log_dir={run}"]  # fmt: skip


def test_a_missing_schema_is_a_preflight_error_with_a_failed_summary(
    tmp_path: Path,
    schema_dir: Path,
    captured_run: list[RunContext],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """evaluation.v1.json is needed only late in a run, and run_summary.v1.json $refs it: its
    absence must stop the run up front, named, instead of at the first evaluation."""
    (schema_dir / "evaluation.v1.json").unlink()
    run = tmp_path / "run"
    code = cli.main(_mujoco_args(run))
    errors = _error_lines(capsys.readouterr().err)
    assert code == 1 and not captured_run
    assert len(errors) == 1
    assert errors[0] == (
        f"error: preflight failed (startup/begin): schema 'run_summary.v1.json' in {schema_dir}: "
        "$ref 'evaluation.v1.json#/$defs/summary_section' does not resolve (Unresolvable); "
        f"restore {schema_dir} from this checkout (git checkout -- schemas/)"
    )
    # Without a usable summary schema nothing unvalidated is written.
    assert not (run / "run_summary.json").exists()


def test_without_the_summary_schema_preflight_fails_and_writes_nothing_unvalidated(
    tmp_path: Path,
    schema_dir: Path,
    captured_run: list[RunContext],
    capsys: pytest.CaptureFixture[str],
) -> None:
    (schema_dir / "run_summary.v1.json").unlink()
    run = tmp_path / "run"
    code = cli.main(_mujoco_args(run))
    err = capsys.readouterr().err
    assert code == 1 and not captured_run
    (line,) = _error_lines(err)
    assert line.startswith(
        "error: preflight failed (startup/begin): unknown schema 'run_summary.v1.json'"
    )
    assert f"warning: cannot write run_summary.json in {run}: unknown schema" in err
    assert sorted(p.name for p in run.iterdir()) == ["run_config.json"]


def test_schemas_removed_after_preflight_still_give_a_valid_summary(
    tmp_path: Path, isolated_cache: Path, schema_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout during a long run replaces schemas/: the run's last writes (a completed or
    a failed summary in finalize/logger_finish) must still validate and land."""
    import shutil

    from tests.harness.schemas.builders import make_completed_summary
    from trainer.rundir.summary import (
        RunFailure,
        RuntimeRecord,
        write_failed_summary,
        write_summary,
    )
    from trainer.runtime import learner_loop

    written: list[dict] = []

    def run_training_after_a_checkout(ctx: RunContext) -> int:
        shutil.rmtree(schema_dir)  # the files are gone for the rest of the run
        written.append(write_summary(ctx.run_dir, make_completed_summary(str(ctx.run_dir))))
        failure = RunFailure(
            classification="learner_failure", owner="learner", phase="finalize/logger_finish",
            exception=RuntimeError("logger flush failed"),
        )  # fmt: skip
        runtime = RuntimeRecord(learner_device=ctx.learner_device)
        written.append(write_failed_summary(ctx.identity, failure, runtime=runtime))
        return 1

    monkeypatch.setattr(learner_loop, "run_training", run_training_after_a_checkout)
    run = tmp_path / "run"
    assert cli.main(_mujoco_args(run)) == 1
    assert not schema_dir.exists()
    completed, failed = written
    assert completed["status"] == "completed"
    shutdown = failed["runtime_manifest"]["shutdown"]
    assert (failed["status"], shutdown["phase"], failed["error"]) == (
        "failed", "finalize/logger_finish", "logger flush failed",
    )  # fmt: skip
    assert shutdown["cleanup"]["errors"] == []  # the full form, not the SummaryInvalid fallback
    assert load_strict(run / "run_summary.json") == failed
    assert validate(failed, "run_summary.v1.json") == []
