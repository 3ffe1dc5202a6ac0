"""Continuous queries on workers: a live stream's partitions run in worker processes.

The producer is a real separate process; the matches must equal the
one-time query over the same tuples (which equals ``workers = 1``, checked
by the stream tests), with and without buckets migrating between batches.
"""

from __future__ import annotations

import random

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import matchsql
from matchsql.config import Config
from matchsql.engine.planner import new_partition_matcher
from matchsql.execution.router.hashed import HashPartitionRouter
from matchsql.execution.workers.balance import RandomMigrations
from matchsql.execution.workers.pool import WorkerPool
from matchsql.execution.workers.stream_router import StreamRouter
from matchsql.grammar.analyze import analyze
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.runtime.cancel import Cancellation
from matchsql.storage.demo import synthetic_trades
from tests.streams.conftest import bounded, runtime_dir, spawn  # noqa: F401 - fixtures

TRADES = "CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)"
QUERIES = [
    """SELECT * FROM {source} MATCH_RECOGNIZE(
      PARTITION BY symbol ORDER BY ts
      MEASURES MATCH_NUMBER() AS m, FIRST(A.price) AS p0, LAST(D.price) AS p1, LAST(D.ts) AS t1
      ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
      PATTERN (A B+ C* D+)
      DEFINE B AS B.price < A.price AND B.price <= PREV(B.price),
             C AS C.price > B.price AND C.price >= PREV(C.price) AND C.price <= A.price,
             D AS D.price > PREV(D.price) AND D.price > A.price)""",
    """SELECT * FROM {source} MATCH_RECOGNIZE(
      PARTITION BY symbol ORDER BY ts
      MEASURES CLASSIFIER() AS c, COUNT(*) AS n ALL ROWS PER MATCH
      AFTER MATCH SKIP TO NEXT ROW PATTERN (A B{{2,}}) DEFINE B AS B.price > PREV(B.price))""",
]

PRODUCE = """
    import sys
    from matchsql.storage import Producer
    from matchsql.storage.demo import synthetic_trades
    rows, chunk, symbols = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    with Producer.open("trades") as producer:
        for batch in synthetic_trades(rows, symbols, 7).to_batches(max_chunksize=chunk):
            producer.write_batch(batch)
"""


def one_shot(query: str, rows: int, symbols: int) -> list[tuple]:
    con = matchsql.connect(demo=False)
    con.duckdb.register("trades_src", synthetic_trades(rows, symbols, 7))
    con.sql("CREATE TABLE trades_table AS SELECT * FROM trades_src")
    out = sorted(con.sql(query.format(source="trades_table")).fetchall(), key=repr)
    con.close()
    return out


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("number", range(len(QUERIES)))
def test_continuous_query_on_workers_equals_one_shot(
    spawn,  # noqa: F811
    workers: int,
    number: int,
) -> None:
    query = QUERIES[number]
    con = matchsql.connect(demo=False, workers=workers, batch_size=300)
    try:
        con.sql(TRADES)
        producer = spawn(PRODUCE, "8000", "700", "40")
        live = sorted(bounded(con.sql(query.format(source="trades")).fetchall), key=repr)
        assert producer.wait() == 0
        router = con._executor.workers.last
        assert isinstance(router, StreamRouter)  # it did run on the workers
        assert router.partitions == 40
        assert len(router.owner) > 1 and len(set(router.owner.values())) == workers
        assert live == one_shot(query, 8000, 40)
        assert live
    finally:
        con.close()


@pytest.mark.parametrize("seed", range(3))
def test_random_migrations_between_batches(spawn, seed: int) -> None:  # noqa: F811
    query = QUERIES[seed % len(QUERIES)]
    con = matchsql.connect(demo=False, workers=2, batch_size=random.Random(seed).choice([50, 400]))
    session = con._executor.workers
    injector = RandomMigrations(seed, rate=0.3)
    session.policy_factory = lambda: injector
    try:
        con.sql(TRADES)
        producer = spawn(PRODUCE, "6000", "500", "25")
        live = sorted(bounded(con.sql(query.format(source="trades")).fetchall), key=repr)
        assert producer.wait() == 0
        moves = session.last.migrations
        assert moves and any(m.open_partitions for m in moves)  # runs moved mid-stream
        assert live == one_shot(query, 6000, 25)
    finally:
        con.close()


def _routers(seed: int, query: str, schema: pa.Schema, pool: WorkerPool):
    """A one-process hash router and a worker router (random migrations) for ``query``."""
    node = next(parse(query)[0].find_all(MatchRecognizeTable))
    spec = analyze(node, schema, sql=query, con=duckdb.connect())
    config = Config(workers=2, threads=1)

    def new_run(key: tuple):
        return new_partition_matcher(spec, key, config, live=True)

    return (
        HashPartitionRouter(spec.partition_by, new_run),
        StreamRouter(
            pool,
            spec,
            config,
            Cancellation(),
            new_run,
            live=True,
            policy=RandomMigrations(seed, rate=0.5),
        ),
    )


@pytest.mark.parametrize("seed", range(3))
def test_batches_in_flight_give_the_rows_of_one_process_in_its_order(seed: int) -> None:
    """``route(batch, more=True)`` keeps a batch in flight while the next is cut; with
    migrations between batches the matches are still those of ``workers = 1``, in the
    same order, batch after batch."""
    rng = random.Random(seed)
    query = QUERIES[seed % len(QUERIES)].format(source="trades")
    table = synthetic_trades(4_000, 20, seed)
    table = table.take(pc.sort_indices(table, [("ts", "ascending"), ("symbol", "ascending")]))
    batches = table.to_batches(max_chunksize=rng.choice([97, 250, 600]))
    pool = WorkerPool(2)
    try:
        single, workers = _routers(seed, query, table.schema, pool)
        expected = [
            row for batch in batches for out in single.route(batch) for row in out.to_pylist()
        ]
        expected += [row for out in single.finish() for row in out.to_pylist()]
        got, flights = [], []
        for i, batch in enumerate(batches):
            got += [
                row
                for out in workers.route(batch, more=i + 1 < len(batches))
                for row in out.to_pylist()
            ]
            flights.append(workers.in_flight)
            if i == 0:  # the first batch's buckets were placed together, largest first
                assert abs(workers.routed[0] - workers.routed[1]) <= max(
                    workers.bucket_rows.values()
                )
        got += [row for out in workers.finish() for row in out.to_pylist()]
        assert flights[:-1] == [1] * (len(batches) - 1) and flights[-1] == 0
        assert workers.migrations and any(m.open_partitions for m in workers.migrations)
        assert got == expected and got
    finally:
        pool.kill()
