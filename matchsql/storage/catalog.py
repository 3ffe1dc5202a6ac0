"""Where streams are registered, so that any local process can open one by name.

A stream belongs to a *namespace*: the real path of the DuckDB database it
was created in (``memory`` for every in-memory database of this user), so
``Producer.open("trades", database="my.duckdb")`` finds the stream that a
connection to ``my.duckdb`` created. The registry is a directory::

    $MATCHSQL_RUNTIME_DIR               (else $XDG_RUNTIME_DIR/matchsql,
                                         else /tmp/matchsql-<uid>; mode 0700)
        <sha1(namespace)[:16]>/
            <stream>.json               the StreamDef below
            <stream>.spill/             Parquet files of on_full='spill' overflow
                                        (at most the entry's max_spill bytes)

The live queue itself is a POSIX shared-memory segment plus three named
semaphores (see :mod:`matchsql.storage.shm_ring`) whose names are a hash
of (registry, namespace, stream), so two registries never collide, and a
random part recorded in the registry entry, so nobody can take a stream's
name first. Everything is created owner-only (0600/0700), in a registry
directory checked on every use (:func:`runtime_dir`).

A stream lives until ``DROP STREAM`` or until the process that created it
(its *owner*) ends: on a clean exit the owner drops its streams; after a
crash the registry entry names a dead owner (pid + start time), and the next
process that looks the stream up reclaims its segment, semaphores and spill
files.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from matchsql.errors import CatalogError, StreamError
from matchsql.grammar.stream_ddl import MAX_SPILL_MAX, MAX_SPILL_MIN, NAME_RULE, is_stream_name
from matchsql.storage import liveness
from matchsql.storage.permissions import io_error, make_private_dirs, private_directory
from matchsql.storage.shm_ring import sweep_orphans, unlink_segment

RUNTIME_ENV = "MATCHSQL_RUNTIME_DIR"
MEMORY_NAMESPACE = "memory"


@dataclass
class StreamDef:
    """A stream's definition as registered; enough for any process to open it."""

    name: str
    namespace: str
    columns: list[tuple[str, str]]  # (column name, DuckDB type text)
    capacity: int
    on_full: str  # 'block' | 'spill'
    archive: str | None = None  # DuckDB table name or Parquet directory
    archive_filter: str | None = None  # SQL predicate over the stream's columns
    segment: str = ""  # POSIX shm name; semaphores add -d, -s, -w
    spill_dir: str = ""
    owner_pid: int = 0
    owner_started: int = 0
    created: float = field(default_factory=time.time)
    # Bytes of spill files a 'spill' stream may hold (None: a 'block' stream, or an
    # entry written before the limit existed; see ``spill_limit``).
    max_spill: int | None = None

    @property
    def spill_limit(self) -> int:
        """The bytes of spill files producers may leave for readers.

        Recorded when the stream is created, so every producer enforces the
        same limit; an entry without one (written by an older matchsql) gets
        the default, from the free space now.
        """
        if self.max_spill is not None:
            return self.max_spill
        return default_max_spill(Path(self.spill_dir))

    @property
    def archive_is_directory(self) -> bool:
        """A path-like archive is a Parquet directory; anything else names a DuckDB table."""
        text = self.archive or ""
        return "/" in text or text.startswith((".", "~")) or text.endswith(".parquet")


