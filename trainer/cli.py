"""``train``: validate the owner config, create the run dir, preflight, then train.

docs/contracts.md §train. ``train --algo A --task T --sim S [KEY=VALUE ...]`` runs these steps; the
first failure stops:

1–5. Flags, owner file, owner chain, overrides, semantics (``trainer.config``): a failure
     prints one ``error: ...`` line and exits 2 with nothing written.
6.   Create the run directory and write ``run_config.json`` (``trainer.rundir.run_config``).
7.   Preflight (``trainer.preflight``): a failure writes a failed ``run_summary.json``
     (``learner_failure``, owner ``learner``) and exits 1. Nothing is spawned before it passes.

Then ``trainer.runtime.learner_loop.run_training`` runs the collector/learner runtime and
its result decides the exit code (0 iff the summary says ``completed``); a completed run is
then played unless ``training.no_play=true`` (``trainer.play.hook``: a failed play exits 1
only when ``training.no_play=false`` was given explicitly). SIGINT/SIGTERM
cancel the run: one line, no traceback, exit 128 + the signal (130 for Ctrl-C), a ``cancelled``
summary with ``external_cancellation`` once the run dir exists and, once training has
updated, the checkpoint of the iteration reached. This module is the trainer's only exit-code mapper;
``python -m trainer train ...`` (the soak's interpreter-pinned argv) lands here too.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime as dt
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from contracts import rundir
from contracts.cli_app import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error, run_app
from contracts.identity import RunIdentity
from contracts.names import Owner, ShutdownClassification, ShutdownPhase
from contracts.schemas import SchemaUnavailable
from trainer.config.checks import check_semantics, resolve_log_dir
from trainer.config.errors import FLAGS_TOGETHER, ConfigError
from trainer.config.loader import LoadedConfig, load_config
from trainer.config.schema import RunContext, SeedInfo, TrainingCfg
from trainer.owner_flags import AlgoFlag, SimFlag, TaskFlag
from trainer.preflight import (
    PHASE_BEGIN,
    CudaFacts,
    PreflightError,
    PreflightResult,
    cuda_facts,
    devices_record,
    resolve_learner_device,
    run_preflight,
)
from trainer.rundir.run_config import build_run_config, create_run_dir, write_run_config
from trainer.runtime.signals import cancelled_exit_code

logger = logging.getLogger(__name__)


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def _utc_stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _StartupCancelled(BaseException):
    """SIGINT/SIGTERM arrived before training started (a BaseException so no ``except
    Exception`` in preflight can turn it into a preflight failure)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _cancel_startup_on_signals() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        raise _StartupCancelled(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@dataclass
class _Startup:
    """What the startup has established so far (for failure and cancellation records)."""

    phase: ShutdownPhase = PHASE_BEGIN
    loaded: LoadedConfig | None = None
    run_dir: Path | None = None
    start_time_utc: str = ""
    identity: RunIdentity | None = None
    """Set once the run directory exists: a failure from then on writes its summary."""
    learner_device: str = "cpu"
    sharing: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def set_phase(self, phase: ShutdownPhase) -> None:
        self.phase = phase


def _record_failure(
    state: _Startup,
    *,
    classification: ShutdownClassification,
    owner: Owner,
    exc: dict[str, str],
    status: str = "failed",
) -> None:
    """Write the failed run_summary.json once the run dir exists (best effort, logged)."""
    if state.identity is None:
        return
    from trainer.rundir.summary import RunFailure, RuntimeRecord, write_failed_summary

    try:
        write_failed_summary(
            state.identity,
            RunFailure(
                classification=classification,
                owner=owner,
                phase=state.phase,
                exception=exc,
                status=status,
            ),
            runtime=RuntimeRecord(
                cuda_process_sharing=state.sharing, learner_device=state.learner_device
            ),
        )
    except (OSError, SchemaUnavailable) as err:  # nothing unvalidated is written
        typer.echo(f"warning: cannot write run_summary.json in {state.run_dir}: {err}", err=True)


def _check_thread_environment() -> None:
    """A malformed ``OMP_NUM_THREADS`` is an input error (torch would only warn)."""
    from trainer.cpu_threads import omp_threads

    try:
        omp_threads(os.environ)
    except ValueError as err:
        raise ConfigError(str(err)) from err


@dataclasses.dataclass(frozen=True)
class _Resolved:
    """Steps 1–5 of one run: the checked config and the choices made from it."""

    loaded: LoadedConfig
    run_dir: Path
    seed: SeedInfo
    training: TrainingCfg
    config: dict[str, Any]
    """The resolved config as ``run_config.json`` records it (``log_dir`` filled in)."""


def _prepare(
    state: _Startup,
    algo: str | None,
    task: str | None,
    sim: str | None,
    overrides: Sequence[str],
    *,
    conf_root: Path | None,
    cwd: Path,
    environ: Mapping[str, str],
    argv: Sequence[str] | None,
) -> RunContext:
    """Steps 1–7; returns the resolved run. Raises ConfigError, OSError, SchemaUnavailable
    (step 6), PreflightError."""
    now = dt.datetime.now(dt.UTC)
    state.start_time_utc = _utc_stamp(now)
    # Steps 1-5: nothing is written.
    if not (algo and task and sim):
        raise ConfigError(FLAGS_TOGETHER)
    res = _resolve(algo, task, sim, overrides, conf_root=conf_root, cwd=cwd, env=environ, now=now)
    state.loaded = res.loaded

    # Step 6: the run dir and run_config.json (device facts without a CUDA context).
    facts = cuda_facts()
    learner_device = resolve_learner_device(res.training, sim, facts)
    state.learner_device = learner_device
    _write_run_dir(state, res, facts, learner_device, argv)

    # Step 7: preflight; nothing is spawned before it passes.
    result = run_preflight(
        res.loaded, learner_device=learner_device, facts=facts, on_phase=state.set_phase
    )
    state.sharing = result.cuda_process_sharing
    return _run_context(state, res, result, facts, learner_device)


def _resolve(
    algo: str,
    task: str,
    sim: str,
    overrides: Sequence[str],
    *,
    conf_root: Path | None,
    cwd: Path,
    env: Mapping[str, str],
    now: dt.datetime,
) -> _Resolved:
    """Steps 2–5: load and check the config, choose the run dir and the seed."""
    loaded = load_config(algo, task, sim, overrides, conf_root=conf_root)
    check_semantics(loaded)
    _check_thread_environment()
    run_dir = resolve_log_dir(loaded, now=now, cwd=cwd, environ=env)
    seed = SeedInfo.resolve(
        loaded.algo_cfg.seed, overridden=loaded.seed_overridden, now_ns=time.time_ns()
    )
    training = dataclasses.replace(loaded.training, log_dir=str(run_dir))
    config = copy.deepcopy(loaded.config)
    config["training"]["log_dir"] = str(run_dir)
    return _Resolved(loaded=loaded, run_dir=run_dir, seed=seed, training=training, config=config)


def _write_run_dir(
    state: _Startup,
    res: _Resolved,
    facts: CudaFacts,
    learner_device: str,
    argv: Sequence[str] | None,
) -> None:
    """Step 6: create the run dir and write ``run_config.json``."""
    loaded = res.loaded
    identity = res.seed.identity(
        run_dir=res.run_dir,
        algo=loaded.algo,
        task=loaded.task,
        sim=loaded.sim,
        start_time_utc=state.start_time_utc,
    )
    doc = build_run_config(
        identity,
        devices=devices_record(res.training, learner_device, facts),
        config=res.config,
        overrides=[o.text for o in loaded.overrides],
        owner_files=loaded.owner_files,
        argv=argv,
    )
    create_run_dir(res.run_dir)
    state.run_dir, state.identity = res.run_dir, identity
    write_run_config(res.run_dir, doc)
    typer.echo(f"train: run directory {res.run_dir}", err=True)


def _run_context(
    state: _Startup,
    res: _Resolved,
    result: PreflightResult,
    facts: CudaFacts,
    learner_device: str,
) -> RunContext:
    """The :class:`RunContext` of a run whose preflight passed."""
    loaded = res.loaded
    return RunContext(
        run_dir=res.run_dir,
        algo=loaded.algo,
        task=loaded.task,
        sim_backend=loaded.sim,
        training=res.training,
        algo_cfg=loaded.algo_cfg,
        task_cfg=loaded.task_cfg,
        eval_cfg=loaded.eval_cfg,
        learner_device=learner_device,
        collector_device=learner_device,
        seed=res.seed,
        start_time_utc=state.start_time_utc,
        motion_id=loaded.task_cfg.motion_file,
        motion_path=Path(result.motion.path),
        motion_source=str(result.motion.source),
        motion_sha256=result.motion.sha256,
        scene_xml=result.scene_xml,
        config=res.config,
        overrides=tuple(o.text for o in loaded.overrides),
        cuda_process_sharing=result.cuda_process_sharing,
        memory_estimate_bytes=result.memory_estimate_bytes,
        extra={
            "memory_free_bytes": result.memory_free_bytes,
            "cuda_device_count": facts.device_count,
            "torch_version": facts.torch_version,
        },
    )


def _exit_code(result: object) -> int:
    """Exit code from ``run_training``'s result, the run's exit status (0 = completed, 128 +
    the signal = cancelled)."""
    if isinstance(result, int) and not isinstance(result, bool):
        if result > 128:
            return result
        return EXIT_OK if result == 0 else EXIT_FAILED
    raise TypeError(f"run_training returned {result!r}; expected an int exit status")


def run_train(
    algo: str | None,
    task: str | None,
    sim: str | None,
    overrides: Sequence[str] = (),
    *,
    conf_root: Path | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    argv: Sequence[str] | None = None,
) -> int:
    """The whole ``train`` command as a function; returns the exit code (0, 1, 2, or 128 + the
    signal that cancelled it: 130 for SIGINT, 143 for SIGTERM).

    Args:
        algo, task, sim: the owner selection (all three or none is a usage error).
        overrides: ``KEY=VALUE`` arguments, in order.
        conf_root: conf tree (tests inject a temporary one).
        cwd: base of relative log dirs (default: the process CWD).
        environ: environment for ``G1SOAK_LOG_DIR`` (default: ``os.environ``).
        argv: the command line, recorded in run_config.json.
    """
    state = _Startup()
    try:
        with _cancel_startup_on_signals():
            ctx = _prepare(
                state,
                algo,
                task,
                sim,
                overrides,
                conf_root=conf_root,
                cwd=Path.cwd() if cwd is None else cwd,
                environ=os.environ if environ is None else environ,
                argv=argv,
            )
    except ConfigError as err:
        error(str(err))
        return EXIT_USAGE
    except PreflightError as err:
        state.phase = err.phase
        _record_failure(
            state,
            classification=ShutdownClassification.LEARNER_FAILURE,
            owner=Owner.LEARNER,
            exc={"type": err.error_type, "message": str(err)},
        )
        error(f"preflight failed ({err.phase}): {err}")
        return EXIT_FAILED
    except _StartupCancelled as cancel:
        message = f"received {cancel} before training started"
        _record_failure(
            state,
            classification=ShutdownClassification.EXTERNAL_CANCELLATION,
            owner=Owner.EXTERNAL,
            exc={"type": "ExternalCancellation", "message": message},
            status="cancelled",
        )
        error(f"cancelled: {message}")
        return cancelled_exit_code(cancel.signum)
    except (OSError, SchemaUnavailable) as err:  # step 6: the run dir or run_config.json
        _record_failure(
            state,
            classification=ShutdownClassification.LEARNER_FAILURE,
            owner=Owner.LEARNER,
            exc={"type": type(err).__name__, "message": str(err)},
        )
        error(f"cannot set up the run directory {state.run_dir or ''}: {err}")
        return EXIT_FAILED
    from trainer.play.hook import after_training
    from trainer.runtime.learner_loop import run_training

    code = _exit_code(run_training(ctx))
    code = after_training(
        ctx.run_dir, no_play=ctx.training.no_play, overrides=state.loaded.overrides, code=code
    )
    print_summary_table(ctx.run_dir)
    return code


def print_summary_table(run_dir: Path) -> None:
    """The run's outcome for a person, on stdout, from the run_summary.json just written
    (``contracts.summary_table``: g1-soak shows the same rows under its verdict)."""
    from tabulate import tabulate

    from contracts.evaluation_text import evaluation_rows
    from contracts.summary_table import summary_rows
    from trainer.play.record import summary_rows as play_rows

    try:  # lenient: the table shows what the run wrote
        summary = rundir.read(run_dir / rundir.RUN_SUMMARY, lenient=True)
    except rundir.DocumentError:
        return  # the failure was already reported on stderr
    if isinstance(summary, dict):
        rows = [
            *summary_rows(summary, str(run_dir)),
            *evaluation_rows(summary.get("evaluation")),
            *play_rows(summary),
        ]
        typer.echo(tabulate(rows, tablefmt="simple"))


def _train_epilog() -> str:
    from trainer.config.loader import list_owners

    owners = "\n".join(f"  {owner}" for owner in list_owners())
    return (
        f"\b\nOwners (--algo/--task/--sim):\n{owners}\n\n"
        "\b\nExamples:\n"
        "  train --algo flashsac --task g1_motion_tracking --sim mujoco \\\n"
        "    algo.num_envs=16 algo.max_iterations=50 training.log_dir=runs/cpu-try \\\n"
        "    env.commands.motion.motion_file=motions/g1/synthetic_dance.npz\n"
        "  train --algo flashsac --task g1_motion_tracking --sim mjwarp --print-config\n"
        "  python -m trainer check-config --algo flashsac --task g1_motion_tracking \\\n"
        "    --sim mjwarp\n\n"
        "Every key, its default and meaning: docs/configuration.md. "
        "Errors and fixes: docs/troubleshooting.md."
    )


@app.command(
    help=(
        "Train with the owner config selected by --algo/--task/--sim plus KEY=VALUE "
        "overrides (VALUE is a JSON literal when it parses, else a string; relative paths "
        "are taken from the current directory). A completed run is then played (video and "
        "ONNX export, see play --help) unless training.no_play=true. Exit 0 iff the run "
        "completed (1 also when play fails after an explicit training.no_play=false); 1 on "
        "failure; 2 on a usage or config error (nothing written)."
    ),
    epilog=_train_epilog(),
)
def train(
    algo: AlgoFlag = None,
    task: TaskFlag = None,
    sim: SimFlag = None,
    overrides: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="KEY=VALUE",
            help="Dotted overrides, e.g. algo.num_envs=1024 training.log_dir=/tmp/run.",
            show_default=False,
        ),
    ] = None,
    print_config: Annotated[
        bool,
        typer.Option(
            "--print-config",
            help="Print the resolved config, each value with the file or override that set "
            "it, and exit (nothing written).",
        ),
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="With --print-config: one strict-JSON object.")
    ] = False,
) -> None:
    """Train (see the command help)."""
    if json_out and not print_config:
        raise typer.BadParameter("--json needs --print-config", param_hint="--json")
    if print_config:
        from trainer.print_config import print_config as show_config

        raise typer.Exit(show_config(algo, task, sim, overrides or [], as_json=json_out))
    argv = [sys.executable, *sys.argv] if sys.argv else None
    raise typer.Exit(run_train(algo, task, sim, overrides or [], argv=argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``train`` script and of ``python -m trainer train``.

    Args:
        argv: arguments after the command name (default: ``sys.argv[1:]``).

    Returns:
        The exit code: 0 completed, 1 failed, 2 usage/config error, 128 + the signal when
        SIGINT/SIGTERM cancelled the run (130 for Ctrl-C).
    """
    from trainer.play.hook import headless_training

    with headless_training():  # the play child renders with the caller's MUJOCO_GL
        return run_app(app, argv, prog="train", usage_suffix=" (see train --help)")
