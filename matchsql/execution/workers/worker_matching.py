"""What a worker does with a query's rows: partition matcher runs, and the answer sent back.

Shared by the worker's message loop (:mod:`.process`) for sorted pieces and by
:mod:`.gather` (rows that the worker sorts itself).
"""

from __future__ import annotations

import dataclasses
import struct
import time
from typing import Any

import numpy as np
import pyarrow as pa

from matchsql.config import Config
from matchsql.engine.planner import new_partition_matcher, whole_partitions
from matchsql.errors import Error
from matchsql.execution.router.partition_batches import MatchRun, PartitionBatch
from matchsql.execution.router.partitions import PartitionRun, feed_last
from matchsql.execution.router.presorted import GroupedRows
from matchsql.execution.workers.balance import charge
from matchsql.execution.workers.channel import RingWriter
from matchsql.execution.workers.frames import Packed, unpack
from matchsql.execution.workers.wire import MessageError, dumps, loads
from matchsql.plan.spec import MatchSpec
from matchsql.saved_state.snapshot import restore_like, snapshot_matcher

_LEN = struct.Struct("<Q")


class Query:
    """One query's open partition runs on this worker."""

    def __init__(self, index: int, spec: MatchSpec, config: Config) -> None:
        self.index = index
        self.spec = spec
        # One core's worth per worker: the query's parallelism is the workers. A thread
        # pool here (a long partition matched in chunks on speculation, then fixed up)
        # would only spend more CPU on the cores the other workers need.
        self.config = dataclasses.replace(config, threads=1)
        self.schema = spec.output_schema()
        # partition number -> (bucket, key, run): the partitions begun and not finished.
        self.runs: dict[int, tuple[int, tuple, PartitionRun]] = {}
        # Matches a run of complete partitions at once (engine/compiled/batch.py), when the
        # planner allows it.
        whole, _ = whole_partitions(spec, self.config)
        self.whole: MatchRun | None = whole.match_counted if whole is not None else None
        self.failed = False
        # The query's grouped input in shared memory (see :mod:`.shared_rows`), where the
        # router sends ranges of it rather than rows.
        self.shared: GroupedRows | None = None
        self.rows = 0
        self.busy_ns = 0
        # CPU per bucket (a message's time shared by its rows): the bench's scaling model.
        self.bucket_ns: dict[int, int] = {}
        # Answers to "take" messages kept while more messages wait (see :meth:`flush`).
        self.deferred: list[tuple[Packed, int]] = []

    def new_run(self, key: tuple) -> PartitionRun:
        return new_partition_matcher(self.spec, key, self.config)

    def data(self, entries: list[tuple], batches: list[pa.RecordBatch]) -> tuple[list, list]:
        """Feed each entry's rows to its partition's run; the matches, partition after
        partition, with each partition's ``(number, rows, done)``.

        Complete partitions (first and last piece in this message, no run held)
        are matched together where the planner allows it, by the rule of every
        router (:mod:`~matchsql.execution.router.partition_batches`): a run of
        them ends where another entry comes; its output comes back by each
        partition's output row count.
        """
        rows = pa.concat_batches(batches) if len(batches) > 1 else (batches[0] if batches else None)
        out_entries: list[tuple[int, int, bool]] = []
        out: list[pa.RecordBatch] = []
        # The run of complete partitions: their numbers, their rows' sizes, where they start.
        numbers: list[int] = []
        sizes: list[int] = []
        first = 0

        def emit(number: int, produced: list[pa.RecordBatch], last: bool) -> None:
            produced = [b for b in produced if b.num_rows]
            if produced or last:
                out_entries.append((number, sum(b.num_rows for b in produced), last))
                out.extend(produced)

        def flush() -> None:
            if numbers:
                assert self.whole is not None and rows is not None
                complete = PartitionBatch(self.whole)
                complete.add(rows, first, sizes)
                produced, counts = complete.matched()
                out_entries.extend(zip(numbers, counts.tolist(), [True] * len(numbers)))
                out.extend(produced)
                numbers.clear()
                sizes.clear()

        offset = 0
        for number, bucket, key, count, last in entries:
            start, offset = offset, offset + count
            self.rows += count
            held = self.runs.get(number)
            if self.whole is not None and held is None and last and count:
                if not numbers:
                    first = start
                numbers.append(number)
                sizes.append(count)
                continue
            flush()
            piece = None
            if count:
                assert rows is not None  # the entry's rows came with it
                piece = rows.slice(start, count)
            run = held[2] if held is not None else self.new_run(key)
            if last:
                self.runs.pop(number, None)
                emit(number, feed_last(run, piece) if piece is not None else run.finish(), True)
            else:
                self.runs[number] = (bucket, key, run)
                emit(number, run.feed(piece) if piece is not None else [], False)
        flush()
        return out_entries, out

    def serve(self, writer: RingWriter, kind: str, payload: bytes, extra: Any) -> None:
        if kind == "data":
            answer(self, writer, *unpack(payload))
        elif kind == "take":
            entries, starts, stops, parts = _take(payload)
            if self.shared is None:
                raise Error("rows were asked for before the query's shared input")
            rows = self.shared.gather(starts, stops, parts)
            answer(self, writer, entries, [rows] if rows.num_rows else [], defer=True)
        elif kind == "snapshot":
            writer.send("state", self.snapshot(extra), extra)
        elif kind == "restore":
            self.restore(payload)

    def flush(self, writer: RingWriter) -> None:
        """Send the answers kept back, in order.

        The answers to "take" messages (the shared input of a one-time query) are
        kept while the next message is already waiting, and sent once none is, or
        before a message of another kind (a snapshot's matches reach the router
        first). The router's process then takes and merges them while a core is
        free (this worker's, once its queue is empty), not while both workers
        match: taking each answer as it came ran on the core of one worker, which
        then ended about 2 ms after the other (1M rows of 500 partitions, 12 ms of
        matching each)."""
        for packed, rows in self.deferred:
            writer.send("out", packed, rows)
        self.deferred.clear()

    def snapshot(self, bucket: int) -> bytes:
        """The bucket's open runs as bytes; they leave this worker."""
        moving = {number: held for number, held in self.runs.items() if held[0] == bucket}
        state = []
        for number, (_, key, run) in moving.items():
            del self.runs[number]
            state.append((number, key, snapshot_matcher(run)))
        return dumps((bucket, state))

    def restore(self, payload: bytes) -> list[int]:
        bucket, state = loads(payload)
        numbers = []
        for number, key, data in state:
            run = restore_like(self.new_run(key), data)
            if run is None:
                raise Error("a migrated partition's state did not restore")
            self.runs[number] = (bucket, key, run)
            numbers.append(number)
        return numbers


