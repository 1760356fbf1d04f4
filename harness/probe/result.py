"""The backend probe's 0.3.0 result document (docs/contracts.md §backend-probe): assembly, validation, writing.

The parent knows the host (Python, platform, CPU, package versions from
``importlib.metadata``, the git source state, the GPU snapshots and the invocation); each
backend child contributes its per-backend result and what only torch can say (CUDA version,
device name and capability). :func:`build_document` joins them, :func:`finalize` validates
the document against ``schemas/backend_probe.0.3.0.json`` (a violation turns the document
into a failed one that still gets written) and :func:`write_document` replaces the output
file atomically.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contracts.backend_probe import BACKENDS, PHASES, PROBE_SCHEMA, SCHEMA_VERSION
from contracts.git import git_output, git_text
from contracts.gpu_snapshot import environment_record, probed_gpu_uuid
from contracts.jsonio import write_json_atomic
from contracts.schemas import validate

__all__ = [
    "BACKENDS",
    "EXCLUDED_COMPONENTS",
    "PHASES",
    "PROBE_SCHEMA",
    "SCHEMA_VERSION",
    "build_document",
    "failed_result",
    "finalize",
    "source_info",
    "versions",
    "write_document",
]

EXCLUDED_COMPONENTS = (
    "inference_ipc",
    "replay_ingestion",
    "learner_update",
    "production_manager_dispatch",
)
TIMING_SEMANTICS = "total_iteration_synchronized; phase_boundaries_may_be_stream_ordered"
NOT_INSTALLED = "not-installed"
_DISTRIBUTIONS = {
    "mujoco": "mujoco",
    "mujoco_warp": "mujoco-warp",
    "warp_lang": "warp-lang",
    "torch": "torch",
    "harness": "g1soak",
}
_REPO_ROOT = Path(__file__).resolve().parents[2]
_GIT_TIMEOUT_S = 10.0


def _utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def versions() -> dict[str, str]:
    """Installed versions of the packages that shape a probe figure (``"not-installed"``)."""
    out = {}
    for key, dist in _DISTRIBUTIONS.items():
        try:
            out[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[key] = NOT_INSTALLED
    return out


def source_info(root: Path = _REPO_ROOT) -> dict[str, Any]:
    """``{git_root, branch, commit, dirty, worktree_patch_sha256}`` of the checkout the probe
    runs from; every field is null outside a git work tree. The patch hash covers
    ``git diff HEAD`` (tracked changes) so two dirty runs can be told apart."""
    top = git_text(root, "rev-parse", "--show-toplevel", timeout=_GIT_TIMEOUT_S)
    if top is None:
        return dict.fromkeys(("git_root", "branch", "commit", "dirty", "worktree_patch_sha256"))
    git_root = Path(top)
    commit = git_text(git_root, "rev-parse", "HEAD", timeout=_GIT_TIMEOUT_S)
    branch = git_text(git_root, "rev-parse", "--abbrev-ref", "HEAD", timeout=_GIT_TIMEOUT_S)
    status = git_output(
        git_root, "status", "--porcelain", "--untracked-files=no", timeout=_GIT_TIMEOUT_S
    )
    patch = git_output(git_root, "diff", "HEAD", "--binary", timeout=_GIT_TIMEOUT_S)
    dirty = None if status is None else bool(status.strip())
    return {
        "git_root": str(git_root),
        "branch": branch,
        "commit": commit,
        "dirty": dirty,
        "worktree_patch_sha256": (
            hashlib.sha256(patch).hexdigest() if dirty and patch is not None else None
        ),
    }


def cpu_info() -> dict[str, Any]:
    """``{model, logical_cores}`` from /proc/cpuinfo (``platform.processor()`` is often empty)."""
    model = None
    try:
        for line in (
            Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
        ):
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"model": model or platform.processor() or None, "logical_cores": os.cpu_count()}


def failed_result(
    backend: str,
    reason: str,
    *,
    exit_code: int | None,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None = None,
    stderr_tail: Sequence[str] = (),
) -> dict[str, Any]:
    """A per-backend result for a child that did not start, crashed or failed a check."""
    result: dict[str, Any] = {
        "backend": backend,
        "status": "failed",
        "failure_reason": reason,
        "exit_code": exit_code,
        "gpu_snapshots": {"before": before, "after": after},
    }
    if stderr_tail:
        result["stderr_tail"] = list(stderr_tail)
    return result


def _probed_gpu(snapshot: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not snapshot or snapshot.get("errors") or not snapshot.get("gpus"):
        return None
    uuid = probed_gpu_uuid(snapshot)
    for gpu in snapshot["gpus"]:
        if gpu.get("uuid") == uuid:
            return gpu
    return None


def build_document(
    *,
    argv: Sequence[str],
    acceptance: bool,
    requested: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    host_snapshot: Mapping[str, Any],
    failure_reason: str | None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The full 0.3.0 document; ``status`` is failed when ``failure_reason`` is set or any
    result failed (the first failure's reason then becomes the document's reason)."""
    env = os.environ if environ is None else environ
    vers = versions()
    if failure_reason is None:
        for result in results:
            if result.get("status") != "passed":
                failure_reason = f"{result['backend']}: {result.get('failure_reason') or 'failed'}"
                break
    if failure_reason is None and not results:
        failure_reason = "no backend result was produced"
    child_rt: Mapping[str, Any] = next(
        (
            r["child_runtime"]
            for r in results
            if r.get("status") == "passed" and r.get("child_runtime")
        ),
        {},
    )
    gpu = _probed_gpu(host_snapshot)
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "failed" if failure_reason else "passed",
        "failure_reason": failure_reason,
        "created_at_utc": _utc_now(),
        "scope": "phase-local",
        "excluded_components": list(EXCLUDED_COMPONENTS),
        "timing_semantics": TIMING_SEMANTICS,
        "process_isolation": "one_process_per_backend",
        "acceptance_mode": acceptance,
        "torch_version": vers["torch"],
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_info(),
        "versions": vers,
        "source": source_info(),
        "runtime": {
            "torch_cuda": child_rt.get("torch_cuda"),
            "driver_version": None if gpu is None else gpu.get("driver_version"),
            "gpu_capability": child_rt.get("gpu_capability"),
            "gpu_total_memory_gib": child_rt.get("gpu_total_memory_gib"),
            "gpu_name": child_rt.get("gpu_name") or (None if gpu is None else gpu.get("name")),
            "gpu_uuid": None if gpu is None else gpu.get("uuid"),
            "clocks": None if gpu is None else gpu.get("clocks"),
            "power": None if gpu is None else gpu.get("power"),
            "gpu_snapshot": dict(host_snapshot),
        },
        "invocation": {"argv": [sys.executable, *argv], "cwd": os.getcwd()},
        "environment": environment_record(env),
        "cuda_device": child_rt.get("cuda_device"),
        "cuda_device_index": child_rt.get("cuda_device_index"),
        "requested": dict(requested),
        "results": [dict(r) for r in results],
    }


def finalize(document: dict[str, Any]) -> dict[str, Any]:
    """Validate against the 0.3.0 schema; a violation fails the document (still written)."""
    violations = validate(document, PROBE_SCHEMA)
    if violations:
        more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
        document["status"] = "failed"
        document["failure_reason"] = f"probe result violates {PROBE_SCHEMA}: {violations[0]}{more}"
        document["schema_violations"] = [str(v) for v in violations[:20]]
    return document


def write_document(path: Path, document: Mapping[str, Any]) -> Path:
    """Write the document as strict JSON, atomically (temp file + rename)."""
    return write_json_atomic(path, document)
