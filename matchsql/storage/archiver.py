"""The writer of a stream's archive among its readers: one at a time, by lease.

Any reader of a stream with an archive may write it, but only the holder of
the archive lease (a reader slot, see :mod:`matchsql.storage.shm_ring`)
does. It reads with a cursor of its own, appends to the
:class:`~matchsql.storage.archive.Archive` and, after each durable flush,
publishes the archive's cursor, which lets the ring free those tuples. When
the holder dies, another reader takes the lease over and starts where the
archive ends: the published cursor or the last archived sequence number,
whichever is later (a holder killed after its fsync but before publishing
leaves the part in place; nothing is archived twice).
"""

from __future__ import annotations

import duckdb

from matchsql.storage.archive import Archive
from matchsql.storage.cursor import Chunk, Cursor
from matchsql.storage.shm_ring import W_ARCH_BYTES, W_ARCH_SEQ, W_CAPACITY, Ring


class Archiver:
    """Reader ``slot``'s share of archiving (active while it holds the lease)."""

    def __init__(
        self,
        ring: Ring,
        slot: int,
        archive: Archive,
        spill_dir: str,
        con: duckdb.DuckDBPyConnection,
    ) -> None:
        self.ring = ring
        self.slot = slot
        self.archive = archive
        self.spill_dir = spill_dir
        self.con = con
        self.cursor: Cursor | None = None
        self._published = 0

    def try_lead(self) -> bool:
        """Take the lease if it is free (or its holder died); whether this reader archives."""
        if self.cursor is not None:
            if self.ring.holds_archive_lease(self.slot):
                return True
            self.cursor = None  # reaped as dead by a slow liveness check: start over
        if not self.ring.take_archive_lease(self.slot):
            return False
        cursor = self.con.cursor()
        try:
            archived = self.archive.last_seq(cursor) + 1
        finally:
            cursor.close()
        seq = max(self.ring.word(W_ARCH_SEQ), archived)
        self.archive.discard()
        self.cursor = Cursor(
            self.ring, self.spill_dir, self.archive.schema, seq, self.ring.word(W_ARCH_BYTES)
        )
        self._published = seq
        self.archive.mark_durable(seq)
        if seq > self.ring.word(W_ARCH_SEQ):
            self.ring.set_archived(seq, self.ring.word(W_ARCH_BYTES))
        return True

    def pump(self, max_rows: int, *, urgent: bool = False, drain: bool = False) -> None:
        """Archive what is published (up to ``max_rows`` unless ``drain``); flush when due,
        ``urgent`` (a writer waits for room) or when the buffer holds half the ring."""
        cursor = self.cursor
        if cursor is None:
            return
        taken = 0
        while drain or taken < max_rows:
            chunk = cursor.read(max_rows)
            if chunk is None:
                break
            self.archive.append(chunk.first, chunk.batch, flush=False)
            taken += chunk.batch.num_rows
        if (
            urgent
            or drain
            or self.archive.due()
            or self.archive.buffered * 2 >= self.ring.word(W_CAPACITY)
            or self.archive.buffered_bytes * 2 >= self.ring.size
        ):
            self.archive.flush()
        self._publish()

    def follow(self, chunk: Chunk, reader: Cursor, max_rows: int, urgent: bool) -> None:
        """Archive ``chunk``, just read by this slot's reader, without reading it again
        when the archive's cursor is where the chunk starts; else catch up by reading."""
        cursor = self.cursor
        if cursor is None:
            return
        if cursor.seq != chunk.first:
            self.pump(max_rows, urgent=urgent)
            return
        self.archive.append(chunk.first, chunk.batch, flush=False)
        cursor.seq, cursor.bytes = reader.seq, reader.bytes
        self.pump(0, urgent=urgent)

    def _publish(self) -> None:
        cursor = self.cursor
        if cursor is not None and self.archive.durable_seq >= cursor.seq > self._published:
            self.ring.set_archived(cursor.seq, cursor.bytes)
            self._published = cursor.seq
