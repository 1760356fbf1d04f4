"""The campaign's cumps daemons: one per GPU of a node, started and stopped by the campaign.

Each daemon is an ordinary ``single_gpu`` cumps daemon (docs/mps.md): private pipe and log
directories, a verified identity and a written ownership record, stopped only through that
record. Its name, ``campaign-<id8>-gpu<index>``, ties it to the campaign, so a cell finds the
daemon of the GPU it was pinned to and a resumed campaign recognises (and stops) a daemon an
interrupted run of the same campaign left behind. A live record of any other name that covers
the GPU is someone else's daemon: the campaign refuses to start rather than share or stop it.
"""

from __future__ import annotations

from collections.abc import Sequence

from contracts.errors import HarnessError
from contracts.mps import records
from contracts.mps.gpus import GpuInfo, Topology, discover_gpus
from harness.mps import daemon


class CampaignMpsError(HarnessError):
    """A campaign daemon could not be started, found or stopped."""


def name_prefix(campaign_id: str) -> str:
    return f"campaign-{campaign_id[:8]}-"


def daemon_name(campaign_id: str, gpu: GpuInfo) -> str:
    return records.check_name(f"{name_prefix(campaign_id)}gpu{gpu.index}")


def _clear_own_leftover(name: str) -> None:
    """Stop (live) or quarantine (stale) a record of this name from an interrupted run."""
    for entry in records.list_entries():
        if entry.name != name:
            continue
        if entry.state == "live":
            daemon.stop_entry(entry)
        else:
            records.quarantine(name)


def _refuse_foreign(gpu: GpuInfo, prefix: str) -> None:
    for record in records.live_records():
        if gpu.uuid in record.gpu_uuids and not record.name.startswith(prefix):
            raise CampaignMpsError(
                f"live cumps daemon {record.name!r} already covers {gpu.uuid} on "
                f"{records.this_host()}; stop it (`cumps stop --name {record.name}`) or run "
                "the campaign without training.cuda_process_sharing=mps"
            )


def start_node_daemons(campaign_id: str) -> list[records.DaemonRecord]:
    """Start one daemon per GPU that NVML lists on this node; all or none.

    Raises:
        CampaignMpsError / HarnessError: a GPU is covered by a foreign daemon, or a start
            failed; the daemons this call started are stopped first.
    """
    prefix = name_prefix(campaign_id)
    gpus = discover_gpus()
    if not gpus:
        raise CampaignMpsError(f"no GPU is visible on {records.this_host()}")
    started: list[records.DaemonRecord] = []
    try:
        for gpu in gpus:
            name = daemon_name(campaign_id, gpu)
            _clear_own_leftover(name)
            _refuse_foreign(gpu, prefix)
            topology = Topology(mode="single_gpu", gpus=(gpu,), selector=str(gpu.index))
            paths = daemon.resolve_paths(name, None, None)
            outcome = daemon.start_daemon(topology, name, paths, foreground=False)
            assert isinstance(outcome, records.DaemonRecord)  # foreground=False returns it
            started.append(outcome)
    except BaseException:
        stop_daemons([record.name for record in started])
        raise
    return started


def stop_daemons(names: Sequence[str]) -> list[tuple[str, bool, str]]:
    """Stop each named daemon through its record: ``(name, stopped, message)`` per name."""
    results = []
    for name in names:
        entry = next((e for e in records.list_entries() if e.name == name), None)
        if entry is None:
            results.append((name, False, f"no record named {name!r} on {records.this_host()}"))
            continue
        try:
            results.append((name, True, daemon.stop_entry(entry)))
        except HarnessError as err:
            results.append((name, False, str(err)))
    return results


def cell_environment(campaign_id: str, gpu_uuid: str) -> dict[str, str]:
    """The pipe variables of this campaign's daemon covering ``gpu_uuid`` on this node.

    Raises:
        CampaignMpsError: no such live daemon (or, impossibly, several).
    """
    prefix = name_prefix(campaign_id)
    live = [
        rec
        for rec in records.live_records()
        if rec.name.startswith(prefix) and gpu_uuid in rec.gpu_uuids
    ]
    if len(live) != 1:
        raise CampaignMpsError(
            f"{len(live)} live campaign MPS daemons ({prefix}*) cover {gpu_uuid} on "
            f"{records.this_host()}, expected one; did this node join after the campaign "
            "started? rerun with --resume"
        )
    return live[0].environment()
