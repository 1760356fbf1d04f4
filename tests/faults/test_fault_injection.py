"""Fault injection: misbehaving trainers run under the real ``soak-run`` (docs/contracts.md §soak-monitor, §verdict).

Every scenario starts the real runner as a subprocess with tiny intervals, waits for it,
then asserts the exit code, the exact ``failure_classification``, a reason substring and
that the written artifact validates against schemas/soak_artifact.0.3.0.json. The
children live in tests/faults/children/. Each scenario runs ``--fault-repeats`` times
(default 3), each repeat in its own directory, and the repeats' outcomes must be identical
(tests/faults/repeat.py); the assertions then read the first repeat. No process carrying
one of a repeat's soak markers may outlive it (the module checks again at its end).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from contracts.jsonio import load_strict
from contracts.procfs import is_same_process, read_stat
from contracts.schemas import validate
from harness.soak.rejudge import replay
from tests.faults.repeat import assert_identical, repeat_roots, soak_outcome

pytestmark = pytest.mark.slow
"""Every scenario is a real ``soak-run`` of a child, ``--fault-repeats`` times: 2-7 s each on
2 cores, so the whole module is in the slow tier (README.md "Run the tests")."""

CHILDREN = Path(__file__).resolve().parent / "children"
SOAK_RUN = [
    sys.executable,
    "-c",
    "import sys; from harness.soak.cli import soak_run_main; soak_run_main()",
]
FAST = [
    "--sample-interval-seconds",
    "0.1",
    "--startup-timeout-seconds",
    "2",
    "--stale-progress-seconds",
    "1.5",
    "--post-shutdown-grace-seconds",
    "0.2",
    "--stop-grace-seconds",  # a SIGTERM-deaf child is killed this long after SIGTERM
    "2",
    "--min-duration-seconds",
    "0",
]
# no warm-up: the trend reads the child from its start, so trend scenarios run their repeats
# one after another (a neighbour slowing the child's start shows as RSS growth)
LEAK_TRENDS = ("--trend-warmup-seconds", "0", "--trend-min-window-seconds", "1")
RUN_TIMEOUT_S = 60


class Soak:
    """One finished soak: exit code, stdout JSON, the artifact and the processes of the soak
    still alive when it had exited (``survivors``), run in the directory ``root``."""

    def __init__(
        self, proc: subprocess.CompletedProcess[str], artifact_path: Path, root: Path
    ) -> None:
        self.root = root
        self.returncode = proc.returncode
        self.stderr = proc.stderr
        self.result = json.loads(proc.stdout)
        self.artifact: dict[str, Any] = load_strict(artifact_path)
        self.soak_id: str = self.artifact["monitor"]["soak_id"]
        _SOAK_IDS.append(self.soak_id)
        self.survivors = _marked_pids(self.soak_id)

    def outcome(self) -> dict[str, Any]:
        """What the repeats of a scenario must share (tests/faults/repeat.py)."""
        return soak_outcome(
            self.artifact, exit_code=self.returncode, root=self.root, survivors=self.survivors
        )

    @property
    def classification(self) -> str | None:
        return self.artifact["failure_classification"]

    @property
    def reason(self) -> str:
        return self.artifact["failure_reason"] or ""


_SOAK_IDS: list[str] = []
_REPEATS = 3  # set from --fault-repeats by _no_leftover_processes


def _argv(
    root: Path, child: str, *child_args: str, extra: tuple[str, ...] = ()
) -> tuple[list[str], Path]:
    """The soak of ``child`` in ``root``; ``{root}`` in a child argument becomes ``root``."""
    artifact = root / "artifact.json"
    argv = [
        *SOAK_RUN,
        "--json",
        *FAST,
        *extra,
        "--log-dir",
        str(root / "run"),
        "--output",
        str(artifact),
        "--",
        sys.executable,
        str(CHILDREN / child),
        "{log_dir}",
        *(arg.replace("{root}", str(root)) for arg in child_args),
    ]
    return argv, artifact


def run_soaks(
    tmp_path: Path,
    child: str,
    *child_args: str,
    extra: tuple[str, ...] = (),
    side_by_side: bool = True,
) -> list[Soak]:
    """Run the scenario ``--fault-repeats`` times, one directory each, and assert that the
    outcomes are identical. The repeats run side by side (their processes, markers and
    directories are their own), except where a neighbour would change what a check
    measures (``side_by_side=False``: the trend scenarios, see ``LEAK_TRENDS``; the GPU's
    memory is the whole device's)."""

    def one(root: Path) -> Soak:
        argv, artifact = _argv(root, child, *child_args, extra=extra)
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
        )
        assert proc.stdout, proc.stderr
        return Soak(proc, artifact, root)

    roots = repeat_roots(tmp_path, _REPEATS)
    if side_by_side and len(roots) > 1:
        with ThreadPoolExecutor(len(roots)) as pool:
            soaks = list(pool.map(one, roots))
    else:
        soaks = [one(root) for root in roots]
    assert_identical([soak.outcome() for soak in soaks], f"{child} {' '.join(child_args)}")
    return soaks


