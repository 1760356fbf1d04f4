"""A CUDA trainer for the GPU path of the monitor: ``gpu_alloc.py LOG_DIR MODE SECONDS``.

MODE ``leak`` allocates another 64 MiB on the GPU every 50 ms and keeps it; ``plateau``
allocates 1 GiB once at the start and keeps it. Either way it trains (appends progress)
for SECONDS and writes a valid completed summary, so only the trend decides.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rundir
import torch


def main() -> int:
    log_dir = rundir.log_dir_from_argv()
    mode, seconds = sys.argv[2], float(sys.argv[3])
    held = (
        [torch.empty(256 * 1024 * 1024, dtype=torch.float32, device="cuda")]
        if mode == "plateau"
        else []
    )
    torch.cuda.synchronize()

    def step(_: int) -> None:
        if mode == "leak":
            held.append(torch.empty(16 * 1024 * 1024, dtype=torch.float32, device="cuda"))

    rundir.start_run(log_dir)
    rundir.train_for(log_dir, seconds, each=step)
    torch.cuda.synchronize()
    rundir.write_summary(log_dir, rundir.completed(log_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
