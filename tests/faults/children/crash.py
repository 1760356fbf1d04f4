"""A trainer that dies: ``crash.py LOG_DIR start|mid|cancelled|signal``.

``start`` exits 1 before writing anything; ``mid`` trains briefly, writes a failed summary
with a learner_failure shutdown (as our trainer does) and exits 1; ``cancelled`` trains
briefly, then does what our trainer does when someone other than the soak sends it SIGTERM:
writes a ``cancelled`` summary (``external_cancellation``) and exits 143 (128 + SIGTERM);
``signal`` trains briefly and kills itself with SIGKILL, leaving no summary.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rundir


def main() -> int:
    log_dir = rundir.log_dir_from_argv()
    when = sys.argv[2]
    if when == "start":
        print("fatal: cannot start", file=sys.stderr)
        return 1
    rundir.start_run(log_dir)
    rundir.train_for(log_dir, 0.3)
    if when == "mid":
        rundir.write_summary(log_dir, rundir.failed("learner_failure"))
        return 1
    if when == "cancelled":
        summary = rundir.failed(
            "external_cancellation",
            owner="external",
            exception={"type": "ExternalCancellation", "message": "received SIGTERM"},
        )
        summary["status"] = "cancelled"
        rundir.write_summary(log_dir, summary)
        return 128 + signal.SIGTERM
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
