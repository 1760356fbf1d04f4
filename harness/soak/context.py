"""The artifact's ``context`` (docs/contracts.md §soak-artifact): source tree, GPUs, software, environment,
motion clip.

Package versions come from ``importlib.metadata`` of the monitor's environment; torch and
the simulators are never imported (the harness must start fast and stay independent of
the trainer's runtime). Git calls have 2 s timeouts and degrade to nulls.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import platform
from pathlib import Path
from typing import Any

from contracts.git import git_text
from contracts.identity import MotionRef, SourceTree
from harness.soak.gpu import GpuSampler

GIT_TIMEOUT_S = 2.0
REPO_ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = {
    "torch": "torch",
    "harness": "g1soak",
    "mujoco": "mujoco",
    "mujoco_warp": "mujoco-warp",
    "warp_lang": "warp-lang",
}


def source_context(path: Path = REPO_ROOT) -> dict[str, Any]:
    commit = git_text(path, "rev-parse", "HEAD", timeout=GIT_TIMEOUT_S)
    branch = git_text(path, "rev-parse", "--abbrev-ref", "HEAD", timeout=GIT_TIMEOUT_S)
    status = git_text(path, "status", "--porcelain", timeout=GIT_TIMEOUT_S)
    return SourceTree(
        path=str(path),
        commit=commit or None,
        branch=branch or None,
        dirty_files=0 if status is None else sum(1 for ln in status.splitlines() if ln.strip()),
    ).to_json()


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def software_context() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    for key, dist in DISTRIBUTIONS.items():
        out[key] = _version(dist)
    return out


def environment_context() -> dict[str, str | None]:
    return {
        key: os.environ.get(key)
        for key in ("CUDA_VISIBLE_DEVICES", "CUDA_MPS_PIPE_DIRECTORY", "HF_HUB_OFFLINE")
    }


def _asset_roots() -> list[tuple[str, Path]]:
    roots: list[tuple[str, Path]] = []
    spec = importlib.util.find_spec("trainer")  # locates the package without importing it
    if spec is not None and spec.submodule_search_locations:
        roots.append(("package", Path(next(iter(spec.submodule_search_locations))) / "assets"))
    env_root = os.environ.get("G1SOAK_ASSET_DIR")
    if env_root:
        roots.append(("cache", Path(env_root)))
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        roots.append(("cache", cache / "g1soak" / "assets"))
    return roots


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def motion_context(motion_id: str | None) -> dict[str, Any] | None:
    """``{id, file_sha256, sha256, source}`` of the clip: ``file_sha256`` hashes the file's
    bytes where found locally (``sha256`` is its older name, same value; neither is the
    ``arrays_sha256`` of the clip's arrays); ``source`` is ``path``, ``package`` or
    ``cache``, null when not found."""
    if motion_id is None:
        return None
    candidates: list[tuple[str, Path]] = [("path", Path(motion_id))]
    if not Path(motion_id).is_absolute():
        candidates += [(name, root / motion_id) for name, root in _asset_roots()]
    for source, path in candidates:
        try:
            if path.is_file():
                digest = _sha256_file(path)
                return MotionRef(id=motion_id, file_sha256=digest, source=source).to_json()
        except OSError:
            continue
    return MotionRef(id=motion_id, file_sha256=None, source=None).to_json()


def build_context(gpu: GpuSampler, *, motion_id: str | None) -> dict[str, Any]:
    devices, errors = gpu.devices()
    return {
        "source": source_context(),
        "gpu_devices": devices,
        "gpu_errors": errors,
        "software": software_context(),
        "environment": environment_context(),
        "motion": motion_context(motion_id),
    }
