"""One cursor over a stream's queue: ring frames and spill files merged by sequence number.

Every reader of a stream, and the archive's writer, reads with a cursor of
its own: a sequence number and the ring byte counter where the frames from
that number on begin (it may lag: frames wholly before the number are
skipped). Reading moves nothing in the shared header; the owner releases
what it consumed (see :mod:`matchsql.storage.shm_ring`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa

from matchsql.storage.shm_ring import W_HEAD_SEQ, Ring
from matchsql.storage.spill import read_spill, read_spill_covering


@dataclass
class Chunk:
    """Tuples read: the first one's sequence number, the batch, the sum of enqueue instants."""

    first: int
    batch: pa.RecordBatch
    enqueue_sum_ns: int


class Cursor:
    """A position in one stream's queue."""

    def __init__(
        self, ring: Ring, spill_dir: str, schema: pa.Schema, seq: int, end_bytes: int
    ) -> None:
        self.ring = ring
        self.spill_dir = spill_dir
        self.schema = schema
        self.seq = seq
        self.bytes = end_bytes

    def available(self) -> bool:
        """Whether tuples were published at or after the cursor."""
        return self.ring.word(W_HEAD_SEQ) > self.seq

    def read(self, max_rows: int) -> Chunk | None:
        """The next published tuples (up to about ``max_rows``), or None when the next one
        is published but not readable yet (its spill file is not there) or none is."""
        if not self.available():  # HEAD_SEQ before the frames: see shm_ring's docstring
            return None
        frames = self.ring.read_frames(self.bytes, self.seq, max_rows)
        if frames:
            batches = [pa.ipc.read_record_batch(pa.py_buffer(f.ipc), self.schema) for f in frames]
            batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
            first = frames[0].first
            stamp = sum(f.rows * f.enqueue_ns for f in frames)
            self.bytes = frames[-1].end
        else:
            found = self._spill()
            if found is None:
                return None
            first, batch, stamp = found
        if first < self.seq:  # a frame or file that straddles the cursor
            rows = batch.num_rows
            batch = batch.slice(self.seq - first)
            stamp = stamp * batch.num_rows // rows
            first = self.seq
        self.seq = first + batch.num_rows
        return Chunk(first, batch, stamp)

    def _spill(self) -> tuple[int, pa.RecordBatch, int] | None:
        table = read_spill(self.spill_dir, self.seq)
        first = self.seq
        if table is None:
            covering = read_spill_covering(self.spill_dir, self.seq)
            if covering is None:
                return None
            first, table = covering
        stamp = _spill_stamp(table.schema.metadata)
        table = table.cast(self.schema)
        batches = table.combine_chunks().to_batches()
        batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
        return first, batch, batch.num_rows * stamp


def _spill_stamp(metadata: dict[bytes, bytes] | None) -> int:
    """The enqueue instant a spill file records, else now (the tuples count as enqueued on read)."""
    stamp = (metadata or {}).get(b"enqueue_ns")
    try:
        return int(stamp) if stamp else time.monotonic_ns()
    except ValueError:
        return time.monotonic_ns()
