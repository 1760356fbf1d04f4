"""``python -m harness.campaign.child G1-SOAK-ARGS...``: a cell's soak process.

It asks Linux to send it SIGTERM when the thread that started it (the Ray worker's task)
exits (``PR_SET_PDEATHSIG``), then runs ``g1-soak`` in this process. A worker that crashes or
is killed therefore never leaves an orphan soak holding a GPU: ``g1-soak`` takes the SIGTERM
as an external cancellation, stops the trainer's process group and writes its artifact.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence

PARENT_PID_ENV = "G1SOAK_CAMPAIGN_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def set_parent_death_signal(expected_parent: int | None) -> None:
    """SIGTERM on the parent's death; exit at once if the parent is already gone.

    Raises:
        OSError: prctl failed (not Linux).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(errno)}")
    # The parent may have died between fork and prctl; the signal would never come.
    if expected_parent is not None and os.getppid() != expected_parent:
        sys.stderr.write("error: the campaign worker that launched this soak is gone\n")
        sys.exit(1)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parent = os.environ.pop(PARENT_PID_ENV, None)
    set_parent_death_signal(int(parent) if parent and parent.isdigit() else None)
    from harness.soak.cli import g1_soak_main

    return g1_soak_main(args)


if __name__ == "__main__":
    sys.exit(main())
