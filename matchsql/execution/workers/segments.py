"""A worker pool's shared-memory segments: made, named, and removed when nobody else will.

Every segment of a pool - each worker's two rings, the payloads too large for
a ring, the shared input of :mod:`.shared_rows` - is a :class:`Segment` named
``msqlw-<uid>-<pid>-<start>-<pool>-<what>``: the user, the pid and start time
of the process that owns the pool (the router), and a token of the pool. The
router makes up the names of the rings, the workers' own included, so a
segment whose creator died before saying its name is still found:

* the pool's :meth:`~matchsql.execution.workers.pool.WorkerPool.kill` removes every
  segment under its prefix (a worker killed after creating its ring but before
  greeting, a large payload its reader never took);
* a worker whose router died removes them as it exits (the router cannot);
* every connection, and every pool as it starts, removes the segments of
  owners that are gone (:func:`sweep_dead_owners`): workers killed with their
  router (a SIGKILL of the process group, or while they were still starting)
  remove nothing.

Segments are not :class:`multiprocessing.shared_memory.SharedMemory`: that one
registers every segment with multiprocessing's resource tracker, a process of
its own started from the same interpreter as the workers. Where that
interpreter cannot start (a Python in a directory the user cannot read), the
registration failed with a bare BrokenPipeError after the segment was made,
and the segment leaked; the rules above leave the tracker nothing to do.
"""

from __future__ import annotations

import errno
import mmap
import os
import secrets

import posix_ipc

from matchsql.storage import liveness

SHM_DIR = "/dev/shm"
#: What every pool segment's name starts with (this user's; another user's are not ours).
PREFIX = f"msqlw-{os.getuid()}-"


class Segment:
    """One POSIX shared-memory segment mapped here: ``name``, ``size``, ``buf``.

    The interface of :class:`~multiprocessing.shared_memory.SharedMemory`
    (``close`` raises BufferError while views of ``buf`` live), owner-only
    (0600), and errors as OSError subclasses: FileExistsError,
    FileNotFoundError, PermissionError.
    """

    def __init__(self, name: str, size: int = 0, *, create: bool = False) -> None:
        if create and size <= 0:
            raise ValueError("a new segment needs a positive size")
        try:
            shm = posix_ipc.SharedMemory(
                "/" + name,
                posix_ipc.O_CREX if create else 0,
                mode=0o600,
                size=size if create else 0,
            )
        except posix_ipc.ExistentialError:
            code = errno.EEXIST if create else errno.ENOENT
            raise (FileExistsError if create else FileNotFoundError)(
                code, os.strerror(code), name
            ) from None
        except posix_ipc.PermissionsError:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), name) from None
        try:
            self.size: int = shm.size
            if self.size <= 0:  # made, never sized: its creator died in between
                raise FileNotFoundError(errno.ENOENT, "an empty segment", name)
            self._mmap: mmap.mmap | None = mmap.mmap(shm.fd, self.size)
        except BaseException:
            if create:
                unlink(name)
            raise
        finally:
            shm.close_fd()
        self.name = name
        self._buf: memoryview | None = memoryview(self._mmap)

    @property
    def buf(self) -> memoryview:
        if self._buf is None:
            raise ValueError(f"segment {self.name} is closed")
        return self._buf

    def close(self) -> None:
        """Unmap (BufferError while a view of :attr:`buf` is alive: then try again later)."""
        if self._buf is not None:
            self._buf.release()
            self._buf = None
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def unlink(self) -> None:
        """Remove the name (mappings stay valid until closed); FileNotFoundError if gone."""
        if not unlink(self.name):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), self.name)


def create(name: str, size: int) -> Segment:
    """A new segment ``name`` of ``size`` bytes (FileExistsError if the name is taken)."""
    return Segment(name, size, create=True)


def pool_prefix() -> str:
    """A prefix of a new pool's segment names: owner pid, its start time, a random token."""
    pid = os.getpid()
    return f"{PREFIX}{pid}-{liveness.start_time(pid)}-{secrets.token_hex(4)}-"


def new_name(prefix: str | None, what: str) -> str:
    """A fresh name under ``prefix`` (None: a prefix of its own, as for a pool of this
    process: channels made outside a pool, in tests and benches); ``what``: a letter
    saying which segment it is."""
    return f"{prefix or pool_prefix()}{what}{secrets.token_hex(4)}"


def owner_of(name: str) -> tuple[int, int] | None:
    """(pid, start time) of the process that owns the pool of segment ``name``, or None
    for a name that is not a pool segment's."""
    if not name.startswith(PREFIX):
        return None
    pid, _, rest = name[len(PREFIX) :].partition("-")
    started, _, _ = rest.partition("-")
    if not (pid.isdigit() and started.isdigit()):
        return None
    return int(pid), int(started)


def names(prefix: str = PREFIX) -> list[str]:
    """The segments under ``prefix`` (none where shared memory is no directory to list)."""
    try:
        return sorted(name for name in os.listdir(SHM_DIR) if name.startswith(prefix))
    except OSError:
        return []


def unlink(name: str) -> bool:
    """Remove segment ``name``; whether it was there to remove."""
    try:
        posix_ipc.unlink_shared_memory("/" + name)
    except (posix_ipc.ExistentialError, posix_ipc.PermissionsError):
        return False
    return True


def sweep(prefix: str) -> list[str]:
    """Remove every segment whose name starts with ``prefix``; the names removed."""
    return [name for name in names(prefix) if unlink(name)]


def sweep_dead_owners() -> list[str]:
    """Remove this user's pool segments whose owning process is gone; the names removed.

    The owner is the pid and start time in the name (see the module); a pid now
    used by another process (another start time) counts as gone.
    """
    removed = []
    for name in names(PREFIX):
        owner = owner_of(name)
        if owner is not None and not liveness.alive(*owner) and unlink(name):
            removed.append(name)
    return removed
