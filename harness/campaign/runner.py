"""The Ray driver of ``soak-campaign run`` (docs/campaign.md); the only module importing Ray.

Ray schedules: every attempt of a cell is one Ray task asking for ``cpus`` CPUs and, for a GPU
cell, ``gpus`` GPUs (the ``task_per_gpu`` topology: with 1, Ray never gives two cells one GPU;
below 1 it packs). The driver only submits, waits and records. Ray retries nothing by itself
(``max_retries=0``): an attempt whose worker or node died is recorded as ``lost`` and, while
the cell's budget lasts, submitted again in a new folder; a soak that failed its verdict is a
result. With MPS cells, one actor per GPU node starts the campaign's cumps daemons there before
the first cell and stops them after the last.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from contracts.errors import HarnessError, StrictJsonError
from contracts.jsonio import load_strict
from harness.campaign import cell as cell_mod
from harness.campaign import mps_fleet
from harness.campaign.spec import CampaignSpec
from harness.campaign.state import CampaignState, acquire_lock

WAIT_S = 1.0
CANCEL_GRACE_S = cell_mod.CHILD_STOP_GRACE_S + 30.0
# Ray's uv integration would run every worker under `uv run` in a copy of the driver's folder
# (a different environment, without this project's extras); workers use this interpreter.
_RAY_ENV = {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
_RAY_ENV_DEFAULTS = {"RAY_USAGE_STATS_ENABLED": "0"}

Progress = Callable[[str], None]


class CampaignInterrupted(BaseException):
    """SIGTERM reached the driver (SIGINT arrives as KeyboardInterrupt)."""


@dataclass(frozen=True)
class RunOptions:
    address: str | None
    resume: bool
    num_cpus: int | None


def _attempt_task(request: cell_mod.AttemptRequest) -> dict[str, Any]:
    """The Ray task of one attempt: read the assigned GPU ids and node, run the cell."""
    import ray

    context = ray.get_runtime_context()
    gpu_ids = [str(x) for x in context.get_accelerator_ids().get("GPU", [])]
    return cell_mod.run_attempt(request, gpu_ids, context.get_node_id())


class NodeMpsAgent:
    """A Ray actor pinned to one GPU node: that node's campaign cumps daemons."""

    def __init__(self, campaign_id: str) -> None:
        self.campaign_id = campaign_id
        self.names: list[str] = []

    def start(self) -> list[dict[str, Any]]:
        records = mps_fleet.start_node_daemons(self.campaign_id)
        self.names = [record.name for record in records]
        return [record.to_json() for record in records]

    def stop(self) -> list[tuple[str, bool, str]]:
        return mps_fleet.stop_daemons(self.names)


def import_ray() -> Any:
    """``ray``, with this project's environment for it; a clear error without the extra."""
    os.environ.update(_RAY_ENV)
    for key, value in _RAY_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    try:
        import ray
    except ImportError as err:
        raise HarnessError(
            "soak-campaign run needs Ray, the optional `campaign` extra: "
            "uv sync --extra mjwarp --extra campaign"
        ) from err
    return ray


