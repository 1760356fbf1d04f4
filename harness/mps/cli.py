"""``cumps``: the user-owned CUDA MPS daemon lifecycle (docs/mps.md).

``status`` and ``doctor`` are read-only; ``start`` creates a daemon and its ownership
record; ``env`` prints the variables a launcher needs; ``stop`` stops recorded daemons only
(``stop --if-running`` exits 0 when there is nothing to stop, for scripts). Relative
``--pipe-dir``/``--log-dir`` are taken from the current directory. Exit codes: 0 pass; 1
check failed or missing/stale/foreign record; 2 usage error.
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
from typing import Annotated, Any

import typer
from tabulate import tabulate

from contracts.cli_app import run_app
from contracts.errors import HarnessError, UsageError
from contracts.jsonio import dumps_strict
from contracts.mps import records
from contracts.mps.gpus import (
    GpuDiscoveryError,
    GpuInfo,
    Topology,
    discover_gpus,
    resolve_topology,
    topology_modes_report,
    visible_device_uuids,
)
from contracts.mps.probe import (
    CONTROL_PIPE,
    DEFAULT_PIPE_DIRECTORY,
    SelectionError,
    pipe_kind,
    probe_pipe,
    select_pipe,
)
from harness.mps import daemon

app = typer.Typer(
    name="cumps",
    help="Start, inspect and stop a user-owned CUDA MPS control daemon.",
    epilog=(
        "\b\nExamples:\n"
        '  cumps start && eval "$(cumps env)"\n'
        "  cumps stop --if-running\n\n"
        "Each command's --help has more; the guide is docs/mps.md."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

JsonFlag = Annotated[
    bool, typer.Option("--json", help="Print one strict-JSON object instead of text.")
]
GpusOption = Annotated[
    str | None,
    typer.Option("--gpus", help="GPU index or UUID (default: the single visible GPU)."),
]


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _note(text: str) -> None:
    sys.stderr.write(text + "\n")


def _candidate_gpus(gpus: list[GpuInfo], selector: str | None) -> list[GpuInfo]:
    """Without a selector, the default GPU is chosen among those CUDA_VISIBLE_DEVICES shows."""
    if selector is not None or "CUDA_VISIBLE_DEVICES" not in os.environ:
        return gpus
    raw = os.environ["CUDA_VISIBLE_DEVICES"]
    uuids = visible_device_uuids(raw, gpus) or []
    visible = [gpu for uuid in uuids for gpu in gpus if gpu.uuid == uuid]
    if gpus and not visible:
        raise UsageError(
            f"CUDA_VISIBLE_DEVICES={raw!r} names no physical GPU; pass --gpus <index-or-uuid>"
        )
    return visible


def _topology(selector: str | None, *, allow_all: bool) -> Topology:
    gpus = discover_gpus()
    return resolve_topology(selector, _candidate_gpus(gpus, selector), allow_all=allow_all)


def _gpu_json(gpu: GpuInfo) -> dict[str, Any]:
    return {"index": gpu.index, "uuid": gpu.uuid, "name": gpu.name}


def _entry_json(entry: records.RecordEntry) -> dict[str, Any]:
    rec = entry.record
    control = None if rec is None else os.path.join(rec.pipe_directory, CONTROL_PIPE)
    return {
        "name": entry.name,
        "state": entry.state,
        "reason": entry.reason,
        "path": str(entry.path),
        "pid": None if rec is None else rec.pid,
        "gpu_uuids": [] if rec is None else list(rec.gpu_uuids),
        "pipe_directory": None if rec is None else rec.pipe_directory,
        "log_directory": None if rec is None else rec.log_directory,
        "control_pipe": control,
        "control_pipe_kind": None if control is None else pipe_kind(control),
        "created_at": None if rec is None else rec.created_at,
    }


@app.command(
    epilog=(
        "\b\nExamples:\n"
        "  cumps status\n"
        "  cumps status --json\n"
        "\nDaemons, records and exit codes: docs/mps.md."
    )
)
def status(json_out: JsonFlag = False) -> None:
    """Read-only: platform, GPUs, this user's records (live/stale) and pipes, topology modes."""
    gpus: list[GpuInfo] = []
    gpu_error = None
    try:
        gpus = discover_gpus()
    except GpuDiscoveryError as err:
        gpu_error = str(err)
    raw_pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
    ambient_dir = raw_pipe or DEFAULT_PIPE_DIRECTORY
    doc = {
        "platform": {
            "system": platform.system(),
            "release": platform.release(),
            "host": records.this_host(),
            "uid": os.getuid(),
            "linux": sys.platform.startswith("linux"),
        },
        "gpus": [_gpu_json(gpu) for gpu in gpus],
        "gpu_error": gpu_error,
        "records_root": str(records.cache_root()),
        "records": [_entry_json(entry) for entry in records.list_entries()],
        "ambient": {
            "pipe_directory_env": raw_pipe,
            "pipe_directory": ambient_dir,
            "control_pipe_kind": pipe_kind(os.path.join(ambient_dir, CONTROL_PIPE)),
        },
        "compatible_topology_modes": topology_modes_report(len(gpus)),
    }
    if json_out:
        _out(dumps_strict(doc))
        return
    plat = doc["platform"]
    lines = [
        f"platform: {plat['system']} {plat['release']}  host={plat['host']}  uid={plat['uid']}"
    ]
    if gpu_error:
        lines.append(f"gpus: unavailable ({gpu_error})")
    else:
        lines.append(
            tabulate([[g.index, g.uuid, g.name] for g in gpus], headers=["index", "uuid", "name"])
        )
    rows = [
        [
            e["name"],
            e["state"],
            e["pid"],
            ",".join(e["gpu_uuids"]),
            e["control_pipe"],
            e["control_pipe_kind"],
        ]
        for e in doc["records"]
    ]
    lines.append(f"\nrecords ({doc['records_root']}):")
    lines.append(
        tabulate(rows, headers=["name", "state", "pid", "gpu", "control pipe", "kind"])
        if rows
        else "  none"
    )
    amb = doc["ambient"]
    lines.append(
        f"\nambient: CUDA_MPS_PIPE_DIRECTORY={amb['pipe_directory_env']!r}  "
        f"{amb['pipe_directory']}/{CONTROL_PIPE}: {amb['control_pipe_kind']}"
    )
    lines.append("\ntopology modes:")
    lines.append(
        tabulate([[m["mode"], m["selector"], m["state"]] for m in doc["compatible_topology_modes"]])
    )
    _out("\n".join(lines))


