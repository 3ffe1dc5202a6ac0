"""A query's grouped input in shared memory: written once by the router, taken by the workers.

Where the router groups the input itself (the input is in ORDER BY order,
matchsql/execution/router/presorted.py), every row a worker needs is known before the
first message goes out. Rather than taking each batch through the grouping's
permutation and copying it through a worker's ring (all of that serial, in the
router's one process), the router writes the read columns, in input order,
and the permutation into one shared segment, once; its messages then name
only ranges of grouped rows, and each worker takes its own rows out of the
segment, in parallel with the other workers.

The segment is the pool's and is reused by its next queries (its pages stay
mapped and warm in every process); a larger input replaces it. Its whole size
is reserved when it is made (``posix_fallocate``): a full ``/dev/shm`` is then
an error at that point, and the query goes through the rings instead, where
an unreserved page would have killed the process with SIGBUS on first touch.
"""

from __future__ import annotations

import builtins
import os
from dataclasses import dataclass, fields

import numpy as np
import pyarrow as pa

from matchsql.execution.router.presorted import GroupedRows
from matchsql.execution.workers import segments
from matchsql.execution.workers.wire import MessageError, dumps, loads

#: A segment larger than this is given back once its query ends (a smaller one stays
#: for the next query, its pages mapped): one large query does not pin its memory.
KEEP_BYTES = 1 << 30
_SHM_DIR = "/dev/shm"
_ALIGN = 64


@dataclass(frozen=True)
class SharedLayout:
    """Where a query's rows lie in the segment: what a worker needs to take them."""

    name: str
    size: int  # the segment's size
    ipc_offset: int
    ipc_length: int
    perm_offset: int
    perm_rows: int  # 0: no column is taken through the permutation
    rows: int
    schema: pa.Schema
    slots: tuple[int, ...]  # the fields written into the segment (IPC columns, in order)
    placed: tuple[tuple[int, int, str], ...]  # (field, offset, dtype): in grouped order
    keys: dict[int, pa.Array]  # per partition key field: its value per partition
    ends: np.ndarray  # where each partition ends in the grouped rows

    def bytes(self) -> bytes:
        """The layout as a "share" message (its fields in order: the arrays as raw buffers)."""
        return dumps(tuple(getattr(self, f.name) for f in fields(self)))

    @classmethod
    def of(cls, payload: builtins.bytes) -> SharedLayout:
        """The layout of a :meth:`bytes` message."""
        values = loads(payload)
        if (
            not isinstance(values, tuple)
            or len(values) != len(fields(cls))
            or not isinstance(values[0], str)
            or not isinstance(values[7], pa.Schema)
            or not isinstance(values[11], np.ndarray)
        ):
            raise MessageError(
                "a worker process message is unreadable: a shared input's layout that is not one"
            )
        return cls(*values)


class RowsArena:
    """The router's end: one segment, written by one query at a time (named under
    ``prefix``, the pool's: see :mod:`.segments`)."""

    def __init__(self, prefix: str | None = None) -> None:
        self.shm: segments.Segment | None = None
        self.prefix = prefix

    def put(self, rows: GroupedRows) -> SharedLayout | None:
        """Write ``rows`` into the segment; None where shared memory has no room for them
        (the caller sends the rows through the rings then). Fixed-width columns go in
        grouped order (moved there by the grouping's counting sort: the workers then
        copy their ranges instead of taking rows from all over the column); the others
        in input order, with the permutation."""
        live = [i for i, column in enumerate(rows.columns) if column is not None]
        moved = {i: rows.placeable(i) for i in live}
        slots = tuple(i for i in live if moved[i] is None)
        batch = (
            pa.RecordBatch.from_arrays(
                [rows.column(i) for i in slots], names=[str(i) for i in slots]
            )
            if slots
            else None
        )
        ipc_length = _ipc_size(batch)
        offset = _aligned(ipc_length)
        perm_offset, perm_rows = offset, rows.num_rows if slots else 0
        offset = _aligned(offset + 8 * perm_rows)
        placed = []
        for i in live:
            dtype = moved[i]
            if dtype is not None:
                placed.append((i, offset, dtype.str))
                offset = _aligned(offset + dtype.itemsize * rows.num_rows)
        shm = self._segment(offset)
        if shm is None:
            return None
        if batch is not None:
            _write_ipc(shm, ipc_length, batch)
        if perm_rows:
            target = np.ndarray(perm_rows, np.int64, shm.buf, perm_offset)
            target[:] = rows.perm
            del target  # no export of the segment may outlive the write
        for i, at, code in placed:
            rows.place(i, np.ndarray(rows.num_rows, np.dtype(code), shm.buf, at))
        return SharedLayout(
            shm.name,
            shm.size,
            0,
            ipc_length,
            perm_offset,
            perm_rows,
            rows.num_rows,
            rows.schema,
            slots,
            tuple(placed),
            dict(rows.keys),
            rows.ends,
        )

    def _segment(self, size: int) -> segments.Segment | None:
        if self.shm is not None and self.shm.size >= size:
            return self.shm
        self.close()
        try:
            shm = segments.create(
                segments.new_name(self.prefix, "a"), max(size + size // 4, 1 << 20)
            )
        except OSError:
            return None
        try:
            _reserve(shm)
        except OSError:
            _drop(shm)
            return None
        self.shm = shm
        return shm

    def ended(self) -> None:
        """The query is over: a large segment goes back to the system."""
        if self.shm is not None and self.shm.size > KEEP_BYTES:
            self.close()

    def close(self) -> None:
        if self.shm is not None:
            _drop(self.shm)
            self.shm = None


def _reserve(shm: segments.Segment) -> None:
    """Allocate every page of ``shm`` now (ENOSPC here rather than SIGBUS on a write)."""
    path = os.path.join(_SHM_DIR, shm.name.lstrip("/"))
    if not os.path.exists(path):
        raise OSError("shared memory is not a /dev/shm file here: its room cannot be reserved")
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, shm.size)
    finally:
        os.close(fd)