def _init_ray(ray: Any, options: RunOptions) -> None:
    common = {"log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if options.address is not None:
            ray.init(address=options.address, **common)
        else:
            ray.init(
                num_cpus=options.num_cpus,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                **common,
            )
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = options.address or "a local Ray instance"
        raise HarnessError(f"cannot start or reach Ray ({where}): {err}") from err


def _check_feasible(ray: Any, spec: CampaignSpec) -> None:
    """Refuse cells no node can ever run (Ray would queue them forever)."""
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    most_cpus = max((node["Resources"].get("CPU", 0.0) for node in nodes), default=0.0)
    most_gpus = max((node["Resources"].get("GPU", 0.0) for node in nodes), default=0.0)
    for cell in spec.cells:
        if cell.cpus > most_cpus:
            raise HarnessError(
                f"cell {cell.id} asks for {cell.cpus:g} CPUs; the largest Ray node has "
                f"{most_cpus:g}; lower cpus_per_cell"
            )
        if cell.gpus > most_gpus:
            raise HarnessError(
                f"cell {cell.id} ({cell.sim}) needs a GPU and no Ray node has one; run on a "
                "GPU host or cluster, or soak mujoco only"
            )


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else "no detail"


def classify_failure(ray: Any, err: BaseException) -> tuple[str, str, str]:
    """``(status, classification, reason)`` of an attempt whose task raised ``err``."""
    exc = ray.exceptions
    lost = (
        exc.WorkerCrashedError,
        exc.NodeDiedError,
        exc.LocalRayletDiedError,
        exc.ObjectLostError,
        exc.OutOfMemoryError,
    )
    name = type(err).__name__
    if isinstance(err, exc.TaskCancelledError):  # may come as RayTaskError(TaskCancelledError)
        return (
            "interrupted",
            "TaskCancelledError",
            "the campaign was interrupted and cancelled this attempt",
        )
    if isinstance(err, lost):
        return "lost", name, f"the cell's Ray worker or node died ({name}: {_first_line(err)})"
    if isinstance(err, exc.RayTaskError):
        cause = getattr(err, "cause", None)
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else _first_line(err)
        return "error", name, f"the cell's task raised {_first_line(detail)}"
    return "error", name, f"Ray failed the attempt ({name}: {_first_line(err)})"


def _started_facts(directory: Path, relative: str) -> dict[str, Any]:
    """What a lost attempt's task wrote when it began (node, host, GPU), if it got that far."""
    try:
        doc = load_strict(directory / relative / cell_mod.STARTED_FILE)
    except (OSError, StrictJsonError):
        return {}
    keys = ("started_at_utc", "node_id", "host", "gpu_ids", "gpu_uuid")
    return {key: doc[key] for key in keys if isinstance(doc, dict) and key in doc}


class CampaignRun:
    """Submits the cells, waits for attempts, retries lost ones, records everything."""

    def __init__(
        self, ray: Any, spec: CampaignSpec, state: CampaignState, progress: Progress
    ) -> None:
        self.ray = ray
        self.spec = spec
        self.state = state
        self.progress = progress
        self.task = ray.remote(_attempt_task)
        self.inflight: dict[Any, tuple[str, int]] = {}
        self.tries: dict[str, int] = {}
        self.total = len(state.doc["cells"])
        self.agents: list[tuple[str, Any]] = []

    # -- MPS -------------------------------------------------------------------------
    def start_daemons(self) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n for n in self.ray.nodes() if n.get("Alive") and n["Resources"].get("GPU", 0) > 0]
        if not nodes:
            raise HarnessError(
                "the campaign asks for training.cuda_process_sharing=mps but no Ray node has a GPU"
            )
        actor = self.ray.remote(num_cpus=0)(NodeMpsAgent)
        for node in nodes:
            strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
            agent = actor.options(scheduling_strategy=strategy).remote(
                self.state.doc["campaign_id"]
            )
            self.agents.append((node["NodeID"], agent))
            try:
                recorded = self.ray.get(agent.start.remote())
            except self.ray.exceptions.RayError as err:
                raise HarnessError(
                    f"cannot start the campaign's MPS daemons on node "
                    f"{node.get('NodeManagerHostname', node['NodeID'])}: {_first_line(err)}"
                ) from err
            self.state.add_daemons(node["NodeID"], recorded)
            names = ", ".join(r["name"] for r in recorded)
            self.progress(f"MPS: started {names} on {node.get('NodeManagerHostname', '?')}")
        self.state.save()

    def stop_daemons(self) -> None:
        for node_id, agent in self.agents:
            try:
                results = self.ray.get(agent.stop.remote(), timeout=120)
            except self.ray.exceptions.RayError as err:  # a dead node's actor: record it
                for entry in self.state.doc["mps"]["daemons"]:
                    if entry["node_id"] == node_id:
                        self.state.daemon_stopped(
                            entry["record"]["name"], False, f"not stopped: {_first_line(err)}"
                        )
                continue
            for name, stopped, message in results:
                self.state.daemon_stopped(name, stopped, message)
                self.progress(f"MPS: {message}")
        self.agents = []

    # -- cells -----------------------------------------------------------------------
    def submit(self, cell_id: str) -> None:
        cell = self.state.cell(cell_id)
        number = self.state.add_attempt(cell_id)
        cell["status"], cell["reason"] = "pending", None
        self.tries[cell_id] = self.tries.get(cell_id, 0) + 1
        request = cell_mod.AttemptRequest(
            campaign_id=self.state.doc["campaign_id"],
            directory=str(self.state.directory),
            cell_id=cell_id,
            number=number,
            args=tuple(cell["g1_soak_args"]),
            gpus=float(cell["gpus"]),
            mps=bool(cell["mps"]),
        )
        ref = self.task.options(
            num_cpus=cell["cpus"],
            num_gpus=cell["gpus"],
            max_retries=0,
            retry_exceptions=False,
            name=f"{cell_id}/attempt-{number}",
        ).remote(request)
        self.inflight[ref] = (cell_id, number)

    def _done_count(self) -> int:
        return sum(1 for c in self.state.doc["cells"] if c["status"] not in ("pending",))

    def _record(self, ref: Any) -> None:
        cell_id, number = self.inflight.pop(ref)
        relative = cell_mod.attempt_relative_dir(cell_id, number)
        try:
            fields = self.ray.get(ref)
        except self.ray.exceptions.RayError as err:
            status, classification, reason = classify_failure(self.ray, err)
            fields = {
                **_started_facts(self.state.directory, relative),
                "status": status,
                "classification": classification,
                "reason": reason,
            }
            if (self.state.directory / relative / cell_mod.ARTIFACT_FILE).exists():
                fields["artifact"] = f"{relative}/{cell_mod.ARTIFACT_FILE}"
        attempt = self.state.end_attempt(cell_id, number, fields)
        retry = attempt["status"] == "lost" and self.tries[cell_id] <= self.spec.max_retries
        where = attempt["host"] or "?"
        if attempt["gpu_uuid"]:
            where += f" {attempt['gpu_uuid']}"
        note = f" ({attempt['reason']})" if attempt["reason"] else ""
        if retry:
            budget = f"{self.tries[cell_id]} of {self.spec.max_retries}"
            self.progress(f"{cell_id} lost on attempt {number}{note}; retrying ({budget})")
            self.submit(cell_id)
        else:
            self.progress(
                f"[{self._done_count()}/{self.total}] {cell_id} {attempt['status']} "
                f"(attempt {number}, {where}){note}"
            )
        self.state.save()

    def run(self) -> None:
        for cell in self.state.cells_to_run():
            self.submit(cell["id"])
        self.state.save()
        while self.inflight:
            ready, _ = self.ray.wait(list(self.inflight), num_returns=1, timeout=WAIT_S)
            for ref in ready:
                self._record(ref)

    def cancel(self, why: str) -> None:
        """Cancel every attempt in flight (the soaks stop and write their artifacts)."""
        if not self.inflight:
            return
        self.progress(f"{why}: cancelling {len(self.inflight)} attempt(s)")
        for ref in self.inflight:
            self.ray.cancel(ref, force=False)
        deadline = time.monotonic() + CANCEL_GRACE_S
        try:
            while self.inflight and time.monotonic() < deadline:
                ready, _ = self.ray.wait(list(self.inflight), num_returns=1, timeout=WAIT_S)
                for ref in ready:
                    self._record(ref)
        except (KeyboardInterrupt, CampaignInterrupted):
            pass  # a second interrupt: stop waiting for the soaks to wind down
        for ref in list(self.inflight):
            self.ray.cancel(ref, force=True)


