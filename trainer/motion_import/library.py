"""Motion libraries: a folder of clips (with or without a ``manifest.json``) as one input.

A library is a directory tree of ``.csv``/``.npz`` clips. Its ``manifest.json``, where there
is one, names every clip (``clip``), its relative ``path``, ``fps``, ``category`` and
``sha256``, and may state a ``quat_order``. The attribution every derived file keeps is the
manifest's ``attribution``, else the one the library's README quotes, else the manifest's
``source`` and ``license`` (docs/assets.md, "Motion libraries"). Without a
manifest every clip under the folder is a clip named by its file stem, at the rate
``--fps-in`` gives (or its own ``fps`` key).

A motion id names a library as ``DIR`` (every clip) or ``DIR:PATTERN[,PATTERN...]``, where a
pattern is an ``fnmatch`` glob over clip names and relative paths (``karate/*``,
``B_*Dance``, ``M_Move1``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.assets import sha256_file
from trainer.motion_import.conventions import read_source
from trainer.motion_import.convert import IMPORTER_VERSION, Conversion, convert, model_sha256
from trainer.motion_import.repair import REPAIRS
from trainer.motion_import.source import QuatOrder
from trainer.task.motion.clip import MotionError

__all__ = [
    "MANIFEST",
    "Library",
    "LibraryClip",
    "convert_clip",
    "parse_library_id",
    "read_library",
]

MANIFEST = "manifest.json"
_README_ATTRIBUTION = re.compile(r"attribution[^`]{0,200}`([^`]+)`", re.IGNORECASE)
CLIP_SUFFIXES = (".npz", ".csv")


@dataclass(frozen=True)
class LibraryClip:
    """One clip of a library."""

    name: str
    relpath: str
    """Path relative to the library root (``karate/M_Move1.csv``)."""
    path: Path
    fps: float | None
    """The manifest's rate; None: the file's own (or ``--fps-in``)."""
    category: str
    sha256: str | None
    """The manifest's sha256 of the file's bytes; None without a manifest."""
    quat_order: QuatOrder = "auto"


@dataclass(frozen=True)
class Library:
    """A library's clips (in manifest or name order) and its attribution."""

    root: Path
    clips: tuple[LibraryClip, ...]
    attribution: str
    """``source, license`` of the manifest; empty without a manifest."""

    def select(self, patterns: tuple[str, ...]) -> Library:
        """The clips any pattern matches (by name or relative path), in library order.

        Raises:
            MotionError: a pattern that matches no clip (the message shows some names).
        """
        if not patterns:
            return self
        for pattern in patterns:
            if not any(_matches(c, pattern) for c in self.clips):
                examples = ", ".join(c.relpath for c in self.clips[:3])
                msg = (
                    f"motion library '{self.root}': no clip matches {pattern!r}; patterns are "
                    f"globs over clip names or paths such as {examples}"
                )
                raise MotionError(msg)
        chosen = tuple(c for c in self.clips if any(_matches(c, p) for p in patterns))
        return Library(self.root, chosen, self.attribution)


def _matches(clip: LibraryClip, pattern: str) -> bool:
    return fnmatch.fnmatchcase(clip.name, pattern) or fnmatch.fnmatchcase(clip.relpath, pattern)


def parse_library_id(motion_id: str) -> tuple[Path, tuple[str, ...]] | None:
    """``(root, patterns)`` when ``motion_id`` names a library, else None.

    ``DIR:PATTERNS`` names a subset of the directory ``DIR``; a bare ``DIR`` names a library
    only when it holds a manifest or clips in sub-folders (a flat folder stays a clip set).
    """
    head, sep, tail = motion_id.partition(":")
    root = Path(head).expanduser()
    if sep and root.is_dir():
        patterns = tuple(p.strip() for p in tail.split(",") if p.strip())
        if not patterns:
            msg = f"motion library '{motion_id}' names no clip after ':'; give a glob such as {head}:karate/*"
            raise MotionError(msg)
        return root, patterns
    if sep or not root.is_dir():
        return None
    if (root / MANIFEST).is_file() or any(p.is_dir() for p in root.iterdir()):
        return root, ()
    return None


