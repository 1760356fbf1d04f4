"""A trainer that stops making progress: ``hang.py LOG_DIR before|after|ignore_sigterm|forever``.

``before`` sleeps without writing a byte (startup timeout); ``after`` writes its run
config and a little progress, then sleeps (stale progress); ``ignore_sigterm`` does the
same with SIGTERM ignored, so only SIGKILL ends it; ``forever`` keeps making progress
until it is signalled (for cancellation tests).
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rundir

LIMIT_S = 60.0  # a safety net: never outlive a broken test by much


def main() -> int:
    log_dir = rundir.log_dir_from_argv()
    mode = sys.argv[2]
    if mode == "ignore_sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode != "before":
        rundir.start_run(log_dir)
        rundir.train_for(log_dir, 0.2)
    if mode == "forever":
        rundir.train_for(log_dir, LIMIT_S)
        return 0
    time.sleep(LIMIT_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
