"""Producers: write tuples into a live stream from any local process.

    from matchsql.storage import Producer
    with Producer.open("trades", database="my.duckdb") as producer:
        producer.write(("MSFT", 26.8, 100, ts))          # buffered, flushed within `linger`
        producer.write_batch(arrow_table, batch_id=7)    # one frame per <= 64k rows
    # leaving the block calls close(): end of stream

Rows travel as Arrow IPC record-batch frames, so the per-tuple cost is
Arrow's, not Python's. ``write`` buffers rows and a background thread
flushes them after ``linger`` seconds (2 ms by default) so per-row writers
keep a low latency; the same thread refreshes the producer's heartbeat.

``batch_id`` makes ``write_batch`` idempotent per producer *name*: the slot
of a name remembers its last batch id and how many of that batch's rows were
published, so a retried batch (say, a Spark micro-batch re-run after a
failure, possibly in another process with the same name) is skipped, or
resumed after the rows that already went out. Batch ids of a name must
increase.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from matchsql.errors import StreamError, StreamWriteError
from matchsql.storage import faults, liveness
from matchsql.storage.catalog import Catalog, StreamDef
from matchsql.storage.shm_ring import (
    MAX_SLOTS,
    S_BEAT,
    S_CLOSED,
    S_IN_USE,
    S_LAST_BATCH,
    S_PID,
    S_ROWS,
    S_STARTED,
    W_EOS,
    W_EOS_SEQ,
    W_HEAD_SEQ,
    W_TAIL_SEQ,
    Ring,
)
from matchsql.storage.spill import SpillSpace, encode_spill, size_text, write_spill

S_BATCH_ROWS = 7  # rows of the last batch published so far; -1 once it is complete
FRAME_ROWS = 65_536
HEARTBEAT_S = 0.1


class Producer:
    """One writer attached to one stream (thread-safe)."""

    def __init__(
        self,
        definition: StreamDef,
        ring: Ring,
        slot: int,
        name: str,
        linger: float,
        batch_rows: int,
    ) -> None:
        self.definition = definition
        self.ring = ring
        self.name = name
        self.linger = linger
        self.batch_rows = batch_rows
        self.schema = ring.schema
        self._slot = slot
        self._frame_rows = max(1, min(FRAME_ROWS, definition.capacity))
        self._spill = definition.on_full == "spill"
        self._max_spill = definition.spill_limit if self._spill else 0
        self._spill_space = SpillSpace(definition.spill_dir)
        self._lock = threading.RLock()  # one write at a time from this process
        self._wake = threading.Condition()
        self._rows: list[Any] = []
        self._first_row_at = 0.0
        self._closed = False
        self._error: BaseException | None = None  # a background flush failed: raised next call
        self._thread = threading.Thread(
            target=self._background, daemon=True, name=f"matchsql-producer-{definition.name}"
        )
        self._thread.start()

    # -- opening -------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        stream: str,
        database: str | None = None,
        *,
        name: str | None = None,
        linger: float = 0.002,
        batch_rows: int = 8192,
    ) -> Producer:
        """Attach to ``stream`` of the database ``database`` (None: in-memory namespace).

        ``name`` identifies the producer for ``batch_id`` de-duplication (default
        ``pid<N>``); ``linger`` bounds how long ``write`` keeps rows before
        sending them; ``batch_rows`` flushes earlier once that many are buffered.
        """
        catalog = Catalog(database)
        definition = catalog.get(stream) or catalog.require(stream.lower())
        ring = Ring.attach(definition.segment)
        pid = os.getpid()
        name = name or f"pid{pid}"
        try:
            with ring.locked():
                slot = _claim_slot(ring, name, pid)
                if ring.word(W_EOS):  # the stream had ended: this producer starts it again
                    ring.set_word(W_EOS, 0)
        except BaseException:
            ring.close()
            raise
        return cls(definition, ring, slot, name, linger, batch_rows)

    # -- writing ----------------------------------------------------------------------

    def write(self, row: Sequence[Any] | dict[str, Any]) -> None:
        """Buffer one row (a tuple in column order, or a dict by column name)."""
        self._check_open()
        with self._wake:
            if not self._rows:
                self._first_row_at = time.monotonic()
                self._wake.notify()
            self._rows.append(row)
            full = len(self._rows) >= self.batch_rows
        if full:
            self.flush()

    def write_batch(
        self,
        data: pa.Table | pa.RecordBatch | Any,
        *,
        batch_id: int | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Write Arrow rows as one unit; False when ``batch_id`` was already written.

        ``timeout`` bounds how long a blocking stream may stay full; without it
        the writer waits for the reader as long as one lives. A batch that
        cannot be written whole (timeout, reader died, spill failed or over the
        stream's max_spill, stream dropped) raises :class:`~matchsql.errors.StreamWriteError`, whose
        ``rows_written`` says how many of its first rows are in the stream: a
        batch may be larger than the ring, so it cannot be all-or-nothing.
        Retrying with the same ``batch_id`` writes exactly the rest.
        """
        self._check_open()
        table = self._conform(data)
        with self._lock:
            self._flush_rows()
            return self._write_table(table, batch_id, timeout)

    def flush(self) -> None:
        """Send the rows buffered by :meth:`write` now (or raise why earlier ones were not)."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        with self._lock:
            self._flush_rows()

    def close(self, end_of_stream: bool = True) -> None:
        """Flush and detach; with ``end_of_stream`` (the default) the stream ends
        once no other producer is attached."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            with self._wake:
                self._wake.notify()
            self._thread.join(timeout=1.0)
            if not self.ring.dropped:
                with self.ring.locked():
                    slot = self.ring.slot(self._slot)
                    slot[S_CLOSED] = 1
                    slot[S_IN_USE] = 0
                    others = [i for i in self.ring.producers() if self.ring.slot_alive(i)]
                    if end_of_stream and not others:
                        self.ring.set_word(W_EOS_SEQ, self.ring.word(W_HEAD_SEQ))
                        self.ring.set_word(W_EOS, 1)
                self.ring.wake_reader()
            self.ring.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StreamError(f"producer of stream {self.definition.name!r} is closed")
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        self.ring.check_dropped()

    def _conform(self, data: Any) -> pa.Table:
        """``data`` as a table with exactly the stream's columns and types."""
        if isinstance(data, pa.RecordBatch):
            table = pa.Table.from_batches([data])
        elif isinstance(data, pa.Table):
            table = data
        else:
            try:
                table = pa.table(data)
            except (TypeError, ValueError, pa.ArrowException) as exc:
                raise StreamError(f"cannot turn the batch into Arrow rows: {exc}") from None
        missing = [n for n in self.schema.names if n not in table.column_names]
        extra = [n for n in table.column_names if n not in self.schema.names]
        if missing or extra:
            raise StreamError(
                f"batch columns do not match stream {self.definition.name!r}: "
                f"missing {missing}, unexpected {extra}"
            )
        try:
            return table.select(self.schema.names).cast(self.schema)
        except (pa.ArrowException, ValueError) as exc:
            raise StreamError(
                f"batch does not fit the types of stream {self.definition.name!r}: {exc}"
            ) from None

    def _flush_rows(self) -> None:
        with self._wake:
            rows, self._rows = self._rows, []
        if not rows:
            return
        try:
            if isinstance(rows[0], dict):
                batch = pa.RecordBatch.from_pylist(rows, schema=self.schema)
            else:
                columns = list(zip(*rows))
                if len(columns) != len(self.schema):
                    raise StreamError(
                        f"rows of stream {self.definition.name!r} have "
                        f"{len(self.schema)} values, got {len(columns)}"
                    )
                batch = pa.RecordBatch.from_arrays(
                    [pa.array(col, type=f.type) for col, f in zip(columns, self.schema)],
                    schema=self.schema,
                )
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise StreamError(f"rows do not fit stream {self.definition.name!r}: {exc}") from None
        self._write_table(pa.Table.from_batches([batch]), None, None)

    def _write_table(self, table: pa.Table, batch_id: int | None, timeout: float | None) -> bool:
        ring = self.ring
        slot = ring.slot(self._slot)
        skip = 0
        if batch_id is not None:
            with ring.locked():
                last, done = int(slot[S_LAST_BATCH]), int(slot[S_BATCH_ROWS])
                if batch_id < last or batch_id == last and done < 0:
                    return False
                if batch_id == last:
                    skip = done  # a retry: resume after the rows that went out
                else:
                    slot[S_LAST_BATCH] = batch_id
                    slot[S_BATCH_ROWS] = 0
        deadline = None if timeout is None else time.monotonic() + timeout
        written = [skip]  # rows of ``table`` in the stream so far
        try:
            for batch in table.slice(skip).to_batches(max_chunksize=self._frame_rows):
                if batch.num_rows:
                    self._write_frame(batch, batch_id, deadline, written)
        except StreamWriteError:
            raise
        except StreamError as exc:
            done = written[0]
            what = (
                f"the first {done} of the batch's {table.num_rows} rows were written"
                if done
                else f"none of the batch's {table.num_rows} rows was written"
            )
            raise StreamWriteError(f"{exc.message}; {what}", done) from None
        if batch_id is not None:
            with ring.locked():
                slot[S_BATCH_ROWS] = -1
        return True

    def _write_frame(
        self,
        batch: pa.RecordBatch,
        batch_id: int | None,
        deadline: float | None,
        written: list[int],
    ) -> None:
        """Publish ``batch`` (adding its rows to ``written[0]``) or raise StreamError."""
        ring = self.ring
        payload = batch.serialize()
        if payload.size + 64 > ring.size // 2 and batch.num_rows > 1:
            self._write_halves(batch, batch_id, deadline, written)  # too big for the ring
            return
        slot = ring.slot(self._slot)
        while True:
            ring.check_dropped()
            with ring.locked():
                first = ring.try_write(payload, batch.num_rows, time.monotonic_ns())
                if first is None and self._spill:
                    first = self._spill_frame(batch)
                    if first is None:  # its spill file alone would pass max_spill
                        break
                if first is not None:
                    slot[S_ROWS] += batch.num_rows
                    if batch_id is not None:
                        slot[S_BATCH_ROWS] += batch.num_rows
                    written[0] += batch.num_rows
                    return
            dead, live = ring.reap_readers()
            if dead and not live:
                raise StreamError(
                    f"stream {self.definition.name!r} is full and its reader (process "
                    f"{dead[0]}) died"
                )
            if deadline is not None and time.monotonic() > deadline:
                raise StreamError(f"stream {self.definition.name!r} stayed full past the timeout")
            ring.note_blocked()
            ring.wait_space()
        self._write_halves(batch, batch_id, deadline, written)

    def _write_halves(
        self,
        batch: pa.RecordBatch,
        batch_id: int | None,
        deadline: float | None,
        written: list[int],
    ) -> None:
        half = batch.num_rows // 2
        self._write_frame(batch.slice(0, half), batch_id, deadline, written)
        self._write_frame(batch.slice(half), batch_id, deadline, written)

    def _spill_frame(self, batch: pa.RecordBatch) -> int | None:
        """Write ``batch`` to a spill file and publish it (hold the ring's lock); its first
        sequence number. Over the stream's ``max_spill`` nothing is written: a StreamError
        says so, and the tuples stay unpublished (none lost, none twice). None when the
        file alone would be larger than max_spill: the caller spills the batch in halves
        (a small limit must not refuse a batch that fits it in smaller files)."""
        ring = self.ring
        first = ring.reserve_spill(batch.num_rows)
        data = encode_spill(pa.Table.from_batches([batch]))
        limit = self._max_spill
        if data.size > limit:
            if batch.num_rows > 1:
                return None
            raise StreamError(
                f"a tuple of stream {self.definition.name!r} takes {data.size:,} bytes in a "
                f"spill file, more than its max_spill = {limit:,} bytes ({size_text(limit)}); "
                "create the stream again with a larger max_spill"
            )
        # Under the lock, so producers never pass the limit together; readers only free.
        used = self._spill_space.in_use(ring.word(W_TAIL_SEQ))
        if used + data.size > limit:
            raise StreamError(
                f"stream {self.definition.name!r} reached its spill limit, max_spill = "
                f"{limit:,} bytes ({size_text(limit)}): readers still need {used:,} bytes of "
                f"spill files and the next file takes {data.size:,}; a reader must catch up "
                "with the stream (spill files go as they are read), or create the stream "
                "again with a larger max_spill"
            )
        write_spill(self.definition.spill_dir, first, data)
        self._spill_space.add(first, data.size)
        faults.point("spill")  # written, not yet published
        ring.publish_spill(first, batch.num_rows)
        return first

    def _background(self) -> None:
        """Heartbeat, and flush rows that waited ``linger``."""
        slot = self.ring.slot(self._slot)
        while not self._closed:
            with self._wake:
                if self._rows:
                    wait = self._first_row_at + self.linger - time.monotonic()
                else:
                    wait = HEARTBEAT_S
                if wait > 0:
                    self._wake.wait(min(wait, HEARTBEAT_S))
                due = bool(self._rows) and time.monotonic() >= self._first_row_at + self.linger
            if self._closed:
                return
            slot[S_BEAT] = time.monotonic_ns()
            if due:
                try:
                    with self._lock:
                        self._flush_rows()
                except Exception as exc:  # noqa: BLE001 - the next write/flush/close raises it
                    self._error = exc
                    return