def _manifest_clip(root: Path, entry: Any, index: int) -> LibraryClip:
    where = f"motion library manifest '{root / MANIFEST}': clip {index}"
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        raise MotionError(f"{where} needs a 'path' string; rebuild the manifest")
    relpath = entry["path"]
    fps = entry.get("fps")
    if fps is not None and (
        isinstance(fps, bool)
        or not isinstance(fps, int | float)
        or not math.isfinite(fps)
        or fps <= 0
    ):
        raise MotionError(f"{where} ({relpath}) has fps {fps!r}; give a positive number")
    order = entry.get("quat_order", "auto")
    if order not in ("auto", "wxyz", "xyzw"):
        raise MotionError(f"{where} ({relpath}) has quat_order {order!r}; use wxyz or xyzw")
    return LibraryClip(
        name=str(entry.get("clip") or Path(relpath).stem),
        relpath=relpath,
        path=root / relpath,
        fps=None if fps is None else float(fps),
        category=str(entry.get("category", "")),
        sha256=entry.get("sha256"),
        quat_order=order,
    )


def _attribution(root: Path, doc: dict[str, Any]) -> str:
    """The manifest's ``attribution``, else the README's quoted attribution line, else the
    manifest's ``source, license``."""
    if isinstance(doc.get("attribution"), str) and doc["attribution"].strip():
        return doc["attribution"].strip()
    readme = root / "README.md"
    if readme.is_file():
        found = _README_ATTRIBUTION.search(readme.read_text(encoding="utf-8", errors="replace"))
        if found:
            return found.group(1).strip()
    return ", ".join(str(doc[k]) for k in ("source", "license") if doc.get(k))


def read_library(root: str | Path) -> Library:
    """The clips of the library at ``root`` (see the module docstring).

    Raises:
        MotionError: not a directory, an unreadable manifest, or no clip at all.
    """
    root = Path(root).expanduser()
    if not root.is_dir():
        raise MotionError(f"motion library '{root}' is not a directory; pass the library's folder")
    manifest = root / MANIFEST
    if manifest.is_file():
        try:
            doc = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            msg = f"motion library manifest '{manifest}' is not readable JSON ({err}); fix or remove it"
            raise MotionError(msg) from err
        entries = doc.get("clips") if isinstance(doc, dict) else None
        if not isinstance(entries, list) or not entries:
            raise MotionError(f"motion library manifest '{manifest}' has no 'clips' list")
        clips = tuple(_manifest_clip(root, e, i) for i, e in enumerate(entries))
        attribution = _attribution(root, doc)
    else:
        files = sorted(
            p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in CLIP_SUFFIXES
        )
        clips = tuple(
            LibraryClip(p.stem, p.relative_to(root).as_posix(), p, None, p.parent.name, None)
            for p in files
            if not any(part.startswith(".") for part in p.relative_to(root).parts)
        )
        attribution = ""
    if not clips:
        raise MotionError(f"motion library '{root}' holds no .csv or .npz clip")
    names = [c.name for c in clips]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise MotionError(f"motion library '{root}' has two clips named {duplicate!r}; rename one")
    return Library(root, clips, attribution)


def conversion_key(sha256: str, fps: float | None, repairs: tuple[str, ...]) -> str:
    """Cache key of a library clip's conversion: source bytes, rate, repairs, importer, model."""
    parts = (sha256, repr(fps), ",".join(repairs), str(IMPORTER_VERSION), model_sha256())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def convert_clip(
    clip: LibraryClip, repairs: tuple[str, ...] = (), fps_in: float | None = None
) -> tuple[Conversion, str]:
    """Convert one library clip at its manifest rate; ``(conversion, file sha256)``.

    Raises:
        MotionError: the file is missing, its bytes differ from the manifest's sha256, or
            it breaks a rule of its convention.
    """
    unknown = [r for r in repairs if r not in REPAIRS]
    if unknown:
        raise MotionError(f"unknown repair {unknown[0]!r}; valid repairs: {', '.join(REPAIRS)}")
    if not clip.path.is_file():
        raise MotionError(f"motion library clip '{clip.path}' is missing; restore the library")
    sha = sha256_file(clip.path)
    if clip.sha256 is not None and sha != clip.sha256:
        msg = (
            f"motion library clip '{clip.path}' has sha256 {sha[:12]}…, its manifest says "
            f"{clip.sha256[:12]}…; restore the file or update the manifest"
        )
        raise MotionError(msg)
    fps = clip.fps if clip.fps is not None else fps_in
    source = read_source(clip.path, fps_in=fps, quat_order=clip.quat_order)
    return convert(source, sha, repairs), sha