def run_soak(
    tmp_path: Path,
    child: str,
    *child_args: str,
    extra: tuple[str, ...] = (),
    side_by_side: bool = True,
) -> Soak:
    """The first of :func:`run_soaks`' identical repeats."""
    return run_soaks(tmp_path, child, *child_args, extra=extra, side_by_side=side_by_side)[0]


def assert_valid(soak: Soak) -> None:
    assert validate(soak.artifact, "soak_artifact.0.3.0.json") == []
    # no process of the soak outlived it but those the artifact names as residuals
    residual = {p["pid"] for p in soak.artifact["post_shutdown"]["residual_processes"]}
    assert set(soak.survivors) <= residual, soak.survivors
    assert soak.result["status"] == soak.artifact["status"]
    assert soak.result["failure_classification"] == soak.classification
    assert soak.returncode == (0 if soak.artifact["status"] == "passed" else 1)
    assert (soak.classification is None) == (soak.artifact["status"] == "passed")
    # The judgement record replays to exactly this verdict (what g1-soak rejudge relies on).
    judgement = soak.artifact["judgement"]
    replayed = replay(
        judgement["monitor_findings"],
        judgement["run_dir_findings"],
        judgement["trainer_classification"],
    )
    assert replayed.status == soak.artifact["status"]
    assert replayed.failure_reason == soak.artifact["failure_reason"]
    assert replayed.failure_classification == soak.classification
    assert replayed.monitor_failure_classification == soak.artifact.get(
        "monitor_failure_classification"
    )


def assert_failed(soak: Soak, classification: str, reason: str) -> None:
    assert_valid(soak)
    assert soak.artifact["status"] == "failed", soak.reason
    assert soak.classification == classification, soak.reason
    assert reason in soak.reason


def _marked_pids(soak_id: str) -> list[int]:
    needle = f"G1SOAK_RUN_ID={soak_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    if needle in handle.read().split(b"\0"):
                        stat = read_stat(int(entry))
                        if stat is not None and stat.state not in ("Z", "X"):
                            found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.fixture(scope="module", autouse=True)
def _no_leftover_processes(fault_repeats: Any) -> Iterator[None]:
    global _REPEATS
    _REPEATS = fault_repeats.cheap
    yield
    leftovers = {soak_id: _marked_pids(soak_id) for soak_id in _SOAK_IDS}
    for pids in leftovers.values():
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    assert not any(leftovers.values()), f"processes survived the fault suite: {leftovers}"


# -- the run summary and run directory (docs/contracts.md §verdict) --------------------------------
def test_clean_run_passes_with_a_valid_artifact(tmp_path: Path) -> None:
    soak = run_soak(tmp_path, "fake_trainer.py", "ok")
    assert_valid(soak)
    art = soak.artifact
    assert art["status"] == "passed", art["failure_reason"]
    assert art["failure_reason"] is None and art["returncode"] == 0
    assert art["run_summary"]["status"] == "completed"
    assert art["shutdown"]["classification"] == "normal_completion"
    assert art["post_shutdown"]["residual_processes"] == []
    assert art["resource_summary"]["replay_ingress_final_occupancy"] == 0
    assert art["resource_summary"]["max_progress_bytes"] > 0
    assert art["monitor"]["sample_count"] == len(art["samples"]) >= 2
    assert art["console_log"] == str(soak.root / "run" / "soak-console.log")
    first = art["samples"][0]["process"]["processes"]
    assert first and first[0]["discovered_by"] == "tree" and first[0]["escaped"] is False
    assert any(s["progress"]["last"] for s in art["samples"])


@pytest.mark.parametrize(
    ("child_args", "classification", "reason"),
    [
        pytest.param(
            ("start",),
            "missing_run_summary",
            "trainer exited with returncode 1",
            id="crash-at-start",
        ),
        pytest.param(
            ("mid",),
            "learner_failure",
            "shutdown classification=learner_failure",
            id="crash-mid-run",
        ),
        pytest.param(
            ("cancelled",),
            "external_cancellation",
            "trainer exited with returncode 143",
            id="cancelled-by-sigterm",
        ),
        pytest.param(
            ("signal",),
            "missing_run_summary",
            "trainer exited with returncode -9",
            id="killed-by-sigkill",
        ),
    ],
)
def test_crashing_trainer_is_classified(
    tmp_path: Path, child_args: tuple[str, ...], classification: str, reason: str
) -> None:
    soak = run_soak(tmp_path, "crash.py", *child_args)
    assert_failed(soak, classification, reason)