def take_bytes(entries: list[tuple], starts: np.ndarray, stops: np.ndarray) -> bytes:
    """A "take" message: ``entries`` (as :meth:`Query.data`'s, see :func:`.wire.dumps`),
    then the ranges of the shared input that hold their rows, as raw int64 (their
    starts, then their stops)."""
    meta = dumps(entries)
    bounds = np.concatenate((starts, stops)).astype("<i8", copy=False)
    return b"".join((_LEN.pack(len(meta)), meta, bounds.tobytes()))


def _take(payload: bytes) -> tuple[list, np.ndarray, np.ndarray, None]:
    view = memoryview(payload)
    size = _LEN.unpack_from(view)[0] if len(view) >= _LEN.size else -1
    rest = len(view) - _LEN.size - size
    if size < 0 or rest < 0 or rest % 16:
        raise MessageError(
            'a worker process message is unreadable: a "take" that is not entries and ranges'
        )
    entries = loads(view[_LEN.size : _LEN.size + size])
    if not isinstance(entries, list):
        raise MessageError(
            'a worker process message is unreadable: a "take" whose entries are not a list'
        )
    bounds = np.frombuffer(view[_LEN.size + size :], "<i8").astype(np.int64)
    half = len(bounds) // 2
    return entries, bounds[:half], bounds[half:], None


def cast(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays(
        [column.cast(field.type) for column, field in zip(batch.columns, schema)], schema=schema
    )


def answer(
    query: Query,
    writer: RingWriter,
    entries: list[tuple],
    batches: list[pa.RecordBatch],
    defer: bool = False,
) -> None:
    """Match ``entries`` (see :meth:`Query.data`) and send their matches as one "out"
    (or keep it for :meth:`Query.flush`)."""
    started = time.process_time_ns()
    out_entries, out = query.data(entries, batches)
    charge(
        query.bucket_ns,
        time.process_time_ns() - started,
        [entry[1] for entry in entries],
        [entry[3] for entry in entries],
    )
    # Sent even when empty: the row count is the router's measure of this queue. The
    # matches go as one batch (each partition's rows counted in its entry): hundreds of
    # small IPC batches cost more to write and read than one copy of the rows.
    out = [cast(batch, query.schema) for batch in out]
    joined = [pa.concat_batches(out)] if len(out) > 1 else out
    packed = Packed(out_entries, joined, query.schema)
    if defer:
        query.deferred.append((packed, query.rows))
        return
    # Written straight into the ring (no copy of the matches on the way).
    writer.send("out", packed, query.rows)
