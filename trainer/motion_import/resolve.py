"""Where motion resolution meets the importer: foreign files and clip sets become cached files.

:func:`trainer.task.motion.resolve_motion` hands every motion id to :func:`resolve_imported`
once a command has called :func:`install_motion_importer` (the task package sits below this
one and never imports it).

* A file in our NPZ contract is returned as found (the hot path: nothing is converted).
* A file in a foreign convention is converted once into
  ``<cache root>/motions/imported/<stem>.<key>.npz``; the key is a digest of the source file's
  sha256, the importer version and the G1 model's MJCF, so a changed source, importer or
  model converts again and an unchanged one is reused.
* A comma list of ids, or a directory of ``.npz``/``.csv`` clips, is a clip set: each clip is
  resolved (and converted) alone, reduced to the 14 tracked bodies and concatenated into one
  ``<cache root>/motions/imported/clipset.<key>.npz`` with ``clip_ends``, so the env knows the
  clip boundaries and everything downstream still sees one file and one hash.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from trainer.assets import sha256_file
from trainer.motion_import.checks import run_checks
from trainer.motion_import.conventions import detect_convention, read_source
from trainer.motion_import.convert import IMPORTER_VERSION, convert, model_sha256
from trainer.motion_import.library import (
    Library,
    LibraryClip,
    conversion_key,
    convert_clip,
    parse_library_id,
    read_library,
)
from trainer.motion_import.model import g1_model
from trainer.motion_import.validate import read_arrays
from trainer.sim.scene import JOINT_NAMES, TRACKED_BODY_NAMES
from trainer.task.motion.clip import (
    MOTION_FPS,
    REQUIRED_KEYS,
    MotionError,
    ResolvedMotion,
    arrays_sha256,
)
from trainer.task.motion.load import load_motion
from trainer.task.motion.resolve import Finder, register_importer
from trainer.task.motion.synthetic import write_npz_atomic

__all__ = [
    "CLIP_SUFFIXES",
    "IMPORT_DIR",
    "cached_conversion",
    "clip_set_items",
    "converted_path",
    "import_if_foreign",
    "install_motion_importer",
    "library_clip_path",
    "library_extra",
    "resolve_imported",
    "resolve_library",
    "write_clip_set",
]

logger = logging.getLogger(__name__)

IMPORT_DIR = "motions/imported"
"""Cache-root folder of converted clips and clip sets."""
CLIP_SUFFIXES = (".npz", ".csv")
"""Files of a directory that count as clips of a clip set."""


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join((*parts, str(IMPORTER_VERSION))).encode()).hexdigest()[:16]


def converted_path(source: Path, source_sha256: str, cache: Path) -> Path:
    """Cache path of the conversion of ``source`` (keyed by its bytes, importer and model)."""
    return cache / IMPORT_DIR / f"{source.stem}.{_key(source_sha256, model_sha256())}.npz"


def _is_native(path: Path) -> bool:
    """In our contract by shape, and, without names, in MuJoCo's order (``read_source``)."""
    if path.suffix.lower() == ".csv":
        return False
    _, native = detect_convention(path, read_arrays(path))
    return native and read_source(path).native


def _reuse(target: Path, source_sha: str) -> bool:
    """A cached conversion is reused only when it records the same source and version."""
    if not target.is_file():
        return False
    try:
        arrays = read_arrays(target)
    except MotionError:
        return False
    recorded = str(arrays.get("import_source_sha256", ""))
    version = int(arrays.get("import_version", -1))
    return recorded == source_sha and version == IMPORTER_VERSION


def import_if_foreign(found: ResolvedMotion, cache: Path) -> ResolvedMotion:
    """``found`` itself when it is in our contract, else its cached conversion.

    Raises:
        MotionError: the file is in no recognised convention, or breaks one of its rules.
    """
    if _is_native(found.path):
        return found
    source_sha = sha256_file(found.path)
    target = converted_path(found.path, source_sha, cache)
    if not _reuse(target, source_sha):
        conversion = convert(read_source(found.path), source_sha)
        for check in run_checks(conversion):
            if not check.passed:
                logger.warning(
                    "motion %s: check %s = %.4g %s (bound %g; %s)",
                    found.path, check.name, check.value, check.unit, check.limit, check.detail,
                )  # fmt: skip
        write_npz_atomic(target, conversion.arrays)
        logger.info(
            "converted motion %s (%s, %g fps) into %s",
            found.path, conversion.source.convention, conversion.source.fps, target,
        )  # fmt: skip
    return ResolvedMotion(target, "converted", arrays_sha256(read_arrays(target)))


def clip_set_items(motion_id: str, roots: Sequence[Path]) -> list[str] | None:
    """The clips of a clip set, or None when ``motion_id`` names one clip.

    A comma list is split (items stripped; an empty item is an error). A directory, as given
    or under an asset root, lists its ``.npz``/``.csv`` files in name order.

    Raises:
        MotionError: an empty item, or a directory without clips.
    """
    if "," in motion_id:
        items = [item.strip() for item in motion_id.split(",")]
        if not all(items):
            msg = f"motion list '{motion_id}' has an empty item; separate clips with single commas"
            raise MotionError(msg)
        return items
    given = Path(motion_id).expanduser()
    candidates = [given] + ([] if given.is_absolute() else [Path(r) / motion_id for r in roots])
    folder = next((c for c in candidates if c.is_dir()), None)
    if folder is None:
        return None
    clips = sorted(
        p
        for p in folder.iterdir()
        if p.is_file() and p.suffix.lower() in CLIP_SUFFIXES and not p.name.startswith(".")
    )
    if not clips:
        msg = f"motion directory '{folder}' holds no .npz or .csv clip; put the clips there or name them in a comma list"
        raise MotionError(msg)
    return [str(p) for p in clips]


