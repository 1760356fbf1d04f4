"""Test-only fault hooks: environment variables with which the fault suite makes the real
trainer misbehave on purpose (tests/faults). Never set them in a real run.

``G1_TEST_HANG_AT_ITERATION=N``: after the update of iteration N the training loop blocks
forever (signals are still recorded but never acted on), while the progress heartbeat thread
keeps writing; the soak must call it stale on the loop's own counter.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import NoReturn

logger = logging.getLogger(__name__)

HANG_AT_ITERATION_ENV = "G1_TEST_HANG_AT_ITERATION"


def hang_at_iteration(environ: Mapping[str, str] = os.environ) -> int | None:
    """The iteration to hang at, or None when the hook is unset.

    Raises:
        ValueError: the value is not an int >= 1.
    """
    raw = environ.get(HANG_AT_ITERATION_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(
            f"{HANG_AT_ITERATION_ENV}={raw!r} must be an iteration >= 1; "
            "unset it (it is a test-only fault hook)"
        )
    return int(raw)


def hang_forever(iteration: int) -> NoReturn:
    logger.warning(
        "%s=%d: the training loop hangs here on purpose (test-only fault hook)",
        HANG_AT_ITERATION_ENV,
        iteration,
    )
    never = threading.Event()
    while True:
        never.wait(3600.0)
