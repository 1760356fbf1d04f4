"""What ``train`` does after its run: play it, or record why not (docs/play.md).

After a completed run ``train`` launches ``python -m trainer play RUN_DIR`` as a child process
(its own OpenGL platform and memory; a crash in a GL driver cannot take the finished training
with it) unless ``training.no_play=true``, which records ``play`` as ``skipped``. Runs whose
summary does not say ``completed`` are left as they are.

A failed play is recorded in ``run_summary.json`` and printed, but a completed training run
still exits 0, unless play was asked for explicitly: ``training.no_play=false`` given on the
command line (:func:`play_requested`). Then a failed play makes ``train`` exit 1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from contracts import rundir
from contracts.cli_app import EXIT_FAILED, EXIT_OK
from contracts.parent_death import die_with_parent_preexec
from trainer.play.record import PlayRecord, record_play, skipped

__all__ = [
    "NO_PLAY_KEY",
    "after_training",
    "headless_training",
    "play_exit_code",
    "play_requested",
    "run_play_child",
]

NO_PLAY_KEY = "training.no_play"
GL_ENV = "MUJOCO_GL"
_caller_gl: list[str | None] = []
"""The caller's ``MUJOCO_GL`` while :func:`headless_training` holds (a stack)."""


@contextlib.contextmanager
def headless_training() -> Iterator[None]:
    """Run the training processes with ``MUJOCO_GL=disable``; play gets the caller's value.

    Training never renders. With ``MUJOCO_GL=osmesa`` MuJoCo would load Mesa at import, whose
    LLVM crashes triton's when torch loads it later (``torch.optim.Adam`` does): a
    segmentation fault of the learner. The play child renders with the caller's setting.
    """
    _caller_gl.append(os.environ.get(GL_ENV))
    os.environ[GL_ENV] = "disable"
    try:
        yield
    finally:
        saved = _caller_gl.pop()
        if saved is None:
            os.environ.pop(GL_ENV, None)
        else:
            os.environ[GL_ENV] = saved


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    if _caller_gl:
        env.pop(GL_ENV, None)
        if _caller_gl[-1] is not None:
            env[GL_ENV] = _caller_gl[-1]
    return env


def play_requested(overrides: Sequence[Any]) -> bool:
    """True when the command line sets ``training.no_play=false`` (an explicit request)."""
    return any(o.key == NO_PLAY_KEY and o.value is False for o in overrides)


def _summary(run_dir: Path) -> dict[str, Any]:
    try:
        doc = rundir.read(run_dir / rundir.RUN_SUMMARY, lenient=True)
    except rundir.DocumentError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _recorded_status(run_dir: Path) -> str | None:
    play = _summary(run_dir).get("play")
    return play.get("status") if isinstance(play, dict) else None


def _child_failure(code: int, last_error: str | None) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"play was killed by {name} before recording a result"
    detail = last_error or "it printed no error line"
    return f"play exited with code {code} before recording a result ({detail})"


def run_play_child(run_dir: Path, argv: Sequence[str] | None = None) -> str:
    """Run ``play`` on ``run_dir`` in a child process; return the recorded status.

    The child's stdout and stderr pass through. A child that dies without recording its
    result (a signal, a usage error) gets a ``failed`` section naming its exit.
    """
    command = list(argv or [sys.executable, "-m", "trainer", "play", str(run_dir)])
    last_error: str | None = None
    with subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env=_child_env(),
        preexec_fn=die_with_parent_preexec(signal.SIGTERM),  # noqa: PLW1509 - a syscall only
    ) as child:
        try:
            assert child.stderr is not None
            for line in child.stderr:
                sys.stderr.write(line)
                if line.startswith("error: "):
                    last_error = line.removeprefix("error: ").strip()
            code = child.wait()
        except KeyboardInterrupt:
            child.terminate()
            child.wait()
            code, last_error = -signal.SIGINT, None
    status = _recorded_status(run_dir)
    if status is None or (code != 0 and status == "ok"):
        record = PlayRecord()
        record.fail("play", _child_failure(code, last_error))
        record_play(run_dir, record.section())
        status = "failed"
    return status


def after_training(run_dir: Path, *, no_play: bool, overrides: Sequence[Any], code: int) -> int:
    """Play the finished run (or record the skip); return ``train``'s exit code."""
    if code != EXIT_OK or _summary(run_dir).get("status") != "completed":
        return code
    try:
        if no_play:
            record_play(run_dir, skipped(f"{NO_PLAY_KEY}=true"))
            return code
        status = run_play_child(run_dir)
    except (OSError, ValueError) as err:
        sys.stderr.write(f"warning: cannot record play in {run_dir / rundir.RUN_SUMMARY}: {err}\n")
        status = "failed"
    return play_exit_code(code, status, requested=not no_play and play_requested(overrides))


def play_exit_code(code: int, status: str, *, requested: bool) -> int:
    """``train``'s exit code after play: a failed play fails a completed run only on request."""
    return EXIT_FAILED if code == EXIT_OK and status != "ok" and requested else code
