"""The learner profile's neighbour env (trainer.bench.env_beside): a real spawned process that
steps the CPU task env, its rate, and how it fails when it dies before or during a measurement."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from contracts.jsonio import load_strict
from contracts.schemas import validate
from tests.trainer.test_learner_profile import TINY
from trainer.bench.env_beside import EnvBeside, EnvBesideError, EnvBesideSpec
from trainer.bench.learner_profile import cli

pytestmark = pytest.mark.slow

CPU_NEIGHBOUR = EnvBesideSpec(sim="mujoco", num_envs=2, device="cpu", warmup=1)


def test_a_profile_beside_an_env_records_the_neighbour_and_its_rate(tmp_path: Path, capsys) -> None:
    out = tmp_path / "profile.json"
    args = [*TINY, "--device", "cpu", "--variants", "legacy"]
    assert cli([*args, "--beside-env", "2", "--beside-sim", "mujoco", "--output", str(out)]) == 0
    doc = load_strict(out)
    assert validate(doc, "learner_profile.v1.json") == []
    assert doc["config"]["beside_env"] == {
        "sim": "mujoco",
        "num_envs": 2,
        "stream_priority": "default",
        "mps_daemon": None,
    }
    (run,) = doc["runs"]
    assert run["beside_env_steps_per_s"] > 0
    assert "learner cycle, beside 2 mujoco envs" in capsys.readouterr().out


def test_alone_the_document_says_so(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    assert cli([*TINY, "--device", "cpu", "--variants", "legacy", "--output", str(out)]) == 0
    doc = load_strict(out)
    assert doc["config"]["beside_env"] is None
    assert doc["runs"][0]["beside_env_steps_per_s"] is None


def test_a_neighbour_that_cannot_build_fails_before_anything_is_measured() -> None:
    bad = EnvBesideSpec(sim="mujoco", num_envs=2, device="cpu", motion_file="no/such_clip.npz")
    with (
        pytest.raises(
            EnvBesideError, match=r"exited 1 before it was ready: MotionError: .*no/such_clip"
        ),
        EnvBeside(bad),
    ):
        pytest.fail("entered a neighbour that never became ready")


def test_a_neighbour_killed_during_a_measurement_fails_it() -> None:
    with EnvBeside(CPU_NEIGHBOUR) as env:
        window = env.mark()
        assert env.rate(window) > 0
        assert env.pid is not None
        os.kill(env.pid, signal.SIGKILL)
        with pytest.raises(EnvBesideError, match=r"exited -9 during the measurement"):
            env.rate(env.mark())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--beside-env", "2", "--beside-sim", "mjwarp"], "mjwarp needs a CUDA device, not cpu"),
        (["--beside-env", "2", "--beside-sim", "isaac"], "'isaac' must be one of mjwarp, mujoco"),
        (["--beside-env", "-1"], "'--beside-env': Input should be greater than or equal to 0"),
    ],
)
def test_bad_neighbour_flags_exit_2_before_anything_runs(
    tmp_path: Path, capsys, args: list[str], message: str
) -> None:
    out = tmp_path / "profile.json"
    assert cli([*TINY, "--device", "cpu", *args, "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1], err
    assert not out.exists()


def test_on_cuda_the_record_says_whether_a_daemon_answered_on_the_pipe_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from trainer.bench.learner_profile import Spec, _beside_record

    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))  # no daemon behind it
    spec = Spec(4, (), torch.device("cuda"), 1, 1, 0, 1, CPU_NEIGHBOUR)
    assert _beside_record(spec) == {
        "sim": "mujoco",
        "num_envs": 2,
        "stream_priority": "default",
        "mps_daemon": False,
    }


def test_a_high_stream_priority_is_refused_for_the_cpu_physics_before_anything_is_built(
    tmp_path: Path,
) -> None:
    out = tmp_path / "lp.json"
    args = [*TINY, "--device", "cpu", "--variants", "legacy", "--beside-env", "2"]
    argv = [
        *args,
        "--beside-sim",
        "mujoco",
        "--beside-stream-priority",
        "high",
        "--output",
        str(out),
    ]
    assert cli(argv) == 2
    assert not out.exists()
