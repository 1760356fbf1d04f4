"""Asset roots and asset-id lookup (docs/contracts.md §assets-and-motion).

An asset id is a relative POSIX path such as ``robots/g1/g1.xml`` or
``motions/g1/synthetic_dance.npz``. It is searched under two roots, in order: the package
root ``trainer/assets/`` (shipped with the code, may be missing or read-only) and the
writable cache root ``$G1SOAK_ASSET_DIR`` or ``${XDG_CACHE_HOME:-~/.cache}/g1soak/assets``,
where downloads and generated files land. This module is pure Python (no mujoco, no
torch) so both the scene builder and the CLI can use it cheaply.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath

__all__ = [
    "PACKAGE_ASSET_ROOT",
    "AssetError",
    "asset_roots",
    "cache_root",
    "check_asset_id",
    "resolve_asset",
    "sha256_file",
]

PACKAGE_ASSET_ROOT = Path(__file__).resolve().parent / "assets"
"""Assets shipped inside the package; the directory may not exist."""

_CHUNK_BYTES = 1 << 20


class AssetError(RuntimeError):
    """A model or asset could not be found or materialised; the message names the fix."""


def cache_root() -> Path:
    """Return the writable cache root (not created here).

    Returns:
        ``$G1SOAK_ASSET_DIR`` when set and non-empty, else
        ``${XDG_CACHE_HOME:-~/.cache}/g1soak/assets``.
    """
    explicit = os.environ.get("G1SOAK_ASSET_DIR", "")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "g1soak" / "assets"


def asset_roots() -> tuple[Path, Path]:
    """Return the search roots in docs/contracts.md §assets-and-motion order: package root, then cache root."""
    return (PACKAGE_ASSET_ROOT, cache_root())


def check_asset_id(asset_id: str) -> PurePosixPath:
    """Validate that ``asset_id`` is a relative POSIX path without ``..`` parts.

    Raises:
        AssetError: the id is absolute, empty or escapes its root.
    """
    rel = PurePosixPath(asset_id)
    if not asset_id or rel.is_absolute() or ".." in rel.parts or "\\" in asset_id:
        msg = f"asset id {asset_id!r} must be a relative POSIX path without '..' (e.g. robots/g1/g1.xml)"
        raise AssetError(msg)
    return rel


def resolve_asset(asset_id: str, roots: tuple[Path, ...] | None = None) -> Path | None:
    """Find ``asset_id`` under the asset roots.

    Args:
        asset_id: relative POSIX path, e.g. ``robots/g1/g1.xml``.
        roots: roots to search in order; defaults to :func:`asset_roots`.

    Returns:
        The first existing file, or ``None`` when no root holds it.
    """
    rel = check_asset_id(asset_id)
    for root in asset_roots() if roots is None else roots:
        candidate = Path(root) / rel
        if candidate.is_file():
            return candidate
    return None


def sha256_file(path: Path) -> str:
    """Return the hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()
