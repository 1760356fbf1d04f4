"""``python -m trainer check-config``: what ``train`` checks before it writes, and nothing else.

Resolves the owner chain and the ``KEY=VALUE`` overrides, runs the semantic checks, picks
the run directory (inspected, never created), resolves the motion clip and loads its
contents against the G1 model of the config. It imports neither torch nor warp and writes
nothing but the asset cache (a built-in clip generated, a hub clip downloaded), so
``g1-soak`` runs it before every launch and rejects bad input in about a second with the
trainer's own one-line message (docs/soak.md "Before the launch").

Exit codes: 0 the config would start; 2 the command line, the config or the motion clip is
wrong (``error: <message>``, the same message ``train`` prints); 1 the check could not be
made (the G1 model is missing, the hub cannot be reached).
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from contracts.cli_app import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error, run_app
from contracts.jsonio import dumps_strict
from trainer.config.checks import check_semantics, resolve_log_dir
from trainer.config.errors import FLAGS_TOGETHER, ConfigError
from trainer.config.loader import LoadedConfig, list_owners, load_config
from trainer.owner_flags import AlgoFlag, SimFlag, TaskFlag

__all__ = ["CheckFailed", "CheckResult", "app", "check_config", "main"]

PROG = "python -m trainer check-config"


class CheckFailed(Exception):
    """The check could not be made (exit 1): not the input's fault."""


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """What a passing check resolved."""

    loaded: LoadedConfig
    log_dir: Path
    motion_id: str
    motion_path: Path
    motion_source: str
    motion_frames: int
    motion_fps: int
    motion_arrays_sha256: str

    def to_json(self) -> dict[str, Any]:
        loaded = self.loaded
        return {
            "status": "ok",
            "owner": f"{loaded.algo}/{loaded.task}/{loaded.sim}",
            "owner_files": [str(p) for p in loaded.owner_files],
            "overrides": [o.text for o in loaded.overrides],
            "log_dir": str(self.log_dir),
            "motion": {
                "id": self.motion_id,
                "path": str(self.motion_path),
                "source": self.motion_source,
                "frames": self.motion_frames,
                "fps": self.motion_fps,
                "arrays_sha256": self.motion_arrays_sha256,
            },
        }


def _hub_unreachable(err: BaseException) -> bool:
    from trainer.hub import HubUnreachable

    current: BaseException | None = err
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        if isinstance(current, HubUnreachable):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def check_config(
    algo: str | None,
    task: str | None,
    sim: str | None,
    overrides: Sequence[str] = (),
    *,
    conf_root: Path | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> CheckResult:
    """Every check of ``train`` up to its run directory, plus the clip's contents.

    Raises:
        ConfigError: the command line, the config or the motion clip is wrong (exit 2).
        CheckFailed: the G1 model is missing or the hub cannot be reached (exit 1).
    """
    from trainer.assets import AssetError
    from trainer.motion_import.resolve import install_motion_importer
    from trainer.task.motion import MotionError, resolve_motion
    from trainer.task.motion_check import check_motion_file

    if not (algo and task and sim):
        raise ConfigError(FLAGS_TOGETHER)
    loaded = load_config(algo, task, sim, overrides, conf_root=conf_root)
    check_semantics(loaded, read_checkpoint=False)
    log_dir = resolve_log_dir(
        loaded,
        now=dt.datetime.now(dt.UTC),
        cwd=Path.cwd() if cwd is None else cwd,
        environ=os.environ if environ is None else environ,
    )
    task_cfg = loaded.task_cfg
    install_motion_importer()
    try:
        resolved = resolve_motion(
            task_cfg.motion_file, hub_repo=task_cfg.hub_repo, hub=loaded.training.motion_hub
        )
        facts = check_motion_file(Path(resolved.path), task_cfg.scene)
    except MotionError as err:
        if _hub_unreachable(err):
            raise CheckFailed(str(err)) from err
        raise ConfigError(str(err)) from err
    except (AssetError, OSError) as err:
        raise CheckFailed(str(err)) from err
    return CheckResult(
        loaded=loaded,
        log_dir=log_dir,
        motion_id=task_cfg.motion_file,
        motion_path=Path(resolved.path),
        motion_source=str(resolved.source),
        motion_frames=facts.frames,
        motion_fps=facts.fps,
        motion_arrays_sha256=facts.arrays_sha256,
    )


def render(result: CheckResult) -> str:
    """The passing check for a person: owner, overrides, run directory, motion clip."""
    from tabulate import tabulate

    doc = result.to_json()
    motion = doc["motion"]
    rows = [
        ("config", "ok"),
        ("owner", doc["owner"]),
        ("overrides", ", ".join(doc["overrides"]) or "-"),
        ("run directory", doc["log_dir"]),
        ("motion", f"{motion['id']} ({motion['source']})"),
        ("motion file", motion["path"]),
        ("motion frames", f"{motion['frames']} ({result.motion_frames / motion['fps']:.1f} s)"),
        ("motion arrays_sha256", motion["arrays_sha256"]),
    ]
    return tabulate(rows, tablefmt="simple", disable_numparse=True)


def _owner_lines() -> str:
    return "\n".join(f"  {owner}" for owner in list_owners())


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command(
    help=(
        "Check a train command line without training: the owner config, every KEY=VALUE "
        "override, the run directory and the motion clip's contents, with train's own "
        "messages. Imports neither torch nor warp; writes nothing but the asset cache. "
        "Exit 0 the run would start; 2 bad input; 1 the check could not be made."
    ),
    epilog=(
        "\b\nOwners (--algo/--task/--sim):\n" + _owner_lines() + "\n\n\b\nExamples:\n"
        "  python -m trainer check-config --algo flashsac --task g1_motion_tracking \\\n"
        "    --sim mujoco \\\n"
        "    env.commands.motion.motion_file=motions/g1/synthetic_dance.npz\n"
        "  python -m trainer check-config --algo flashsac --task g1_motion_tracking \\\n"
        "    --sim mjwarp algo.batch_size=256 --json\n\n"
        "Every key: docs/configuration.md. The g1-soak preflight: docs/soak.md."
    ),
)
def check(
    algo: AlgoFlag = None,
    task: TaskFlag = None,
    sim: SimFlag = None,
    overrides: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="KEY=VALUE", help="Dotted overrides, as for train.", show_default=False
        ),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one strict-JSON object instead of the table.")
    ] = False,
) -> None:
    """Check a train command line (see the command help)."""
    try:
        result = check_config(algo, task, sim, overrides or [])
    except ConfigError as err:
        raise typer.Exit(error(str(err), EXIT_USAGE)) from None
    except CheckFailed as err:
        raise typer.Exit(error(str(err), EXIT_FAILED)) from None
    if json_out:
        sys.stdout.write(dumps_strict(result.to_json()) + "\n")
    else:
        sys.stdout.write(render(result) + "\n")
    raise typer.Exit(EXIT_OK)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m trainer check-config``; returns 0, 1 or 2."""
    return run_app(app, argv, prog=PROG, usage_suffix=f" (see {PROG} --help)")
