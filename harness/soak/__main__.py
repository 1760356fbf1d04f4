"""``python -m harness.soak``: ``g1-soak`` without the console script (the GPU smoke uses it)."""

import sys

from harness.soak.cli import g1_soak_main

sys.exit(g1_soak_main())
