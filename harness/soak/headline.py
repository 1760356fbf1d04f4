"""The soak's ``failure_reason`` and ``failure_classification`` from its findings.

Every finding stays in the artifact's ``judgement``; the reason leaves out the findings that
only restate a consequence of another, so it says the cause once and the fix once:

- a trainer that exited with an error is why the run was short, failed and shut down, so the
  minimum-duration finding, the ``run_summary status`` finding and a shutdown finding whose
  exception the trainer's error line already quotes are left out;
- a trainer that could not be started wrote no run summary, so that finding is left out.

A soak whose only finding is its minimum duration ran correctly but too short
(``too_short``); other findings that no check classified are ``unknown_failure``.
Pure: shared by the verdict and ``g1-soak rejudge``, so a re-judged artifact with the
original settings reproduces the original reason exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from contracts.names import Classification

RETURNCODE_HEAD = "trainer exited with returncode"
MIN_DURATION_HEAD = "soak completed before min_duration_seconds="
LAUNCH_HEAD = "could not start the trainer"
STATUS_HEAD = "run_summary status is "
SHUTDOWN_HEAD = "shutdown classification="
MISSING_SUMMARY = "trainer did not write run_summary.json"
EXCEPTION_MARK = ", exception="


def _restates(reason: str, causes: Sequence[str]) -> bool:
    """Whether ``reason`` only follows from one of ``causes`` (module docstring)."""
    trainer_errors = [c for c in causes if c.startswith(RETURNCODE_HEAD)]
    if reason.startswith((MIN_DURATION_HEAD, STATUS_HEAD)):
        return bool(trainer_errors)
    if reason == MISSING_SUMMARY:
        return any(c.startswith(LAUNCH_HEAD) for c in causes)
    if reason.startswith(SHUTDOWN_HEAD) and EXCEPTION_MARK in reason:
        message = reason.split(EXCEPTION_MARK, 1)[1].split(": ", 1)[-1]
        return any(message in c for c in trainer_errors)
    return False


def launch_reason(err: OSError) -> str:
    """Why the trainer command could not start, and the fix (the soak itself is sound)."""
    what = err.filename if err.filename is not None else "the trainer command"
    return f"{LAUNCH_HEAD}: {what}: {err.strerror or err}; check the trainer command's path"


def failure_reason(reasons: Sequence[str]) -> str | None:
    """The reasons that are causes, joined with ``"; "``; None when there are none."""
    if not reasons:
        return None
    kept = [r for r in reasons if not _restates(r, reasons)]
    return "; ".join(kept or reasons)


def unclassified(reasons: Sequence[str]) -> str:
    """The classification of failing ``reasons`` that none of the checks classified."""
    if reasons and all(r.startswith(MIN_DURATION_HEAD) for r in reasons):
        return Classification.TOO_SHORT
    return Classification.UNKNOWN_FAILURE
