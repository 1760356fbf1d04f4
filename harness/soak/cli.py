"""``g1-soak`` (the canonical preset) and ``soak-run`` (the generic runner), docs/contracts.md §g1-soak/§other-commands.

Both validate everything before launching (exit 2, nothing launched, no artifact), load
the schemas the judgement needs (exit 1 when one is unusable), then run the monitor and
always write the artifact; exit 0 iff the soak passed. stdout holds
only the result (a summary table, or one strict-JSON object with ``--json``); the live
status line and ``error:`` lines go to stderr.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from contracts.cli_app import run_app
from contracts.errors import UsageError
from contracts.jsonio import dumps_strict
from contracts.names import Backend
from harness.soak import preflight
from harness.soak.claim import claim_soak_paths
from harness.soak.eta import SoakPlan
from harness.soak.invocation import (
    build_g1_command,
    check_non_negative,
    check_overrides,
    check_paths,
    checked_timing,
    motion_selection,
    resolve_plan,
    trainer_extras,
)
from harness.soak.launch import DEFAULT_STOP_GRACE_S
from harness.soak.learning import DEFAULT_MARGIN, DEFAULT_TOLERANCE_MM, LearningCfg, learning_cfg
from harness.soak.trend import SERIES, TrendThresholdError, parse_threshold_overrides
from harness.soak.verdict_table import render_summary


class TrendMode(str, enum.Enum):
    enforce = "enforce"
    report = "report"


class LearningMode(str, enum.Enum):
    enforce = "enforce"
    report = "report"


# -- shared monitor options ---------------------------------------------------------
_MON = "Monitor"
_TREND = "Resource trends"
LogDirOpt = Annotated[
    Path, typer.Option("--log-dir", help="Run directory (missing or empty; relative to the CWD).")
]
OutputOpt = Annotated[
    Path,
    typer.Option("--output", help="Artifact path (must not exist; outside the log dir)."),
]
MinDurationOpt = Annotated[
    float,
    typer.Option(
        "--min-duration-seconds",
        help="Fail if the trainer ends sooner (>= 0).",
        rich_help_panel=_MON,
    ),
]
G1MinDurationOpt = Annotated[
    float | None,
    typer.Option(
        "--min-duration-seconds",
        help="Fail if the trainer ends sooner (>= 0); default 1800, or the --duration-seconds.",
        show_default=False,
        rich_help_panel=_MON,
    ),
]
SampleOpt = Annotated[
    float,
    typer.Option(
        "--sample-interval-seconds", help="Seconds between samples (> 0).", rich_help_panel=_MON
    ),
]
StartupOpt = Annotated[
    float,
    typer.Option(
        "--startup-timeout-seconds",
        help="Fail without run-dir bytes this long (> 0).",
        rich_help_panel=_MON,
    ),
]
StaleOpt = Annotated[
    float,
    typer.Option(
        "--stale-progress-seconds",
        help="Fail when run-dir bytes stop changing (> 0).",
        rich_help_panel=_MON,
    ),
]
GraceOpt = Annotated[
    float,
    typer.Option(
        "--post-shutdown-grace-seconds",
        help="Wait before the residual-process check (>= 0).",
        rich_help_panel=_MON,
    ),
]
StopGraceOpt = Annotated[
    float,
    typer.Option(
        "--stop-grace-seconds",
        help="After SIGTERM, wait this long for the trainer to finish (summary, checkpoint) "
        "before SIGKILL (> 0).",
        rich_help_panel=_MON,
    ),
]
TrendModeOpt = Annotated[
    TrendMode,
    typer.Option(
        "--trend-mode",
        help="enforce: growth fails the soak; report: recorded only.",
        rich_help_panel=_TREND,
    ),
]
TrendThresholdOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--trend-threshold",
        help=f"SERIES=MAX_PER_HOUR[:MIN_GROWTH], repeatable; series: {', '.join(SERIES)}.",
        rich_help_panel=_TREND,
    ),
]
TrendWarmupOpt = Annotated[
    float | None,
    typer.Option(
        "--trend-warmup-seconds",
        help="Skip this long after training starts (>= 0); default: scaled to the soak.",
        show_default=False,
        rich_help_panel=_TREND,
    ),
]
TrendWindowOpt = Annotated[
    float | None,
    typer.Option(
        "--trend-min-window-seconds",
        help="Shorter windows are insufficient_data (>= 0); default: scaled to the soak.",
        show_default=False,
        rich_help_panel=_TREND,
    ),
]
_LEARN = "Learning verdict"
LearningModeOpt = Annotated[
    LearningMode,
    typer.Option(
        "--learning-mode",
        help="enforce: a regression or a missing evaluation fails the soak; report: recorded only.",
        rich_help_panel=_LEARN,
    ),
]
LearningMarginOpt = Annotated[
    float,
    typer.Option(
        "--learning-margin",
        help="Final may trail the best by this fraction (success rate, R-MPKPE).",
        rich_help_panel=_LEARN,
    ),
]
ToleranceOpt = Annotated[
    float,
    typer.Option(
        "--learning-tolerance-mm",
        help="R-MPKPE must also trail the best by more than this many mm to fail.",
        rich_help_panel=_LEARN,
    ),
]
MinSuccessOpt = Annotated[
    float | None,
    typer.Option(
        "--min-success-rate",
        help="Fail if final uniform-start success is lower (0-1; default: no floor).",
        rich_help_panel=_LEARN,
    ),
]
MinClipSuccessOpt = Annotated[
    float | None,
    typer.Option(
        "--min-clip-success-rate",
        help="On a clip set: fail if any clip's final uniform-start success is lower (0-1).",
        rich_help_panel=_LEARN,
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one strict-JSON object instead of the table.")
]
OverwriteOpt = Annotated[
    bool,
    typer.Option("--overwrite", help="Replace an existing --output artifact (default: refuse)."),
]
CheckOnlyOpt = Annotated[
    bool,
    typer.Option(
        "--check-only",
        help="Run every pre-launch check (the trainer's config check too), launch nothing.",
    ),
]


def _load_schemas() -> None:
    """Compile the schemas the verdict and the artifact use after the run, before launch.

    The judgement then never reads ``schemas/``, which a checkout during a long soak may
    change or remove. Raises SchemaUnavailable (exit 1, nothing launched).
    """
    from contracts.run_summary import MANIFEST_SCHEMA, RUN_SUMMARY_SCHEMA
    from contracts.schemas import preload
    from harness.soak.artifact import SCHEMA_FILE
    from harness.soak.learning import EVALUATION_SCHEMA

    preload((RUN_SUMMARY_SCHEMA, MANIFEST_SCHEMA, SCHEMA_FILE, EVALUATION_SCHEMA))


def _finish(result: Any, json_out: bool) -> int:
    if not result.written:
        print(
            f"error: could not write the soak artifact {result.artifact_path}: {result.write_error}",
            file=sys.stderr,
        )
        if json_out:
            print(dumps_strict(_json_result(result.artifact, None), indent=None), end="")
        return 1
    if json_out:
        print(
            dumps_strict(_json_result(result.artifact, result.artifact_path), indent=None), end=""
        )
    else:
        print(render_summary(result.artifact, result.artifact_path))
    return 0 if result.passed else 1


def _checked(command: Sequence[str], json_out: bool) -> int:
    """``--check-only``: say that every check passed and what would have been launched."""
    if json_out:
        print(dumps_strict({"status": "checked", "command": list(command)}, indent=None), end="")
    else:
        print("checked: every pre-launch check passed; nothing was launched")
    return 0


def _json_result(artifact: dict[str, Any], path: Path | None) -> dict[str, Any]:
    return {
        "status": artifact["status"] if path is not None else "failed",
        "failure_classification": artifact["failure_classification"],
        "failure_reason": artifact["failure_reason"],
        "artifact": None if path is None else str(path),
        "monitor": artifact["monitor"],
    }


def _monitor_cfg(
    *,
    sample: float,
    startup: float,
    stale: float,
    grace: float,
    min_duration: float,
    mode: TrendMode,
    thresholds: list[str] | None,
    warmup: float | None,
    window: float | None,
    stop_grace: float,
    learning: LearningCfg,
    plan: SoakPlan | None = None,
):
    from harness.soak.monitor import MonitorCfg

    try:
        parsed = parse_threshold_overrides(thresholds or [])
    except TrendThresholdError as err:
        raise UsageError(str(err)) from err
    return MonitorCfg(
        sample_interval_s=sample,
        startup_timeout_s=startup,
        stale_progress_s=stale,
        post_shutdown_grace_s=grace,
        stop_grace_s=stop_grace,
        min_duration_s=min_duration,
        trend_mode=mode.value,
        trend_thresholds=parsed,
        trend_warmup_s=warmup,
        trend_min_window_s=window,
        learning=learning,
        plan=plan,
    )


# -- g1-soak ------------------------------------------------------------------------
g1_soak_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


G1_SOAK_EPILOG = (
    "\b\nExamples:\n"
    "  g1-soak --duration-seconds 1800 --iterations 145000 --log-dir runs/g1-soak \\\n"
    "    --output artifacts/g1-soak.json\n"
    "  g1-soak --sim mujoco --motion synthetic --num-envs 16 --iterations 200 \\\n"
    "    --min-duration-seconds 0 --log-dir runs/cpu --output artifacts/cpu.json\n"
    "  g1-soak --duration-seconds 1800 --log-dir runs/g1-thread \\\n"
    "    --extra-override training.collector_placement=thread \\\n"
    "    --output artifacts/g1-thread.json            (no MPS: a collector thread)\n\n"
    "Before the launch, python -m trainer check-config checks the trainer's command line "
    "(bad input: exit 2 with the trainer's message). Exit 0 passed, 1 failed, 2 usage. "
    "Re-judge an artifact's trends with other settings: g1-soak rejudge --help. "
    "Flags, artifact and verdict: docs/soak.md; errors: docs/troubleshooting.md."
)


# g1-soak's own options
NumEnvsOpt = Annotated[int, typer.Option("--num-envs", help="Parallel envs (> 0).")]
DurationOpt = Annotated[
    float | None,
    typer.Option(
        "--duration-seconds",
        help="Train this many seconds, then finish normally (> 0); --iterations is then "
        "an optional cap. The canonical soak: 1800.",
        show_default=False,
    ),
]
IterationsOpt = Annotated[
    int | None,
    typer.Option(
        "--iterations",
        help="Training iterations (> 0); default 65000, with --duration-seconds an optional cap.",
        show_default=False,
    ),
]
SimOpt = Annotated[
    Backend, typer.Option("--sim", help="Owner backend: mjwarp (GPU) or mujoco (CPU).")
]
MotionOpt = Annotated[
    str | None,
    typer.Option(
        "--motion",
        help="synthetic (offline dance clip), march (offline marching clip), dance (the "
        "seed's clip via the hub), an asset id ending in .npz or .csv, or an existing "
        "file; a comma list is a clip set.",
    ),
]
ExtraOverrideOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--extra-override",
        help="Extra trainer KEY=VALUE, repeatable (soak-owned keys rejected).",
    ),
]


@g1_soak_app.command(epilog=G1_SOAK_EPILOG)
def g1_soak(
    log_dir: LogDirOpt,
    output: OutputOpt,
    num_envs: NumEnvsOpt = 1024,
    duration_seconds: DurationOpt = None,
    iterations: IterationsOpt = None,
    min_duration_seconds: G1MinDurationOpt = None,
    sample_interval_seconds: SampleOpt = 5.0,
    startup_timeout_seconds: StartupOpt = 900.0,
    stale_progress_seconds: StaleOpt = 300.0,
    post_shutdown_grace_seconds: GraceOpt = 10.0,
    stop_grace_seconds: StopGraceOpt = DEFAULT_STOP_GRACE_S,
    sim: SimOpt = Backend.MJWARP,
    motion: MotionOpt = None,
    extra_override: ExtraOverrideOpt = None,
    trend_mode: TrendModeOpt = TrendMode.enforce,
    trend_threshold: TrendThresholdOpt = None,
    trend_warmup_seconds: TrendWarmupOpt = None,
    trend_min_window_seconds: TrendWindowOpt = None,
    learning_mode: LearningModeOpt = LearningMode.enforce,
    learning_margin: LearningMarginOpt = DEFAULT_MARGIN,
    min_success_rate: MinSuccessOpt = None,
    learning_tolerance_mm: ToleranceOpt = DEFAULT_TOLERANCE_MM,
    min_clip_success_rate: MinClipSuccessOpt = None,
    json_out: JsonOpt = False,
    overwrite: OverwriteOpt = False,
    check_only: CheckOnlyOpt = False,
) -> None:
    """Soak the canonical FlashSAC / G1 motion-tracking run and judge it (docs/soak.md)."""
    from harness.soak.monitor import run_soak

    # Pre-launch order: types (typer) -> bounds -> paths -> override syntax -> reserved
    # keys -> removed keys -> --motion -> trend thresholds -> the trainer's check-config.
    if num_envs <= 0:
        raise UsageError(f"--num-envs={num_envs} must be an integer > 0")
    if min_duration_seconds is not None:
        check_non_negative("--min-duration-seconds", min_duration_seconds)
    plan = resolve_plan(iterations, duration_seconds, min_duration_seconds)
    timing = checked_timing(
        sample_interval_seconds, startup_timeout_seconds, stale_progress_seconds,
        post_shutdown_grace_seconds, plan.min_duration_s, trend_warmup_seconds,
        trend_min_window_seconds, stop_grace_seconds,
    )  # fmt: skip
    learning = learning_cfg(
        learning_mode.value,
        learning_margin,
        min_success_rate,
        learning_tolerance_mm,
        min_clip_success_rate,
    )
    log_dir, output = check_paths(log_dir, output, overwrite=overwrite)
    user = list(extra_override or [])
    check_overrides(user)
    motion_extra, motion_id = motion_selection(motion, user)
    cfg = _monitor_cfg(
        mode=trend_mode, thresholds=trend_threshold, learning=learning, plan=plan, **timing
    )
    command = build_g1_command(
        sim=sim.value,
        num_envs=num_envs,
        iterations=plan.iterations,
        log_dir=log_dir,
        extras=trainer_extras(user, motion_extra),
        duration_s=plan.duration_s,
    )
    preflight.check_trainer_command(command)  # the trainer's own check; nothing launched yet
    if check_only:
        raise typer.Exit(_checked(command, json_out))
    _load_schemas()
    # the claim is held until the artifact is written
    with claim_soak_paths(log_dir, output, overwrite=overwrite):
        result = run_soak(command, log_dir=log_dir, output=output, cfg=cfg, motion_id=motion_id)
        code = _finish(result, json_out)
    raise typer.Exit(code)


# -- soak-run -----------------------------------------------------------------------
soak_run_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


SOAK_RUN_EPILOG = (
    "\b\nExamples:\n"
    "  soak-run --log-dir runs/any --output artifacts/any.json -- \\\n"
    "    python my_train.py --out {log_dir}\n\n"
    "The command must honour the run-directory contract (docs/soak.md). Exit 0 passed, "
    "1 failed, 2 usage."
)


@soak_run_app.command(context_settings={"allow_interspersed_args": False}, epilog=SOAK_RUN_EPILOG)
def soak_run(
    command: Annotated[
        list[str],
        typer.Argument(help="Trainer command after --; {log_dir} is replaced by --log-dir."),
    ],
    log_dir: LogDirOpt,
    output: OutputOpt,
    min_duration_seconds: MinDurationOpt = 1800.0,
    sample_interval_seconds: SampleOpt = 5.0,
    startup_timeout_seconds: StartupOpt = 900.0,
    stale_progress_seconds: StaleOpt = 300.0,
    post_shutdown_grace_seconds: GraceOpt = 10.0,
    stop_grace_seconds: StopGraceOpt = DEFAULT_STOP_GRACE_S,
    trend_mode: TrendModeOpt = TrendMode.enforce,
    trend_threshold: TrendThresholdOpt = None,
    trend_warmup_seconds: TrendWarmupOpt = None,
    trend_min_window_seconds: TrendWindowOpt = None,
    learning_mode: LearningModeOpt = LearningMode.report,
    learning_margin: LearningMarginOpt = DEFAULT_MARGIN,
    min_success_rate: MinSuccessOpt = None,
    learning_tolerance_mm: ToleranceOpt = DEFAULT_TOLERANCE_MM,
    min_clip_success_rate: MinClipSuccessOpt = None,
    json_out: JsonOpt = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """Soak any trainer command that honours the run-directory contract (docs/soak.md)."""
    from harness.soak.monitor import run_soak

    timing = checked_timing(
        sample_interval_seconds, startup_timeout_seconds, stale_progress_seconds,
        post_shutdown_grace_seconds, min_duration_seconds, trend_warmup_seconds,
        trend_min_window_seconds, stop_grace_seconds,
    )  # fmt: skip
    learning = learning_cfg(
        learning_mode.value,
        learning_margin,
        min_success_rate,
        learning_tolerance_mm,
        min_clip_success_rate,
    )
    log_dir, output = check_paths(log_dir, output, overwrite=overwrite)
    cfg = _monitor_cfg(mode=trend_mode, thresholds=trend_threshold, learning=learning, **timing)
    argv = [str(log_dir) if arg == "{log_dir}" else arg for arg in command]
    if not argv:
        raise UsageError(
            "no trainer command given; pass it after --, e.g. soak-run ... -- python train.py {log_dir}"
        )
    _load_schemas()
    # the claim is held until the artifact is written
    with claim_soak_paths(log_dir, output, overwrite=overwrite):
        result = run_soak(argv, log_dir=log_dir, output=output, cfg=cfg)
        code = _finish(result, json_out)
    raise typer.Exit(code)


# -- g1-soak rejudge ----------------------------------------------------------------
rejudge_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@rejudge_app.command()
def rejudge(
    artifact: Annotated[
        Path, typer.Argument(help="Absolute path of the soak artifact to re-judge (read only).")
    ],
    output: Annotated[
        Path, typer.Option("--output", help="Absolute path of the new artifact (must not exist).")
    ],
    trend_mode: Annotated[
        TrendMode | None,
        typer.Option(
            "--trend-mode",
            help="enforce or report; default: the artifact's mode.",
            show_default=False,
            rich_help_panel=_TREND,
        ),
    ] = None,
    trend_threshold: TrendThresholdOpt = None,
    trend_warmup_seconds: TrendWarmupOpt = None,
    trend_min_window_seconds: TrendWindowOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Judge an artifact's samples again with other trend settings; write a NEW artifact.

    The old artifact is never modified. Thresholds start from the artifact's own; windows
    are scaled to the soak unless given. Exit 0 if the re-judged soak passes, 1 if not.

    Example: g1-soak rejudge $PWD/soak.json --output $PWD/soak-strict.json
    --trend-threshold rss_kib=32768:8192
    """
    from harness.soak import rejudge as rejudge_mod
    from harness.soak.monitor import SoakResult

    check_non_negative("--trend-warmup-seconds", trend_warmup_seconds)
    check_non_negative("--trend-min-window-seconds", trend_min_window_seconds)
    doc, raw = rejudge_mod.load_artifact(artifact)
    rejudge_mod.check_output(output, artifact)
    try:
        rejudge_mod.thresholds_of(doc, trend_threshold or [])
    except TrendThresholdError as err:
        raise UsageError(str(err)) from err
    new = rejudge_mod.rejudge(
        doc,
        source=artifact,
        source_bytes=raw,
        mode=None if trend_mode is None else trend_mode.value,
        threshold_specs=list(trend_threshold or []),
        warmup_s=trend_warmup_seconds,
        min_window_s=trend_min_window_seconds,
    )
    try:
        rejudge_mod.write_rejudged(new, output)
    except (OSError, ValueError, RuntimeError) as err:
        result = SoakResult(new, output, False, f"{type(err).__name__}: {err}")
    else:
        result = SoakResult(new, output, True, None)
    raise typer.Exit(_finish(result, json_out))


def g1_soak_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``g1-soak`` (and of ``g1-soak rejudge ...``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["rejudge"]:
        code = run_app(rejudge_app, args[1:], prog="g1-soak rejudge")
    else:
        code = run_app(g1_soak_app, args, prog="g1-soak")
    if argv is None:
        sys.exit(code)
    return code


def soak_run_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``soak-run``."""
    return run_app(soak_run_app, argv, prog="soak-run")
