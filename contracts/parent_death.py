"""Children that die with their parent: Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``).

A child the project starts (the collector, a benchmark's env beside it, the soak's trainer,
play) must never outlive the process that started it: once that parent is gone nobody stops
it, and it spins for hours. The kernel sends the chosen signal when the parent *thread* that
started the child exits, so start such children from a thread that lives as long as they
should (every caller here starts them from its main thread). The setting survives ``exec``.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


def die_with_parent(parent_pid: int, sig: int = signal.SIGKILL) -> bool:
    """In a child: have the kernel send ``sig`` to this process when its parent exits; when
    the parent ``parent_pid`` is already gone (it died before this call), send it now.

    Returns:
        False where ``prctl`` is unavailable (not Linux); the child then lives on alone.
    """
    prctl = _prctl()
    if prctl is None or prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)
    return True


def die_with_parent_preexec(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``subprocess.Popen(preexec_fn=...)`` that makes the child die with this process.

    Everything is looked up here, in the parent: between fork and exec the child only makes
    the ``prctl`` call and compares two PIDs, taking no lock another thread could hold, which
    is what makes a ``preexec_fn`` safe in a process with threads.
    """
    parent_pid = os.getpid()
    prctl = _prctl()

    def preexec() -> None:
        armed = prctl is not None and prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
        if armed and os.getppid() != parent_pid:
            os.kill(os.getpid(), sig)

    return preexec
