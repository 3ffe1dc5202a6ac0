"""The reading end of a live stream: tuples in sequence order, blocking without spinning.

One reader per stream. :meth:`LiveReader.read` returns the next tuples as
one Arrow record batch together with the first one's sequence number,
coalescing every frame already waiting (up to ``max_rows``) so a fast
producer is read in large batches while a slow one is read as soon as each
frame lands. Ring frames and spill files are merged by sequence number.

When the queue is empty the reader sleeps on the stream's data semaphore for
at most 50 ms at a time; between sleeps it checks the interrupt flag and
(every 100 ms) the producers' liveness, so a producer that dies without ``close()`` is
noticed within about 200 ms (well inside the 1 s promise) and the query ends
with a :class:`~matchsql.errors.StreamError` - or, with
``on_producer_death = 'wait'``, the dead producer is forgotten and the query
waits for a new one. Everything the dead producer published is read first.

For latency (thesis: time from a tuple's enqueue to its first selection),
every :meth:`LiveReader.read` also leaves in :attr:`LiveReader.last_enqueue_sum_ns`
the sum over the returned tuples of their enqueue instants
(``time.monotonic_ns()`` at the producer's write, one per frame): the
weighted sum ``sum(rows_i * enqueue_ns_i)`` over the frames read. Spill files
carry no stamp unless their Parquet metadata has ``enqueue_ns``; their tuples
count as enqueued when they are read.

End of stream is a marker at a sequence number (set by the last producer's
``close()``): every reader that reaches it ends - a second query over an
ended stream replays the archive and ends too - until a new producer opens
the stream again.

Tuples read are not yet gone: with ``durable`` the reader keeps them in the
ring (or their spill file) until :meth:`LiveReader.release`, which the
continuous query calls once they are durable in the archive. A reader killed
at any moment therefore leaves every tuple that is not in the archive to the
next reader.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import pyarrow as pa

from matchsql.errors import ExecutionError, StreamError
from matchsql.storage.catalog import StreamDef
from matchsql.storage.shm_ring import (
    S_BEAT,
    S_IN_USE,
    S_PID,
    W_CAPACITY,
    W_EOS,
    W_EOS_SEQ,
    W_HEAD_SEQ,
    W_READER_BEAT,
    W_TAIL_BYTES,
    W_TAIL_SEQ,
    Ring,
)
from matchsql.storage.spill import read_spill, remove_spill, remove_spills_before

CHECK_EVERY_S = 0.1
INTERRUPT_POLL_S = 0.05  # longest wait on an empty queue before the interrupt flag is read
STALE_HEARTBEAT_S = 10.0  # a producer whose pid lives but who stopped beating this long is dead
SPILL_GRACE_S = 5.0


class LiveReader:
    """Consumes one stream's queue (ring and spill files) in order."""

    def __init__(self, definition: StreamDef, *, on_producer_death: str = "error",
                 cancelled: Callable[[], bool] | None = None, max_rows: int = 65_536,
                 durable: bool = False) -> None:
        """``durable``: tuples stay in the ring (or spill) until :meth:`release` is
        called for them, instead of going as soon as they are read."""
        self.definition = definition
        self.ring = Ring.attach(definition.segment)
        self.schema = self.ring.schema
        self.on_producer_death = on_producer_death
        self.cancelled = cancelled or (lambda: False)
        self.max_rows = max_rows
        self.durable = durable
        # Called before the reader sleeps on an empty queue while it holds unreleased
        # tuples, with whether that is urgent (a writer waits for room, or the held
        # tuples fill half the ring): the moment to make them durable and release them.
        self.on_idle: Callable[[bool], None] | None = None
        self.rows_read = 0
        # sum(rows * enqueue_ns) of the batch the last read() returned (monotonic ns).
        self.last_enqueue_sum_ns = 0
        self._checked = 0.0
        self._claimed = False
        self._read_bytes = 0
        self._read_seq = 0
        # What was read and not released: (first seq, rows, ring end byte or None: spill).
        self._pending: deque[tuple[int, int, int | None]] = deque()
        self._held_ring_rows = 0

    def open(self) -> LiveReader:
        self.ring.claim_reader(self.definition.name)
        self._claimed = True
        self._read_bytes = self.ring.word(W_TAIL_BYTES)
        self._read_seq = self.ring.word(W_TAIL_SEQ)
        remove_spills_before(self.definition.spill_dir, self._read_seq)
        return self

    @property
    def next_seq(self) -> int:
        """The sequence number the next read() starts at."""
        return self._read_seq

    @property
    def unreleased(self) -> int:
        """Tuples read and not yet released."""
        return self._read_seq - self.ring.word(W_TAIL_SEQ)

    def under_pressure(self) -> bool:
        """Whether unreleased tuples fill half the ring (rows or bytes): release them soon."""
        ring = self.ring
        held_bytes = self._read_bytes - ring.word(W_TAIL_BYTES)
        return self._held_ring_rows * 2 >= ring.word(W_CAPACITY) or held_bytes * 2 >= ring.size

    def release(self, upto: int) -> None:
        """Let the tuples before sequence number ``upto`` go (whole frames and spill files)."""
        pending = self._pending
        next_seq, end_bytes, ring_rows, spills = None, None, 0, []
        while pending and pending[0][0] + pending[0][1] <= upto:
            first, rows, end = pending.popleft()
            next_seq = first + rows
            if end is None:
                spills.append(first)
            else:
                end_bytes, ring_rows = end, ring_rows + rows
        if next_seq is None:
            return
        self._held_ring_rows -= ring_rows
        self.ring.release(next_seq, end_bytes, ring_rows)
        for first in spills:
            remove_spill(self.definition.spill_dir, first)

    def read(self) -> tuple[int, pa.RecordBatch] | None:
        """The next tuples and the first one's sequence number; None at end of stream.

        The end is a state, not an event: every reader that reaches the end
        sequence number ends, until a new producer opens the stream.
        """
        ring = self.ring
        spill_missing_since = None
        while True:
            ring.check_dropped()
            ring.set_word(W_READER_BEAT, time.monotonic_ns())
            head_seq = ring.word(W_HEAD_SEQ)  # before the frames: see shm_ring's docstring
            first = self._read_seq
            if head_seq > first:
                frames = ring.read_frames(self._read_bytes, first, self.max_rows)
                if frames:
                    batches = [pa.ipc.read_record_batch(pa.py_buffer(f.ipc), self.schema)
                               for f in frames]
                    batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
                    for frame in frames:
                        self._pending.append((frame.first, frame.rows, frame.end))
                    self._held_ring_rows += batch.num_rows
                    self._read_bytes = frames[-1].end
                    self.last_enqueue_sum_ns = sum(f.rows * f.enqueue_ns for f in frames)
                    return first, self._took(batch)
                batch = self._read_spill(first)
                if batch is not None:
                    return first, self._took(batch)
                spill_missing_since = spill_missing_since or time.monotonic()
                if time.monotonic() - spill_missing_since > SPILL_GRACE_S:
                    raise StreamError(f"stream {self.definition.name!r} lost tuples from "
                                      f"sequence number {first}: its spill file is missing")
                time.sleep(0.001)
                continue
            if ring.word(W_EOS) and first >= ring.word(W_EOS_SEQ):
                return None
            if self._pending and self.on_idle is not None:
                self.on_idle(ring.take_blocked() or self.under_pressure())
            if self.cancelled():
                raise ExecutionError("statement interrupted")
            now = time.monotonic()
            if now - self._checked >= CHECK_EVERY_S:
                self._checked = now
                self._check_producers()
            ring.wait_data(INTERRUPT_POLL_S)

    def _took(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Advance the cursor past ``batch``; without durability its tuples go at once."""
        self._read_seq += batch.num_rows
        self.rows_read += batch.num_rows
        if not self.durable:
            self.release(self._read_seq)
        return batch

    def _read_spill(self, first: int) -> pa.RecordBatch | None:
        table = read_spill(self.definition.spill_dir, first)
        if table is None:
            return None
        stamp = _spill_stamp(table.schema.metadata)
        table = table.cast(self.schema)
        batches = table.combine_chunks().to_batches()
        batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
        self._pending.append((first, batch.num_rows, None))
        self.last_enqueue_sum_ns = batch.num_rows * stamp
        return batch

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
                "SET on_producer_death = 'wait' keeps waiting for a new producer instead")

    def close(self) -> None:
        if self._claimed:
            self.ring.release_reader()
            self._claimed = False
        self.ring.close()


def _spill_stamp(metadata: dict[bytes, bytes] | None) -> int:
    """The enqueue instant a spill file records, else now (the tuples count as enqueued on read)."""
    stamp = (metadata or {}).get(b"enqueue_ns")
    try:
        return int(stamp) if stamp else time.monotonic_ns()
    except ValueError:
        return time.monotonic_ns()
