"""Durable, owner-only file writes for the live store (spill files, Parquet archive).

A file is written to a temporary name, fsync'd, renamed into place and its
directory fsync'd, so after a crash it is either complete or absent; the
temporary name is never one a reader looks for. Every failure becomes a
:class:`~matchsql.errors.StreamError` naming the path and the cause (a
read-only directory, a full disk), and the temporary file is removed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from matchsql.errors import StreamError


def make_private_dirs(directory: Path) -> None:
    """Create ``directory`` and any missing parents owner-only (0700)."""
    missing = []
    current = directory
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
            os.chmod(path, 0o700)  # mkdir's mode is masked by the umask


def write_atomically(final: Path, table: pa.Table, tmp: Path, what: str, *,
                     sync: bool = True) -> None:
    """Write ``table`` as zstd Parquet to ``tmp`` (owner-only) and rename it to ``final``.

    With ``sync`` the file is fsync'd before the rename and the directory
    after it: once this returns the file survives a machine crash, not only
    a process crash (a spill file needs no more than the shared memory it
    stands in for, so it skips the cost).
    """
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb", closefd=False) as handle:
                pq.write_table(table, handle, compression="zstd")
                handle.flush()
                if sync:
                    os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        if sync:
            sync_directory(final.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise io_error(what, str(final), exc) from None


def sync_directory(directory: Path) -> None:
    """fsync a directory, so that a rename in it is durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def io_error(what: str, path: str, exc: OSError) -> StreamError:
    """A StreamError for a failed file operation: what failed, on which path, and why."""
    cause = exc.strerror or str(exc)
    return StreamError(f"{what} {path}: {cause}")