def stream_schema(stream: str, database: str | None = None) -> pa.Schema:
    """The columns of ``stream`` (looked up as :meth:`Producer.open` does), without
    attaching: a producer that attaches restarts an ended stream, so a command that
    may still fail (say, on a missing input file) asks this first."""
    catalog = Catalog(database)
    definition = catalog.get(stream) or catalog.require(stream.lower())
    ring = Ring.attach(definition.segment)
    try:
        return ring.schema
    finally:
        ring.close()


def _claim_slot(ring: Ring, name: str, pid: int) -> int:
    """A producer slot for ``name`` (reusing its batch-id memory); hold the ring's lock."""
    free = None
    for index in range(MAX_SLOTS):
        slot = ring.slot(index)
        if ring.slot_name(index) == name and (slot[S_PID] or slot[S_IN_USE]):
            if slot[S_IN_USE] and ring.slot_alive(index):
                raise StreamError(
                    f"a producer named {name!r} is already writing to this "
                    f"stream (process {int(slot[S_PID])})"
                )
            free = index
            break
        if free is None and not slot[S_IN_USE] and not slot[S_PID]:
            free = index
    if free is None:
        free = next((i for i in range(MAX_SLOTS) if not ring.slot(i)[S_IN_USE]), None)
        if free is None:
            raise StreamError(f"the stream has {MAX_SLOTS} producers attached already")
        ring.slot(free)[S_LAST_BATCH] = -1
        ring.slot(free)[S_BATCH_ROWS] = -1
    slot = ring.slot(free)
    if ring.slot_name(free) != name:
        ring.set_slot_name(free, name)
        slot[S_LAST_BATCH] = -1
        slot[S_BATCH_ROWS] = -1
        slot[S_ROWS] = 0
    slot[S_PID] = pid
    slot[S_STARTED] = liveness.start_time(pid)
    slot[S_BEAT] = time.monotonic_ns()
    slot[S_CLOSED] = 0
    slot[S_IN_USE] = 1
    return free
