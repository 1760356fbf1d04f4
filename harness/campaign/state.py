"""``campaign.json``: the campaign's state and results, one writer, written atomically.

The driver holds ``.campaign.lock`` (``flock``) for as long as it runs, so two drivers never
write one campaign. Every save recomputes the counts, validates the document against
``schemas/campaign_result.v1.json`` and rewrites ``campaign.json`` and ``index.html``.
``--resume`` keeps every cell whose soak gave a verdict (``passed``, ``failed``) and runs the
rest again, each attempt in a new folder, and only with the campaign file and the
candidate overrides (``soak-campaign regression --override``) it was started with.
"""

from __future__ import annotations

import fcntl
import os
import platform
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from contracts.errors import HarnessError, StrictJsonError, UsageError
from contracts.jsonio import load_strict, write_atomic_text, write_json_atomic
from contracts.schemas import validate
from harness.campaign import candidate, seeds
from harness.campaign.cell import TOKEN_FILE, attempt_relative_dir, blank_result, utc_now
from harness.campaign.spec import CampaignSpec

SCHEMA_FILE = "campaign_result.v1.json"
STATE_FILE = "campaign.json"
HTML_FILE = "index.html"
LOCK_FILE = ".campaign.lock"
KEPT_ON_RESUME = ("passed", "failed")
COUNTED = ("passed", "failed", "lost", "error", "interrupted", "pending")


class CampaignStateError(HarnessError):
    """campaign.json is missing, unreadable or invalid."""


def load_state(directory: Path) -> dict[str, Any]:
    """The validated ``campaign.json`` of ``directory``.

    Raises:
        CampaignStateError: missing, not strict JSON or not valid against the schema.
    """
    path = directory / STATE_FILE
    try:
        doc = load_strict(path)
    except FileNotFoundError as err:
        raise CampaignStateError(
            f"{path} does not exist; pass a directory that `soak-campaign run` wrote"
        ) from err
    except (OSError, StrictJsonError) as err:
        raise CampaignStateError(f"{path} is unreadable: {err}") from err
    violations = validate(doc, SCHEMA_FILE)
    if violations:
        raise CampaignStateError(f"{path} is not a valid campaign.json: {violations[0]}")
    return doc


def acquire_lock(directory: Path) -> IO[str]:
    """Hold the campaign's lock until the returned handle is closed (or the process dies).

    Raises:
        HarnessError: another ``soak-campaign run`` holds it.
    """
    handle = open(directory / LOCK_FILE, "a+", encoding="ascii")  # noqa: SIM115 - kept open
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as err:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise HarnessError(
            f"campaign directory {directory} is in use by another soak-campaign run (pid "
            f"{holder}); wait for it or stop it"
        ) from err
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def driver_running(directory: Path) -> bool:
    """True while a ``soak-campaign run`` holds the campaign's lock."""
    try:
        handle = open(directory / LOCK_FILE, encoding="ascii")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        handle.close()
    return False


def check_new_directory(folder: Path) -> None:
    """A new campaign needs a missing or empty directory.

    Raises:
        UsageError: it exists and is not empty, or is not a directory.
    """
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        hint = (
            "pass --resume to continue it"
            if (folder / STATE_FILE).exists()
            else "pick an empty or new directory"
        )
        raise UsageError(f"campaign directory {folder} is not empty; {hint}")


def check_resumable(spec: CampaignSpec) -> dict[str, Any]:
    """The campaign in ``spec.directory``, if ``spec`` may continue it: the same campaign
    file (its hash) and the same candidate overrides. Cheap: ``--resume`` runs it before the
    preflight.

    Raises:
        UsageError: no valid campaign there, the file changed, or the override list differs.
    """
    try:
        doc = load_state(spec.directory)
    except CampaignStateError as err:
        raise UsageError(f"cannot resume: {err}") from err
    if doc["spec_sha256"] != spec.spec_sha256:
        raise UsageError(
            f"cannot resume {spec.directory}: {spec.path} "
            "changed since the campaign started "
            f"(spec sha256 {spec.spec_sha256[:12]} != {doc['spec_sha256'][:12]}); "
            "restore the file or start a new directory"
        )
    candidate.check_same_on_resume(doc, spec.candidate_overrides, str(spec.directory))
    return doc


