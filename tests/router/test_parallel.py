"""Partitions on a thread pool: the same rows in the same order as one thread.

Unit tests drive :class:`ParallelPartitionRouter` with recording runs; SQL
tests compare ``threads = 1`` with ``threads = 2`` on random data with many
partitions of mixed sizes (a small ``batch_size`` makes both small-partition
groups and chunked large partitions).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow as pa
import pytest

import matchsql
from matchsql.errors import ExecutionError, LimitExceededError
from matchsql.execution.router.parallel import ParallelPartitionRouter, coalesce
from matchsql.execution.router.partitions import SortedPartitionRouter
from matchsql.runtime.cancel import Cancellation


class EchoRun:
    """Echoes every fed row tagged with its key; finish adds one marker row."""

    def __init__(self, key, fail_on=None, delay=0.0):
        self.key = key
        self.fail_on = fail_on
        self.delay = delay
        self.fed = 0

    def feed(self, batch):
        if self.delay:
            time.sleep(self.delay)
        if self.fail_on is not None and self.key == self.fail_on:
            raise LimitExceededError(f"partition {self.key} is too large")
        self.fed += batch.num_rows
        return [
            pa.RecordBatch.from_pydict(
                {"k": [self.key[0]] * batch.num_rows, "v": batch.column("v").to_pylist()}
            )
        ]

    def finish(self):
        return [pa.RecordBatch.from_pydict({"k": [self.key[0]], "v": [-self.fed]})]


def random_batches(seed: int, rows: int = 3000, batch_rows: int = 97) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(seed)
    # Mostly short partitions, a few long ones.
    sizes = np.where(rng.random(400) < 0.05, rng.integers(200, 900, 400), rng.integers(1, 30, 400))
    keys = np.repeat(np.arange(len(sizes)), sizes)[:rows]
    table = pa.table({"k": keys, "v": np.arange(len(keys))})
    return table.to_batches(batch_rows)


def rows_of(batches) -> list[tuple]:
    return [
        row for b in batches for row in zip(b.column("k").to_pylist(), b.column("v").to_pylist())
    ]


def sequential(batches, new_run=EchoRun):
    router = SortedPartitionRouter(["k"], new_run)
    out = []
    for batch in batches:
        out += router.route(batch)
    return out + list(router.finish())


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("chunk_rows", [1, 50, 100_000])
@pytest.mark.parametrize("seed", [0, 1])
def test_same_rows_in_the_same_order_as_sequential(threads, chunk_rows, seed):
    batches = random_batches(seed)
    router = ParallelPartitionRouter(["k"], EchoRun, threads, chunk_rows=chunk_rows)
    assert rows_of(router.run(batches)) == rows_of(sequential(batches))
    assert router.partitions == len({k for k, _ in rows_of(batches)})


def test_no_keys_is_one_partition_in_chunks():
    batches = random_batches(2)
    router = ParallelPartitionRouter([], lambda key: EchoRun((0,)), 2, chunk_rows=100)
    expected = SortedPartitionRouter([], lambda key: EchoRun((0,)))
    want = [b for batch in batches for b in expected.route(batch)] + list(expected.finish())
    assert rows_of(router.run(batches)) == rows_of(want)
    assert router.partitions == 1


def test_error_in_a_partition_reaches_the_caller_unchanged():
    batches = random_batches(3)
    keys = [k for k, _ in rows_of(batches)]
    bad = keys[len(keys) // 2]
    before = [row for row in rows_of(sequential(batches)) if row[0] < bad]
    router = ParallelPartitionRouter(
        ["k"], lambda key: EchoRun(key, fail_on=(bad,)), 2, chunk_rows=64
    )
    got = []
    with pytest.raises(LimitExceededError, match=f"partition \\({bad},\\) is too large"):
        for batch in router.run(batches):
            got += rows_of([batch])
    # Rows of earlier partitions come first (those grouped with the failing
    # partition into one task are dropped with it); nothing after it.
    assert got == before[: len(got)]


def test_a_huge_partition_streams_chunk_by_chunk():
    pulled = []

    def source():
        for i in range(200):
            pulled.append(i)
            yield pa.RecordBatch.from_pydict({"k": [7] * 10, "v": list(range(i * 10, i * 10 + 10))})

    router = ParallelPartitionRouter(["k"], EchoRun, 2, chunk_rows=10, max_pending=4)
    out = router.run(source())
    first = next(out)
    assert first.column("v").to_pylist()[:10] == list(range(10))
    assert len(pulled) <= 10  # not the whole partition: at most a few chunks ahead
    rest = rows_of([first, *out])
    assert rest == rows_of(
        sequential(
            [
                pa.RecordBatch.from_pydict({"k": [7] * 10, "v": list(range(i * 10, i * 10 + 10))})
                for i in range(200)
            ]
        )
    )


def test_cancel_stops_the_workers_and_the_caller():
    cancel = Cancellation()
    router = ParallelPartitionRouter(
        ["k"], lambda key: EchoRun(key, delay=0.05), 2, chunk_rows=10, cancel=cancel
    )
    threading.Timer(0.2, cancel.cancel).start()
    start = time.perf_counter()
    with pytest.raises(ExecutionError, match="interrupted"):
        for _ in router.run(random_batches(4, batch_rows=10)):
            pass
    assert time.perf_counter() - start < 5


def test_coalesce_keeps_rows_and_order():
    small = [pa.RecordBatch.from_pydict({"v": [i, i + 1]}) for i in range(0, 20, 2)]
    big = pa.RecordBatch.from_pydict({"v": list(range(20, 20_000))})
    out = coalesce([*small, big, *small])
    assert [b.num_rows for b in out] == [20, 19_980, 20]
    assert sum((b.column("v").to_pylist() for b in out), []) == sum(
        (b.column("v").to_pylist() for b in [*small, big, *small]), []
    )


# -- through SQL ------------------------------------------------------------------------

QUERIES = [
    # ONE ROW PER MATCH, row-local DEFINEs
    """SELECT * FROM t MATCH_RECOGNIZE(PARTITION BY k ORDER BY ts
       MEASURES MATCH_NUMBER() AS mn, FIRST(x) AS fx, LAST(x) AS lx, COUNT(*) AS c
       ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
       PATTERN (A B+ C+) DEFINE B AS x < PREV(x), C AS x > PREV(x))""",
    # ALL ROWS PER MATCH, DEFINE reading another variable (registers)
    """SELECT * FROM t MATCH_RECOGNIZE(PARTITION BY k ORDER BY ts
       MEASURES CLASSIFIER() AS cls, MATCH_NUMBER() AS mn, RUNNING COUNT(*) AS c
       ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW
       PATTERN (A B* C) DEFINE B AS x >= A.x, C AS x < A.x)""",
    # ALL ROWS PER MATCH WITH UNMATCHED ROWS, two partition keys
    """SELECT * FROM t MATCH_RECOGNIZE(PARTITION BY k, g ORDER BY ts
       MEASURES CLASSIFIER() AS cls, FINAL LAST(x) AS lx
       ALL ROWS PER MATCH WITH UNMATCHED ROWS
       PATTERN (A+ B) DEFINE A AS x > 1, B AS x <= 1)""",
    # no PARTITION BY: one partition, chunked
    """SELECT * FROM t MATCH_RECOGNIZE(ORDER BY ts
       MEASURES MATCH_NUMBER() AS mn, FIRST(ts) AS s, LAST(ts) AS e
       ONE ROW PER MATCH PATTERN (A{2,} B) DEFINE A AS x > PREV(x), B AS x < PREV(x))""",
]


@pytest.fixture(scope="module")
def table() -> pa.Table:
    rng = np.random.default_rng(11)
    sizes = np.where(rng.random(300) < 0.05, rng.integers(300, 1500, 300), rng.integers(1, 40, 300))
    k = np.repeat(np.arange(len(sizes)), sizes)
    rng.shuffle(k)
    n = len(k)
    return pa.table(
        {"k": k, "g": rng.integers(0, 2, n), "ts": np.arange(n), "x": rng.integers(0, 5, n)}
    )


def connect(table: pa.Table, **options) -> matchsql.Connection:
    con = matchsql.connect(demo=False, batch_size=100, **options)
    con.duckdb.register("t_src", table)
    con.sql("CREATE TABLE t AS SELECT * FROM t_src")
    return con


@pytest.mark.parametrize("path", ["auto", "reference"])
@pytest.mark.parametrize("query", range(len(QUERIES)))
def test_sql_threads_1_and_2_give_identical_results(table, query, path):
    one = connect(table, threads=1, execution_path=path).sql(QUERIES[query]).fetchall()
    two = connect(table, threads=2, execution_path=path).sql(QUERIES[query]).fetchall()
    assert one and one == two


def test_sql_limit_over_a_parallel_query(table):
    sql = f"SELECT * FROM ({QUERIES[1]}) LIMIT 7"
    one = connect(table, threads=1).sql(sql).fetchall()
    two = connect(table, threads=2).sql(sql).fetchall()
    assert len(one) == 7 and one == two


def test_sql_set_threads_reaches_duckdb_too(table):
    con = connect(table)
    con.sql("SET threads = 3")
    assert con.config.threads == 3
    assert con.sql("SELECT current_setting('threads')").fetchall() == [(3,)]


def test_sql_error_in_a_partition_surfaces(table):
    sql = """SELECT * FROM t MATCH_RECOGNIZE(PARTITION BY k ORDER BY ts
             MEASURES COUNT(*) AS c ONE ROW PER MATCH PATTERN (A+ B) DEFINE B AS x > 99)"""
    errors = []
    for threads in (1, 2):
        with pytest.raises(LimitExceededError) as info:
            connect(table, threads=threads, max_buffered_rows=200).sql(sql).fetchall()
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_sql_interrupt_stops_a_parallel_query():
    con = matchsql.connect(demo=False, threads=2, execution_path="reference")
    con.sql(
        "CREATE TABLE big AS SELECT i % 50 AS k, i AS ts, random() AS p FROM range(2000000) r(i)"
    )
    sql = """SELECT count(*) FROM big MATCH_RECOGNIZE(PARTITION BY k ORDER BY ts
             MEASURES FIRST(p) AS f ALL ROWS PER MATCH PATTERN (A B+) DEFINE B AS p < PREV(p))"""
    _assert_interrupted(con, sql, after=0.5, within=20)
    assert con.sql("SELECT 42").fetchall() == [(42,)]


def _assert_interrupted(con: matchsql.Connection, sql: str, after: float, within: float) -> None:
    """``con.interrupt()`` ``after`` seconds into ``sql`` ends it with an error in time."""
    threading.Timer(after, con.interrupt).start()
    start = time.perf_counter()
    with pytest.raises(ExecutionError, match="interrupted"):
        con.sql(sql).fetchall()
    assert time.perf_counter() - start < within


@pytest.mark.parametrize("threads", [1, 2])
def test_sql_interrupt_stops_the_input_sort(threads):
    con = matchsql.connect(demo=False, threads=threads)
    con.sql(
        "CREATE VIEW big AS SELECT (i * 7919) % 1000 AS k, -i AS ts, i % 10 AS p "
        "FROM range(30000000) r(i)"
    )
    sql = """SELECT count(*) FROM big MATCH_RECOGNIZE(PARTITION BY k ORDER BY ts
             MEASURES FIRST(p) AS f ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS p < PREV(p))"""
    _assert_interrupted(con, sql, after=0.3, within=5)


def _spec(con: matchsql.Connection, sql: str):
    from matchsql.grammar.analyze import analyze
    from matchsql.grammar.nodes import MatchRecognizeTable
    from matchsql.grammar.statements import parse

    node = next(parse(sql)[-1].find_all(MatchRecognizeTable))
    schema = con.duckdb.sql("SELECT * FROM t LIMIT 0").to_arrow_table().schema
    return analyze(node, schema, sql=sql, con=con.duckdb)


def test_planner_spreads_only_partitions_worth_a_thread(table):
    from matchsql.engine.planner import partition_threads

    con = connect(table, threads=2)
    # Row-local on the DFA: too short per partition unless batched; registers: spread.
    assert partition_threads(_spec(con, QUERIES[0]), con.config) == (
        2,
        "partitions spread over 2 threads",
    )
    unbatched = QUERIES[0].replace("COUNT(*) AS c", "PREV(x) AS px")
    assert partition_threads(_spec(con, unbatched), con.config)[0] == 1
    assert partition_threads(_spec(con, QUERIES[1]), con.config) == (
        2,
        "partitions spread over 2 threads",
    )
    assert partition_threads(_spec(con, QUERIES[3]), con.config) == (
        1,
        "no PARTITION BY: one partition",
    )
    con.config.threads = 1
    assert partition_threads(_spec(con, QUERIES[1]), con.config)[0] == 1
    con.config.threads = 2
    explained = "\n".join(r[0] for r in con.sql("EXPLAIN " + QUERIES[1]).fetchall())
    assert "partitions: 2 threads" in explained
    explained = "\n".join(r[0] for r in con.sql("EXPLAIN " + unbatched).fetchall())
    assert "partitions: sequential (row-local partitions on the DFA, not batched" in explained


def test_input_reader_errors_carry_no_traceback():
    # DuckDB's Arrow reader of the input query raises OSError whose text
    # embeds a Python traceback; the user sees a plain message.
    from matchsql.session.matching import _reader_error

    text = (
        "INTERRUPT Error: Interrupted!. Detail: Python exception: Traceback (most recent "
        'call last):\n  File "x.py", line 1, in f\nOSError: INTERRUPT Error: Interrupted!'
    )
    assert _reader_error(OSError(text)).message == "statement interrupted"
    other = _reader_error(OSError("Invalid Input Error: bad\nDetail: Python exception: Traceback"))
    assert "Traceback" not in other.message and other.message.endswith("Invalid Input Error: bad")


def test_whole_partitions_of_one_batch_reach_whole_as_one_slice():
    """With ``whole``, the complete partitions of a batch go as one slice of it (no copy),
    the batch's last partition joining them once the next batch shows it complete."""
    seen = []

    def whole(rows, bounds):
        seen.append((rows, bounds.tolist()))
        out = {"k": rows.column("k").to_pylist(), "v": rows.column("v").to_pylist()}
        return [pa.RecordBatch.from_pydict(out)], np.diff(bounds)

    first = pa.RecordBatch.from_pydict({"k": [1, 1, 2, 3, 3], "v": [0, 1, 2, 3, 4]})
    second = pa.RecordBatch.from_pydict({"k": [4, 5], "v": [5, 6]})
    router = ParallelPartitionRouter(["k"], EchoRun, 2, chunk_rows=5, whole=whole)
    out = list(router.run([first, second]))
    assert rows_of(out) == [(k, v) for k, v in zip([1, 1, 2, 3, 3, 4, 5], range(7))]
    rows, bounds = seen[0]
    assert bounds == [0, 2, 3, 5]
    assert rows.column("v").buffers()[1].address == first.column("v").buffers()[1].address
    assert router.partitions == 5