def _doctor_gpu(gpu: GpuInfo) -> dict[str, Any]:
    matching = [rec.name for rec in records.live_records() if gpu.uuid in rec.gpu_uuids]
    result: dict[str, Any] = {
        **_gpu_json(gpu),
        "matching_records": matching,
        "selection": None,
        "probe": None,
        "valid": False,
        "error": None,
    }
    try:
        selection = select_pipe(gpu.uuid)
    except SelectionError as err:
        result["error"] = str(err)
        return result
    result["selection"] = {
        "source": selection.source,
        "pipe_directory": selection.pipe_directory,
        "log_directory": selection.log_directory,
        "record": None if selection.record is None else selection.record.name,
    }
    if selection.record is not None and gpu.uuid not in selection.record.gpu_uuids:
        result["error"] = (
            f"CUDA_MPS_PIPE_DIRECTORY names record {selection.record.name!r}, which covers "
            f"{','.join(selection.record.gpu_uuids)}, not {gpu.uuid}; run `cumps start --gpus {gpu.index}`"
        )
        return result
    probe = probe_pipe(selection.pipe_directory, selection.log_directory)
    result["probe"] = {
        "control_pipe": probe.control_pipe,
        "control_pipe_kind": probe.control_pipe_kind,
        "accessible": probe.accessible,
        "answered": probe.answered,
        "server_pid": probe.server_pid,
    }
    if probe.error is not None:
        result["error"] = f"{probe.error}; check `cumps status` or run `cumps start`"
        return result
    result["valid"] = True
    return result


