"""``python -m harness.scaling``: the scaling sweep (harness/scaling/cli.py)."""

import sys

from harness.scaling.cli import main

sys.exit(main())
