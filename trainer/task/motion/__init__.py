"""Reference motions: the NPZ contract, clip loading, resolution and the synthetic clip.

A motion clip is an ``.npz`` with per-frame joint and body states (docs/contracts.md §assets-and-motion). The
loader checks every rule of the contract and fails with a :class:`MotionError` naming the
offending key; it keeps only the 14 tracked bodies (docs/task.md §tracked-bodies) as float32, so the env can
put the clip into one device table. :func:`resolve_motion` turns a motion id or path into a
file (path, package root, cache root, local synthetic generation, Hugging Face hub) and
never substitutes another clip; a clip in a foreign convention, or a clip set (comma list or
directory), goes through the registered importer (``trainer.motion_import``, registered by
the commands) into one cached file in this contract (an optional ``clip_ends`` key marks the
clips of a set). :func:`generate_synthetic_dance`
builds the offline default clip, a deterministic flat-foot squat with waist and arm motion.
"""

from trainer.task.motion.clip import (
    DANCE_MOTION_ID,
    DEFAULT_HUB_REPO,
    MOTION_FPS,
    REQUIRED_KEYS,
    SYNTHETIC_GENERATOR_VERSION,
    SYNTHETIC_MARCH_ID,
    SYNTHETIC_MOTION_ID,
    HubMode,
    MotionClip,
    MotionError,
    ResolvedMotion,
    arrays_sha256,
    npz_sha256,
)
from trainer.task.motion.load import (
    check_clip_ends,
    load_motion,
    load_motions,
    load_resolved_motion,
)
from trainer.task.motion.resolve import (
    MotionImporter,
    download_from_hub,
    hub_offline,
    register_importer,
    resolve_motion,
)
from trainer.task.motion.synthetic import (
    SYNTHETIC_CLIP_IDS,
    ensure_synthetic_clip,
    generate_synthetic_clip,
    generate_synthetic_dance,
    write_npz_atomic,
)

__all__ = [
    "DANCE_MOTION_ID",
    "DEFAULT_HUB_REPO",
    "MOTION_FPS",
    "REQUIRED_KEYS",
    "SYNTHETIC_CLIP_IDS",
    "SYNTHETIC_GENERATOR_VERSION",
    "SYNTHETIC_MARCH_ID",
    "SYNTHETIC_MOTION_ID",
    "HubMode",
    "MotionClip",
    "MotionError",
    "MotionImporter",
    "ResolvedMotion",
    "arrays_sha256",
    "check_clip_ends",
    "download_from_hub",
    "ensure_synthetic_clip",
    "generate_synthetic_clip",
    "generate_synthetic_dance",
    "hub_offline",
    "load_motion",
    "load_motions",
    "load_resolved_motion",
    "npz_sha256",
    "register_importer",
    "resolve_motion",
    "write_npz_atomic",
]
