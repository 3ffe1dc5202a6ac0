"""Payload framing shared by both ends: a pickled list of entries, then an Arrow IPC stream.

The entries say what the rows are (for input: partition, bucket, key, row
count, last piece?; for output: partition, batch count, partition done?);
the IPC stream holds the rows themselves. Only engine-made values are
pickled here (partition keys, counters), never user text to be evaluated.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

import pyarrow as pa

_LEN = struct.Struct("<Q")


def pack(entries: list[Any], batches: list[pa.RecordBatch],
         schema: pa.Schema | None = None) -> memoryview:
    """One payload: ``entries`` and ``batches`` (all of ``schema``, or the first's)."""
    meta = pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL)
    sink = pa.BufferOutputStream()
    sink.write(_LEN.pack(len(meta)))
    sink.write(meta)
    if batches:
        with pa.ipc.new_stream(sink, schema or batches[0].schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
    return memoryview(sink.getvalue())


def unpack(payload: bytes) -> tuple[list[Any], list[pa.RecordBatch]]:
    """The entries and batches of a :func:`pack` payload; the batches own their memory."""
    (size,) = _LEN.unpack_from(payload, 0)
    entries = pickle.loads(payload[_LEN.size:_LEN.size + size])
    rest = payload[_LEN.size + size:]
    if not rest:
        return entries, []
    return entries, list(pa.ipc.open_stream(pa.py_buffer(rest)))
