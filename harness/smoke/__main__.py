"""``python -m harness.smoke``: the GPU smoke (harness/smoke/cli.py)."""

import sys

from harness.smoke.cli import main

sys.exit(main())
