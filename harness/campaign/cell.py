"""One attempt of one cell, run inside a Ray task on the node Ray chose (docs/campaign.md).

The attempt pins the GPU Ray assigned (``CUDA_VISIBLE_DEVICES=<its physical UUID>``, looked
up through NVML; a CPU cell gets ``CUDA_VISIBLE_DEVICES=""``), adds the campaign's MPS daemon
of that GPU when the cell asks for MPS, runs ``g1-soak`` as its own process
(:mod:`harness.campaign.child`) with the run directory and artifact under
``cells/<cell>/attempt-<n>/``, renders the report and returns what ``campaign.json`` records.
Ray is not imported here: the task wrapper in :mod:`harness.campaign.runner` passes in the GPU
ids and the node id it read from Ray's runtime context.
"""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.errors import HarnessError, StrictJsonError
from contracts.jsonio import load_strict, write_json_atomic
from contracts.mps.gpus import GpuDiscoveryError, discover_gpus, resolve_visible_entry
from contracts.schemas import validate
from harness.campaign import mps_fleet
from harness.campaign.child import PARENT_PID_ENV
from harness.soak.artifact import SCHEMA_FILE as ARTIFACT_SCHEMA

CELLS_DIR = "cells"
TOKEN_FILE = ".campaign-id"
STARTED_FILE = "started.json"
ARTIFACT_FILE = "soak.json"
RUN_DIR = "run"
LOG_FILE = "g1-soak.log"
REPORT_DIR = "report"
# Fault injection for tests and drills: a comma list of cell ids whose Ray worker kills itself
# (os._exit) at the start of every attempt, as a crashed worker would.
KILL_WORKER_ENV = "G1SOAK_CAMPAIGN_TEST_KILL_WORKER"
KILLED_EXIT = 86
CHILD_STOP_GRACE_S = 120.0
WAIT_SLICE_S = 0.5
REPORT_TIMEOUT_S = 600.0
_REPORT_CODE = "import sys; from harness.report.cli import main; sys.exit(main(sys.argv[1:]))"


class CellSetupError(HarnessError):
    """The attempt could not start a soak (an ``error`` attempt, not retried)."""


@dataclass(frozen=True)
class AttemptRequest:
    """What the driver sends a task: which cell, which attempt, and its arguments."""

    campaign_id: str
    directory: str
    cell_id: str
    number: int
    args: tuple[str, ...]
    gpus: float
    mps: bool

    @property
    def relative_dir(self) -> str:
        return attempt_relative_dir(self.cell_id, self.number)


def attempt_relative_dir(cell_id: str, number: int) -> str:
    return f"{CELLS_DIR}/{cell_id}/attempt-{number}"


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _killed_by_hook(cell_id: str) -> bool:
    listed = os.environ.get(KILL_WORKER_ENV, "")
    return cell_id in {item.strip() for item in listed.split(",") if item.strip()}


def check_directory_visible(request: AttemptRequest) -> None:
    """The campaign directory is the driver's (a cluster node must mount it at the same path)."""
    token = Path(request.directory) / TOKEN_FILE
    try:
        seen = token.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        seen = None
    if seen != request.campaign_id:
        raise CellSetupError(
            f"campaign directory {request.directory} is not visible on host "
            f"{platform.node()} ({TOKEN_FILE} missing or from another campaign); put it on "
            "storage every node mounts at the same path"
        )


