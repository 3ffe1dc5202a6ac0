"""Payload framing shared by both ends: a pickled list of entries, then an Arrow IPC stream.

The entries say what the rows are (for input: partition, bucket, key, row
count, last piece?; for output: partition, row count, partition done?);
the IPC stream holds the rows themselves. Only engine-made values are
pickled here (partition keys, counters), never user text to be evaluated.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

import pyarrow as pa

_LEN = struct.Struct("<Q")


class Packed:
    """A payload not written yet: its size, and a way to write it straight into the
    channel's shared memory (the router's rows then take one copy, not two)."""

    def __init__(self, entries: list[Any], batches: list[pa.RecordBatch],
                 schema: pa.Schema | None = None) -> None:
        self.meta = pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL)
        self.batches = batches
        self.schema = schema or (batches[0].schema if batches else None)
        mock = pa.MockOutputStream()  # counts the bytes, copies nothing
        self._write(mock)
        self.size = mock.size()

    def _write(self, sink: pa.NativeFile) -> None:
        sink.write(_LEN.pack(len(self.meta)))
        sink.write(self.meta)
        if self.batches:
            with pa.ipc.new_stream(sink, self.schema) as writer:
                for batch in self.batches:
                    writer.write_batch(batch)

    def write_into(self, view: memoryview) -> None:
        """Write the payload into ``view`` (exactly :attr:`size` writable bytes)."""
        buffer = pa.py_buffer(view)
        sink = pa.FixedSizeBufferWriter(buffer)
        try:
            self._write(sink)
        finally:
            sink.close()
            del sink, buffer  # no export of the shared memory may outlive the write

    def bytes(self) -> memoryview:
        sink = pa.BufferOutputStream()
        self._write(sink)
        return memoryview(sink.getvalue())


def pack(entries: list[Any], batches: list[pa.RecordBatch],
         schema: pa.Schema | None = None) -> memoryview:
    """One payload: ``entries`` and ``batches`` (all of ``schema``, or the first's)."""
    return Packed(entries, batches, schema).bytes()


def unpack(payload: bytes) -> tuple[list[Any], list[pa.RecordBatch]]:
    """The entries and batches of a :func:`pack` payload; the batches own their memory."""
    (size,) = _LEN.unpack_from(payload, 0)
    view = memoryview(payload)  # slices of a view copy nothing (of bytes they copy the rows)
    entries = pickle.loads(view[_LEN.size:_LEN.size + size])
    rest = view[_LEN.size + size:]
    if not rest:
        return entries, []
    return entries, list(pa.ipc.open_stream(pa.py_buffer(rest)))
