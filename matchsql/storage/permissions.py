"""Owner-only files and directories, and checks of the directories matchsql writes in.

Apart from :mod:`matchsql.storage.files` (Parquet writes) so that the
connection, the plots and the shell can use them without loading pyarrow.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from matchsql.errors import StreamError

#: System directories: never an archive, whoever runs matchsql (root owns them).
SYSTEM_DIRECTORIES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/sbin",
    "/sys",
    "/usr",
    "/var/lib",
    "/var/log",
)


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
            raise StreamError(
                f"{what} {path} is a symbolic link, which matchsql does not follow{hint}"
            ) from None
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
        raise StreamError(
            f"{what} {path} is owned by user id {info.st_uid}, not by this "
            f"user ({os.getuid()}){hint}"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise StreamError(
            f"{what} {path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}){hint}"
        )


def check_user_directory(path: Path, what: str) -> None:
    """Refuse a directory (where the user asked matchsql to keep files, an archive)
    that is a system directory, is not the user's or that others can write to: other
    users could replace the files matchsql reads back there."""
    real = os.path.realpath(path)
    if real == "/" or any(real == d or real.startswith(d + "/") for d in SYSTEM_DIRECTORIES):
        raise StreamError(
            f"{what} {path} is in a system directory ({real}); choose a directory of your own"
        )
    with contextlib.suppress(FileNotFoundError):
        link = os.lstat(path)
        if stat.S_ISLNK(link.st_mode) and link.st_uid not in (os.getuid(), 0):
            raise StreamError(
                f"{what} {path} is a symbolic link owned by user id {link.st_uid}, not by this user"
            )
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
    if (
        stat.S_ISREG(wal.st_mode)
        and wal.st_uid == os.getuid()
        and stat.S_IMODE(wal.st_mode) & ~mode
    ):
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


def io_error(what: str, path: str, exc: OSError) -> StreamError:
    """A StreamError for a failed file operation: what failed, on which path, and why."""
    cause = exc.strerror or str(exc)
    return StreamError(f"{what} {path}: {cause}")