def _drop(shm: segments.Segment) -> None:
    try:
        shm.close()
    except BufferError:
        pass
    try:
        shm.unlink()
    except FileNotFoundError:
        pass


def _aligned(offset: int) -> int:
    return (offset + _ALIGN - 1) // _ALIGN * _ALIGN


def _ipc_size(batch: pa.RecordBatch | None) -> int:
    if batch is None:
        return 0
    mock = pa.MockOutputStream()  # counts the bytes, copies nothing
    with pa.ipc.new_stream(mock, batch.schema) as writer:
        writer.write_batch(batch)
    return mock.size()


def _write_ipc(shm: segments.Segment, length: int, batch: pa.RecordBatch) -> None:
    view = shm.buf[:length]
    try:
        _write_into(view, batch)
    finally:
        view.release()  # no export of the segment may outlive the write


def _write_into(view: memoryview, batch: pa.RecordBatch) -> None:
    sink = pa.FixedSizeBufferWriter(pa.py_buffer(view))
    writer = pa.ipc.new_stream(sink, batch.schema)
    writer.write_batch(batch)
    writer.close()
    sink.close()


class Attached:
    """A worker's mappings of the router's segments, kept from query to query."""

    def __init__(self) -> None:
        self._segments: dict[str, segments.Segment] = {}

    def rows(self, layout: SharedLayout) -> GroupedRows:
        """The query's rows, their columns read in place from the segment (no copy)."""
        shm = self._segments.get(layout.name)
        if shm is None:
            self.release()  # an older segment: the router has replaced it
            shm = self._segments[layout.name] = segments.Segment(layout.name)
        columns: list[pa.Array | None] = [None] * len(layout.schema)
        if layout.slots:
            view = shm.buf[layout.ipc_offset : layout.ipc_offset + layout.ipc_length]
            batch = pa.ipc.open_stream(pa.py_buffer(view)).read_next_batch()
            for slot, column in zip(layout.slots, batch.columns):
                columns[slot] = column
        perm = np.ndarray(layout.perm_rows, np.int64, shm.buf, layout.perm_offset)
        placed = {
            i: np.ndarray(layout.rows, np.dtype(dtype), shm.buf, at)
            for i, at, dtype in layout.placed
        }
        return GroupedRows(
            layout.schema, columns, layout.keys, perm, layout.ends, layout.rows, placed=placed
        )

    def ended(self) -> None:
        """The query is over (its rows dropped): a large segment is let go of."""
        for name, shm in list(self._segments.items()):
            if shm.size > KEEP_BYTES:
                self._close(name)

    def release(self) -> None:
        for name in list(self._segments):
            self._close(name)

    def _close(self, name: str) -> None:
        try:
            self._segments[name].close()
        except BufferError:
            return  # rows of it are still referenced: closed at a later release
        del self._segments[name]
