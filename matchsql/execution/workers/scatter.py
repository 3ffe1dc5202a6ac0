"""One-time queries on workers without a sort in the router: scatter, then sort in parallel.

``workers = 1`` puts the whole input in partition and ORDER BY order before
the first match (DuckDB's sort, or a check and a grouping where it is in
order already: matchsql/session/ordered_input.py), serially. Here the
router's DuckDB scan stays unsorted and only adds each row's bucket
(``hash(partition keys) % B``) and input position; Arrow takes each worker's
rows out of the batch; every worker orders its own rows (:mod:`.gather`:
the same check and grouping where :attr:`ScatterPlan.order` allows it, else
a sort), so that work runs on all workers at once.

Waves: a worker can sort a bucket only once all its rows are in. Over a base
table the buckets are scanned in ``waves`` groups (``bucket % waves``), one
scan each, so the workers sort and match wave *g* while the router scans
wave *g + 1*; over any other source (a subquery, a view, another
MATCH_RECOGNIZE's matches: not to be evaluated twice) there is one wave.

Order: each worker sends a wave's partition keys in its sorted order before
their matches; the router sorts all the keys once (DuckDB, the same ORDER BY
as ``workers = 1``) into the global sequence of partitions and emits their
matches in it. Ties in ORDER BY are broken by input position (a table's
``rowid``, else ``row_number() OVER ()`` of the scan), which is also the
order of ``workers = 1`` where there is no ORDER BY.

Migration: while a bucket's wave is open its state is its buffered rows; the
State Transfer steps are the same as for open runs (flush, snapshot, buffer,
restore, drain, switch).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator

import duckdb
import numpy as np
import pyarrow as pa
from sqlglot import exp

from matchsql.config import Config
from matchsql.execution.router.presorted import GroupedRows, OrderKey
from matchsql.execution.workers.balance import Policy, least_loaded
from matchsql.execution.workers.frames import pack, unpack
from matchsql.execution.workers.pool import WorkerPool
from matchsql.execution.workers.scatter_plan import (
    BUCKET,
    KEYS_VIEW,
    POSITION,
    ROWS_VIEW,
    WAVES,
    ScatterPlan,
)
from matchsql.execution.workers.wire import query_bytes
from matchsql.execution.workers.worker_router import BUCKETS, MigrationRecord, WorkerRouter
from matchsql.grammar.subqueries import visible_ctes
from matchsql.plan.spec import MatchSpec, select_list
from matchsql.runtime.cancel import Cancellation


def _quoted(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def scatter_plan(
    node,
    spec: MatchSpec,
    columns: list[str] | None,
    con: duckdb.DuckDBPyConnection,
    *,
    waves: int = WAVES,
    buckets: int = BUCKETS,
    presorted: list[OrderKey] | None = None,
) -> ScatterPlan:
    """The plan for ``node``'s input (``columns`` only, when given); ``presorted``: the
    ORDER BY keys when the caller's rule lets rows in that order skip the sort."""
    source = node.this.sql(dialect="duckdb")
    select = select_list(columns, spec.derived)
    ctes = visible_ctes(node)
    table = _base_table(node, ctes, con)
    if table is None:
        waves = 1
    position = "rowid" if table is not None else "row_number() OVER ()"
    keys = ", ".join(_quoted(k) for k in spec.partition_by)
    scan = (
        f"SELECT *, (hash({keys}) % {buckets})::INTEGER AS {BUCKET} FROM "
        f"(SELECT {select}, {position} AS {POSITION} FROM {source})"
    )
    prefix = ("WITH " + ", ".join(c.sql(dialect="duckdb") for c in ctes) + " ") if ctes else ""
    scans = [
        prefix
        + (scan if waves == 1 else f"SELECT * FROM ({scan}) WHERE {BUCKET} % {waves} = {wave}")
        for wave in range(waves)
    ]
    order = node.args.get("order")
    items = [_quoted(k) for k in spec.partition_by]
    for item, name in zip(order.expressions if order is not None else [], spec.order_by):
        item = item.copy()
        item.set("this", exp.column(exp.to_identifier(name, quoted=True)))
        items.append(item.sql(dialect="duckdb"))
    sort_sql = f"SELECT * FROM {ROWS_VIEW} ORDER BY {', '.join(items)}, {POSITION}"
    width = len(spec.columns)
    # Position last: ties must come in input order, as the workers' sort puts them.
    order_keys = None if presorted is None else [*presorted, OrderKey(POSITION)]
    return ScatterPlan(scans, sort_sql, list(spec.partition_by), width, order_keys)


def _base_table(node, ctes, con: duckdb.DuckDBPyConnection) -> str | None:
    """The name of the DuckDB base table ``node`` reads directly, else None."""
    source = node.this
    if (
        not isinstance(source, exp.Table)
        or source.args.get("joins")
        or not isinstance(source.this, exp.Identifier)
    ):
        return None
    name = source.name
    if any(cte.alias_or_name.lower() == name.lower() for cte in ctes):
        return None
    found = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE lower(table_name) = ? AND NOT temporary",
        [name.lower()],
    ).fetchall()[0][0]
    return name if found == 1 and not source.args.get("db") else None