def default_max_spill(directory: Path) -> int:
    """A quarter of the free space of the disk ``directory`` is on (at least 64 KiB).

    A stream whose readers fall behind must not fill the disk other programs
    (and the stream's own archive) need; a quarter leaves room for both, and
    scales with the machine instead of being one guess for every disk.
    """
    path = directory
    while not path.exists() and path.parent != path:  # the spill directory comes later
        path = path.parent
    try:
        stats = os.statvfs(path)
    except OSError:
        return MAX_SPILL_MIN
    free = stats.f_bavail * stats.f_frsize
    return min(MAX_SPILL_MAX, max(MAX_SPILL_MIN, free // 4))


def namespace_of(database: str | None) -> str:
    """The namespace of a DuckDB database: its real path, or ``memory``."""
    if database is None or database in ("", ":memory:") or database.startswith(":memory:"):
        return MEMORY_NAMESPACE
    return os.path.realpath(os.path.expanduser(database))


def runtime_dir() -> Path:
    """The registry root: a directory of this user only, checked (never a link, never
    one another user made or can write to) and created 0700."""
    configured = os.environ.get(RUNTIME_ENV)
    if configured:
        root = Path(configured)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        root = Path(os.environ["XDG_RUNTIME_DIR"]) / "matchsql"
    else:
        root = Path("/tmp") / f"matchsql-{os.getuid()}"
    hint = f"; remove it, or set {RUNTIME_ENV} to a directory of your own"
    try:
        make_private_dirs(root.parent)
    except OSError as exc:
        raise io_error("cannot create the stream registry", str(root.parent), exc) from None
    private_directory(root, "stream registry", hint)
    return root


class Catalog:
    """The streams of one namespace."""

    def __init__(self, database: str | None = None) -> None:
        self.namespace = namespace_of(database)
        root = runtime_dir()
        digest = hashlib.sha1(self.namespace.encode()).hexdigest()[:16]
        self.directory = root / digest
        private_directory(
            self.directory,
            "stream registry",
            f"; remove it, or set {RUNTIME_ENV} to a directory of your own",
        )
        self._root = str(root)
        _sweep_once()

    def segment_name(self, name: str) -> str:
        """A new segment's name: its stream's hash and a random part, recorded in the
        registry entry (another user cannot make the name first to block the stream)."""
        key = f"{self._root}\0{self.namespace}\0{name}".encode()
        return f"/msql-{os.getuid()}-{hashlib.sha1(key).hexdigest()[:12]}-{secrets.token_hex(8)}"

    def _path(self, name: str) -> Path:
        if not is_stream_name(name):
            raise CatalogError(f"{name!r} is not a stream name: {NAME_RULE}")
        return self.directory / f"{name}.json"

    def new_def(
        self,
        name: str,
        columns: list[tuple[str, str]],
        capacity: int,
        on_full: str,
        archive: str | None,
        archive_filter: str | None,
        max_spill: int | None = None,
    ) -> StreamDef:
        """A new stream's entry; a 'spill' stream without ``max_spill`` records the default
        (:func:`default_max_spill`) now, so that all its producers agree on it."""
        pid = os.getpid()
        spill_dir = self.directory / f"{name}.spill"
        if on_full == "spill" and max_spill is None:
            max_spill = default_max_spill(spill_dir)
        return StreamDef(
            name=name,
            namespace=self.namespace,
            columns=columns,
            capacity=capacity,
            on_full=on_full,
            archive=archive,
            archive_filter=archive_filter,
            segment=self.segment_name(name),
            spill_dir=str(spill_dir),
            owner_pid=pid,
            owner_started=liveness.start_time(pid),
            max_spill=max_spill if on_full == "spill" else None,
        )

    def register(self, definition: StreamDef) -> None:
        """Publish ``definition`` (the segment must exist already)."""
        path = self._path(definition.name)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(definition), handle)
        os.replace(tmp, path)
        if definition.owner_pid == os.getpid():
            _OWNED.add((str(self.directory), definition.name))

    def get(self, name: str) -> StreamDef | None:
        """The live stream ``name``, or None (a stale one is reclaimed on the way)."""
        definition = self._load(name)
        if definition is not None and not liveness.alive(
            definition.owner_pid, definition.owner_started
        ):
            self.remove(definition)
            return None
        return definition

    def require(self, name: str) -> StreamDef:
        definition = self.get(name)
        if definition is None:
            raise CatalogError(f"stream {name!r} does not exist")
        return definition

    def list(self) -> list[StreamDef]:
        found = []
        for path in sorted(self.directory.glob("*.json")):
            definition = self.get(path.stem)
            if definition is not None:
                found.append(definition)
        return found

    def _load(self, name: str) -> StreamDef | None:
        try:
            data = json.loads(self._path(name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StreamError(f"stream {name!r} has an unreadable registry entry: {exc}") from None
        try:
            data["columns"] = [tuple(c) for c in data["columns"]]
            # Fields this version does not know (a newer writer's) are left out; missing
            # ones (an older writer's) take their defaults.
            return StreamDef(**{k: v for k, v in data.items() if k in _FIELDS})
        except (KeyError, TypeError) as exc:
            raise StreamError(f"stream {name!r} has an unreadable registry entry: {exc}") from None

    def remove(self, definition: StreamDef) -> None:
        """Delete the stream: segment, semaphores, spill files and registry entry."""
        unlink_segment(definition.segment)
        shutil.rmtree(definition.spill_dir, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self._path(definition.name).unlink()
        _OWNED.discard((str(self.directory), definition.name))


_FIELDS = frozenset(f.name for f in fields(StreamDef))

# Streams created by this process: dropped when it exits cleanly.
_OWNED: set[tuple[str, str]] = set()


_swept = False


def _sweep_once() -> None:
    """Reclaim segments of crashed owners once per process (see ``sweep_orphans``)."""
    global _swept
    if not _swept:
        _swept = True
        sweep_orphans()


@atexit.register
def _drop_owned() -> None:
    for directory, name in list(_OWNED):
        path = Path(directory) / f"{name}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if data.get("owner_pid") != os.getpid():
            continue
        unlink_segment(data.get("segment", ""))
        shutil.rmtree(data.get("spill_dir", ""), ignore_errors=True)
        with contextlib.suppress(OSError):
            path.unlink()
