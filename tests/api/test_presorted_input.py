"""MATCH_RECOGNIZE input taken in its own order when it is in ORDER BY order
(matchsql/session/ordered_input.py): the same rows, in the same order, as with
DuckDB's sort, on sorted, almost sorted and unsorted random tables.

ORDER BY keys are unique within a partition here: with ties SQL leaves the
order free, and the two routes may legitimately match differently (the
grouping itself is tested with ties in tests/router/test_presorted.py).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.execution.router.presorted import OrderKey
from matchsql.grammar.analyze import analyze
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.session import ordered_input

SETTINGS = settings(
    max_examples=int(os.environ.get("PRESORTED_EXAMPLES", "60")),
    deadline=None,
    derandomize=not os.environ.get("PRESORTED_EXAMPLES"),
    suppress_health_check=[HealthCheck.too_slow],
)

SHAPES = {
    "row-local": (
        "ONE ROW PER MATCH",
        "MATCH_NUMBER() AS mn, FIRST(x) AS fx, LAST(x) AS lx, COUNT(*) AS n",
        "A B+ C+",
        "B AS x < PREV(x), C AS x > PREV(x)",
    ),
    "registers": (
        "ONE ROW PER MATCH",
        "MATCH_NUMBER() AS mn, LAST(B.x) AS lb",
        "A B+ C* D+",
        "B AS x < A.x, C AS x >= PREV(x), D AS x > A.x",
    ),
    "all rows": (
        "ALL ROWS PER MATCH",
        "CLASSIFIER() AS cls, RUNNING COUNT(*) AS n",
        "A B+",
        "B AS x <= PREV(x)",
    ),
    "unmatched": (
        "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
        "MATCH_NUMBER() AS mn",
        "A B",
        "B AS x > PREV(x)",
    ),
}


def _run(con, sql: str, presorted: bool) -> list[tuple]:
    saved = ordered_input.ENABLED
    ordered_input.ENABLED = presorted
    try:
        return con.sql(sql).fetchall()
    finally:
        ordered_input.ENABLED = saved


@st.composite
def cases(draw):
    n = draw(st.integers(0, 60))
    ptype = draw(st.sampled_from(["str", "int", "two", "none"]))
    parts = draw(st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=n, max_size=n))
    xs = draw(st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=n, max_size=n))
    mode = draw(st.sampled_from(["sorted", "almost", "unsorted"]))
    ts = list(range(n))  # unique: no ties in ORDER BY
    if mode == "unsorted":
        ts = draw(st.permutations(ts))
    elif mode == "almost" and n > 1:
        i = draw(st.integers(0, n - 2))
        ts[i], ts[i + 1] = ts[i + 1], ts[i]
    descending = draw(st.booleans())
    if descending:
        ts = [n - t for t in ts]
    null_ts = draw(st.one_of(st.none(), st.integers(0, max(n - 1, 0)))) if n else None
    tsv: list = [1000 + t * 10 for t in ts]
    if null_ts is not None:
        tsv[null_ts] = None
    kind = draw(st.sampled_from(["int", "float", "timestamp"]))
    ts_array = pa.array(tsv, pa.int64())
    if kind == "float":
        ts_array = ts_array.cast(pa.float64())
    elif kind == "timestamp":
        ts_array = ts_array.cast(pa.timestamp("us"))
    table = pa.table(
        {
            "p": pa.array([None if p is None else f"s{p}" for p in parts], pa.string())
            if ptype == "str"
            else pa.array(parts, pa.int32()),
            "q": pa.array([None if p is None else p % 2 for p in parts], pa.int8()),
            "ts": ts_array,
            "x": pa.array(xs, pa.int64()),
        }
    )
    partition = {
        "str": "PARTITION BY p",
        "int": "PARTITION BY p",
        "two": "PARTITION BY p, q",
        "none": "",
    }[ptype]
    nulls = draw(st.sampled_from(["", " NULLS FIRST", " NULLS LAST"]))
    order = draw(st.sampled_from(["ts", "none", "ts, x"]))
    if order == "none":
        order_by = ""
    else:
        order_by = "ORDER BY " + order.replace("ts", f"ts{' DESC' if descending else ''}{nulls}")
    shape = draw(st.sampled_from(sorted(SHAPES)))
    return table, partition, order_by, shape


@SETTINGS
@given(cases())
def test_presorted_input_matches_like_the_sorted_one(case):
    table, partition, order_by, shape = case
    rows, measures, pattern, define = SHAPES[shape]
    con = matchsql.connect(demo=False, threads=1)
    con.duckdb.register("src", table)
    con.sql("CREATE TABLE t AS SELECT * FROM src")
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE({partition} {order_by} MEASURES {measures} "
        f"{rows} AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) DEFINE {define})"
    )
    assert _run(con, sql, True) == _run(con, sql, False)


@pytest.fixture
def trades():
    con = matchsql.connect(demo=False, threads=1)
    con.sql(
        "CREATE TABLE t AS SELECT 's' || (range % 3) AS p, range AS ts, "
        "(range * 7919) % 13 AS x, range * 2 AS unused FROM range(3000)"
    )
    return con


ROW_LOCAL = (
    "SELECT * FROM t MATCH_RECOGNIZE(PARTITION BY p ORDER BY ts MEASURES "
    "MATCH_NUMBER() AS mn, FIRST(x) AS fx, LAST(ts) AS lt PATTERN (A B+ C+) "
    "DEFINE B AS x < PREV(x), C AS x > PREV(x))"
)


def test_unsorted_input_falls_back_to_the_sort(trades):
    trades.sql("CREATE TABLE u AS SELECT * FROM t ORDER BY x, ts DESC")
    sql = ROW_LOCAL.replace("FROM t ", "FROM u ")
    rows = _run(trades, sql, True)
    assert rows == _run(trades, sql, False)
    assert rows == _run(trades, ROW_LOCAL, True)  # same rows, other storage order


def test_input_larger_than_the_check_budget_is_sorted(trades, monkeypatch):
    expected = _run(trades, ROW_LOCAL, False)
    monkeypatch.setattr(ordered_input, "PRESORTED_BYTES", 1)
    assert _run(trades, ROW_LOCAL, True) == expected


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """The input queries each MATCH_RECOGNIZE runs, in order."""
    queries: list[str] = []
    original = ordered_input.input_batches

    def spy(q, open_input, *rest):
        def opening(sql):
            queries.append(sql)
            return open_input(sql)

        return original(q, opening, *rest)

    monkeypatch.setattr("matchsql.session.matching.input_batches", spy)
    return queries


def test_other_null_order_setting_keeps_the_sort(trades, opened):
    trades.sql("INSERT INTO t VALUES ('s0', NULL, 1, 0), ('s0', NULL, 2, 0)")
    sql = ROW_LOCAL.replace("LAST(ts) AS lt", "COUNT(*) AS n").replace("B+ C+", "B+ C*")
    trades.sql("SET default_null_order = 'nulls_first'")
    rows = _run(trades, sql, True)
    assert len(opened) == 1 and "ORDER BY" in opened[0]
    assert rows == _run(trades, sql, False)


def test_presorted_input_is_read_without_duckdb_sort(trades, opened):
    _run(trades, ROW_LOCAL, True)
    assert len(opened) == 1 and "ORDER BY" not in opened[0]
    assert '"x"' in opened[0] and "unused" not in opened[0]  # only the columns read
    opened.clear()
    trades.sql("CREATE TABLE u AS SELECT * FROM t ORDER BY x")
    _run(trades, ROW_LOCAL.replace("FROM t ", "FROM u "), True)
    assert len(opened) == 2 and "ORDER BY" not in opened[0] and "ORDER BY" in opened[1]


def test_a_source_read_once_is_sorted_by_duckdb(trades, opened):
    table = trades.sql("SELECT * FROM t ORDER BY x, ts DESC").arrow()
    expected = _run(trades, ROW_LOCAL, False)
    opened.clear()
    once = table.to_reader()  # noqa: F841 - read by name from the statement
    assert trades.sql(ROW_LOCAL.replace("FROM t ", "FROM once ")).fetchall() == expected
    assert len(opened) == 1 and "ORDER BY" in opened[0]


def test_a_subquery_source_is_sorted_by_duckdb(trades, opened):
    sql = ROW_LOCAL.replace("FROM t ", "FROM (SELECT * FROM t WHERE x < 12) ")
    assert _run(trades, sql, True) == _run(trades, sql, False)
    assert len(opened) == 2 and all("ORDER BY" in q for q in opened)


def test_nested_match_recognize_out_of_order_reads_its_input_once(trades):
    inner = ROW_LOCAL.replace("PATTERN", "ALL ROWS PER MATCH PATTERN")
    sql = (
        f"SELECT * FROM ({inner}) MATCH_RECOGNIZE(PARTITION BY p ORDER BY x, ts "
        "MEASURES COUNT(*) AS k, LAST(ts) AS lt PATTERN (A B+) DEFINE B AS ts > PREV(ts))"
    )
    rows = _run(trades, sql, True)
    assert rows and rows == _run(trades, sql, False)


@pytest.mark.parametrize("threads", [1, 2])
def test_small_batches_and_threads_see_the_same_rows(threads):
    """Many partitions of mixed sizes cut by small batches, one and two threads."""
    con = matchsql.connect(demo=False, threads=threads, batch_size=100)
    con.sql(
        "CREATE TABLE t AS SELECT CASE WHEN range % 10 = 0 THEN 'big' "
        "ELSE 'p' || (range % 37) END AS p, range AS ts, (range * 7919) % 11 AS x "
        "FROM range(4000)"
    )
    rows = _run(con, ROW_LOCAL, True)
    assert len(rows) > 100 and rows == _run(con, ROW_LOCAL, False)
    registers = ROW_LOCAL.replace("C AS x > PREV(x)", "C AS x > A.x")
    rows = _run(con, registers, True)
    assert len(rows) > 100 and rows == _run(con, registers, False)


def _spec(con, clauses: str):
    sql = f"SELECT * FROM t MATCH_RECOGNIZE(PARTITION BY p ORDER BY ts {clauses})"
    node = next(parse(sql)[-1].find_all(MatchRecognizeTable))
    schema = con.duckdb.sql("SELECT * FROM t LIMIT 0").to_arrow_table().schema
    return analyze(node, schema, sql=sql, con=con.duckdb)


@pytest.mark.parametrize(
    "clauses,unread",
    [
        ("MEASURES FIRST(x) AS fx PATTERN (A B+) DEFINE B AS x < PREV(x)", {"ts"}),
        ("MEASURES FIRST(ts) AS f PATTERN (A B+) DEFINE B AS x < PREV(x)", set()),
        ("MEASURES FIRST(x) AS fx PATTERN (A B+) DEFINE B AS ts > PREV(ts) + 1", set()),
        ("MEASURES FIRST(x) AS fx PATTERN (A B+) WITHIN 5 DEFINE B AS x < PREV(x)", set()),
        (
            "MEASURES FIRST(x) AS fx ALL ROWS PER MATCH PATTERN (A B+) DEFINE B AS x < PREV(x)",
            set(),
        ),
    ],
)
def test_only_order_columns_nothing_reads_are_left_untaken(trades, clauses, unread):
    """The ORDER BY column is left out of the grouping's take only where no DEFINE,
    MEASURES, WITHIN or ALL ROWS PER MATCH output reads it."""
    assert ordered_input.unread_columns(_spec(trades, clauses)) == unread


def test_an_unread_order_column_gives_the_same_matches(trades):
    """Interleaved partitions (grouped here): ts, read by nobody, is not taken, and the
    output is that of DuckDB's sort; read in MEASURES, it is taken and right."""
    for measures in ("FIRST(x) AS fx, COUNT(*) AS n", "FIRST(x) AS fx, LAST(ts) AS lt"):
        sql = (
            f"SELECT * FROM t MATCH_RECOGNIZE(PARTITION BY p ORDER BY ts MEASURES "
            f"{measures} PATTERN (A B+ C+) DEFINE B AS x < PREV(x), C AS x > PREV(x))"
        )
        rows = _run(trades, sql, True)
        assert len(rows) > 100 and rows == _run(trades, sql, False)


