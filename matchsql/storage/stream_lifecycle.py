"""Stream life cycle behind ``CREATE STREAM``, ``DROP STREAM`` and ``SHOW STREAMS``."""

from __future__ import annotations

import contextlib
import time

import duckdb
import pyarrow as pa

from matchsql.errors import CatalogError, StreamError
from matchsql.grammar.stream_ddl import CAPACITY_RULE, ON_FULL, is_capacity, spill_limit
from matchsql.storage.archive import Archive
from matchsql.storage.catalog import Catalog, StreamDef
from matchsql.storage.shm_ring import (
    MAX_SLOTS,
    R_BEAT,
    R_PID,
    R_READ,
    R_SEQ,
    S_CLOSED,
    W_ARCH_LEASE,
    W_ARCH_SEQ,
    W_DROPPED,
    W_EOS,
    W_EOS_SEQ,
    W_HAS_ARCHIVE,
    W_HEAD_SEQ,
    W_MAX_QUEUE,
    W_SPILLED,
    W_TAIL_SEQ,
    Ring,
)
from matchsql.storage.spill import SpillSpace

DEFAULT_CAPACITY = 1_048_576


def create_stream(
    con: duckdb.DuckDBPyConnection,
    database: str | None,
    name: str,
    columns: list[tuple[str, str]],
    schema: pa.Schema,
    *,
    capacity: int = DEFAULT_CAPACITY,
    on_full: str = "block",
    max_spill: int | float | str | None = None,
    archive: str | None = None,
    archive_filter: str | None = None,
    if_not_exists: bool = False,
) -> StreamDef | None:
    """Create the segment, register the stream and make sure its archive exists.

    ``max_spill`` (bytes, or text such as ``'512 MiB'``; ``on_full = 'spill'``
    only) bounds the spill files; without it a spill stream records a quarter of
    the free space of the spill directory's disk (see ``default_max_spill``).
    """
    limit = None
    if max_spill is not None:
        if on_full != "spill":
            raise StreamError(
                "max_spill bounds the spill files of an on_full = 'spill' "
                "stream; this stream blocks when full and never spills"
            )
        try:
            limit = spill_limit(max_spill)
        except ValueError as exc:
            raise StreamError(str(exc)) from None
    if not is_capacity(capacity):  # the statement checked these: the Python API's values
        raise StreamError(f"{CAPACITY_RULE}, got {capacity!r}")
    if on_full not in ON_FULL:
        raise StreamError(f"on_full is {' or '.join(map(repr, ON_FULL))}, got {on_full!r}")
    catalog = Catalog(database)
    existing = catalog.get(name)
    if existing is not None:
        if if_not_exists:
            return None
        raise StreamError(
            f"stream {name!r} already exists (owned by process "
            f"{existing.owner_pid}); DROP STREAM {name} first"
        )
    cursor = con.cursor()
    try:
        clash = cursor.execute(
            "SELECT count(*) FROM information_schema.tables WHERE lower(table_name) = lower(?)",
            [name],
        ).fetchall()[0][0]
    finally:
        cursor.close()
    if clash:
        raise CatalogError(f"a table or view named {name!r} exists; a stream needs its own name")
    definition = catalog.new_def(name, columns, capacity, on_full, archive, archive_filter, limit)
    first_seq = 0
    if archive:
        store = Archive(definition, con, schema)
        store.create()
        cursor = con.cursor()
        try:
            first_seq = store.last_seq(cursor) + 1  # sequence numbers continue the archive's
        finally:
            cursor.close()
    ring = Ring.create(
        definition.segment, schema, capacity, on_full, first_seq, archived=bool(archive)
    )
    ring.close()
    catalog.register(definition)
    return definition


def drop_stream(database: str | None, name: str, *, if_exists: bool = False) -> None:
    """Tell attached producers and readers, then remove the segment and the registry entry."""
    catalog = Catalog(database)
    definition = catalog.get(name)
    if definition is None:
        if if_exists:
            return
        raise CatalogError(f"stream {name!r} does not exist")
    with contextlib.suppress(StreamError):
        ring = Ring.attach(definition.segment)
        ring.set_word(W_DROPPED, 1)
        ring.wake_reader()
        ring.space_sem.release()
        ring.close()
    catalog.remove(definition)


SHOW_SCHEMA = pa.schema(
    [
        ("name", pa.string()),
        ("columns", pa.string()),
        ("capacity", pa.int64()),
        ("on_full", pa.string()),
        ("max_spill", pa.int64()),
        ("archive", pa.string()),
        ("archive_filter", pa.string()),
        ("written", pa.int64()),
        ("read", pa.int64()),
        ("queued", pa.int64()),
        ("max_queued", pa.int64()),
        ("spilled", pa.int64()),
        ("spill_bytes", pa.int64()),
        ("producers", pa.int64()),
        ("readers", pa.int64()),
        ("max_lag", pa.int64()),
        ("archived", pa.int64()),
        ("ended", pa.bool_()),
    ]
)
READERS_SCHEMA = pa.schema(
    [
        ("stream", pa.string()),
        ("reader", pa.int64()),
        ("name", pa.string()),
        ("pid", pa.int64()),
        ("position", pa.int64()),
        ("released", pa.int64()),
        ("lag", pa.int64()),
        ("archive_writer", pa.bool_()),
        ("idle_s", pa.float64()),
    ]
)


