"""run_config.json: what a run was asked to do, written when its directory is created.

docs/contracts.md §run-directory: ``{run: {<identity>, hostname, git, devices}, config:
<resolved>, overrides: [str]}``, the identity's fields those of ``contracts.identity.RunIdentity``
(algo, task, sim_backend, log_dir, start_time_utc and the seed's three). ``train`` writes it in step 6, before
preflight, so even a run that fails preflight says what it was. The document is validated
against ``schemas/run_config.v1.json`` before the atomic rename; readers (the soak judge,
``soak-report``) validate after loading.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contracts import rundir
from contracts.git import git_text
from contracts.identity import RunIdentity

RUN_CONFIG_SCHEMA = rundir.SCHEMAS[rundir.RUN_CONFIG]
GIT_TIMEOUT_S = 2.0
"""Each git query may take this long; a slow or missing git records nulls."""


class RunConfigInvalid(ValueError):
    """The run_config document violates its schema (a bug in the writer: nothing is written)."""


def git_info(source_dir: Path | None = None) -> dict[str, Any]:
    """``{commit, branch, dirty}`` of the checkout holding the trainer (nulls outside git)."""
    cwd = source_dir or Path(__file__).resolve().parent
    commit = git_text(cwd, "rev-parse", "HEAD", timeout=GIT_TIMEOUT_S)
    if not commit:
        return {"commit": None, "branch": None, "dirty": None}
    branch = git_text(cwd, "rev-parse", "--abbrev-ref", "HEAD", timeout=GIT_TIMEOUT_S)
    status = git_text(cwd, "status", "--porcelain", "--untracked-files=no", timeout=GIT_TIMEOUT_S)
    return {
        "commit": commit,
        "branch": None if branch in (None, "HEAD") else branch,
        "dirty": None if status is None else bool(status),
    }


def build_run_config(
    identity: RunIdentity,
    *,
    devices: Mapping[str, Any],
    config: Mapping[str, Any],
    overrides: Sequence[str],
    owner_files: Sequence[Path] = (),
    argv: Sequence[str] | None = None,
    hostname: str | None = None,
    git: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble the run_config document (not yet validated; see :func:`write_run_config`).

    Args:
        identity: the run (its eight document fields: ``RunIdentity.document_fields``).
        devices: requested/resolved learner and collector devices and the CUDA facts.
        config: the resolved config (contract spelling, plain JSON types).
        overrides: the CLI ``KEY=VALUE`` arguments exactly as given.
    """
    run: dict[str, Any] = {
        **identity.document_fields(),
        "hostname": hostname if hostname is not None else platform.node(),
        "git": dict(git) if git is not None else git_info(),
        "devices": dict(devices),
    }
    if owner_files:
        run["owner_files"] = [str(p) for p in owner_files]
    if argv is not None:
        run["argv"] = list(argv)
    return {"run": run, "config": dict(config), "overrides": list(overrides)}


def write_run_config(run_dir: Path, doc: Mapping[str, Any]) -> Path:
    """Validate ``doc`` and write ``<run_dir>/run_config.json`` atomically.

    Raises:
        RunConfigInvalid: the document violates ``schemas/run_config.v1.json``.
        OSError: the file cannot be written.
    """
    try:
        return rundir.write(Path(run_dir) / rundir.RUN_CONFIG, doc)
    except ValueError as err:
        raise RunConfigInvalid(f"{rundir.RUN_CONFIG} violates {err}") from None


def create_run_dir(path: Path) -> Path:
    """Create the (checked-fresh) run directory and its parents; returns it.

    An existing directory is accepted only because step 5 proved it holds nothing but the
    harness's ``soak-console.log``.
    """
    os.makedirs(path, exist_ok=True)
    return path
