"""``python -m trainer train|play ...``: the commands under an explicit interpreter.

The soak launches ``[sys.executable, "-m", "trainer", "train", ...]`` so the trainer runs
with the monitor's interpreter, and ``train`` launches ``play`` the same way after a run;
each behaves exactly like its script.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

COMMANDS = ("train", "play")


def dispatch(argv: Sequence[str]) -> int:
    """Run ``train`` or ``play`` with the arguments after the command name; returns the exit code."""
    if not argv or argv[0] not in COMMANDS:
        given = repr(argv[0]) if argv else "nothing"
        sys.stderr.write(
            f"error: python -m trainer expects a command ({', '.join(COMMANDS)}), got {given}; "
            "use python -m trainer train --algo A --task T --sim S [KEY=VALUE ...] "
            "or python -m trainer play RUN_DIR\n"
        )
        return 2
    if argv[0] == "play":
        from trainer.play.cli import main as play_main

        return play_main(list(argv[1:]))
    from trainer.cli import main

    return main(list(argv[1:]))


if __name__ == "__main__":
    raise SystemExit(dispatch(sys.argv[1:]))
