"""``play RUN_DIR|CHECKPOINT [--motion M] [--video OUT.mp4] [--onnx OUT.onnx] [--json]``.

Plays a trained policy (docs/play.md): the deterministic actor over the whole clip on CPU
MuJoCo, rendered offscreen into a 50 fps H.264 MP4 with the reference as a translucent ghost
and a filmstrip PNG beside it, and the actor exported to ONNX with its deployment metadata,
verified in onnxruntime. Outputs default to the run directory (``play.mp4``,
``play_filmstrip.png``, ``policy.onnx``) and the result is recorded as the ``play`` section
of the run's ``run_summary.json`` when it has one and the outputs are the run directory's own
(``--video``/``--onnx`` elsewhere leave it untouched). ``train`` runs this after a completed run
(:mod:`trainer.play.hook`).

Exit codes: 0 every output written; 1 a part failed (the summary and the ``error:`` line say
which and why: a render failure names the ``MUJOCO_GL`` setting to try); 2 a bad argument,
run directory, checkpoint or motion clip (nothing written).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from contracts import rundir
from contracts.cli_app import EXIT_OK, EXIT_USAGE, error, run_app
from contracts.errors import UsageError
from contracts.jsonio import dumps_strict
from trainer.play.render import choose_gl_backend

__all__ = ["app", "main"]

MIN_SIZE, MAX_SIZE = 64, 3840

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def _check_size(width: int, height: int) -> None:
    for name, value in (("--width", width), ("--height", height)):
        if not MIN_SIZE <= value <= MAX_SIZE or value % 2:
            msg = f"{name} {value} must be an even number of pixels in {MIN_SIZE}..{MAX_SIZE} (H.264 yuv420p); use e.g. 640x360"
            raise UsageError(msg)


def _log(message: str) -> None:
    typer.echo(f"play: {message}", err=True)


def _table(section: dict[str, Any], summary: str) -> str:
    from tabulate import tabulate

    timings = section.get("timings_s") or {}
    rows = [
        ("status", section["status"]),
        ("reason", section.get("reason") or "-"),
        ("checkpoint", section.get("checkpoint") or "-"),
        ("motion", section.get("motion_id") or "-"),
        ("frames", section.get("frames") if section.get("frames") is not None else "-"),
        ("mean body position error (m)", _num(section.get("mean_body_pos_error_m"), ".3f")),
        ("video", section.get("video") or "-"),
        ("filmstrip", section.get("filmstrip") or "-"),
        ("onnx", section.get("onnx") or "-"),
        ("onnx max |ort - torch|", _num(section.get("onnx_max_abs_error"), ".2e")),
        ("MUJOCO_GL", section.get("gl_backend") or "-"),
        ("time (s)", " ".join(f"{k} {v:.1f}" for k, v in timings.items()) or "-"),
        (rundir.RUN_SUMMARY, summary),
    ]
    return tabulate(rows, tablefmt="simple", maxcolwidths=[None, 100])


def _precheck(target: Path, motion: str | None) -> str | None:
    """The path and clip checks that need no torch or mujoco; ``--motion`` as resolved."""
    from trainer.play.precheck import PlayInputError, locate, motion_choice

    try:
        locate(target)
        return motion_choice(motion)
    except PlayInputError as err:
        raise typer.Exit(error(str(err), EXIT_USAGE)) from None


def _record(run_dir: Path, section: dict[str, Any], *, own: bool) -> str:
    """Record the play in the run's summary when its outputs are the run's own files; the
    table's note on what happened to ``run_summary.json``."""
    from trainer.play.record import record_play

    if not own:
        return "not changed: --video or --onnx wrote outside the run directory's own files"
    try:
        summary = record_play(run_dir, section)
    except (OSError, ValueError) as err:
        raise typer.Exit(error(f"cannot record play in {run_dir}: {err}")) from None
    return str(summary) if summary else "- (the run has no summary yet)"


def _num(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


@app.command(
    help=(
        "Play a trained policy: render its deterministic rollout over the whole clip "
        "(reference as a translucent ghost) into a 50 fps H.264 MP4 plus a filmstrip PNG, "
        "and export it to ONNX with deployment metadata, verified in onnxruntime. The policy "
        "is the checkpoint's averaged one where the run kept it (algo.policy_average_rate), "
        "else its actor, as evaluate scores it. "
        "Outputs go into the run directory by default and are recorded in its "
        "run_summary.json. Rendering uses MUJOCO_GL (default: egl with an NVIDIA driver, "
        "else osmesa).\n\n"
        "Example: play logs/flashsac/g1_motion_tracking/2026-12-01T10-00-00Z_mujoco\n\n"
        "Exit 0 every output written; 1 a part failed; 2 bad input (nothing written)."
    )
)
def play(
    target: Annotated[
        Path,
        typer.Argument(
            metavar="RUN_DIR|CHECKPOINT",
            help="A run directory (its newest model_<iter>.pt is played) or a checkpoint in one.",
            show_default=False,
        ),
    ],
    motion: Annotated[
        str | None,
        typer.Option(
            "--motion",
            help="Clip to play instead of the run's: a short name (g1-motion list), an asset "
            "id or an .npz/.csv path.",
        ),
    ] = None,
    video: Annotated[
        Path | None,
        typer.Option("--video", help="MP4 to write (default RUN_DIR/play.mp4)."),
    ] = None,
    onnx: Annotated[
        Path | None,
        typer.Option("--onnx", help="ONNX file to write (default RUN_DIR/policy.onnx)."),
    ] = None,
    width: Annotated[int, typer.Option("--width", help="Video width in pixels (even).")] = 640,
    height: Annotated[int, typer.Option("--height", help="Video height in pixels (even).")] = 360,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the play section as strict JSON on stdout.")
    ] = False,
) -> None:
    """Play (see the command help)."""
    _check_size(width, height)
    try:
        gl = choose_gl_backend()  # both before anything imports mujoco
    except ValueError as err:
        raise UsageError(str(err)) from None
    motion = _precheck(target, motion)
    from trainer.play.export import preload_exporter

    preload_exporter()
    from trainer.play.session import PlayOptions, default_outputs, run_play
    from trainer.play.source import PlayInputError, resolve_source

    try:
        source = resolve_source(target)
        outputs = default_outputs(source.run_dir, video, onnx)
        record = run_play(source, outputs, PlayOptions(motion, width, height), gl, _log)
    except PlayInputError as err:
        raise typer.Exit(error(str(err), EXIT_USAGE)) from None
    section = record.section()
    summary = _record(source.run_dir, section, own=outputs == default_outputs(source.run_dir))
    typer.echo(
        dumps_strict(section) if json_output else _table(section, summary), nl=not json_output
    )
    if section["status"] != "ok":
        raise typer.Exit(error(f"play failed: {section['reason']}"))
    raise typer.Exit(EXIT_OK)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``play`` script and of ``python -m trainer play``.

    Returns:
        0 every output written, 1 a part failed, 2 bad input.
    """
    return run_app(app, argv, prog="play", usage_suffix=" (see play --help)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