@pytest.mark.parametrize(
    ("case", "classification", "reason"),
    [
        pytest.param(
            "no_summary",
            "missing_run_summary",
            "trainer did not write run_summary.json",
            id="exit0-no-summary",
        ),
        pytest.param(
            "unparseable", "invalid_run_summary", "run_summary.json is invalid", id="unparseable"
        ),
        pytest.param(
            "nan_token", "invalid_run_summary", "run_summary.json is invalid", id="nan-token"
        ),
        pytest.param("non_object", "invalid_run_summary", "expected an object", id="non-object"),
        pytest.param(
            "schema_missing_field",
            "schema_violation",
            "final_mean_reward",
            id="schema-missing-field",
        ),
        pytest.param(
            "schema_wrong_type",
            "schema_violation",
            "$.completed_iterations",
            id="schema-wrong-type",
        ),
        pytest.param("stamp_bool", "schema_violation", "$.metric_schema_version", id="stamp-bool"),
        pytest.param(
            "stamp_float", "schema_violation", "$.metric_schema_version", id="stamp-float"
        ),
        pytest.param("stamp_str", "schema_violation", "$.metric_schema_version", id="stamp-str"),
        pytest.param(
            "manifest_version_2",
            "schema_violation",
            "$.runtime_manifest.schema_version",
            id="manifest-v2",
        ),
        pytest.param(
            "manifest_version_float",
            "schema_violation",
            "$.runtime_manifest.schema_version",
            id="manifest-float",
        ),
        pytest.param(
            "undrained_inference",
            "unknown_failure",
            "final inference flight is not drained",
            id="undrained",
        ),
        pytest.param(
            "cleanup_errors", "shutdown_contract_violation", "cleanup", id="cleanup-errors"
        ),
        pytest.param(
            "completed_without_shutdown",
            "shutdown_contract_violation",
            "missing shutdown diagnostics",
            id="no-shutdown",
        ),
        pytest.param(
            "missing_checkpoint", "schema_violation", "model_20.pt", id="missing-checkpoint"
        ),
        pytest.param(
            "failed_claims_normal",
            "shutdown_contract_violation",
            "shutdown contract violated",
            id="failed-claims-normal",
        ),
        pytest.param(
            "failed_without_shutdown",
            "unknown_failure",
            "shutdown diagnostics are unavailable",
            id="failed-no-shutdown",
        ),
    ],
)
def test_bad_summary_is_classified(
    tmp_path: Path, case: str, classification: str, reason: str
) -> None:
    soak = run_soak(tmp_path, "fake_trainer.py", case)
    assert_failed(soak, classification, reason)
    if classification in ("missing_run_summary", "invalid_run_summary"):
        assert soak.artifact["run_summary"] is None
        assert soak.artifact["run_summary_error"]


# The documented invariants of a completed run (docs/soak.md "What the gate checks").
_SD = "$.runtime_manifest.shutdown"
_FL = "$.runtime_manifest.inference_flight"
INVARIANT_CASES = [
    ("collector_exit_1", "shutdown_contract_violation", f"{_SD}.collector.exitcode"),
    ("collector_alive", "shutdown_contract_violation", f"{_SD}.collector.alive"),
    ("phase_not_finalize", "shutdown_contract_violation", f"{_SD}.phase"),
    ("empty_checkpoint", "schema_violation", "model_20.pt in"),
    ("last_checkpoint_nowhere", "schema_violation", "$.last_checkpoint"),
    ("evaluation_of_another_checkpoint", "schema_violation", "evaluation of another checkpoint"),
    ("env_steps_doubled", "schema_violation", "(warmup_ticks + completed_iterations) x num_envs"),
    ("max_in_flight_5", "unknown_failure", f"{_FL}.max_in_flight=5"),
    ("tick_in_flight_at_end", "unknown_failure", f"{_FL}.in_flight=1"),
    ("short_of_budget", "schema_violation", "short of its iteration budget"),
    ("overflowing_number", "invalid_run_summary", "number 1e400 is not finite"),
    ("end_time_newline", "schema_violation", "$.end_time_utc"),
    ("end_time_99", "schema_violation", "$.end_time_utc"),
    ("env_fallback", "acceleration_fallback", "env task_cuda_graph fell back at run time"),
    ("learner_fallback", "acceleration_fallback", "learner fusion fell back at run time"),
]


