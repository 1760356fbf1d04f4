"""GPU runs end without torch's CUDA IPC warning (trainer/runtime/shared_tensors.py).

The learner is the CUDA IPC producer of the ring and ingress tensors; torch prints
"Producer process has been terminated before all shared CUDA tensors released" when it exits
while a copy is still referenced. The runs are subprocesses, so that exit is observed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from contracts.jsonio import load_strict
from tests.trainer.runtime.train_cmd import train_argv
from trainer.runtime.shared_tensors import TORCH_WARNING

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

CHILD = Path(__file__).resolve().parent / "gpu_ipc_child.py"


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900, check=False
    )


def test_a_real_mjwarp_training_run_ends_without_the_cuda_ipc_warning(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = _run(
        train_argv(
            run_dir,
            "algo.num_envs=64",
            "algo.max_iterations=40",
            "algo.batch_size=256",
            "algo.learning_starts=2",
            "algo.save_interval=20",
            "training.no_play=true",
            "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz",
            sim="mjwarp",
        )
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert TORCH_WARNING not in proc.stdout, proc.stdout[-4000:]
    manifest = load_strict(run_dir / "run_summary.json")["runtime_manifest"]
    assert manifest["inference_transport"] == "cuda_ipc"
    assert manifest["shutdown"]["cleanup"]["errors"] == []


def test_a_real_mjwarp_run_with_a_collector_thread_trains_in_one_cuda_context(
    tmp_path: Path,
) -> None:
    # The learner compiles and captures its graphs next to the env's in one process: a
    # capture that overlapped the env's build would fail the run (learner_startup.py).
    run_dir = tmp_path / "run"
    proc = _run(
        train_argv(
            run_dir,
            "algo.num_envs=64",
            "algo.max_iterations=40",
            "algo.batch_size=256",
            "algo.learning_starts=2",
            "algo.save_interval=20",
            "training.no_play=true",
            "training.collector_placement=thread",
            "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz",
            sim="mjwarp",
        )
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    summary = load_strict(run_dir / "run_summary.json")
    manifest = summary["runtime_manifest"]
    assert (manifest["collector_placement"], manifest["inference_transport"]) == (
        "thread",
        "in_process",
    )
    assert manifest["shutdown"]["cleanup"]["errors"] == []
    assert manifest["cuda_graph"]["learner"]["enabled"] is True
    assert summary["completed_iterations"] == 40


@pytest.mark.parametrize(("case", "rc"), [("complete", 0), ("collector_raises", 1)])
def test_device_ring_runs_end_without_the_cuda_ipc_warning(
    tmp_path: Path, case: str, rc: int
) -> None:
    proc = _run([sys.executable, str(CHILD), str(tmp_path / "run"), case])
    assert proc.returncode == rc, proc.stdout[-4000:]
    assert TORCH_WARNING not in proc.stdout, proc.stdout[-4000:]


def test_a_killed_collector_leaves_the_warning_and_the_learner_says_why(tmp_path: Path) -> None:
    """Control: a consumer killed before it could free its copies makes torch warn, so the
    absence checked above is meaningful; the learner's own line names the cause first."""
    proc = _run([sys.executable, str(CHILD), str(tmp_path / "run"), "collector_killed"])
    assert proc.returncode == 1, proc.stdout[-4000:]
    assert "the collector exited without freeing its copies" in proc.stdout
    # torch's own line (ours quotes its first sentence, but not the note it points to)
    assert f"{TORCH_WARNING}. See Note [Sharing CUDA tensors]" in proc.stdout, proc.stdout[-4000:]