@app.command(
    epilog=(
        "\b\nExamples:\n"
        "  cumps doctor\n"
        "  cumps doctor --gpus 0 --json\n"
        "\nDaemons, records and exit codes: docs/mps.md."
    )
)
def doctor(gpus: GpusOption = None, json_out: JsonFlag = False) -> None:
    """Read-only: topology, matching records and the trainer's MPS probe; exit 0 iff valid."""
    errors: list[str] = []
    if not sys.platform.startswith("linux"):
        errors.append(f"cumps needs Linux (this is {sys.platform})")
    topology = _topology(gpus, allow_all=True)
    per_gpu = [_doctor_gpu(gpu) for gpu in topology.gpus]
    errors.extend(f"{g['uuid']}: {g['error']}" for g in per_gpu if g["error"])
    doc = {
        "valid": not errors,
        "topology": {
            "mode": topology.mode,
            "selector": topology.selector,
            "gpu_uuids": topology.uuids,
        },
        "gpus": per_gpu,
        "errors": errors,
    }
    if json_out:
        _out(dumps_strict(doc))
    else:
        rows = [
            [
                g["index"],
                g["uuid"],
                ",".join(g["matching_records"]) or "-",
                (g["selection"] or {}).get("pipe_directory"),
                (g["probe"] or {}).get("server_pid"),
                "ok" if g["valid"] else "FAIL",
            ]
            for g in per_gpu
        ]
        _out(
            f"topology: {topology.mode}\n"
            + tabulate(rows, headers=["index", "uuid", "records", "pipe", "server pid", "check"])
            + f"\nverdict: {'valid' if not errors else 'invalid'}"
        )
    if errors:
        raise HarnessError(errors[0])


@app.command(
    epilog=(
        "\b\nExamples:\n"
        "  cumps start\n"
        "  cumps start --gpus 0 --name mps0 --pipe-dir mps/pipe --log-dir mps/log\n"
        "\nDaemons, records and exit codes: docs/mps.md."
    )
)
def start(
    gpus: GpusOption = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Daemon name (default gpu-<uuid>).")
    ] = None,
    pipe_dir: Annotated[
        str | None,
        typer.Option("--pipe-dir", help="Pipe directory (default <tmp>/cumps/<name>/pipe)."),
    ] = None,
    log_dir: Annotated[
        str | None,
        typer.Option("--log-dir", help="Log directory (default <tmp>/cumps/<name>/log)."),
    ] = None,
    foreground: Annotated[
        bool,
        typer.Option("--foreground", help="Run the daemon in the foreground; writes no record."),
    ] = False,
) -> None:
    """Start a user-owned MPS control daemon on one GPU and record its ownership."""
    if not sys.platform.startswith("linux"):
        raise HarnessError(f"cumps needs Linux (this is {sys.platform})")
    topology = _topology(gpus, allow_all=False)
    gpu = topology.gpus[0]
    daemon_name = records.check_name(name if name is not None else records.default_name(gpu.uuid))
    paths = daemon.resolve_paths(daemon_name, pipe_dir, log_dir)
    if not foreground:
        _prepare_name(daemon_name, gpu.uuid)
    outcome = daemon.start_daemon(topology, daemon_name, paths, foreground=foreground)
    if isinstance(outcome, int):
        raise typer.Exit(code=0 if outcome == 0 else 1)
    _out(
        f"started {outcome.name} (pid {outcome.pid}) on {gpu.uuid}\n"
        f"pipe: {outcome.pipe_directory}\nlog:  {outcome.log_directory}\n"
        'next: train ... training.cuda_process_sharing=mps   (or: eval "$(cumps env)")'
    )


def _prepare_name(name: str, gpu_uuid: str) -> None:
    """Refuse a live or foreign record under ``name`` or a live one on the GPU; quarantine a stale one."""
    entries = records.list_entries(include_foreign=True)
    for entry in entries:
        if entry.name == name:
            if entry.state == "live":
                raise HarnessError(
                    f"cumps daemon {name!r} is already running (pid {entry.record.pid}); "
                    f"use `cumps env --name {name}`, or `cumps stop --name {name}` first"
                )
            if entry.state == "foreign":
                raise HarnessError(
                    f"record {name!r} is foreign ({entry.reason}); pass another --name"
                )
            moved = records.quarantine(name)
            _note(f"quarantined {entry.state} record {name!r} ({entry.reason}) to {moved}")
        elif (
            entry.state == "live"
            and entry.record is not None
            and gpu_uuid in entry.record.gpu_uuids
        ):
            raise HarnessError(
                f"live cumps daemon {entry.name!r} already covers {gpu_uuid}; use it "
                f"(`cumps env --name {entry.name}`) or `cumps stop --name {entry.name}` first"
            )


def _named_entry(name: str) -> records.RecordEntry:
    folder = records.cache_root() / records.check_name(name)
    if not (folder / records.RECORD_FILE).exists():
        raise records.RecordError(
            f"no cumps record named {name!r}; run `cumps status` or `cumps start`"
        )
    return records.read_entry(folder)


