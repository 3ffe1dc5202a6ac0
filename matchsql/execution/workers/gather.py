"""The worker's side of a one-time query whose rows come unsorted (see :mod:`.scatter`).

The router scans the input without sorting it and sends each row to the
worker that owns its bucket; the worker keeps the rows until the router says
that a wave of buckets is complete, then puts them in order by partition keys,
ORDER BY keys and input position: by a stable grouping by partition where
they are in ORDER BY order already (execution/router/presorted.py, the rule of one
process's input), else by a sort (DuckDB, one thread: every worker sorts
its share at the same time), cuts them into partitions and matches them
like sorted pieces (:class:`~.matching.Query`). It first sends the wave's
partition keys in its order, so that the router can put every worker's
partitions into the one global order of ``workers = 1``.

A bucket's state while its wave is open is its buffered rows: a snapshot
takes them out, a restore adds them (State Transfer; the order of rows within
a bucket does not matter, the sort puts them in place).
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from matchsql.config import Config
from matchsql.execution.router.partitions import partition_key, segments
from matchsql.execution.router.presorted import grouped
from matchsql.execution.workers.channel import RingWriter
from matchsql.execution.workers.frames import pack, unpack
from matchsql.execution.workers.scatter_plan import BUCKET, ROWS_VIEW, ScatterPlan
from matchsql.execution.workers.worker_matching import Query, answer
from matchsql.plan.spec import MatchSpec

#: Rows matched per "out" answer (the router merges as they come).
CHUNK_ROWS = 65_536


class Gather:
    """One query's buffered rows on this worker, matched wave by wave."""

    def __init__(self, index: int, spec: MatchSpec, config: Config, plan: ScatterPlan) -> None:
        self.query = Query(index, spec, config)
        self.index = index
        self.plan = plan
        self.held: list[pa.RecordBatch] = []
        self._duck: duckdb.DuckDBPyConnection | None = None

    # What the loop reads of every kind of query.
    @property
    def failed(self) -> bool:
        return self.query.failed

    @failed.setter
    def failed(self, value: bool) -> None:
        self.query.failed = value

    @property
    def rows(self) -> int:
        return self.query.rows

    @property
    def busy_ns(self) -> int:
        return self.query.busy_ns

    @busy_ns.setter
    def busy_ns(self, value: int) -> None:
        self.query.busy_ns = value

    @property
    def bucket_ns(self) -> dict[int, int]:
        return self.query.bucket_ns

    def serve(self, writer: RingWriter, kind: str, payload: bytes, extra: Any) -> None:
        if kind == "rows":
            self.held += unpack(payload)[1]
        elif kind == "snapshot":
            writer.send("state", self.snapshot(extra), extra)
        elif kind == "restore":
            self.held += unpack(payload)[1]
        elif kind == "wave":
            self.wave(extra, writer)

    def snapshot(self, bucket: int) -> memoryview:
        """The bucket's buffered rows; they leave this worker."""
        if not self.held:
            return pack([bucket], [])
        table = pa.Table.from_batches(self.held)
        mask = pc.equal(table.column(BUCKET), bucket)
        moving = table.filter(mask)
        self.held = table.filter(pc.invert(mask)).to_batches()
        return pack([bucket], moving.to_batches())

    def wave(self, wave: int, writer: RingWriter) -> None:
        """Sort and match every buffered row (a complete wave of buckets)."""
        rows, self.held = self.held, []
        rows = [batch for batch in rows if batch.num_rows]
        if not rows:
            writer.send("keys", pack([wave], []))
            return
        batch = self._sorted(pa.Table.from_batches(rows))
        keys = self.plan.keys
        bounds = segments(batch, keys)
        starts = pa.array([a for a, _ in bounds], pa.int64())
        key_batch = pa.RecordBatch.from_arrays(
            [batch.column(name).take(starts) for name in keys], names=keys
        )
        writer.send("keys", pack([wave], [key_batch]))
        buckets = np.asarray(batch.column(BUCKET))
        spec = self.query.spec
        data = pa.RecordBatch.from_arrays(
            batch.columns[: self.plan.width], names=batch.schema.names[: self.plan.width]
        )
        if not data.schema.equals(spec.columns):
            data = pa.RecordBatch.from_arrays(
                [column.cast(field.type) for column, field in zip(data.columns, spec.columns)],
                schema=spec.columns,
            )
        values = [
            partition_key(v) for v in zip(*(key_batch.column(name).to_pylist() for name in keys))
        ]
        entries: list[tuple] = []
        first = rows_in = 0
        for number, ((a, b), key) in enumerate(zip(bounds, values)):
            entries.append(((self.index, wave, number), int(buckets[a]), key, b - a, True))
            rows_in += b - a
            if rows_in >= CHUNK_ROWS:
                answer(self.query, writer, entries, [data.slice(first, rows_in)])
                entries, first, rows_in = [], b, 0
        if entries:
            answer(self.query, writer, entries, [data.slice(first, rows_in)])

    def _sorted(self, table: pa.Table) -> pa.RecordBatch:
        """The rows in partition, ORDER BY and position order.

        Each partition's rows reach this worker in input order (a bucket's rows
        come in order, and a migrated bucket's held rows before its later ones),
        so where the input is in ORDER BY order a stable grouping by partition
        gives exactly what the sort would (ties in position order): no sort.
        """
        if self.plan.order is not None:
            rows = grouped(table, self.plan.keys, self.plan.order)
            if rows is not None:
                return rows.combine_chunks().to_batches()[0]
        if self._duck is None:
            self._duck = duckdb.connect()
            self._duck.execute("SET threads = 1")  # one core per worker
        self._duck.register(ROWS_VIEW, table)
        try:
            result = self._duck.sql(self.plan.sort_sql).to_arrow_table()
        finally:
            self._duck.unregister(ROWS_VIEW)
        return result.combine_chunks().to_batches()[0]
