"""The worker process: runs the partition matchers of the buckets routed to it.

A worker serves one query at a time, for the life of its pool. It takes
notices in order from its input channel, so everything the router sent for
a bucket before a snapshot request has been matched when the snapshot is
taken (the State Transfer protocol's "flush" needs nothing more):

* ``query``: the MatchSpec and Config of the next query (pickled);
* ``data``: pieces of partitions, one Arrow batch, in input order per partition;
  a partition's last piece finishes its run;
* ``snapshot`` / ``restore``: a bucket's open runs leave / join this worker;
* ``end``: the query is over; ``stop``: exit.

It answers with ``out`` (matches per partition, in order), ``state``,
``error`` (the first matchsql error of the query; the rest of the query is
skipped) and ``ended``.
"""

from __future__ import annotations

import os
import pickle
import signal
import time
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import pyarrow as pa

from matchsql.config import Config
from matchsql.errors import Error, internal_error
from matchsql.fsm.planner import new_partition_matcher, whole_partitions
from matchsql.plan.spec import MatchSpec
from matchsql.router.parallel import coalesce
from matchsql.router.partitions import PartitionRun, feed_last, segments
from matchsql.spark.state import restore_like, snapshot_matcher
from matchsql.workers.channel import RingReader, RingWriter
from matchsql.workers.frames import pack, unpack


class _Query:
    """One query's open partition runs on this worker."""

    def __init__(self, spec: MatchSpec, config: Config) -> None:
        self.spec = spec
        self.config = config
        self.schema = spec.output_schema()
        # partition number -> (bucket, key, run): the partitions begun and not finished.
        self.runs: dict[int, tuple[int, tuple, PartitionRun]] = {}
        # Matches a run of complete partitions at once (fsm/compiled/batch.py), when the
        # planner allows it and the output carries the partition columns to cut it by.
        whole, _ = whole_partitions(spec, config)
        names = set(self.schema.names)
        self.whole = whole if whole is not None and set(spec.partition_by) <= names else None
        self.failed = False
        self.rows = 0
        self.busy_ns = 0
        # CPU per bucket (a message's time shared by its rows): the bench's scaling model.
        self.bucket_ns: dict[int, int] = {}

    def new_run(self, key: tuple) -> PartitionRun:
        return new_partition_matcher(self.spec, key, self.config)

    def data(self, entries: list[tuple], batches: list[pa.RecordBatch]) -> tuple[list, list]:
        """Feed each entry's rows to its partition's run; the matches per partition.

        Runs of complete partitions (first and last piece in this message) are
        matched together where the planner allows it, as the single-process
        router does; their output is cut back into partitions by key.
        """
        rows = pa.concat_batches(batches) if len(batches) > 1 else \
            (batches[0] if batches else None)
        out_entries: list[tuple[int, int, bool]] = []
        out: list[pa.RecordBatch] = []
        group: list[tuple[int, tuple, int, int]] = []

        def emit(number: int, produced: list[pa.RecordBatch], last: bool) -> None:
            produced = [b for b in coalesce(produced) if b.num_rows]
            if produced or last:
                out_entries.append((number, len(produced), last))
                out.extend(produced)

        def flush() -> None:
            if len(group) > 1:
                for number, produced in self._whole(rows, group):
                    emit(number, produced, True)
            for number, key, offset, count in group if len(group) == 1 else ():
                emit(number, feed_last(self.new_run(key), rows.slice(offset, count)), True)
            group.clear()

        offset = 0
        for number, bucket, key, count, last in entries:
            start, offset = offset, offset + count
            self.rows += count
            held = self.runs.get(number)
            if self.whole is not None and held is None and last and count and _plain(key):
                group.append((number, key, start, count))
                continue
            flush()
            piece = rows.slice(start, count) if count else None
            run = held[2] if held is not None else self.new_run(key)
            if last:
                self.runs.pop(number, None)
                emit(number, feed_last(run, piece) if piece is not None else run.finish(), True)
            else:
                self.runs[number] = (bucket, key, run)
                emit(number, run.feed(piece) if piece is not None else [], False)
        flush()
        return out_entries, out

    def _whole(self, rows: pa.RecordBatch, group: list[tuple[int, tuple, int, int]]
               ) -> list[tuple[int, list[pa.RecordBatch]]]:
        """Complete partitions matched in one pass, each one's output found by its key."""
        start = group[0][2]
        counts = [count for _, _, _, count in group]
        bounds = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        assert self.whole is not None
        produced = self.whole.match(rows.slice(start, int(bounds[-1])), bounds)
        number_of = {key: number for number, key, _, _ in group}
        per: dict[int, list[pa.RecordBatch]] = {number: [] for number, _, _, _ in group}
        keys = self.spec.partition_by
        for batch in produced:
            for a, b in segments(batch, keys):
                key = tuple(batch.column(name)[a].as_py() for name in keys)
                per[number_of[key]].append(batch.slice(a, b - a))
        return list(per.items())

    def snapshot(self, bucket: int) -> bytes:
        """The bucket's open runs as bytes; they leave this worker."""
        moving = {number: held for number, held in self.runs.items() if held[0] == bucket}
        state = []
        for number, (_, key, run) in moving.items():
            del self.runs[number]
            state.append((number, key, snapshot_matcher(run, plain_first=True)))
        return pickle.dumps((bucket, state), protocol=pickle.HIGHEST_PROTOCOL)

    def restore(self, payload: bytes) -> list[int]:
        bucket, state = pickle.loads(payload)
        numbers = []
        for number, key, data in state:
            run = restore_like(self.new_run(key), data)
            if run is None:
                raise Error("a migrated partition's state did not restore")
            self.runs[number] = (bucket, key, run)
            numbers.append(number)
        return numbers