def _install_sigterm() -> Any:
    def handler(signum: int, _frame: FrameType | None) -> None:
        raise CampaignInterrupted(signal.Signals(signum).name)

    return signal.signal(signal.SIGTERM, handler)


def run_campaign(spec: CampaignSpec, options: RunOptions, progress: Progress) -> CampaignState:
    """Run (or resume) the campaign to its end or interruption; return its final state.

    Raises:
        UsageError: the directory is not new (without --resume) or not resumable.
        HarnessError: no Ray, the lock is held, Ray cannot start, MPS daemons cannot start
            (after campaign.json records the failed invocation).
    """
    ray = import_ray()
    version = str(ray.__version__)
    if options.resume:
        state = CampaignState.resume(spec, version)
    else:
        state = CampaignState.create(spec, version)
    state.prepare_directory()
    lock = acquire_lock(state.directory)
    previous = signal.getsignal(signal.SIGTERM)
    state.begin_invocation(resumed=options.resume, address=options.address)
    state.save()
    run: CampaignRun | None = None
    outcome, error = "finished", None
    try:
        _init_ray(ray, options)
        _install_sigterm()  # after ray.init, which may install its own
        _check_feasible(ray, spec)
        run = CampaignRun(ray, spec, state, progress)
        kept = len(state.doc["cells"]) - len(state.cells_to_run())
        where = options.address or "a local Ray instance"
        progress(
            f"campaign {spec.name}: {len(state.cells_to_run())} cell(s) to run, {kept} kept, "
            f"on {where}; {state.directory}"
        )
        if spec.mps_requested:
            run.start_daemons()
        run.run()
    except (KeyboardInterrupt, CampaignInterrupted) as err:
        why = "interrupted" + (f" ({err})" if str(err) else " (SIGINT)")
        outcome = "interrupted"
        if run is not None:
            run.cancel(why)
        state.interrupt_unfinished(f"the campaign was {why} before this cell finished")
    except HarnessError as err:
        outcome, error = "failed", str(err)
        if run is not None:
            run.cancel("stopping on an error")
        state.interrupt_unfinished(f"the campaign stopped on an error: {_first_line(err)}")
    finally:
        if run is not None:
            run.stop_daemons()
        state.finish(outcome, error)
        state.save()
        if ray.is_initialized():
            ray.shutdown()
        signal.signal(signal.SIGTERM, previous)
        lock.close()
    if error is not None:
        raise HarnessError(f"{error} (recorded in {state.directory / 'campaign.json'})")
    return state
