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
``close()``); the reader that reaches it consumes it, so the next query on
the same stream waits for new producers instead of ending at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa

from matchsql.errors import ExecutionError, StreamError
from matchsql.storage.catalog import StreamDef
from matchsql.storage.shm_ring import (
    S_BEAT,
    S_IN_USE,
    S_PID,
    W_EOS,
    W_EOS_SEQ,
    W_HEAD_SEQ,
    W_READER_BEAT,
    W_TAIL_SEQ,
    Ring,
)
from matchsql.storage.spill import read_spill, remove_spill

CHECK_EVERY_S = 0.1
INTERRUPT_POLL_S = 0.05  # longest wait on an empty queue before the interrupt flag is read
STALE_HEARTBEAT_S = 10.0  # a producer whose pid lives but who stopped beating this long is dead
SPILL_GRACE_S = 5.0


class LiveReader:
    """Consumes one stream's queue (ring and spill files) in order."""

    def __init__(self, definition: StreamDef, *, on_producer_death: str = "error",
                 cancelled: Callable[[], bool] | None = None, max_rows: int = 65_536) -> None:
        self.definition = definition
        self.ring = Ring.attach(definition.segment)
        self.schema = self.ring.schema
        self.on_producer_death = on_producer_death
        self.cancelled = cancelled or (lambda: False)
        self.max_rows = max_rows
        self.rows_read = 0
        # sum(rows * enqueue_ns) of the batch the last read() returned (monotonic ns).
        self.last_enqueue_sum_ns = 0
        self._checked = 0.0
        self._claimed = False

    def open(self) -> LiveReader:
        self.ring.claim_reader()
        self._claimed = True
        return self

    @property
    def next_seq(self) -> int:
        return self.ring.word(W_TAIL_SEQ)

    def read(self) -> tuple[int, pa.RecordBatch] | None:
        """The next tuples and the first one's sequence number; None at end of stream."""
        ring = self.ring
        spill_missing_since = None
        while True:
            ring.check_dropped()
            ring.set_word(W_READER_BEAT, time.monotonic_ns())
            head_seq = ring.word(W_HEAD_SEQ)  # before the frames: see shm_ring's docstring
            first = ring.word(W_TAIL_SEQ)
            if head_seq > first:
                frames = ring.read_frames(self.max_rows)
                if frames:
                    batches = [pa.ipc.read_record_batch(pa.py_buffer(ipc), self.schema)
                               for _, _, _, ipc in frames]
                    batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
                    self.rows_read += batch.num_rows
                    self.last_enqueue_sum_ns = sum(rows * stamp for _, rows, stamp, _ in frames)
                    return first, batch
                batch = self._read_spill(first)
                if batch is not None:
                    return first, batch
                spill_missing_since = spill_missing_since or time.monotonic()
                if time.monotonic() - spill_missing_since > SPILL_GRACE_S:
                    raise StreamError(f"stream {self.definition.name!r} lost tuples from "
                                      f"sequence number {first}: its spill file is missing")
                time.sleep(0.001)
                continue
            if ring.word(W_EOS) and first >= ring.word(W_EOS_SEQ):
                ring.set_word(W_EOS, 0)  # consumed: the next query waits for new producers
                return None
            if self.cancelled():
                raise ExecutionError("statement interrupted")
            now = time.monotonic()
            if now - self._checked >= CHECK_EVERY_S:
                self._checked = now
                self._check_producers()
            ring.wait_data(INTERRUPT_POLL_S)

    def _read_spill(self, first: int) -> pa.RecordBatch | None:
        table = read_spill(self.definition.spill_dir, first)
        if table is None:
            return None
        stamp = _spill_stamp(table.schema.metadata)
        table = table.cast(self.schema)
        batches = table.combine_chunks().to_batches()
        batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
        self.ring.consumed_spill(batch.num_rows)
        remove_spill(self.definition.spill_dir, first)
        self.rows_read += batch.num_rows
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