def _single_live_entry() -> records.RecordEntry:
    entries = records.list_entries()
    live = [e for e in entries if e.state == "live"]
    if len(live) == 1:
        return live[0]
    if len(live) > 1:
        raise UsageError(
            f"{len(live)} live cumps daemons ({', '.join(e.name for e in live)}); pass --name"
        )
    stale = [e.name for e in entries]
    hint = f" (stale: {', '.join(stale)}; `cumps stop --name <name>` removes one)" if stale else ""
    raise records.RecordError(f"no live cumps daemon{hint}; run `cumps start`")


@app.command(
    epilog=(
        "\b\nExamples:\n"
        '  eval "$(cumps env)"\n'
        "  cumps env --name mps0 --json\n"
        "\nDaemons, records and exit codes: docs/mps.md."
    )
)
def env(
    name: Annotated[
        str | None, typer.Option("--name", help="Record name (default: the single live one).")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Print shell-quoted exports for a launcher (`eval "$(cumps env)"`); never changes this shell."""
    entry = _named_entry(name) if name is not None else _single_live_entry()
    if entry.state == "foreign":
        raise records.RecordError(f"record {entry.name!r} is foreign ({entry.reason})")
    if entry.state != "live" or entry.record is None:
        raise records.RecordError(
            f"stale record {entry.name!r} ({entry.reason}); `cumps stop --name {entry.name}` removes it, "
            "then `cumps start`"
        )
    variables = entry.record.environment()
    if json_out:
        _out(dumps_strict({"name": entry.name, "env": variables}))
        return
    _out("\n".join(f"export {key}={shlex.quote(value)}" for key, value in variables.items()))


@app.command(
    epilog=(
        "\b\nExamples:\n"
        "  cumps stop\n"
        "  cumps stop --if-running   # for scripts: exit 0 when nothing runs\n"
        "  cumps stop --all\n"
        "\nDaemons, records and exit codes: docs/mps.md."
    )
)
def stop(
    name: Annotated[
        str | None, typer.Option("--name", help="Record to stop (default: the single live one).")
    ] = None,
    all_: Annotated[
        bool, typer.Option("--all", help="Stop every live record of this user and host.")
    ] = False,
    if_running: Annotated[
        bool,
        typer.Option(
            "--if-running",
            help="Exit 0 when no such daemon runs (for scripts); a stale record is still removed.",
        ),
    ] = False,
) -> None:
    """Stop recorded daemons only; a stale record is removed without contacting any pipe."""
    if name is not None and all_:
        raise UsageError("pass --name or --all, not both")
    if if_running and not all_:
        _stop_if_running(name)
        return
    if all_:
        failures = []
        for entry in records.list_entries():
            if entry.state != "live":
                _note(f"skipped {entry.state} record {entry.name!r} ({entry.reason})")
                continue
            try:
                _out(daemon.stop_entry(entry))
            except HarnessError as err:
                failures.append(str(err))
        if failures:
            raise HarnessError(
                failures[0] + (f" (+{len(failures) - 1} more)" if len(failures) > 1 else "")
            )
        return
    entry = _named_entry(name) if name is not None else _single_live_entry()
    _out(daemon.stop_entry(entry))


def _stop_if_running(name: str | None) -> None:
    """``stop --if-running``: stop the daemon if one runs; nothing running is not a failure."""
    if name is not None:
        folder = records.cache_root() / records.check_name(name)
        entry = records.read_entry(folder) if (folder / records.RECORD_FILE).exists() else None
    else:
        live = [e for e in records.list_entries() if e.state == "live"]
        if len(live) > 1:
            raise UsageError(
                f"{len(live)} live cumps daemons ({', '.join(e.name for e in live)}); pass --name"
            )
        entry = live[0] if live else None
    if entry is None:
        _note("no cumps daemon is running; nothing to stop")
        return
    if entry.state != "live":
        try:
            daemon.stop_entry(entry)  # a stale record is removed; a foreign one raises
        except records.RecordError as err:
            if entry.state == "foreign":
                raise
            _note(str(err))
        return
    _out(daemon.stop_entry(entry))


def _print_error(message: str) -> None:
    first, _, rest = message.partition("\n")
    sys.stderr.write(f"error: {first}\n")
    for line in rest.splitlines():
        sys.stderr.write(f"  {line}\n")


def main(argv: list[str] | None = None) -> int:
    """Console entry point: run the app and map failures to ``error: ...`` and exit 0/1/2."""
    return run_app(
        app,
        argv,
        prog="cumps",
        failures={OSError: lambda err: f"{type(err).__name__}: {err}"},
        printer=_print_error,
    )


if __name__ == "__main__":
    sys.exit(main())
