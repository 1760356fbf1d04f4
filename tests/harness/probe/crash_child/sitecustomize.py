"""Loaded at interpreter start through PYTHONPATH: with ``FAKE_PROBE_CHILD_CRASH`` set, a
probe child (its argv carries ``--_single-result``) aborts before doing anything, as a
segfaulting backend would; the parent must report it, not hide it."""

import os
import sys

if os.environ.get("FAKE_PROBE_CHILD_CRASH") and "--_single-result" in sys.argv:
    sys.stderr.write("fake backend crash: SIGABRT\n")
    sys.stderr.flush()
    os.abort()