def show_streams(database: str | None) -> pa.Table:
    """One row per live stream of the namespace, with its queue counters."""
    rows = []
    for definition in Catalog(database).list():
        try:
            ring = Ring.attach(definition.segment)
        except StreamError:
            continue
        try:
            live = [i for i in ring.producers() if ring.slot_alive(i)]
            spilling = definition.on_full == "spill"
            rows.append(
                {
                    "name": definition.name,
                    "columns": ", ".join(f"{c} {t}" for c, t in definition.columns),
                    "capacity": definition.capacity,
                    "on_full": definition.on_full,
                    "max_spill": definition.spill_limit if spilling else None,
                    "archive": definition.archive,
                    "archive_filter": definition.archive_filter,
                    "written": ring.word(W_HEAD_SEQ),
                    "read": ring.word(W_TAIL_SEQ),
                    "queued": ring.queued,
                    "max_queued": ring.word(W_MAX_QUEUE),
                    "spilled": ring.word(W_SPILLED),
                    "spill_bytes": _spill_bytes(definition, ring) if spilling else None,
                    "producers": len(live),
                    **_reader_summary(ring),
                    "ended": _ended(ring, live),
                }
            )
        finally:
            ring.close()
    return pa.Table.from_pylist(rows, schema=SHOW_SCHEMA)


def _spill_bytes(definition: StreamDef, ring: Ring) -> int | None:
    """Bytes of the stream's spill files that readers still need (what max_spill bounds);
    None when the spill directory cannot be read (SHOW STREAMS still lists the stream)."""
    try:
        return SpillSpace(definition.spill_dir).in_use(ring.word(W_TAIL_SEQ))
    except StreamError:
        return None


def _reader_summary(ring: Ring) -> dict:
    """How many readers read the stream, how far the slowest one lags behind the producers
    (tuples written and not yet read by it), and where the archive's cursor is."""
    head = ring.word(W_HEAD_SEQ)
    lags = [head - int(ring.reader(i)[R_READ]) for i in ring.readers()]
    return {
        "readers": len(lags),
        "max_lag": max(lags) if lags else None,
        "archived": ring.word(W_ARCH_SEQ) if ring.word(W_HAS_ARCHIVE) else None,
    }


def stream_lag(definition: StreamDef) -> int | None:
    """Tuples written into the stream and not yet read by its slowest reader (None: it has
    no reader, or its queue is gone)."""
    try:
        ring = Ring.attach(definition.segment)
    except StreamError:
        return None
    try:
        return _reader_summary(ring)["max_lag"]
    finally:
        ring.close()


def show_stream_readers(database: str | None, name: str | None = None) -> pa.Table:
    """One row per registered reader (of stream ``name``, else of every stream): its
    cursor, its lag behind the producers, and whether it writes the archive."""
    rows = []
    for definition in Catalog(database).list():
        if name is not None and definition.name.lower() != name.lower():
            continue
        try:
            ring = Ring.attach(definition.segment)
        except StreamError:
            continue
        try:
            head = ring.word(W_HEAD_SEQ)
            now = time.monotonic_ns()
            for index in ring.readers():
                slot = ring.reader(index)
                rows.append(
                    {
                        "stream": definition.name,
                        "reader": index,
                        "name": ring.reader_name(index),
                        "pid": int(slot[R_PID]),
                        "position": int(slot[R_READ]),
                        "released": int(slot[R_SEQ]),
                        "lag": head - int(slot[R_READ]),
                        "archive_writer": ring.word(W_ARCH_LEASE) == index + 1,
                        "idle_s": round(max(0, now - int(slot[R_BEAT])) / 1e9, 3),
                    }
                )
        finally:
            ring.close()
    return pa.Table.from_pylist(rows, schema=READERS_SCHEMA)


def _ended(ring: Ring, live: list[int]) -> bool:
    """Whether the producers closed the stream: its end marker waits for the reader, or
    the reader took it and nothing was written (nor a producer attached) since."""
    if ring.word(W_EOS):
        return True
    if live:
        return False
    closed = any(ring.slot(i)[S_CLOSED] for i in range(MAX_SLOTS))
    return bool(closed) and ring.word(W_EOS_SEQ) == ring.word(W_HEAD_SEQ) == ring.word(W_TAIL_SEQ)
