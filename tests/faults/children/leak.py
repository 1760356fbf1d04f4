"""A trainer that completes correctly but leaks: ``leak.py LOG_DIR KIND SECONDS``.

KIND is ``fds`` (pipes), ``eventfd`` (``os.eventfd``), ``shm`` (files in /dev/shm kept
open), or ``plateau`` (opens a batch of pipes once, half way, then stays flat: the
negative control that must not read as a leak). One resource per progress step.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rundir


def main() -> int:
    log_dir = rundir.log_dir_from_argv()
    kind = sys.argv[2]
    seconds = float(sys.argv[3])
    held: list[Any] = []
    shm_dir = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    created: list[Path] = []
    steps = int(seconds / 0.05)

    def leak(i: int) -> None:
        if kind == "fds":
            held.extend(os.pipe())
        elif kind == "eventfd":
            held.append(os.eventfd(0))
        elif kind == "shm":
            path = shm_dir / f"g1soak-fault-{os.getpid()}-{i}"
            created.append(path)
            # unbuffered: it leaks the descriptor, not an 8 KiB buffer the RSS trend would see
            held.append(open(path, "wb", buffering=0))  # noqa: SIM115 - kept open on purpose
        elif kind == "plateau" and i == steps // 2:
            for _ in range(8):
                held.extend(os.pipe())

    try:
        rundir.start_run(log_dir)
        rundir.train_for(log_dir, seconds, each=leak)
        rundir.write_summary(log_dir, rundir.completed(log_dir))
    finally:
        for path in created:
            path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
