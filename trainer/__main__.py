"""``python -m trainer train ...``: the ``train`` command under an explicit interpreter.

The soak launches ``[sys.executable, "-m", "trainer", "train", ...]`` so the trainer runs
with the monitor's interpreter; this behaves exactly like the ``train`` script.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

COMMANDS = ("train",)


def dispatch(argv: Sequence[str]) -> int:
    """Run ``train`` with the arguments after the command name; returns the exit code."""
    if not argv or argv[0] not in COMMANDS:
        given = repr(argv[0]) if argv else "nothing"
        sys.stderr.write(
            f"error: python -m trainer expects a command ({', '.join(COMMANDS)}), got {given}; "
            "use python -m trainer train --algo A --task T --sim S [KEY=VALUE ...]\n"
        )
        return 2
    from trainer.cli import main

    return main(list(argv[1:]))


if __name__ == "__main__":
    raise SystemExit(dispatch(sys.argv[1:]))
