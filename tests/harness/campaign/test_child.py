"""The orphan guard of a cell's soak process, with real processes: when the Ray worker that
started it dies, the soak process gets SIGTERM (which g1-soak treats as a cancellation)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

# The soak process: arm the guard, say so, wait for a signal; record the one that came.
SOAK = """
import os, signal, sys
from harness.campaign.child import set_parent_death_signal
def on_term(*_):
    open(sys.argv[2], "w").write("SIGTERM")
    os._exit(0)
signal.signal(signal.SIGTERM, on_term)
set_parent_death_signal(int(sys.argv[1]))
print("armed", flush=True)
signal.pause()
"""
# The Ray worker: start the soak process, then die without a word.
WORKER = """
import os, subprocess, sys
soak = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(os.getpid()), sys.argv[2]],
                        stdout=subprocess.PIPE, text=True)
assert soak.stdout.readline().strip() == "armed"
print(soak.pid, flush=True)
os._exit(9)
"""
# The node: a subreaper, so the orphaned soak process becomes its child and can be waited for.
NODE = """
import ctypes, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
worker = subprocess.run([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]],
                        capture_output=True, text=True, timeout=60)
pid = int(worker.stdout)
_, status = os.waitpid(pid, 0)
print(worker.returncode, os.waitstatus_to_exitcode(status))
"""


def test_the_soak_process_gets_sigterm_when_its_worker_dies(tmp_path: Path) -> None:
    marker = tmp_path / "signal.txt"
    node = subprocess.run(
        [sys.executable, "-c", NODE, WORKER, SOAK, str(marker)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert node.returncode == 0, node.stderr
    assert node.stdout.split() == ["9", "0"]  # the worker died; the soak process exited 0
    assert marker.read_text(encoding="utf-8") == "SIGTERM"


def test_a_soak_process_whose_worker_is_already_gone_exits_at_once() -> None:
    code = textwrap.dedent(
        """
        from harness.campaign.child import set_parent_death_signal
        set_parent_death_signal(1)  # not our parent: the worker died before the guard was set
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == "error: the campaign worker that launched this soak is gone"
