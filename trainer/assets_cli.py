"""``g1-pull-assets --robot g1 [--asset-dir DIR] [--hub auto|skip|require] [--json]``.

Materialises everything a G1 run needs into the asset cache root (docs/contracts.md §other-commands, §assets-and-motion):
the robot MJCF (copied from the model bundled in the package when no asset root has it),
our ``scene_flat.xml``, the synthetic offline clip and, depending on ``--hub``, the seed's
dance clip from the Hugging Face hub. Only ``g1.xml`` is copied: the scene drops the visual
meshes, so no mesh file is needed to load it. Each run prints one row per asset (item,
status, ``file_sha256`` of the file's bytes, ``arrays_sha256`` of an NPZ's arrays, path);
running it again reports ``present``. The soak artifact's ``context.motion.file_sha256``
is the same file hash (docs/assets.md "Two hashes"). Exit 0 iff the model and
the synthetic clip are present (and the hub clip too under ``--hub require``); 1 otherwise;
2 for usage errors.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Literal

import typer
from tabulate import tabulate

from contracts.cli_app import run_app
from contracts.errors import UsageError
from contracts.jsonio import dumps_strict
from contracts.paths import absolute
from trainer.assets import PACKAGE_ASSET_ROOT, AssetError, cache_root, sha256_file
from trainer.config.defaults import default_scene_cfg
from trainer.sim.scene import (
    G1_MJCF_ID,
    SCENE_FLAT_ID,
    build_g1_model,
    locate_g1_mjcf,
    materialize_scene,
)
from trainer.task.motion import (
    DANCE_MOTION_ID,
    DEFAULT_HUB_REPO,
    SYNTHETIC_MOTION_ID,
    MotionError,
    download_from_hub,
    ensure_synthetic_clip,
    hub_offline,
    npz_sha256,
)

__all__ = ["AssetRow", "app", "main", "pull_assets"]

Status = Literal["present", "generated", "copied", "downloaded", "missing"]
SUPPORTED_ROBOTS = ("g1",)
SHORT_HASH = 16


class HubChoice(str, Enum):
    """How to treat the hub-only dance clip."""

    auto = "auto"  # try unless HF_HUB_OFFLINE; warn on failure
    skip = "skip"  # never contact the hub
    require = "require"  # a missing clip fails the command


@dataclass(frozen=True)
class AssetRow:
    """One line of the report: an asset id, where it lives and what this run did."""

    item: str
    path: str
    status: Status
    file_sha256: str | None
    """SHA-256 of the file's bytes (None when missing)."""
    arrays_sha256: str | None = None
    """An NPZ clip's :func:`~trainer.task.motion.arrays_sha256` (None for other files)."""

    @classmethod
    def found(cls, item: str, path: Path, status: Status) -> AssetRow:
        """The row of an existing file, with its hashes."""
        arrays = npz_sha256(path) if path.suffix == ".npz" else None
        return cls(item, str(path), status, sha256_file(path), arrays)


@dataclass(frozen=True)
class PullResult:
    rows: list[AssetRow]
    warnings: list[str]
    errors: list[str]

    @property
    def ok(self) -> bool:
        return not self.errors


def _pull_model(cache: Path) -> tuple[AssetRow, Path | None, str | None]:
    target = cache / G1_MJCF_ID
    try:
        found = locate_g1_mjcf(default_scene_cfg(), asset_roots=(PACKAGE_ASSET_ROOT, cache))
    except AssetError as err:
        return AssetRow(G1_MJCF_ID, str(target), "missing", None), None, str(err)
    if found in (PACKAGE_ASSET_ROOT / G1_MJCF_ID, target):
        return AssetRow.found(G1_MJCF_ID, found, "present"), found, None
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(found, tmp)
    tmp.replace(target)
    return AssetRow.found(G1_MJCF_ID, target, "copied"), target, None


def _pull_dance(cache: Path, hub: HubChoice, hub_repo: str) -> tuple[AssetRow, str | None]:
    for root in (PACKAGE_ASSET_ROOT, cache):
        candidate = root / DANCE_MOTION_ID
        if candidate.is_file():
            return AssetRow.found(DANCE_MOTION_ID, candidate, "present"), None
    target = cache / DANCE_MOTION_ID
    missing = AssetRow(DANCE_MOTION_ID, str(target), "missing", None)
    if hub is HubChoice.skip:
        return missing, None
    if hub_offline():
        return missing, f"{DANCE_MOTION_ID} not downloaded: hub download disabled by HF_HUB_OFFLINE"
    try:
        path = download_from_hub(DANCE_MOTION_ID, hub_repo, cache)
    except Exception as err:  # noqa: BLE001 (any hub failure: a warning, or an error under require)
        cause = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return missing, f"{DANCE_MOTION_ID} not downloaded: {type(err).__name__}: {cause}"
    return AssetRow.found(DANCE_MOTION_ID, path, "downloaded"), None


