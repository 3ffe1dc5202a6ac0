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
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from matchsql.storage.permissions import io_error, make_private_dirs

__all__ = [
    "io_error",
    "make_private_dirs",
    "sync_directory",
    "write_atomically",
    "write_bytes_atomically",
]


def write_atomically(
    final: Path, table: pa.Table, tmp: Path, what: str, *, sync: bool = True
) -> None:
    """Write ``table`` as zstd Parquet to ``tmp`` (owner-only) and rename it to ``final``.

    With ``sync`` the file is fsync'd before the rename and the directory
    after it: once this returns the file survives a machine crash, not only
    a process crash (a spill file needs no more than the shared memory it
    stands in for, so it skips the cost).
    """
    _write(final, tmp, what, sync, lambda handle: pq.write_table(table, handle, compression="zstd"))


def write_bytes_atomically(
    final: Path, data: pa.Buffer | bytes, tmp: Path, what: str, *, sync: bool = True
) -> None:
    """:func:`write_atomically` for a file already encoded in memory (whose size the caller
    needed to know before writing it, as a spill file's against its stream's limit)."""
    _write(final, tmp, what, sync, lambda handle: handle.write(memoryview(data)))


def _write(
    final: Path, tmp: Path, what: str, sync: bool, fill: Callable[[BinaryIO], object]
) -> None:
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a leftover of another mode keeps its mode on O_TRUNC
            with os.fdopen(fd, "wb", closefd=False) as handle:
                fill(handle)
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
