"""The owner flags every config-reading command takes: ``--algo``, ``--task``, ``--sim``.

One declaration, so ``train`` and ``check-config`` offer the same flags with the same help.
"""

from __future__ import annotations

from typing import Annotated

import typer

AlgoFlag = Annotated[str | None, typer.Option("--algo", help="Algorithm owner, e.g. flashsac.")]
TaskFlag = Annotated[
    str | None, typer.Option("--task", help="Task owner, e.g. g1_motion_tracking.")
]
SimFlag = Annotated[
    str | None, typer.Option("--sim", help="Simulator owner file: mjwarp or mujoco.")
]