def _plain(key: tuple) -> bool:
    """A key that equals itself (no NaN), so the output's copy of it finds it again."""
    return all(value == value for value in key)


def _cast(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays(
        [column.cast(field.type) for column, field in zip(batch.columns, schema)], schema=schema)


def main(index: int, inbox: Connection, inbox_name: str, outbox: Connection,
         capacity: int) -> None:
    """The worker's loop (the target of a spawned process)."""
    # Ctrl-C in a terminal reaches the whole process group: the router turns it into an
    # interrupt of the statement (which kills this pool); dying here on our own would
    # report a lost worker instead.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    reader = RingReader(inbox, inbox_name, capacity)
    writer = RingWriter(outbox, capacity)
    outbox.send(("hello", writer.name, os.getpid()))
    query: _Query | None = None
    try:
        while True:
            try:
                kind, payload, extra = reader.receive()
            except (EOFError, OSError):
                return  # the router's process is gone
            if kind == "stop":
                return
            if kind == "query":
                spec, config = pickle.loads(payload)
                query = _Query(spec, config)
                continue
            if kind == "end":
                stats = (query.rows, query.busy_ns, query.bucket_ns) if query is not None \
                    else (0, 0, {})
                query = None
                writer.send("ended", None, stats)
                continue
            if query is None or query.failed:
                continue
            started = time.process_time_ns()
            try:
                _serve(query, writer, kind, payload, extra)
            except Error as err:
                query.failed = True
                writer.send("error", _error_bytes(err))
            except MemoryError:
                query.failed = True
                writer.send("error", _error_bytes(Error("a worker process ran out of memory")))
            except Exception as exc:  # a bug in the engine: a one-line error, no traceback
                query.failed = True
                writer.send("error", _error_bytes(internal_error(exc)))
            query.busy_ns += time.process_time_ns() - started
    finally:
        reader.close()
        writer.close()


def _serve(query: _Query, writer: RingWriter, kind: str, payload: bytes, extra: Any) -> None:
    if kind == "data":
        entries, batches = unpack(payload)
        started = time.process_time_ns()
        out_entries, out = query.data(entries, batches)
        spent = time.process_time_ns() - started
        total = sum(entry[3] for entry in entries) or 1
        for entry in entries:
            query.bucket_ns[entry[1]] = query.bucket_ns.get(entry[1], 0) + spent * entry[3] // total
        # Sent even when empty: the row count is the router's measure of this queue.
        out = [_cast(batch, query.schema) for batch in out]
        writer.send("out", pack(out_entries, out, query.schema), query.rows)
    elif kind == "snapshot":
        writer.send("state", query.snapshot(extra), extra)
    elif kind == "restore":
        query.restore(payload)


def _error_bytes(err: Error) -> bytes:
    try:
        data = pickle.dumps(err, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(data)
        return data
    except Exception:  # an error whose arguments do not round-trip: keep its text
        return pickle.dumps(Error(err.message))
