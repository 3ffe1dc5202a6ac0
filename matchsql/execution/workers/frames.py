"""Payload framing shared by both ends: a list of entries, then an Arrow IPC stream.

The entries say what the rows are (for input: partition, bucket, key, row
count, last piece?; for output: partition, row count, partition done?);
the IPC stream holds the rows themselves. A payload lies in shared memory, so
nothing of it is a pickle: the entries are in the data-only snapshot format
(:mod:`.wire`), whose loading runs no code, the rows Arrow IPC.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa

from matchsql.execution.workers.wire import MessageError, dumps, loads

_LEN = struct.Struct("<Q")


class Packed:
    """A payload not written yet: its size, and a way to write it straight into the
    channel's shared memory (the router's rows then take one copy, not two)."""

    def __init__(
        self, entries: list[Any], batches: list[pa.RecordBatch], schema: pa.Schema | None = None
    ) -> None:
        self.meta = dumps(entries)
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


def pack(
    entries: list[Any], batches: list[pa.RecordBatch], schema: pa.Schema | None = None
) -> memoryview:
    """One payload: ``entries`` and ``batches`` (all of ``schema``, or the first's)."""
    return Packed(entries, batches, schema).bytes()


def unpack(payload: bytes) -> tuple[list[Any], list[pa.RecordBatch]]:
    """The entries and batches of a :func:`pack` payload; the batches own their memory
    (:class:`~.wire.MessageError` for a payload that is not one)."""
    view = memoryview(payload)  # slices of a view copy nothing (of bytes they copy the rows)
    if len(view) < _LEN.size:
        raise MessageError("a worker process message is unreadable: too short for its frame")
    (size,) = _LEN.unpack_from(view, 0)
    if size > len(view) - _LEN.size:
        raise MessageError("a worker process message is unreadable: its entries run past its end")
    entries = loads(view[_LEN.size : _LEN.size + size])
    if not isinstance(entries, list):
        raise MessageError("a worker process message is unreadable: its entries are not a list")
    rest = view[_LEN.size + size :]
    if not rest:
        return entries, []
    try:
        return entries, list(pa.ipc.open_stream(pa.py_buffer(rest)))
    except (pa.ArrowException, ValueError) as exc:
        raise MessageError(
            f"a worker process message is unreadable: its rows are not an Arrow stream ({exc})"
        ) from None