def _new_cell(cell: Any) -> dict[str, Any]:
    return {
        "id": cell.id,
        "override": cell.override,
        "seed": cell.seed,
        "motion": cell.motion,
        "sim": cell.sim,
        "g1_soak_args": list(cell.args),
        "cpus": cell.cpus,
        "gpus": cell.gpus,
        "mps": cell.mps,
        "status": "pending",
        "reason": None,
        "attempts": [],
    }


class CampaignState:
    """The document plus the bookkeeping of this invocation (wall time, the directory)."""

    def __init__(self, doc: dict[str, Any], directory: Path) -> None:
        self.doc = doc
        self.directory = directory
        self._wall_before = float(doc["wall_time_s"])
        self._began = time.monotonic()

    # -- creation -----------------------------------------------------------------
    @classmethod
    def create(cls, spec: CampaignSpec, ray_version: str) -> CampaignState:
        """A new campaign in ``spec.directory``, which must be missing or empty.

        Raises:
            UsageError: the directory exists and is not empty, or is not a directory.
        """
        folder = spec.directory
        check_new_directory(folder)
        now = utc_now()
        doc = {
            "schema_version": 1,
            "name": spec.name,
            "campaign_id": uuid.uuid4().hex,
            "spec_sha256": spec.spec_sha256,
            "campaign_file": str(spec.path),
            "directory": str(folder),
            "topology_mode": "task_per_gpu",
            "status": "running",
            "verdict": None,
            "created_at_utc": now,
            "updated_at_utc": now,
            "finished_at_utc": None,
            "wall_time_s": 0.0,
            "ray_version": ray_version,
            "invocations": [],
            "mps": {"requested": spec.mps_requested, "daemons": []},
            "counts": dict.fromkeys(COUNTED, 0),
            "cells": [_new_cell(cell) for cell in spec.cells],
        }
        if spec.candidate_overrides:
            doc[candidate.DOC_KEY] = list(spec.candidate_overrides)
        if spec.over_seeds is not None:
            doc["over_seeds"] = {"config": spec.over_seeds.to_json(), "configurations": []}
        return cls(doc, folder)

    @classmethod
    def resume(cls, spec: CampaignSpec, ray_version: str) -> CampaignState:
        """The campaign in ``spec.directory``, checked against the campaign file.

        Raises:
            UsageError: no campaign there, or it is not resumable (:func:`check_resumable`).
        """
        doc = check_resumable(spec)
        doc["ray_version"] = ray_version
        doc["status"], doc["verdict"], doc["finished_at_utc"] = "running", None, None
        return cls(doc, spec.directory)

    def prepare_directory(self) -> None:
        """Create the directory and its token (what tasks check to see it is shared)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        token = self.directory / TOKEN_FILE
        if not token.exists():
            write_atomic_text(token, self.doc["campaign_id"] + "\n")

    # -- invocations --------------------------------------------------------------
    def begin_invocation(self, *, resumed: bool, address: str | None) -> None:
        self.doc["invocations"].append(
            {
                "started_at_utc": utc_now(),
                "ended_at_utc": None,
                "resumed": resumed,
                "driver_host": platform.node() or "unknown",
                "address": address,
                "outcome": "running",
            }
        )
        reason = "the campaign driver stopped before this attempt reported"
        for cell in self.doc["cells"]:
            for attempt in cell["attempts"]:
                if attempt["status"] == "submitted":
                    attempt.update(status="interrupted", reason=reason)
            if cell["status"] not in KEPT_ON_RESUME:
                cell["status"], cell["reason"] = "pending", None

    def cells_to_run(self) -> list[dict[str, Any]]:
        return [cell for cell in self.doc["cells"] if cell["status"] not in KEPT_ON_RESUME]

    def cell(self, cell_id: str) -> dict[str, Any]:
        return next(cell for cell in self.doc["cells"] if cell["id"] == cell_id)

    # -- attempts -----------------------------------------------------------------
    def add_attempt(self, cell_id: str) -> int:
        """Record a submitted attempt; return its number."""
        cell = self.cell(cell_id)
        number = len(cell["attempts"]) + 1
        cell["attempts"].append(
            {
                "number": number,
                **blank_result(),
                "status": "submitted",
                "submitted_at_utc": utc_now(),
                "directory": attempt_relative_dir(cell_id, number),
            }
        )
        return number

    def end_attempt(self, cell_id: str, number: int, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Fill in an attempt's outcome; the cell takes the attempt's status and reason."""
        cell = self.cell(cell_id)
        attempt = cell["attempts"][number - 1]
        attempt.update({key: value for key, value in fields.items() if key in attempt})
        if attempt["ended_at_utc"] is None:
            attempt["ended_at_utc"] = utc_now()
        cell["status"], cell["reason"] = attempt["status"], attempt["reason"]
        return attempt

    def interrupt_unfinished(self, why: str) -> None:
        for cell in self.doc["cells"]:
            for attempt in cell["attempts"]:
                if attempt["status"] == "submitted":
                    attempt.update(status="interrupted", reason=why, ended_at_utc=utc_now())
            if cell["status"] == "pending":
                cell["status"], cell["reason"] = "interrupted", why

    # -- MPS evidence ---------------------------------------------------------------
    def add_daemons(self, node_id: str, recorded: list[dict[str, Any]]) -> None:
        for record in recorded:
            self.doc["mps"]["daemons"].append(
                {"node_id": node_id, "record": record, "stopped": None, "stop_message": None}
            )

    def daemon_stopped(self, name: str, stopped: bool, message: str) -> None:
        for entry in self.doc["mps"]["daemons"]:
            if entry["record"]["name"] == name and entry["stopped"] is None:
                entry.update(stopped=stopped, stop_message=message)

    # -- the end ------------------------------------------------------------------
    def finish(self, outcome: str, error: str | None = None) -> None:
        """Close this invocation: ``finished`` iff every cell has a final status."""
        invocation = self.doc["invocations"][-1]
        invocation["ended_at_utc"] = utc_now()
        invocation["outcome"] = outcome
        if error:
            invocation["error"] = error
        done = all(cell["status"] not in ("pending", "interrupted") for cell in self.doc["cells"])
        if done:
            self.doc["status"] = "finished"
            passed = self._all_passed()
            self.doc["verdict"] = "passed" if passed else "failed"
            self.doc["finished_at_utc"] = invocation["ended_at_utc"]
        else:
            self.doc["status"] = "interrupted"

    def _all_passed(self) -> bool:
        """Every cell passed or, judged over seeds, every configuration did."""
        over_seeds = seeds.config_of(self.doc)
        if over_seeds is None:
            return all(cell["status"] == "passed" for cell in self.doc["cells"])
        return seeds.campaign_passed(seeds.configurations(self.doc, over_seeds))

    def _judge_over_seeds(self) -> None:
        over_seeds = seeds.config_of(self.doc)
        if over_seeds is not None:
            found = seeds.configurations(self.doc, over_seeds)
            self.doc["over_seeds"]["configurations"] = [c.to_json() for c in found]

    @property
    def passed(self) -> bool:
        return self.doc["verdict"] == "passed"

    def save(self) -> None:
        """Recount, validate and write campaign.json and index.html atomically.

        Raises:
            HarnessError: the document does not validate (a bug: nothing is written).
        """
        from harness.campaign.table import render_html

        doc = self.doc
        doc["updated_at_utc"] = utc_now()
        doc["wall_time_s"] = round(self._wall_before + time.monotonic() - self._began, 3)
        doc["counts"] = {
            status: sum(1 for cell in doc["cells"] if cell["status"] == status)
            for status in COUNTED
        }
        self._judge_over_seeds()
        violations = validate(doc, SCHEMA_FILE)
        if violations:
            raise HarnessError(f"campaign.json would be invalid: {violations[0]}")
        # Pages to share, unlike the temp file's private default mode.
        write_json_atomic(self.directory / STATE_FILE, doc).chmod(0o644)
        write_atomic_text(self.directory / HTML_FILE, render_html(doc, self.directory)).chmod(0o644)