@pytest.mark.parametrize(
    ("case", "classification", "reason"),
    [pytest.param(*c, id=c[0].replace("_", "-")) for c in INVARIANT_CASES],
)
def test_broken_invariant_fails_the_gate_naming_it(
    tmp_path: Path, case: str, classification: str, reason: str
) -> None:
    soak = run_soak(tmp_path, "fake_trainer.py", case)
    assert_failed(soak, classification, reason)
    # the fault is named by every finding it causes, and causes nothing else
    findings = soak.artifact["judgement"]["run_dir_findings"]
    assert findings and all(reason in f["reason"] for f in findings), soak.reason


@pytest.mark.parametrize(
    ("case", "path"),
    [
        pytest.param("ri_occupancy_mismatch", "replay_ingress.occupancy", id="occupancy-mismatch"),
        pytest.param(
            "ri_release_exceeds_published",
            "replay_ingress.release_sequence",
            id="release-exceeds-published",
        ),
        pytest.param("ri_dropped_batches", "replay_ingress.dropped_batches", id="dropped-batches"),
        pytest.param(
            "ri_returns_unbalanced", "replay_ingress.closed_returns", id="returns-unbalanced"
        ),
        pytest.param(
            "ri_high_water_zero", "replay_ingress.high_water_occupancy", id="high-water-zero"
        ),
        pytest.param("ri_float_counter", "replay_ingress.backpressure_waits", id="float-counter"),
        pytest.param("ri_not_a_multiple", "$.total_env_steps", id="not-a-multiple"),
        pytest.param(
            "ri_sequence_not_total", "replay_ingress.published_sequence", id="sequence-not-total"
        ),
        pytest.param("ri_missing", "$.runtime_manifest.replay_ingress", id="missing"),
    ],
)
def test_replay_ingress_invariant_breach_is_a_schema_violation(
    tmp_path: Path, case: str, path: str
) -> None:
    soak = run_soak(tmp_path, "fake_trainer.py", case)
    assert_failed(soak, "schema_violation", "replay_ingress")
    assert path in soak.reason


# -- liveness and limits (docs/contracts.md §liveness-and-residuals) ------------------------------------------
def test_hang_before_progress_is_a_startup_timeout(tmp_path: Path) -> None:
    soak = run_soak(tmp_path, "hang.py", "before")
    assert_failed(soak, "timeout/startup", "training produced no progress artifact within 2 s")
    assert soak.artifact["monitor"]["termination"] == ["SIGTERM"]
    assert soak.artifact["returncode"] == -signal.SIGTERM


def test_hang_after_progress_is_stale(tmp_path: Path) -> None:
    soak = run_soak(tmp_path, "hang.py", "after")
    assert_failed(soak, "timeout/stale_tick", "training progress did not change for 1.5 s")
    assert soak.artifact["returncode"] == -signal.SIGTERM


def test_trainer_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    soak = run_soak(tmp_path, "hang.py", "ignore_sigterm")
    assert_failed(soak, "timeout/stale_tick", "training progress did not change")
    assert soak.artifact["monitor"]["termination"][:2] == ["SIGTERM", "SIGKILL"]
    assert soak.artifact["returncode"] == -signal.SIGKILL
    assert soak.artifact["post_shutdown"]["residual_processes"] == []


def test_run_shorter_than_min_duration_fails(tmp_path: Path) -> None:
    soak = run_soak(tmp_path, "fake_trainer.py", "ok", extra=("--min-duration-seconds", "30"))
    assert_failed(soak, "too_short", "soak completed before min_duration_seconds=30")


