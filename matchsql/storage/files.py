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
import stat
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from matchsql.errors import StreamError

#: System directories: never an archive, whoever runs matchsql (root owns them).
SYSTEM_DIRECTORIES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64",
                      "/libx32", "/proc", "/sbin", "/sys", "/usr", "/var/lib", "/var/log")


def private_directory(path: Path, what: str, hint: str = "") -> None:
    """Create ``path`` owner-only (0700), or check the one there: a directory of this
    user that nobody else can write to, reached without following a symbolic link.

    A directory at a predictable place (the stream registry in ``/tmp``) may be
    made first by another user, or be a link they placed to redirect our files.
    """
    created = False
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
        created = True
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        if os.path.islink(path):
            raise StreamError(f"{what} {path} is a symbolic link, which matchsql does not "
                              f"follow{hint}") from None
        raise io_error(f"cannot open {what}", str(path), exc) from None
    try:
        info = os.fstat(fd)
        _check_owner(info, path, what, hint)
        if created or info.st_mode & 0o077:
            os.fchmod(fd, 0o700)  # mkdir's mode is masked by the umask
    finally:
        os.close(fd)


def _check_owner(info: os.stat_result, path: Path | str, what: str, hint: str) -> None:
    if info.st_uid != os.getuid():
        raise StreamError(f"{what} {path} is owned by user id {info.st_uid}, not by this "
                          f"user ({os.getuid()}){hint}")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise StreamError(f"{what} {path} is writable by other users (mode "
                          f"{stat.S_IMODE(info.st_mode):o}){hint}")


def check_user_directory(path: Path, what: str) -> None:
    """Refuse a directory (where the user asked matchsql to keep files, an archive)
    that is a system directory, is not the user's or that others can write to: other
    users could replace the files matchsql reads back there."""
    real = os.path.realpath(path)
    if real == "/" or any(real == d or real.startswith(d + "/") for d in SYSTEM_DIRECTORIES):
        raise StreamError(f"{what} {path} is in a system directory ({real}); choose a "
                          "directory of your own")
    with contextlib.suppress(FileNotFoundError):
        link = os.lstat(path)
        if stat.S_ISLNK(link.st_mode) and link.st_uid not in (os.getuid(), 0):
            raise StreamError(f"{what} {path} is a symbolic link owned by user id "
                              f"{link.st_uid}, not by this user")
    try:
        info = os.stat(real)
    except OSError as exc:
        raise io_error(f"cannot open {what}", str(path), exc) from None
    if not stat.S_ISDIR(info.st_mode):
        raise StreamError(f"{what} {path} is not a directory")
    _check_owner(info, path, what, "")


def owner_only_database(database: str | None) -> None:
    """Give a DuckDB database's write-ahead log the database file's mode, at most 0600.

    DuckDB creates both files by the umask (often 0644) and makes a new log
    after each checkpoint; matchsql makes the database file it creates 0600
    (:func:`owner_only_file`) and calls this after its statements and
    checkpoints, so the log is no more readable than the database.
    """
    if not database or database.startswith(":memory:"):
        return
    try:
        mode = stat.S_IMODE(os.stat(database).st_mode) & 0o666
        wal = os.lstat(database + ".wal")
    except OSError:
        return
    if stat.S_ISREG(wal.st_mode) and wal.st_uid == os.getuid() and \
            stat.S_IMODE(wal.st_mode) & ~mode:
        with contextlib.suppress(OSError):
            os.chmod(database + ".wal", stat.S_IMODE(wal.st_mode) & mode)


def owner_only_file(path: str) -> None:
    """Make a regular file of this user 0600 (a database matchsql just created)."""
    with contextlib.suppress(OSError):
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid():
            os.chmod(path, 0o600)


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
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a leftover of another mode keeps its mode on O_TRUNC
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


