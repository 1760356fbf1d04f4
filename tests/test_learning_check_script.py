"""scripts/learning_check.sh table: the verdict line and the rows it reads from a check's
directory (the GPU soaks themselves run on the device; docs/benchmarks.md "Learning check")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "learning_check.sh"


def _mode(r_mpkpe: float) -> dict:
    return {
        "success_rate": 1.0,
        "mpkpe_mm": r_mpkpe + 4.0,
        "r_mpkpe_mm": r_mpkpe,
        "joint_pos_error_rad": 0.02,
    }


def _passed(learning: dict) -> dict:
    return {"status": "passed", "failure_reason": None, "learning": learning}


def _clip(root: Path, name: str, soak: dict, r_mpkpe: float) -> None:
    run = root / name / "run"
    run.mkdir(parents=True)
    (root / name / "soak.json").write_text(json.dumps(soak))
    summary = {
        "total_env_steps": 66_660_352,
        "wall_time_sec": 755.5,
        "steady_env_steps_per_sec": 112_750.1,
        "tail_env_steps_per_sec": 107_717.2,
    }
    (run / "run_summary.json").write_text(json.dumps(summary))
    point = {
        "iteration": 65_000,
        "source": "final",
        "eval_wall_time_s": 0.89,
        "modes": {"uniform": _mode(r_mpkpe), "frame0": _mode(r_mpkpe + 1.0)},
    }
    (run / "evaluation.json").write_text(json.dumps({"points": [point]}))


def _table(root: Path) -> subprocess.CompletedProcess[str]:
    return _script("table", root)


def _script(verb: str, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), verb, str(root)],
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_table_names_each_clips_learning_verdict_and_steady_rate(tmp_path: Path) -> None:
    _clip(tmp_path, "synthetic", _passed({"verdict": "passed", "reason": None}), 5.107)
    not_judged = {"verdict": "not_judged", "reason": "the run did not complete"}
    _clip(tmp_path, "march", _passed(not_judged), 11.1)

    result = _table(tmp_path)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(
        "march: soak passed; learning not_judged (the run did not complete);"
    )
    assert lines[1].startswith("synthetic: soak passed; learning passed;")
    assert "steady 112750.1 env steps/s (tail 107717.2)" in lines[1]
    rows = json.loads((tmp_path / "learning_check.json").read_text())
    assert [(r["clip"], r["r_mpkpe_mm"]) for r in rows] == [("march", 11.1), ("synthetic", 5.107)]


def test_a_soak_without_a_learning_section_reads_absent(tmp_path: Path) -> None:
    failed = {"status": "failed", "failure_reason": "the trainer exited 1"}
    _clip(tmp_path, "synthetic", failed, 5.0)

    result = _table(tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "synthetic: soak failed (the trainer exited 1); learning absent;"
    )


def test_an_unknown_verb_exits_2_with_the_usage(tmp_path: Path) -> None:
    result = subprocess.run(
        ["bash", str(SCRIPT), "collect", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert "usage: learning_check.sh start|wait|table|diagnostics DIR" in result.stderr


FAKE_PYTHON = """#!/bin/bash
# Stands in for python: records each call's arguments, one per line, in its own file.
log="$FAKE_LOG/call.$$"
printf '%s\\n' "$@" > "$log"
case " $* " in
  *" harness.mps.cli start "*) [ -z "$FAKE_NO_MPS" ] || { echo "cumps: no nvidia-cuda-mps-control on PATH"; exit 1; } ;;
  *" --check-only "*) case " $* " in *" bad=1 "*) echo "error: bad=1 is not a key" >&2; exit 2;; esac ;;
