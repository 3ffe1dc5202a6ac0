"""The reading end of a live stream: tuples in sequence order, blocking without spinning.

Any number of readers per stream, in any threads and processes: each one
registers a reader slot with a cursor of its own (see
:mod:`matchsql.storage.shm_ring`) and sees every tuple from where it joined.
:meth:`LiveReader.read` returns the next tuples as one Arrow record batch
together with the first one's sequence number, coalescing every frame
already waiting (up to ``max_rows``) so a fast producer is read in large
batches while a slow one is read as soon as each frame lands. Ring frames and
spill files are merged by sequence number.

When the queue is empty the reader sleeps on its slot's semaphore for at
most 50 ms at a time; between sleeps it checks the interrupt flag and (every
100 ms) the producers' and the other readers' liveness, so a producer that
dies without ``close()`` is noticed within about 200 ms and the query ends
with a :class:`~matchsql.errors.StreamError` - or, with
``on_producer_death = 'wait'``, the dead producer is forgotten and the query
waits for a new one - and a reader killed with SIGKILL stops holding the
ring for the others. Everything the dead producer published is read first.

For latency (thesis: time from a tuple's enqueue to its first selection),
every :meth:`LiveReader.read` also leaves in :attr:`LiveReader.last_enqueue_sum_ns`
the sum over the returned tuples of their enqueue instants
(``time.monotonic_ns()`` at the producer's write, one per frame). Spill files
carry no stamp unless their Parquet metadata has ``enqueue_ns``; their tuples
count as enqueued when they are read.

End of stream is a marker at a sequence number (set by the last producer's
``close()``): every reader that reaches it ends - a second query over an
ended stream replays the archive and ends too - until a new producer opens
the stream again.

A reader releases what it read at once; for a stream with an archive, the
ring still keeps every tuple until the archive holds it durably (the
archive's own cursor, advanced by whichever reader holds the archive lease:
see :mod:`matchsql.storage.archiver`). A reader killed at any moment
therefore leaves every tuple that is not in the archive in the ring.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import duckdb
import pyarrow as pa

from matchsql.errors import ExecutionError, StreamError
from matchsql.storage.archive import Archive
from matchsql.storage.archiver import Archiver
from matchsql.storage.catalog import StreamDef
from matchsql.storage.cursor import Cursor
from matchsql.storage.shm_ring import (
    R_BEAT,
    R_BYTES,
    R_READ,
    R_SEQ,
    S_BEAT,
    S_IN_USE,
    S_PID,
    W_EOS,
    W_EOS_SEQ,
    W_SPILLED,
    W_TAIL_SEQ,
    Ring,
)
from matchsql.storage.spill import remove_spills_before

CHECK_EVERY_S = 0.1
INTERRUPT_POLL_S = 0.05  # longest wait on an empty queue before the interrupt flag is read
STALE_HEARTBEAT_S = 10.0  # a producer whose pid lives but who stopped beating this long is dead
SPILL_GRACE_S = 5.0


class LiveReader:
    """Consumes one stream's queue (ring and spill files) in order, with a cursor of its own."""

    def __init__(
        self,
        definition: StreamDef,
        *,
        on_producer_death: str = "error",
        cancelled: Callable[[], bool] | None = None,
        max_rows: int = 65_536,
        archive: Archive | None = None,
        con: duckdb.DuckDBPyConnection | None = None,
        label: str = "",
    ) -> None:
        """``archive`` (with ``con``): this reader takes its turn at writing the stream's
        archive; ``label`` names the reader in ``SHOW STREAM READERS``."""
        self.definition = definition
        self.ring = Ring.attach(definition.segment)
        self.schema = self.ring.schema
        self.on_producer_death = on_producer_death
        self.cancelled = cancelled or (lambda: False)
        self.max_rows = max_rows
        self.archive = archive
        self.con = con
        self.label = label
        # Called before each wait on an empty queue (every 50 ms at most while idle).
        self.on_wait: Callable[[], None] | None = None
        self.rows_read = 0
        # sum(rows * enqueue_ns) of the batch the last read() returned (monotonic ns).
        self.last_enqueue_sum_ns = 0
        self.slot = -1
        self.cursor: Cursor | None = None
        self.archiver: Archiver | None = None
        self._checked = 0.0
        self._tail = 0

    def take_archive(self, con: duckdb.DuckDBPyConnection) -> Archive | None:
        """Join in writing the stream's archive (if it has one) through ``con``; the Archive."""
        if self.definition.archive:
            self.archive, self.con = Archive(self.definition, con, self.schema), con
        return self.archive

    def open(self) -> LiveReader:
        ring = self.ring
        self.slot = ring.add_reader(self.definition.name, self.label)
        slot = ring.reader(self.slot)
        self.cursor = Cursor(
            ring, self.definition.spill_dir, self.schema, int(slot[R_SEQ]), int(slot[R_BYTES])
        )
        self._tail = ring.word(W_TAIL_SEQ)
        if self.archive is not None and self.con is not None:
            self.archiver = Archiver(
                ring, self.slot, self.archive, self.definition.spill_dir, self.con
            )
            self.archiver.try_lead()
        return self

    @property
    def next_seq(self) -> int:
        """The sequence number the next read() starts at."""
        return self.cursor.seq if self.cursor is not None else 0

    def read(self) -> tuple[int, pa.RecordBatch] | None:
        """The next tuples and the first one's sequence number; None at end of stream.

        The end is a state, not an event: every reader that reaches the end
        sequence number ends, until a new producer opens the stream.
        """
        ring, cursor = self.ring, self.cursor
        assert cursor is not None, "open() first"
        slot = ring.reader(self.slot)
        spill_missing_since = None
        while True:
            ring.check_dropped()
            slot[R_BEAT] = time.monotonic_ns()
            if cursor.available():
                chunk = cursor.read(self.max_rows)
                if chunk is not None:
                    if self.archiver is not None:
                        self.archiver.follow(chunk, cursor, self.max_rows, ring.take_blocked())
                    slot[R_READ] = cursor.seq
                    self.rows_read += chunk.batch.num_rows
                    self.last_enqueue_sum_ns = chunk.enqueue_sum_ns
                    self._release()
                    return chunk.first, chunk.batch
                spill_missing_since = spill_missing_since or time.monotonic()
                if time.monotonic() - spill_missing_since > SPILL_GRACE_S:
                    raise StreamError(
                        f"stream {self.definition.name!r} lost tuples from "
                        f"sequence number {cursor.seq}: its spill file is "
                        "missing"
                    )
                time.sleep(0.001)
                continue
            if ring.word(W_EOS) and cursor.seq >= ring.word(W_EOS_SEQ):
                if self.archiver is not None:
                    self.archiver.pump(self.max_rows, drain=True)
                return None
            if self.archiver is not None:
                self.archiver.pump(self.max_rows, urgent=ring.take_blocked())
            if self.on_wait is not None:
                self.on_wait()
            if self.cancelled():
                raise ExecutionError("statement interrupted")
            now = time.monotonic()
            if now - self._checked >= CHECK_EVERY_S:
                self._checked = now
                self._check_producers()
                ring.reap_readers()
                if self.archiver is not None:
                    self.archiver.try_lead()
            ring.wait_data(self.slot, INTERRUPT_POLL_S)

    def _release(self) -> None:
        """Hand what was read back to the ring; spill files no cursor needs go."""
        cursor = self.cursor
        assert cursor is not None
        tail = self.ring.release_slot(self.slot, cursor.seq, cursor.bytes)
        if tail > self._tail and self.ring.word(W_SPILLED):
            remove_spills_before(self.definition.spill_dir, tail)
        self._tail = tail

    def flush_archive(self) -> None:
        """Make what this reader archived so far durable (when it holds the lease)."""
        if self.archiver is not None:
            self.archiver.pump(self.max_rows, drain=True)

    def _check_producers(self) -> None:
        ring = self.ring
        for index in ring.producers():
            slot = ring.slot(index)
            beat_age = (time.monotonic_ns() - int(slot[S_BEAT])) / 1e9
            if ring.slot_alive(index) and beat_age < STALE_HEARTBEAT_S:
                continue
            name, pid = ring.slot_name(index), int(slot[S_PID])
            with ring.locked():
                slot[S_IN_USE] = 0  # reported once; a new producer may take over
            if self.on_producer_death == "wait":
                continue
            raise StreamError(
                f"producer {name!r} (process {pid}) of stream {self.definition.name!r} stopped "
                f"without close(); the query read all {self.rows_read} tuples it received. "
                "SET on_producer_death = 'wait' keeps waiting for a new producer instead"
            )

    def close(self) -> None:
        try:
            if self.slot >= 0 and not self.ring.mm.closed:
                try:
                    # A failing flush was raised by read() already; the tuples stay in the ring.
                    with contextlib.suppress(StreamError):
                        self.flush_archive()
                finally:
                    self.ring.remove_reader(self.slot)
                    self.slot = -1
        finally:
            self.ring.close()
