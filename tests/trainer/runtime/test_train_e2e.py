"""The real stack on CPU: `python -m trainer train --sim mujoco` (CLI, G1 env, FlashSAC learner,
collector/learner runtime) at a tiny size, judged by the soak's §8 checks."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from harness.jsonio import load_strict
from harness.schemas import validate
from harness.soak.verdict import judge_run_dir

pytestmark = pytest.mark.slow


def test_tiny_cpu_training_run_passes_the_soak_checks(tmp_path, isolated_cache):
    run_dir = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "trainer",
        "train",
        "--algo",
        "flashsac",
        "--task",
        "g1_motion_tracking",
        "--sim",
        "mujoco",
        "algo.num_envs=4",
        "algo.max_iterations=5",
        "algo.batch_size=8",
        "algo.learning_starts=2",
        "algo.save_interval=2",
        "training.no_play=true",
        "training.replay_ingress_slot_rows=2",
        f"training.log_dir={run_dir}",
        "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pid = proc.pid
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    summary = load_strict(run_dir / "run_summary.json")
    assert validate(summary, "run_summary.v1.json") == []
    assert summary["total_env_steps"] == (2 + 5) * 4
    ingress = summary["runtime_manifest"]["replay_ingress"]
    assert ingress["published_sequence"] == ingress["release_sequence"] == 14
    assert summary["runtime_manifest"]["backend_diagnostics"]["available"] is False
    assert sorted(p.name for p in run_dir.glob("model_*.pt")) == [
        "model_2.pt",
        "model_4.pt",
        "model_5.pt",
    ]
    verdict = judge_run_dir(run_dir, monitor_reasons=[], monitor_classification=None)
    assert verdict.status == "passed", verdict.reasons
    leftovers = [p for p in psutil.process_iter(["ppid"]) if p.info["ppid"] == pid]
    assert leftovers == []