def _sigint_soak(root: Path) -> Soak:
    argv, artifact = _argv(root, "hang.py", "forever")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (root / "run" / "progress.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return Soak(subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr), artifact, root)


def test_sigint_to_the_soak_is_external_cancellation(tmp_path: Path) -> None:
    with ThreadPoolExecutor(_REPEATS) as pool:
        soaks = list(pool.map(_sigint_soak, repeat_roots(tmp_path, _REPEATS)))
    assert_identical([soak.outcome() for soak in soaks], "SIGINT to the soak")
    soak = soaks[0]
    assert_failed(soak, "external_cancellation", "soak cancelled by SIGINT")
    assert soak.artifact["returncode"] == -signal.SIGTERM


# -- resource trends and residuals (docs/contracts.md §liveness-and-residuals, §resource-trends) ----------------------------
@pytest.mark.parametrize(
    ("kind", "series"),
    [
        pytest.param("fds", "fd_count", id="pipes"),
        pytest.param("eventfd", "eventfd_fds", id="eventfd"),
        pytest.param("shm", "shared_memory_fds", id="shm"),
    ],
)
def test_leaking_trainer_is_a_resource_leak(tmp_path: Path, kind: str, series: str) -> None:
    soak = run_soak(tmp_path, "leak.py", kind, "2.0", extra=LEAK_TRENDS, side_by_side=False)
    assert_failed(soak, "resource_leak", "sustained resource growth: ")
    assert f"{series} " in soak.reason
    trends = soak.artifact["resource_trends"]
    assert trends["verdict"] == "growing" and trends["series"][series]["verdict"] == "growing"
    assert trends["series"]["rss_kib"]["verdict"] == "bounded"


def test_one_time_fd_plateau_is_not_a_leak(tmp_path: Path) -> None:
    soak = run_soak(tmp_path, "leak.py", "plateau", "2.0", extra=LEAK_TRENDS, side_by_side=False)
    assert_valid(soak)
    assert soak.artifact["status"] == "passed", soak.reason
    series = soak.artifact["resource_trends"]["series"]["fd_count"]
    assert series["verdict"] == "bounded" and series["growth"] >= 16


def test_report_mode_records_growth_without_failing(tmp_path: Path) -> None:
    soak = run_soak(
        tmp_path,
        "leak.py",
        "eventfd",
        "2.0",
        extra=(*LEAK_TRENDS, "--trend-mode", "report"),
        side_by_side=False,
    )
    assert_valid(soak)
    assert soak.artifact["status"] == "passed", soak.reason
    assert soak.artifact["resource_trends"]["verdict"] == "growing"
    assert soak.artifact["resource_trends"]["mode"] == "report"


def test_escaped_setsid_grandchild_is_a_residual(tmp_path: Path) -> None:
    soaks: list[Soak] = []
    try:
        soaks = run_soaks(tmp_path, "escape_setsid.py", "{root}/escaped.pid")
        for soak in soaks:  # each repeat's escaped grandchild: a residual, still alive
            pid = int((soak.root / "escaped.pid").read_text())
            assert_failed(soak, "resource_leak", f"residual child processes after shutdown: {pid}")
            residual = soak.artifact["post_shutdown"]["residual_processes"]
            assert [p["pid"] for p in residual] == [pid] == soak.survivors
            assert residual[0]["escaped"] is True
            assert soak.artifact["resource_summary"]["residual_process_count"] == 1
            seen_escaped = [
                p
                for s in soak.artifact["samples"]
                for p in s["process"]["processes"]
                if p["pid"] == pid
            ]
            assert seen_escaped and all(p["escaped"] for p in seen_escaped)
    finally:
        for soak in soaks:
            _kill_escaped(soak.root / "escaped.pid")


def _kill_escaped(pidfile: Path) -> None:
    """SIGKILL the grandchild named in ``pidfile`` and wait until it is gone."""
    if not pidfile.exists():
        return
    pid = int(pidfile.read_text())
    stat = read_stat(pid)
    if stat is None:
        return
    if is_same_process(pid, stat.start_time_ticks):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while is_same_process(pid, stat.start_time_ticks) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not is_same_process(pid, stat.start_time_ticks)


# -- the GPU path on a real CUDA device (skipped without one) ------------------------
GPU_EXTRA = (*LEAK_TRENDS, "--startup-timeout-seconds", "90")


@pytest.mark.gpu
def test_gpu_memory_leak_is_growing(tmp_path: Path) -> None:
    soak = run_soak(tmp_path, "gpu_alloc.py", "leak", "3.0", extra=GPU_EXTRA, side_by_side=False)
    assert_failed(soak, "resource_leak", "gpu_memory_mib ")
    gpu = [s["gpu"] for s in soak.artifact["samples"]]
    assert all(g["source"] == "nvml" for g in gpu), gpu[0]
    assert max(g["used_memory_mib_total"] for g in gpu) >= 1024


@pytest.mark.gpu
def test_gpu_one_time_allocation_is_bounded(tmp_path: Path) -> None:
    soak = run_soak(tmp_path, "gpu_alloc.py", "plateau", "3.0", extra=GPU_EXTRA, side_by_side=False)
    assert_valid(soak)
    assert soak.artifact["status"] == "passed", soak.reason
    assert soak.artifact["resource_summary"]["max_gpu_used_memory_mib"] >= 1024
    assert soak.artifact["resource_trends"]["series"]["gpu_memory_mib"]["verdict"] == "bounded"
    assert soak.artifact["context"]["gpu_devices"]
