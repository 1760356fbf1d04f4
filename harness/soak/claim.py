"""The soak claims its artifact path and run directory before the launch (docs/soak.md,
"Before the launch"), so no result is lost to a path it cannot write or to another soak.

:func:`claim_soak_paths` makes sure the artifact's directory exists, is writable and has
room, then takes two exclusive ``flock`` locks held for the soak's life: one on
``.<artifact name>.lock`` beside the artifact, one on the run directory itself. The kernel
drops a lock when its holder dies, so a crashed soak never leaves a path stuck. The "new
artifact, empty run directory" checks are made again under the locks: a soak started a
second later sees the first one's claim or its files, never a free path. Every refusal is
a ``UsageError`` (exit 2): nothing launched, nothing written but the artifact's directory
and an empty run directory. The lock files stay behind (removing a lock file another
process may be opening would let two soaks lock two different files).
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contracts.errors import UsageError

__all__ = [
    "MIN_FREE_BYTES",
    "check_replaceable",
    "claim_soak_paths",
    "lock_path",
    "write_error_text",
]

MIN_FREE_BYTES = 16 << 20
"""Room the artifact needs: a 30-minute soak's samples take a few MiB."""


def lock_path(output: Path) -> Path:
    return output.parent / f".{output.name}.lock"


def no_space_text(where: Path) -> str:
    return f"no space left on device at {where}; free space or pick another --output"


def write_error_text(err: OSError, output: Path) -> str:
    """One line naming why the artifact could not be written, and the fix."""
    if err.errno == errno.ENOSPC:
        return no_space_text(output)
    return f"{type(err).__name__}: {err}"


def check_replaceable(output: Path, overwrite: bool) -> None:
    """An existing artifact is replaced only when ``--overwrite`` says so."""
    if not output.exists():
        return
    if not overwrite:
        raise UsageError(
            f"--output {output} already exists; pass a new artifact path, or --overwrite to "
            "replace it"
        )
    if not output.is_file():
        raise UsageError(
            f"--output {output} exists and is not a file; --overwrite replaces only an artifact"
        )


@contextmanager
def claim_soak_paths(log_dir: Path, output: Path, *, overwrite: bool = False) -> Iterator[None]:
    """Hold the soak's claim on ``output`` and ``log_dir`` for the ``with`` block.

    Raises:
        UsageError: the artifact's directory or the run directory cannot be written, the
            artifact's is full, another soak holds either path, the artifact exists (without
            ``overwrite``), or the run directory is not empty.
    """
    _check_writable_dir(output)
    fds = [_lock(lock_path(output), f"--output {output}")]
    try:
        check_replaceable(output, overwrite)
        fds.append(_lock(_made_dir(log_dir), f"--log-dir {log_dir}"))
        if any(log_dir.iterdir()):
            raise UsageError(f"--log-dir {log_dir} is not empty; pass a missing or empty directory")
        yield
    finally:
        for fd in fds:
            os.close(fd)


def _check_writable_dir(output: Path) -> None:
    parent = output.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(_unwritable(output, parent, err)) from err
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(
            f"--output {output}: its directory {parent} is not writable; pick a writable path"
        )
    if shutil.disk_usage(parent).free < MIN_FREE_BYTES:
        raise UsageError(no_space_text(parent))


def _unwritable(output: Path, parent: Path, err: OSError) -> str:
    if err.errno == errno.ENOSPC:
        return no_space_text(parent)
    why = err.strerror or str(err)
    return f"--output {output}: cannot create its directory {parent} ({why}); pick a writable path"


def _made_dir(log_dir: Path) -> Path:
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        why = err.strerror or str(err)
        raise UsageError(f"--log-dir {log_dir}: cannot create it ({why}); pick a writable path")
    if not os.access(log_dir, os.W_OK | os.X_OK):
        raise UsageError(f"--log-dir {log_dir} is not writable; pick a writable path")
    return log_dir


def _lock(path: Path, what: str) -> int:
    """An fd holding an exclusive flock on ``path`` (a file, created if missing, or a dir)."""
    flags = os.O_RDONLY if path.is_dir() else os.O_RDWR | os.O_CREAT
    try:
        fd = os.open(path, flags | os.O_CLOEXEC, 0o644)
    except OSError as err:
        raise UsageError(f"{what}: cannot open {path} to claim it ({err.strerror or err})")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UsageError(
            f"{what} is claimed by another running soak (lock {path}); wait for it to "
            "finish or pick another path"
        ) from None
    return fd
