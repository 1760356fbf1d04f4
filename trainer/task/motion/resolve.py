"""Resolving a motion id or path to a local file (docs/assets.md).

:func:`resolve_motion` turns a motion id or path into a file (path, package root, cache root,
local synthetic generation, Hugging Face hub) and never substitutes another clip; a clip in a
foreign convention, or a clip set (comma list or directory), goes through the registered
:class:`MotionImporter` into one cached file in this contract. The importer lives above this
package (``trainer.motion_import``); each command that resolves a motion registers it
(``trainer.motion_import.resolve.install_motion_importer``), this package never imports it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from trainer.assets import AssetError, cache_root, check_asset_id
from trainer.assets import asset_roots as default_asset_roots
from trainer.task.motion.clip import (
    DEFAULT_HUB_REPO,
    SYNTHETIC_MOTION_ID,
    HubMode,
    MotionError,
    ResolvedMotion,
    content_sha256,
)
from trainer.task.motion.synthetic import SYNTHETIC_CLIP_IDS, ensure_synthetic_clip

Finder = Callable[[str], ResolvedMotion]
"""Resolves one motion id to a file as it is on disk (docs/assets.md order)."""


class MotionImporter(Protocol):
    """Resolves any motion id (one clip, a comma list, a directory, a library) to one file in
    our contract, converting foreign clips; ``find`` resolves one id as it is on disk, ``roots``
    are the asset roots, ``cache`` the writable root that receives conversions."""

    def __call__(
        self, motion_id: str, find: Finder, *, roots: Sequence[Path], cache: Path
    ) -> ResolvedMotion: ...


_importer: MotionImporter | None = None


def register_importer(importer: MotionImporter | None) -> MotionImporter | None:
    """Make :func:`resolve_motion` hand every motion id to ``importer`` (None: no importer).

    Returns:
        The importer registered before (so a caller can put it back).
    """
    global _importer
    previous, _importer = _importer, importer
    return previous


_OFFLINE_ALTERNATIVE = (
    f"offline alternative: env.commands.motion.motion_file={SYNTHETIC_MOTION_ID} "
    "(generate with: g1-pull-assets --robot g1)"
)


# ---------------------------------------------------------------------------------------------
# Resolution (docs/contracts.md §assets-and-motion "Resolving a motion path")
# ---------------------------------------------------------------------------------------------


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` is truthy (huggingface_hub's spelling: 1/ON/YES/TRUE)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


ASSET_ID_SUFFIXES = (".npz", ".csv")
"""How a motion asset id ends; anything else that is no existing path is never looked up on
the hub, so a typo such as ``dnace`` costs no network time."""
NOT_AN_ASSET_ID = (
    "; it is no path and no asset id (those end in .npz or .csv), so the hub was not asked"
)


def _not_found(motion_id: str, searched: Sequence[str], hub_note: str) -> MotionError:
    return MotionError(
        f"motion file '{motion_id}' not found (searched: {', '.join(searched)}){hub_note}; {_OFFLINE_ALTERNATIVE}"
    )


def _describe(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def download_from_hub(motion_id: str, hub_repo: str, local_dir: Path) -> Path:
    """Download ``motion_id`` from the dataset repo ``hub_repo`` into ``local_dir``.

    A failing custom ``HF_ENDPOINT`` is retried once against the public hub; a host that
    does not resolve or takes no connection fails at once (``trainer.hub``).

    Raises:
        Exception: whatever huggingface_hub raised on the last attempt
            (:class:`trainer.hub.HubUnreachable` when the hub could not be reached).
    """
    from trainer.hub import download

    return download(hub_repo, motion_id, local_dir)


def resolve_motion(
    motion_id: str,
    *,
    hub_repo: str = DEFAULT_HUB_REPO,
    hub: HubMode = "auto",
    asset_roots: Sequence[Path] | None = None,
) -> ResolvedMotion:
    """Resolve a motion id or path to a local file in our NPZ contract.

    Each file is found in docs/assets.md order: 1. the path as given (absolute or CWD-relative)
    if it exists; a missing absolute path fails at once. 2. ``<package root>/<id>``, then
    ``<cache root>/<id>``. 3. The synthetic id is generated into the cache root; any other id
    is downloaded from the dataset repo ``hub_repo`` unless ``hub == "skip"`` or
    ``HF_HUB_OFFLINE`` is truthy. Another clip is never substituted.

    A file already in our contract is returned unchanged. With the importer registered
    (:func:`register_importer`; every command that resolves a motion registers
    ``trainer.motion_import``'s), a clip in a foreign convention is converted into the cache
    root, keyed by its digest, and a comma list or a directory of clips becomes one cached clip
    set (docs/assets.md); without it, the id is one file taken as it is.

    Args:
        motion_id: a path or an asset id such as ``motions/g1/dance1_subject2_part.npz``, a
            comma-separated list of them, or a directory of clips.
        hub_repo: Hugging Face dataset repository.
        hub: ``auto``/``require`` try the hub (unless offline), ``skip`` never does.
        asset_roots: asset roots (package, cache); defaults to :func:`trainer.assets.asset_roots`.

    Returns:
        The local path, where it came from and its arrays hash.

    Raises:
        MotionError: not found anywhere (the contract's wording), or not convertible.
    """
    if hub not in ("auto", "skip", "require"):
        msg = f"hub={hub!r} must be one of auto, skip, require"
        raise MotionError(msg)
    roots = tuple(default_asset_roots() if asset_roots is None else asset_roots)

    def find(item: str) -> ResolvedMotion:
        return _resolve_file(item, hub_repo=hub_repo, hub=hub, search_roots=roots)

    if _importer is None:
        return find(motion_id)
    return _importer(motion_id, find, roots=roots, cache=Path(roots[-1]) if roots else cache_root())


def _resolve_file(
    motion_id: str, *, hub_repo: str, hub: HubMode, search_roots: tuple[Path, ...]
) -> ResolvedMotion:
    """One file in docs/assets.md order (see :func:`resolve_motion`), as it is on disk."""
    given = Path(motion_id).expanduser()
    if given.is_file():
        return ResolvedMotion(given, "path", content_sha256(given))
    if given.is_absolute():
        raise _not_found(motion_id, [str(given)], "")
    searched = [str(given)]
    try:
        check_asset_id(motion_id)
    except AssetError as err:
        raise _not_found(motion_id, searched, "") from err
    for root, source in zip(search_roots, ("package", "cache"), strict=False):
        candidate = Path(root) / motion_id
        if candidate.is_file():
            return ResolvedMotion(candidate, source, content_sha256(candidate))
        searched.append(str(candidate))
    writable = Path(search_roots[-1]) if search_roots else cache_root()
    if motion_id in SYNTHETIC_CLIP_IDS:
        path, _, sha = ensure_synthetic_clip(writable, motion_id=motion_id)
        return ResolvedMotion(path, "generated", sha)
    if not motion_id.lower().endswith(ASSET_ID_SUFFIXES):
        raise _not_found(motion_id, searched, NOT_AN_ASSET_ID)
    if hub == "skip":
        raise _not_found(motion_id, searched, "; hub download skipped (--hub skip)")
    if hub_offline():
        raise _not_found(motion_id, searched, "; hub download disabled by HF_HUB_OFFLINE")
    try:
        path = download_from_hub(motion_id, hub_repo, writable)
    except Exception as err:  # any hub failure is reported, never swallowed into a fallback
        raise _not_found(motion_id, searched, f"; hub download failed: {_describe(err)}") from err
    return ResolvedMotion(path, "downloaded", content_sha256(path))