def write_clip_set(
    clips: Sequence[ResolvedMotion],
    names: Sequence[str],
    target: Path,
    extra: dict[str, np.ndarray] | None = None,
) -> ResolvedMotion:
    """Concatenate resolved clips into one clip-set file at ``target`` (atomically).

    ``extra`` arrays (a library's attribution, the repairs of its clips) are stored beside
    the contract's keys; the loader ignores them.
    """
    loaded = [load_motion(c.path, g1_model()) for c in clips]
    lengths = [clip.num_frames for clip in loaded]
    f32 = np.float32

    def cat(field: str) -> np.ndarray:
        return np.concatenate([getattr(clip, field) for clip in loaded]).astype(f32)

    arrays = {
        "fps": np.asarray(MOTION_FPS, dtype=np.int64),
        **{key: cat(key) for key in REQUIRED_KEYS if key != "fps"},
        "joint_names": np.asarray(JOINT_NAMES, dtype=np.str_),
        "body_names": np.asarray(TRACKED_BODY_NAMES, dtype=np.str_),
        "clip_ends": np.cumsum(lengths).astype(np.int64),
        "clip_names": np.asarray(list(names), dtype=np.str_),
        "clip_sha256": np.asarray([c.sha256 for c in clips], dtype=np.str_),
        **(extra or {}),
    }
    write_npz_atomic(target, arrays)
    logger.info("clip set of %d clips (%d frames) in %s", len(clips), sum(lengths), target)
    return ResolvedMotion(target, "clip-set", arrays_sha256(read_arrays(target)))


def _clip_set(clips: Sequence[ResolvedMotion], names: Sequence[str], cache: Path) -> ResolvedMotion:
    """Concatenate resolved clips into one cached clip-set file."""
    target = cache / IMPORT_DIR / f"clipset.{_key(*(c.sha256 for c in clips))}.npz"
    if target.is_file():
        return ResolvedMotion(target, "clip-set", arrays_sha256(read_arrays(target)))
    return write_clip_set(clips, names, target)


def library_clip_path(
    clip: LibraryClip, sha256: str, repairs: tuple[str, ...], cache: Path
) -> Path:
    """Cache path of one library clip's conversion (keyed by bytes, rate and repairs)."""
    return cache / IMPORT_DIR / f"{clip.name}.{conversion_key(sha256, clip.fps, repairs)}.npz"


def cached_conversion(target: Path, arrays: dict[str, np.ndarray]) -> ResolvedMotion:
    """Write a conversion's arrays to ``target`` (atomically) and resolve it."""
    write_npz_atomic(target, arrays)
    return ResolvedMotion(target, "converted", arrays_sha256(read_arrays(target)))


def _library_clip(clip: LibraryClip, repairs: tuple[str, ...], cache: Path) -> ResolvedMotion:
    """One library clip converted at its manifest rate into the cache (reused when cached)."""
    sha = clip.sha256 or sha256_file(clip.path)
    target = library_clip_path(clip, sha, repairs, cache)
    if _reuse(target, sha):
        return ResolvedMotion(target, "converted", arrays_sha256(read_arrays(target)))
    conversion, sha = convert_clip(clip, repairs)
    return cached_conversion(library_clip_path(clip, sha, repairs, cache), conversion.arrays)


def library_extra(library: Library, repairs: tuple[str, ...]) -> dict[str, np.ndarray]:
    """What a clip set of a library records besides its clips: attribution and repairs."""
    return {
        "library_attribution": np.asarray(library.attribution or "none stated"),
        "library_repairs": np.asarray(",".join(repairs) or "none"),
    }


def resolve_library(
    root: Path, patterns: tuple[str, ...], cache: Path, repairs: tuple[str, ...] = ()
) -> ResolvedMotion:
    """The clips of a library (or the subset ``patterns`` selects) as one cached clip set."""
    library = read_library(root).select(patterns)
    clips = [_library_clip(c, repairs, cache) for c in library.clips]
    key = _key(*(c.sha256 for c in clips), library.attribution, ",".join(repairs))
    target = cache / IMPORT_DIR / f"library.{key}.npz"
    if target.is_file():
        return ResolvedMotion(target, "clip-set", arrays_sha256(read_arrays(target)))
    names = [c.name for c in library.clips]
    return write_clip_set(clips, names, target, library_extra(library, repairs))


def resolve_imported(
    motion_id: str, find: Finder, *, roots: Sequence[Path], cache: Path
) -> ResolvedMotion:
    """Resolve ``motion_id`` (one clip, a comma list, a directory or a library) to a file in
    our contract.

    Args:
        motion_id: as given to ``env.commands.motion.motion_file``.
        find: resolves one id to a file as it is on disk (docs/assets.md order).
        roots: the asset roots (for directory ids).
        cache: the writable cache root that receives conversions and clip sets.
    """
    library = parse_library_id(motion_id)
    if library is not None:
        return resolve_library(*library, cache)
    items = clip_set_items(motion_id, roots)
    if items is None:
        return import_if_foreign(find(motion_id), cache)
    clips = [import_if_foreign(find(item), cache) for item in items]
    return _clip_set(clips, items, cache)


def install_motion_importer() -> None:
    """Register :func:`resolve_imported` with motion resolution (idempotent): each command that
    resolves a motion calls it first, so foreign clips and clip sets resolve everywhere."""
    register_importer(resolve_imported)
