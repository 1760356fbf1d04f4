"""A trainer that waits at a gate: ``gated.py LOG_DIR GATE_FIFO``.

It writes a valid run directory, then ``started`` (its pid) beside it, blocks until the test
writes a line to GATE_FIFO, writes a completed summary and exits 0. The test decides when it
finishes, so two soaks overlap without sleeping.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rundir


def main() -> int:
    log_dir, gate = rundir.log_dir_from_argv(), Path(sys.argv[2])
    rundir.start_run(log_dir)
    (log_dir.parent / "started").write_text(str(os.getpid()), encoding="utf-8")
    with open(gate, encoding="utf-8") as handle:
        handle.readline()
    rundir.write_summary(log_dir, rundir.completed(log_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