esac
exit 0
"""


FAKE_NVIDIA_SMI = """#!/bin/bash
# Stands in for nvidia-smi --query-gpu=memory.free: the free MiB the test set, or a failure.
[ -n "$FAKE_FREE_MIB" ] || { echo "NVIDIA-SMI has failed" >&2; exit 9; }
echo "$FAKE_FREE_MIB"
"""


def _start(
    tmp_path: Path,
    *args: str,
    candidate: str = "",
    candidates: str = "",
    no_mps: bool = False,
    free_mib: str = "143000",
    **extra_env: str,
) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (tools / "nvidia-smi").chmod(0o755)
    calls = tmp_path / "calls"
    calls.mkdir()
    env = {
        "PYTHON": str(fake),
        "PATH": f"{tools}:/usr/bin:/bin",
        "FAKE_LOG": str(calls),
        "FAKE_NO_MPS": "1" if no_mps else "",
        "FAKE_FREE_MIB": free_mib,
        **extra_env,
    }
    if candidate:
        env["CANDIDATE"] = candidate
    if candidates:
        env["CANDIDATES"] = candidates
    return subprocess.run(
        ["bash", str(SCRIPT), "start", str(tmp_path / "check"), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def _launched(tmp_path: Path) -> dict[str, list[str]]:
    """The soaks `start` launched, by name, once each has exited: their arguments."""
    pids = {}
    for line in (tmp_path / "check" / "pids").read_text().splitlines():
        name, pid = line.split()
        pids[name] = int(pid)
    procs = []
    for pid in pids.values():
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=60)
    assert not alive
    return {
        name: (tmp_path / "calls" / f"call.{pid}").read_text().splitlines()
        for name, pid in pids.items()
    }


def test_a_candidate_runs_beside_each_clips_baseline_with_its_overrides_on_top(
    tmp_path: Path,
) -> None:
    result = _start(tmp_path, "/lib:J_Dance18", candidate="algo.reward_scale_horizon=8192")

    assert result.returncode == 0, result.stderr
    soaks = _launched(tmp_path)
    assert sorted(soaks) == ["lib-J_Dance18", "lib-J_Dance18+candidate"]
    base, cand = soaks["lib-J_Dance18"], soaks["lib-J_Dance18+candidate"]
    assert base[:2] == ["-m", "harness.soak"]
    assert "--check-only" not in base
    assert "algo.reward_scale_horizon=8192" not in base
    assert base[base.index("--motion") + 1] == cand[cand.index("--motion") + 1] == "/lib:J_Dance18"
    assert cand[cand.index("algo.reward_scale_horizon=8192") - 1] == "--extra-override"
    # the candidate's override comes after the shared ones, so it wins
    assert cand.index("algo.reward_scale_horizon=8192") > cand.index("algo.save_interval=5000")
    assert base[base.index("--output") + 1].endswith("check/lib-J_Dance18/soak.json")
    assert cand[cand.index("--output") + 1].endswith("check/lib-J_Dance18+candidate/soak.json")


def test_a_candidate_that_fails_its_check_starts_nothing(tmp_path: Path) -> None:
    result = _start(tmp_path, "synthetic", candidate="bad=1")

    assert result.returncode == 2
    assert "the soak 'synthetic+candidate' failed its pre-launch check" in result.stderr
    assert "bad=1 is not a key" in result.stderr
    assert not (tmp_path / "check").exists()  # no daemon started, no soak, no directory
    calls = [p.read_text() for p in (tmp_path / "calls").iterdir()]
    assert all("--check-only" in c for c in calls)


def test_named_candidates_each_run_beside_the_baseline_with_only_their_own_overrides(
    tmp_path: Path,
) -> None:
    result = _start(
        tmp_path,
        "synthetic",
        candidates="h8192:algo.reward_scale_horizon=8192;lr:algo.lr_end=3e-5 algo.tau=0.005",
    )

    assert result.returncode == 0, result.stderr
    soaks = _launched(tmp_path)
    assert sorted(soaks) == ["synthetic", "synthetic+h8192", "synthetic+lr"]
    assert "algo.reward_scale_horizon=8192" in soaks["synthetic+h8192"]
    assert "algo.lr_end=3e-5" not in soaks["synthetic+h8192"]
    lr = soaks["synthetic+lr"]
    assert lr[lr.index("algo.tau=0.005") - 1] == "--extra-override"
    assert "algo.reward_scale_horizon=8192" not in lr
    assert not any("algo.lr_end" in a or "horizon" in a for a in soaks["synthetic"])


def test_a_malformed_candidate_set_exits_2_before_any_check(tmp_path: Path) -> None:
    result = _start(tmp_path, "synthetic", candidates="a:algo.tau=0.005;a:algo.lr_end=3e-5")

    assert result.returncode == 2
    assert "candidate 'a:algo.lr_end=3e-5' must read NAME:KEY=VALUE" in result.stderr
    assert not list((tmp_path / "calls").iterdir())
    assert not (tmp_path / "check").exists()


def test_a_daemon_that_does_not_start_starts_no_soak_and_says_why(tmp_path: Path) -> None:
    result = _start(tmp_path, "synthetic", no_mps=True)

    assert result.returncode == 1
    assert "the MPS daemon did not start; no soak started" in result.stderr
    assert "no nvidia-cuda-mps-control on PATH" in result.stderr
    assert not (tmp_path / "check" / "pids").exists()


def test_more_soaks_than_the_gpu_holds_start_nothing(tmp_path: Path) -> None:
    # three soaks at 1024 envs on an 80 GB H100 (about 81,000 MiB free)
    result = _start(
        tmp_path, "synthetic", candidates="a:algo.tau=0.005;b:algo.lr_end=3e-5", free_mib="81000"
    )

    assert result.returncode == 2
    assert (
        "3 soak(s) need about 96900 MiB of GPU memory (32300 each), GPU 0 has 81000 MiB free"
        in result.stderr
    )
    assert not (tmp_path / "check").exists()  # no daemon, no soak
    assert all("harness.mps.cli" not in p.read_text() for p in (tmp_path / "calls").iterdir())


def test_the_per_soak_memory_follows_the_envs_or_soak_mib(tmp_path: Path) -> None:
    for sub in ("half", "small", "big"):
        (tmp_path / sub).mkdir()
    # three soaks of 512 envs: 48,450 MiB
    half = _start(tmp_path / "half", "synthetic", free_mib="81000", NUM_ENVS="512",
                  CANDIDATES="a:algo.tau=0.005;b:algo.lr_end=3e-5")  # fmt: skip
    assert half.returncode == 0, half.stderr
    _launched(tmp_path / "half")
    small = _start(tmp_path / "small", "synthetic", free_mib="81000", SOAK_MIB="40000")
    assert small.returncode == 0, small.stderr
    _launched(tmp_path / "small")
    big = _start(tmp_path / "big", "synthetic", free_mib="81000", SOAK_MIB="90000",
                 CUDA_VISIBLE_DEVICES="1,2")  # fmt: skip
    assert big.returncode == 2
    assert "1 soak(s) need about 90000 MiB of GPU memory (90000 each), GPU 1 has" in big.stderr


def test_a_machine_without_a_readable_gpu_starts_nothing(tmp_path: Path) -> None:
    result = _start(tmp_path, "synthetic", free_mib="")

    assert result.returncode == 2
    assert "cannot read GPU 0's free memory with nvidia-smi" in result.stderr
    assert not (tmp_path / "check").exists()


def test_diagnostics_overlays_each_clips_baseline_and_candidates(tmp_path: Path) -> None:
    from tests.harness.schemas.evaluation_builders import (
        DECLINING_CURVE,
        HEALTHY_CURVE,
        write_diagnostic_run,
    )

    for name in ("LIB-A", "LIB-A+h8192", "LIB-A+lr3e-5", "march"):
        write_diagnostic_run(tmp_path, name, DECLINING_CURVE if name == "LIB-A" else HEALTHY_CURVE)

    result = _script("diagnostics", tmp_path)

    assert result.returncode == 0, result.stderr
    doc = json.loads((tmp_path / "LIB-A.diagnostics.json").read_text())
    assert [r["label"] for r in doc["runs"]] == ["LIB-A", "LIB-A+h8192", "LIB-A+lr3e-5"]
    assert [
        r["label"] for r in json.loads((tmp_path / "march.diagnostics.json").read_text())["runs"]
    ] == ["march"]
    assert (tmp_path / "LIB-A.diagnostics.png").read_bytes().startswith(b"\x89PNG")


def test_diagnostics_without_runs_exits_1(tmp_path: Path) -> None:
    result = _script("diagnostics", tmp_path)
    assert result.returncode == 1 and f"no soak run directory under {tmp_path}" in result.stderr