class ScatterRouter(WorkerRouter):
    """Scatters unsorted rows by bucket; the workers sort, match; merges in global order."""

    consecutive_numbers = False  # (worker, wave, number): ordered by the keys' sort

    def __init__(
        self,
        pool: WorkerPool,
        spec: MatchSpec,
        config: Config,
        cancel: Cancellation,
        plan: ScatterPlan,
        open_input: Callable[[str], Iterable[pa.RecordBatch]],
        *,
        chunk_rows: int = 65_536,
        policy: Policy | None = None,
    ) -> None:
        super().__init__(pool, spec, config, cancel, chunk_rows=chunk_rows, policy=policy)
        self.plan = plan
        self.open_input = open_input
        self.owner_of = np.full(self.buckets, -1, np.int64)
        self._keys: list[tuple[int, int, pa.RecordBatch]] = []
        self._pieces: list[list[pa.RecordBatch]] = [[] for _ in self.workers]

    def run(
        self, source: GroupedRows | pa.Table | Iterable[pa.RecordBatch] = ()
    ) -> Iterator[pa.RecordBatch]:
        """The matches of the plan's scans (``open_input``), in the order of ``workers = 1``.
        ``source`` is never read: it keeps :meth:`WorkerRouter.run`'s signature, so the
        session runs either router alike."""
        n = len(self.workers)
        payload = query_bytes(self.spec, self.config, self.plan)
        for index in range(n):
            self._post(index, "gather", payload)
        for wave, sql in enumerate(self.plan.waves):
            for batch in self.open_input(sql):
                self._check()
                self._scatter(batch)
                self._step()
            while self.migrating:  # a bucket's rows all reach one worker before its wave ends
                self._wait()
                self._step(decide=False)
            for index in range(n):
                self._send(index)
                self._post(index, "wave", None, wave)
        while len(self._keys) < n * len(self.plan.waves):
            self._wait()
        self._order = deque(self._global_order())
        self.partitions = len(self._order)
        while True:
            yield from self._ready()
            if not self._order:
                break
            self._wait()
        for index in range(n):
            self._post(index, "end")
        while self._ended < n:
            self._wait()

    def _scatter(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        buckets = np.asarray(batch.column(BUCKET), dtype=np.int64)
        counts = np.bincount(buckets, minlength=self.buckets)
        seen = np.flatnonzero(counts)
        ahead = [0] * len(self.workers)  # rows counted as routed at a bucket's first sight
        for bucket in seen[self.owner_of[seen] < 0].tolist():
            index = least_loaded(self._load())
            self.owner[bucket] = self.owner_of[bucket] = index
            self.routed[index] += int(counts[bucket])  # the next new bucket sees this load
            ahead[index] += int(counts[bucket])
        for bucket in seen.tolist():
            count = int(counts[bucket])
            self.bucket_rows[bucket] = self.bucket_rows.get(bucket, 0) + count
            self.recent[bucket] = self.recent.get(bucket, 0) + count
        owners = self.owner_of[buckets]
        for bucket, moving in self.migrating.items():  # held until the snapshot is back
            mine = buckets == bucket
            if mine.any():
                moving.held.append(batch.take(pa.array(np.flatnonzero(mine))))
                moving.buffered_rows += int(mine.sum())
                owners = np.where(mine, -1, owners)
        for index in range(len(self.workers)):
            rows = np.flatnonzero(owners == index)
            self.routed[index] += rows.size - ahead[index]
            if rows.size:
                self._hand(
                    index, batch.take(pa.array(rows)) if rows.size < batch.num_rows else batch
                )

    def _hand(self, index: int, piece: pa.RecordBatch) -> None:
        self._pieces[index].append(piece)
        self._pending_rows[index] += piece.num_rows
        if self._pending_rows[index] >= self.chunk_rows:
            self._send(index)

    def _send(self, index: int, whole: bool = False) -> None:
        pieces = self._pieces[index]
        if not pieces:
            return
        self._pieces[index] = []
        self._pending_rows[index] = 0
        self._post(index, "rows", pack([], pieces))

    def _step(self, decide: bool = True) -> None:
        """Safe point: snapshots and migrations only (rows go out as each piece is cut)."""
        self._settle(decide)

    def _finish_migration(self, bucket: int, state: bytes) -> None:
        moving = self.migrating.pop(bucket)
        self._post(moving.target, "restore", state, bucket)
        self.owner[bucket] = self.owner_of[bucket] = moving.target
        _, rows = unpack(state)
        moved = sum(batch.num_rows for batch in rows)
        self.routed[moving.source] -= moved
        self.routed[moving.target] += moved
        for piece in moving.held:
            self.routed[moving.target] += piece.num_rows
            self._hand(moving.target, piece)
        self._send(moving.target)
        self.migrations.append(
            MigrationRecord(
                bucket,
                moving.source,
                moving.target,
                time.perf_counter() - moving.started,
                len(state),
                0,
                moving.buffered_rows,
                moved,
            )
        )
        self.pool.migrations += 1

    def _answer(self, index: int, kind: str, payload: bytes, extra) -> None:
        if kind == "keys":
            (wave,), batches = unpack(payload)
            self._keys.append((index, wave, batches[0] if batches else None))

    def _global_order(self) -> list[tuple[int, int, int]]:
        """Every partition as (worker, wave, number), in the order of ``workers = 1``."""
        parts = []
        for index, wave, keys in self._keys:
            if keys is None or not keys.num_rows:
                continue
            n = keys.num_rows
            parts.append(
                pa.table(
                    [
                        *keys.columns,
                        pa.array(np.full(n, index)),
                        pa.array(np.full(n, wave)),
                        pa.array(np.arange(n)),
                    ],
                    names=[*keys.schema.names, "__w", "__g", "__i"],
                )
            )
        if not parts:
            return []
        table = pa.concat_tables(parts, promote_options="permissive")
        con = duckdb.connect()
        try:
            con.register(KEYS_VIEW, table)
            order = ", ".join(_quoted(k) for k in self.plan.keys)
            rows = con.sql(f"SELECT __w, __g, __i FROM {KEYS_VIEW} ORDER BY {order}").fetchall()
        finally:
            con.close()
        return [tuple(row) for row in rows]
