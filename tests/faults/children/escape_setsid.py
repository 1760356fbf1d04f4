"""A trainer whose grandchild escapes: ``escape_setsid.py LOG_DIR PIDFILE``.

It double-forks; the grandchild calls ``setsid`` (new session and process group), writes
its PID to PIDFILE (outside the run dir) and sleeps. The trainer then completes a valid
run and exits 0, so the only fault is the escaped survivor, which the soak must report
as a residual process. The test kills it afterwards.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rundir

LIMIT_S = 60.0


def main() -> int:
    log_dir = rundir.log_dir_from_argv()
    pidfile = Path(sys.argv[2])
    rundir.start_run(log_dir)
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        tmp = pidfile.with_suffix(".tmp")
        tmp.write_text(str(os.getpid()))
        tmp.rename(pidfile)
        time.sleep(LIMIT_S)
        os._exit(0)
    os.waitpid(child, 0)
    while not pidfile.exists():
        time.sleep(0.01)
    rundir.train_for(log_dir, 0.3)
    rundir.write_summary(log_dir, rundir.completed(log_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