def pin_gpu(gpu_ids: Sequence[str], gpus: float) -> tuple[dict[str, str], str | None]:
    """The variables that pin the cell to its GPU, and that GPU's physical UUID.

    Raises:
        CellSetupError: a GPU cell without exactly one Ray GPU id, or an id NVML cannot map.
    """
    if gpus == 0:
        return {"CUDA_VISIBLE_DEVICES": ""}, None
    if len(gpu_ids) != 1:
        raise CellSetupError(
            f"Ray assigned GPU ids {list(gpu_ids)} to a cell that asked for {gpus:g} GPU; "
            "expected exactly one"
        )
    try:
        physical = discover_gpus()
    except GpuDiscoveryError as err:
        raise CellSetupError(f"cannot map Ray's GPU {gpu_ids[0]} to a physical GPU: {err}") from err
    gpu = resolve_visible_entry(gpu_ids[0], physical)
    if gpu is None:
        listing = ", ".join(f"{g.index}={g.uuid}" for g in physical) or "none"
        raise CellSetupError(
            f"Ray's GPU id {gpu_ids[0]!r} names no GPU NVML lists on {platform.node()} "
            f"({listing}); start the node's raylet with CUDA_DEVICE_ORDER=PCI_BUS_ID"
        )
    return {"CUDA_VISIBLE_DEVICES": gpu.uuid, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, gpu.uuid


def cell_environment(
    request: AttemptRequest, gpu_ids: Sequence[str]
) -> tuple[dict[str, str], str | None]:
    """The soak's environment (this worker's, pinned, with MPS pipes) and its GPU UUID."""
    env = dict(os.environ)
    pinned, gpu_uuid = pin_gpu(gpu_ids, request.gpus)
    env.update(pinned)
    if request.mps:
        if gpu_uuid is None:
            raise CellSetupError("an MPS cell needs a GPU; it was given none")
        try:
            env.update(mps_fleet.cell_environment(request.campaign_id, gpu_uuid))
        except mps_fleet.CampaignMpsError as err:
            raise CellSetupError(str(err)) from err
    env[PARENT_PID_ENV] = str(os.getpid())
    return env, gpu_uuid


def _stop_child(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (g1-soak cancels the trainer and writes its artifact), then SIGKILL."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=CHILD_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_soak(argv: Sequence[str], env: Mapping[str, str], cwd: Path, log: Path) -> int:
    """Run the soak process to its end; on cancellation (KeyboardInterrupt) stop it first."""
    with open(log, "wb") as handle:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
            env=dict(env), cwd=cwd,
        )  # fmt: skip
        try:
            # A timed wait returns to Python often, so Ray's cancellation (an exception
            # raised in this thread) is not held up by a blocking waitpid.
            while True:
                try:
                    return proc.wait(timeout=WAIT_SLICE_S)
                except subprocess.TimeoutExpired:
                    continue
        except BaseException:
            _stop_child(proc)
            raise


def _last_error_line(log: Path) -> str | None:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    errors = [line.strip() for line in lines if line.strip().startswith("error:")]
    return errors[-1] if errors else None


def _figures(point: Any) -> dict[str, Any] | None:
    if not isinstance(point, Mapping):
        return None
    uniform = point.get("modes", {}).get("uniform", {})
    return {
        "iteration": point.get("iteration"),
        "success_rate": uniform.get("success_rate"),
        "r_mpkpe_mm": uniform.get("r_mpkpe_mm"),
        "mpkpe_mm": uniform.get("mpkpe_mm"),
    }


def evaluation_figures(run_summary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``run_summary.evaluation`` in short (uniform-start figures), or None without one."""
    section = (run_summary or {}).get("evaluation")
    if not isinstance(section, Mapping):
        return None
    return {
        "status": section.get("status"),
        "points": section.get("points"),
        "final": _figures(section.get("final")),
        "best": _figures(section.get("best")),
    }


def _throughput(run_summary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not isinstance(run_summary, Mapping):
        return None
    return {
        key: run_summary.get(key)
        for key in (
            "final_env_steps_per_sec",
            "tail_env_steps_per_sec",
            "steady_env_steps_per_sec",
            "total_env_steps",
            "completed_iterations",
        )
    }


def _sharing(run_summary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    manifest = (run_summary or {}).get("runtime_manifest")
    record = manifest.get("cuda_process_sharing") if isinstance(manifest, Mapping) else None
    if not isinstance(record, Mapping):
        return None
    return {
        "effective": record.get("effective"),
        "validated": record.get("validated"),
        "selected_record": record.get("selected_record"),
        "server_pid": record.get("server_pid"),
        "learner_gpu_uuid": record.get("learner_gpu_uuid"),
    }


def learning_summary(artifact: Mapping[str, Any]) -> dict[str, Any] | None:
    """The soak's learning verdict in short, with every evaluation point's uniform-start
    figures (what judging over seeds reads), or None when the artifact has no verdict."""
    section = artifact.get("learning")
    if not isinstance(section, Mapping):
        return None
    evaluation = section.get("evaluation") or {}
    points = [
        {
            "iteration": point["iteration"],
            "success_rate": point["uniform"]["success_rate"],
            "r_mpkpe_mm": point["uniform"]["r_mpkpe_mm"],
        }
        for point in evaluation.get("points") or []
    ]
    findings = [finding["check"] for finding in section.get("findings") or []]
    return {
        "verdict": section["verdict"],
        "reason": section.get("reason"),
        "findings": findings,
        "points": points,
    }


def summarise_artifact(artifact: Mapping[str, Any], exit_code: int) -> dict[str, Any]:
    """The attempt fields a 0.3.0 soak artifact gives: verdict, throughput, residuals..."""
    run_summary = artifact.get("run_summary")
    residuals = artifact["post_shutdown"]["residual_processes"]
    passed = artifact["status"] == "passed"
    if passed and exit_code != 0:
        status, reason = "error", f"g1-soak exited {exit_code} although its artifact passed"
    else:
        status, reason = ("passed", None) if passed else ("failed", artifact["failure_reason"])
    return {
        "status": status,
        "reason": reason,
        "classification": artifact.get("failure_classification"),
        "throughput": _throughput(run_summary),
        "evaluation": evaluation_figures(run_summary),
        "learning": learning_summary(artifact),
        "residual_process_count": len(residuals),
        "residual_processes": [{"pid": p["pid"], "command": p["command"]} for p in residuals],
        "cuda_process_sharing": _sharing(run_summary),
    }


def read_artifact(path: Path) -> dict[str, Any] | str:
    """The validated artifact, or why it cannot be used."""
    try:
        doc = load_strict(path)
    except FileNotFoundError:
        return f"no artifact at {path}"
    except (OSError, StrictJsonError) as err:
        return f"artifact {path} is unreadable: {err}"
    violations = validate(doc, ARTIFACT_SCHEMA) if isinstance(doc, dict) else ["not an object"]
    if violations:
        return f"artifact {path} is not a valid 0.3.0 soak artifact: {violations[0]}"
    return doc


def render_report(artifact: Path, out_dir: Path) -> str | None:
    """Run ``soak-report``; return None on success, else its error line."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _REPORT_CODE, str(artifact), "--out", str(out_dir)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=REPORT_TIMEOUT_S,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"soak-report did not finish within {REPORT_TIMEOUT_S:g} s"
    if proc.returncode == 0:
        return None
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"soak-report exited {proc.returncode}"


def blank_result() -> dict[str, Any]:
    """Every attempt field the task reports, before anything is known."""
    return {
        "status": "error",
        "reason": None,
        "classification": None,
        "started_at_utc": None,
        "ended_at_utc": None,
        "node_id": None,
        "host": None,
        "gpu_ids": [],
        "gpu_uuid": None,
        "wall_time_s": None,
        "soak_exit_code": None,
        "artifact": None,
        "run_dir": None,
        "log": None,
        "report": None,
        "report_error": None,
        "throughput": None,
        "evaluation": None,
        "learning": None,
        "residual_process_count": None,
        "residual_processes": [],
        "cuda_process_sharing": None,
    }


def _soak(request: AttemptRequest, result: dict[str, Any], gpu_ids: Sequence[str]) -> None:
    check_directory_visible(request)
    rel = request.relative_dir
    folder = Path(request.directory) / rel
    try:
        folder.mkdir(parents=True, exist_ok=False)
    except FileExistsError as err:
        raise CellSetupError(f"{folder} already exists; attempts never reuse a folder") from err
    env, gpu_uuid = cell_environment(request, gpu_ids)
    result["gpu_uuid"] = gpu_uuid
    started = {key: result[key] for key in ("started_at_utc", "node_id", "host", "gpu_ids")}
    write_json_atomic(folder / STARTED_FILE, {**started, "gpu_uuid": gpu_uuid, "pid": os.getpid()})
    argv = [
        sys.executable, "-m", "harness.campaign.child", *request.args,
        "--log-dir", str(folder / RUN_DIR), "--output", str(folder / ARTIFACT_FILE),
    ]  # fmt: skip
    result["log"] = f"{rel}/{LOG_FILE}"
    code = run_soak(argv, env, folder, folder / LOG_FILE)
    result["soak_exit_code"] = code
    artifact = read_artifact(folder / ARTIFACT_FILE)
    if isinstance(artifact, str):
        detail = _last_error_line(folder / LOG_FILE) or f"g1-soak exited {code}"
        result["reason"] = f"{detail} ({artifact})"
        return
    result.update(summarise_artifact(artifact, code))
    result["artifact"], result["run_dir"] = f"{rel}/{ARTIFACT_FILE}", f"{rel}/{RUN_DIR}"
    problem = render_report(folder / ARTIFACT_FILE, folder / REPORT_DIR)
    if problem is None:
        result["report"] = f"{rel}/{REPORT_DIR}/report.html"
    else:
        result["report_error"] = problem


def run_attempt(request: AttemptRequest, gpu_ids: Sequence[str], node_id: str) -> dict[str, Any]:
    """The body of a cell's Ray task; returns the attempt's fields for ``campaign.json``.

    A setup problem is an ``error`` result; a KeyboardInterrupt (Ray's cancellation) stops the
    soak and propagates.
    """
    if _killed_by_hook(request.cell_id):
        os._exit(KILLED_EXIT)
    began = time.monotonic()
    result = blank_result()
    result.update(
        started_at_utc=utc_now(), node_id=node_id, host=platform.node(), gpu_ids=list(gpu_ids)
    )
    try:
        _soak(request, result, gpu_ids)
    except (CellSetupError, OSError) as err:
        result["status"] = "error"
        result["reason"] = str(err) or type(err).__name__
    result["ended_at_utc"] = utc_now()
    result["wall_time_s"] = round(time.monotonic() - began, 3)
    return result