def pull_assets(cache: Path, *, hub: HubChoice, hub_repo: str = DEFAULT_HUB_REPO) -> PullResult:
    """Materialise the G1 assets into ``cache`` and report one row per asset.

    Args:
        cache: the cache root (``--asset-dir`` or docs/contracts.md §assets-and-motion's default).
        hub: what to do about the hub-only dance clip.
        hub_repo: the Hugging Face dataset repository.

    Returns:
        The rows, stderr warnings and errors; ``ok`` is the exit-0 condition.
    """
    rows: list[AssetRow] = []
    warnings: list[str] = []
    errors: list[str] = []
    model_row, model_path, model_error = _pull_model(cache)
    rows.append(model_row)
    scene_path = cache / SCENE_FLAT_ID
    synth_path = cache / SYNTHETIC_MOTION_ID
    if model_path is None:
        errors.append(model_error or "G1 model missing; run: g1-pull-assets --robot g1")
        rows.append(AssetRow(SCENE_FLAT_ID, str(scene_path), "missing", None))
        rows.append(AssetRow(SYNTHETIC_MOTION_ID, str(synth_path), "missing", None))
    else:
        cfg = default_scene_cfg(robot_mjcf=str(model_path))
        before = scene_path.read_bytes() if scene_path.is_file() else None
        materialize_scene(cfg, cache)
        scene_status: Status = "present" if before == scene_path.read_bytes() else "generated"
        rows.append(AssetRow.found(SCENE_FLAT_ID, scene_path, scene_status))
        path, status, _ = ensure_synthetic_clip(cache, build_g1_model(cfg))
        rows.append(AssetRow.found(SYNTHETIC_MOTION_ID, path, status))
    dance_row, dance_problem = _pull_dance(cache, hub, hub_repo)
    rows.append(dance_row)
    if dance_problem is not None:
        if hub is HubChoice.require:
            errors.append(
                f"{dance_problem}; --hub require needs it (unset HF_HUB_OFFLINE, check network/HF_ENDPOINT)"
            )
        else:
            warnings.append(f"{dance_problem}; offline runs can use {SYNTHETIC_MOTION_ID}")
    elif hub is HubChoice.require and dance_row.status == "missing":
        errors.append(f"{DANCE_MOTION_ID} missing under --hub require")
    return PullResult(rows=rows, warnings=warnings, errors=errors)


def _short(digest: str | None) -> str:
    return "-" if digest is None else digest[:SHORT_HASH] + "..."


def render_rows(rows: list[AssetRow]) -> str:
    """The report for a person: hashes cut to their first 16 hex digits (full in --json)."""
    table = [
        [r.item, r.status, _short(r.file_sha256), _short(r.arrays_sha256), r.path] for r in rows
    ]
    headers = ["item", "status", "file_sha256", "arrays_sha256", "path"]
    return tabulate(table, headers=headers, disable_numparse=True)


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command(
    epilog=(
        "\b\nExamples:\n"
        "  g1-pull-assets --robot g1\n"
        "  g1-pull-assets --robot g1 --hub skip --asset-dir ./assets --json\n\n"
        "Assets, roots and the two hashes: docs/assets.md. Exit 0 assets ready, 1 failed, "
        "2 usage."
    )
)
def pull(
    robot: Annotated[
        str, typer.Option("--robot", help="Robot whose assets to pull (only g1).")
    ] = "g1",
    asset_dir: Annotated[
        Path | None,
        typer.Option(
            "--asset-dir",
            help="Cache root (relative to the CWD); default $G1SOAK_ASSET_DIR or "
            "~/.cache/g1soak/assets.",
        ),
    ] = None,
    hub: Annotated[
        HubChoice,
        typer.Option("--hub", help="auto: try the hub unless HF_HUB_OFFLINE; skip; require."),
    ] = HubChoice.auto,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the rows as a strict-JSON list (full hashes).")
    ] = False,
) -> None:
    """Materialise the G1 model, scene_flat.xml and motion clips into the asset cache."""
    if robot not in SUPPORTED_ROBOTS:
        raise UsageError(f"--robot {robot!r} is not supported; use --robot g1")
    cache = absolute(asset_dir if asset_dir is not None else cache_root())
    result = pull_assets(cache, hub=hub)
    for warning in result.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    if as_json:
        sys.stdout.write(dumps_strict([asdict(row) for row in result.rows]) + "\n")
    else:
        sys.stdout.write(render_rows(result.rows) + "\n")
    if not result.ok:
        raise AssetError(result.errors[0])


def main(argv: list[str] | None = None) -> int:
    """Console entry point: ``error: ...`` on stderr; exit 0 assets ready, 1 failed, 2 usage."""
    return run_app(
        app,
        argv,
        prog="g1-pull-assets",
        failures={
            AssetError: str,
            MotionError: str,
            OSError: lambda err: (
                f"cannot write the asset cache: {err}; pass a writable --asset-dir"
            ),
        },
    )


if __name__ == "__main__":
    sys.exit(main())
