"""Motion clips: the NPZ contract's constants, the clip types and content hashing.

A motion clip is an ``.npz`` with per-frame joint and body states (docs/contracts.md §assets-and-motion). This module
holds the types the rest of :mod:`trainer.task.motion` shares (:class:`MotionClip`,
:class:`ResolvedMotion`, :class:`MotionError`) and :func:`arrays_sha256`, the container-free
hash every clip is identified by (docs/assets.md).
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from trainer.assets import sha256_file

if TYPE_CHECKING:
    import mujoco


SYNTHETIC_MOTION_ID = "motions/g1/synthetic_dance.npz"
SYNTHETIC_MARCH_ID = "motions/g1/synthetic_march.npz"
"""A second built-in clip of a different motion (marching in place), for learning checks."""
DANCE_MOTION_ID = "motions/g1/dance1_subject2_part.npz"
DEFAULT_HUB_REPO = "unilabsim/unilab-motions"
MOTION_FPS = 50
"""1 / ctrl_dt; clips at any other rate are rejected (no resampling)."""
SYNTHETIC_GENERATOR_VERSION = 1
"""Bump when :func:`generate_synthetic_dance` changes its output (and update docs/assets.md)."""

REQUIRED_KEYS: tuple[str, ...] = (
    "fps",
    "joint_pos",
    "joint_vel",
    "body_pos_w",
    "body_quat_w",
    "body_lin_vel_w",
    "body_ang_vel_w",
)

HubMode = Literal["auto", "skip", "require"]
MotionSource = Literal[
    "path", "package", "cache", "generated", "downloaded", "converted", "clip-set"
]


class MotionError(ValueError):
    """A motion clip is missing or breaks the NPZ contract; the message names key and fix."""


@dataclass(frozen=True)
class MotionClip:
    """One or more concatenated clips, reduced to the 14 tracked bodies (float32, wxyz)."""

    fps: int
    """Frames per second (always 50 = 1 / ctrl_dt)."""
    joint_pos: np.ndarray
    """[T, 29] joint positions, model XML joint order."""
    joint_vel: np.ndarray
    """[T, 29] joint velocities."""
    body_pos_w: np.ndarray
    """[T, 14, 3] world body positions, docs/task.md §tracked-bodies order."""
    body_quat_w: np.ndarray
    """[T, 14, 4] world body orientations, wxyz."""
    body_lin_vel_w: np.ndarray
    """[T, 14, 3] world linear velocity of each body-frame origin."""
    body_ang_vel_w: np.ndarray
    """[T, 14, 3] world angular velocity."""
    clip_ends: np.ndarray
    """[n_clips] int64 exclusive end frame of each clip on the concatenated axis."""
    source: str
    """Where the clip came from (paths joined by ``,`` for several clips)."""
    sha256: str
    """Content hash: :func:`arrays_sha256` of one file, or of the per-clip hashes for several."""
    clip_names: tuple[str, ...] = ()
    """Name of each clip (``clip_names`` of a clip set); empty: ``clip_labels`` numbers them."""

    @property
    def clip_labels(self) -> tuple[str, ...]:
        """One name per clip: the file's ``clip_names``, else ``clip0``, ``clip1``, ..."""
        if len(self.clip_names) == self.num_clips:
            return self.clip_names
        return tuple(f"clip{i}" for i in range(self.num_clips))

    @property
    def num_frames(self) -> int:
        """Total frames T over all clips."""
        return int(self.joint_pos.shape[0])

    @property
    def num_clips(self) -> int:
        return int(self.clip_ends.shape[0])


@dataclass(frozen=True)
class ResolvedMotion:
    """A motion id resolved to a local file."""

    path: Path
    source: MotionSource
    sha256: str
    """:func:`arrays_sha256` of the file's arrays (zip containers embed timestamps); the
    file's sha256 for a CSV (which resolution then converts)."""


# ---------------------------------------------------------------------------------------------
# Hashing
# ---------------------------------------------------------------------------------------------


def arrays_sha256(arrays: Mapping[str, np.ndarray]) -> str:
    """Hash a set of arrays independently of the zip container.

    For each key in sorted order the digest takes the key, the dtype string, the shape and
    the C-order bytes, so equal arrays give equal hashes whatever the file's timestamps.
    """
    digest = hashlib.sha256()
    for key in sorted(arrays):
        arr = np.ascontiguousarray(np.asarray(arrays[key]))
        digest.update(key.encode())
        digest.update(arr.dtype.str.encode())
        digest.update(repr(arr.shape).encode())
        digest.update(arr.tobytes())
    return digest.hexdigest()


def npz_sha256(path: str | Path) -> str:
    """:func:`arrays_sha256` of an ``.npz`` file's arrays.

    Raises:
        MotionError: the file is not a readable ``.npz``.
    """
    return arrays_sha256(read_npz(Path(path)))


def read_npz(path: Path) -> dict[str, np.ndarray]:
    if path.is_file() and not zipfile.is_zipfile(path):
        # numpy would try it as a pickle and suggest loading it unsafely.
        if path.suffix.lower() != ".npz":
            what = f"is a '{path.suffix}' file" if path.suffix else "has no .npz or .csv suffix"
            raise MotionError(f"motion file '{path}' {what}; clips are .npz or .csv, pass one")
        raise MotionError(
            f"motion file '{path}' is not an .npz archive; re-export it with numpy.savez"
        )
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        why = f"{type(err).__name__}: {err}"
        if "pickle" in why:  # numpy's message names the unsafe switch; never relay it
            why = "it holds Python objects, which are never unpickled"
        msg = f"motion file '{path}' is not a readable .npz ({why}); re-export it with numpy.savez"
        raise MotionError(msg) from err


def content_sha256(path: Path) -> str:
    """:func:`arrays_sha256` of an NPZ; the bytes' sha256 of a CSV clip (no arrays to hash)."""
    if path.suffix.lower() == ".csv":
        return sha256_file(path)
    return arrays_sha256(read_npz(path))


def model_joint_names(model: mujoco.MjModel) -> tuple[str, ...]:
    return tuple(model.joint(j).name for j in range(model.njnt) if model.jnt_type[j] == 3)


def model_body_names(model: mujoco.MjModel) -> tuple[str, ...]:
    return tuple(model.body(b).name for b in range(model.nbody))
