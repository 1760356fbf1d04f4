"""``python -m trainer <command> ...``: the trainer's commands under an explicit interpreter.

``train`` and ``play`` behave exactly like their scripts; the soak launches
``[sys.executable, "-m", "trainer", "train", ...]`` so the trainer runs with the monitor's
interpreter, and ``train`` launches ``play`` the same way after a run. ``check-config``
checks a ``train`` command line without training (torch-free; ``g1-soak`` runs it before
the launch, docs/soak.md).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

COMMANDS = ("train", "play", "check-config")


def dispatch(argv: Sequence[str]) -> int:
    """Run the command named by ``argv[0]`` with the arguments after it; returns the exit code."""
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
    if argv[0] == "check-config":
        from trainer.check_config import main as check_main

        return check_main(list(argv[1:]))
    from trainer.cli import main

    return main(list(argv[1:]))


if __name__ == "__main__":
    raise SystemExit(dispatch(sys.argv[1:]))