def _batches_pulled(batches: list[pa.RecordBatch]):
    """An ``open_input`` over ``batches`` and the count of those taken from it."""
    pulled = [0]

    def open_input(sql: str):
        for batch in batches:
            pulled[0] += 1
            yield batch

    return open_input, pulled


@pytest.mark.parametrize("rows", [100, 70_000])  # numpy's passes, then the compiled ones
def test_an_unsorted_first_batch_stops_the_reading_at_the_second(rows):
    keys = ordered_input.InputQueries("", "", ["p"], [OrderKey("ts")])

    def batch(descending: bool, at: int) -> pa.RecordBatch:
        ts = list(range(at + rows, at, -1)) if descending else list(range(at, at + rows))
        return pa.record_batch(
            {"p": pa.array([f"k{i % 7}" for i in range(rows)]), "ts": pa.array(ts, pa.int64())}
        )

    unsorted = [batch(True, 0)] + [batch(False, rows * (k + 1)) for k in range(5)]
    open_input, pulled = _batches_pulled(unsorted)
    assert ordered_input._held_in_order("", keys, open_input) is None
    assert pulled[0] == 2  # the first batch's order is known once a second one comes
    ordered = [batch(False, rows * k) for k in range(4)]
    open_input, pulled = _batches_pulled(ordered)
    table = ordered_input._held_in_order("", keys, open_input)
    assert pulled[0] == 4 and table.num_rows == 4 * rows
    # One batch: no early check (the whole check follows), so its rows come back.
    open_input, pulled = _batches_pulled(unsorted[:1])
    assert ordered_input._held_in_order("", keys, open_input).num_rows == rows
