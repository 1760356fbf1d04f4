"""SIGINT/SIGTERM in the learner: a flag the runtime checks, never an exception mid-write."""

from __future__ import annotations

import logging
import signal
from types import FrameType
from typing import Any, Self

from trainer.runtime.shutdown import ExternalCancellation

logger = logging.getLogger(__name__)


def cancelled_exit_code(signum: int) -> int:
    """The shell's convention for a process a signal stopped: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + signum


class SignalGuard:
    """SIGINT/SIGTERM set a flag (docs/contracts.md §train: graceful ``external_cancellation``)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Self:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
            logger.warning("received %s: stopping the run", signal.Signals(signum).name)

    def check(self) -> None:
        if self.signum is not None:
            raise ExternalCancellation(self.signum)

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
