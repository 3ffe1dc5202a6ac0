"""A query without PARTITION BY matched as ORDER BY ranges in parallel
(matchsql.integrations.spark.ranges).

Small ranges (``ranges=``) and a small ``overlap`` put many matches across range
boundaries; every result must be the embedded engine's rows on the same data.
"""

from __future__ import annotations

import warnings

import pyarrow as pa
import pytest

from matchsql.config import Config
from matchsql.integrations.spark import SinglePartitionWarning, match_recognize
from matchsql.integrations.spark.ranges import range_keys, spark_hash_partition, split_reason
from matchsql.integrations.spark.spark_plan import build_plan
from tests.spark.helpers import canonical, embedded, frame, rows, trades

pytestmark = pytest.mark.xdist_group("spark")

DEJAVU = """SELECT * FROM trade MATCH_RECOGNIZE(
  ORDER BY ts
  MEASURES MATCH_NUMBER() AS matchno
  {rows}
  AFTER MATCH SKIP {skip}
  PATTERN(A B+ C* D+)
  DEFINE
    B AS (B.price < A.price AND B.price <= PREV(B.price)),
    C AS (C.price > B.price AND C.price >= PREV(C.price) AND C.price <= A.price),
    D AS (D.price > PREV(D.price) AND D.price > A.price)
)"""

ONE_ROW = """SELECT * FROM trade MATCH_RECOGNIZE(
  ORDER BY ts
  MEASURES MATCH_NUMBER() AS mn, FIRST(A.ts) AS t0, LAST(D.price) AS top,
           COUNT(*) AS n, CLASSIFIER() AS cls, NEXT(D.price) AS after
  ONE ROW PER MATCH
  AFTER MATCH SKIP {skip}
  PATTERN(A B+ D+)
  DEFINE
    B AS B.price < PREV(B.price),
    D AS D.price > PREV(D.price)
)"""


@pytest.fixture(scope="module")
def trade_data() -> pa.Table:
    return trades(3000, 4, seed=5)


@pytest.fixture(scope="module")
def trade_frame(spark, trade_data):
    return frame(spark, trade_data).cache()


def _check(df, data: pa.Table, query: str) -> list[tuple]:
    got = rows(df)
    expected = embedded("trade", data, query)
    assert len(expected) > 20
    assert canonical(got) == canonical(expected)
    return got


@pytest.mark.parametrize("skip", ["PAST LAST ROW", "TO NEXT ROW"])
@pytest.mark.parametrize("rows_per_match", ["ALL ROWS PER MATCH", "ONE ROW PER MATCH"])
def test_ranges_equal_the_embedded_rows(trade_data, trade_frame, skip, rows_per_match) -> None:
    """Seven ranges of about 430 rows, 64 rows of overlap: matches cross boundaries,
    MATCH_NUMBER() runs on across them."""
    query = DEJAVU.format(rows=rows_per_match, skip=skip)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SinglePartitionWarning)  # really split
        df = match_recognize(trade_frame, query, ranges=7, overlap=64)
    got = _check(df, trade_data, query)
    at = df.columns.index("matchno")
    numbers = sorted({row[at] for row in got})
    assert numbers == list(range(1, len(numbers) + 1))


@pytest.mark.parametrize("skip", ["PAST LAST ROW", "TO NEXT ROW"])
def test_one_row_measures_across_ranges(trade_data, trade_frame, skip) -> None:
    query = ONE_ROW.format(skip=skip)
    df = match_recognize(trade_frame, query, ranges=5, overlap=32)
    _check(df, trade_data, query)


def test_outer_statement_over_renumbered_matches(trade_data, trade_frame) -> None:
    inner = DEJAVU.format(rows="ONE ROW PER MATCH", skip="PAST LAST ROW")
    query = inner.replace("SELECT *", "SELECT matchno * 10 AS m10", 1) + " WHERE matchno > 3"
    df = match_recognize(trade_frame, query, table="trade", ranges=4, overlap=64)
    _check(df, trade_data, query)


def test_match_longer_than_the_overlap_raises(spark) -> None:
    """A rising run longer than the overlap crosses a boundary: a clear error, never
    a wrong row."""
    values = list(range(400))
    data = pa.table({"ts": pa.array(values, pa.int64()), "price": pa.array(values, pa.float64())})
    query = """SELECT * FROM t MATCH_RECOGNIZE(ORDER BY ts MEASURES COUNT(*) AS n
        ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS B.price > PREV(B.price))"""
    df = match_recognize(frame(spark, data), query, ranges=3, overlap=16)
    with pytest.raises(Exception, match="overlap=16"):
        df.collect()
    # A head and a tail come from the neighbouring range only: two ranges, each read
    # whole by the other.
    wide = match_recognize(frame(spark, data), query, ranges=2, overlap=400)
    assert rows(wide) == embedded("t", data, query)


def test_unsplittable_query_runs_as_one_task(trade_data, trade_frame) -> None:
    query = DEJAVU.format(rows="ONE ROW PER MATCH", skip="PAST LAST ROW").replace(
        "MATCH_NUMBER() AS matchno", "MATCH_NUMBER() + 1 AS matchno"
    )
    with pytest.warns(SinglePartitionWarning, match="MATCH_NUMBER"):
        df = match_recognize(trade_frame, query, ranges=4)
    _check(df, trade_data, query)


def test_split_reasons(trade_data) -> None:
    schema = trade_data.schema
    plain = DEJAVU.format(rows="ONE ROW PER MATCH", skip="PAST LAST ROW")
    assert split_reason(build_plan(plain, "trade", schema), Config(), 64) is None
    by_float = plain.replace("ORDER BY ts", "ORDER BY price")
    assert "may sort otherwise" in split_reason(build_plan(by_float, "trade", schema), Config(), 64)
    assert "overlap" in split_reason(build_plan(plain, "trade", schema), Config(), 1)
    unmatched = plain.replace("ONE ROW PER MATCH", "ALL ROWS PER MATCH WITH UNMATCHED ROWS")
    assert "UNMATCHED" in split_reason(build_plan(unmatched, "trade", schema), Config(), 64)


def test_range_keys_land_on_their_own_task(spark) -> None:
    """The Python port of Spark's hash partitioning agrees with Spark's own."""
    from pyspark.sql import functions as F

    keys = range_keys(7)
    got = (
        spark.createDataFrame([(k,) for k in keys], "k long")
        .select(F.expr("pmod(hash(k), 7)").alias("p"))
        .collect()
    )
    assert [row.p for row in got] == list(range(7))
    assert [spark_hash_partition(k, 7) for k in keys] == list(range(7))


def test_fewer_order_values_than_ranges(spark) -> None:
    """Two ORDER BY values, six ranges asked for: Spark makes fewer ranges (an empty one
    between two others would be a clear error, never a wrong row)."""
    data = pa.table({"ts": pa.array([1] * 50 + [2] * 50, pa.int64()), "v": list(range(100))})
    query = """SELECT * FROM t MATCH_RECOGNIZE(ORDER BY ts MEASURES COUNT(*) AS n
        ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.v > PREV(B.v))"""
    df = match_recognize(frame(spark, data), query, ranges=6, overlap=8)
    try:
        got = rows(df)
    except Exception as exc:  # noqa: BLE001 - the task's error arrives wrapped by Spark
        assert "empty neighbour" in str(exc)
        return
    assert canonical(got) == canonical(embedded("t", data, query))


SHAPES = {
    "skip to last": """SELECT * FROM trade MATCH_RECOGNIZE(ORDER BY ts
        MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS n ONE ROW PER MATCH
        AFTER MATCH SKIP TO LAST B PATTERN (A B+ C)
        DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price, 2))""",
    "empty matches": """SELECT * FROM trade MATCH_RECOGNIZE(ORDER BY ts
        MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS n ONE ROW PER MATCH
        PATTERN (B*) DEFINE B AS B.price < PREV(B.price))""",
    "all matches": """SELECT * FROM trade MATCH_RECOGNIZE(ORDER BY ts
        MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS n, LAST(C.volume) AS v
        ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW ALL MATCHES
        PATTERN (A B{1,3} C) DEFINE B AS B.price < A.price, C AS C.price > A.price)""",
    "no match number": """SELECT * FROM trade MATCH_RECOGNIZE(ORDER BY ts, symbol
        MEASURES FIRST(A.price) AS p, NEXT(C.price, 2) AS later ONE ROW PER MATCH
        PATTERN (A B+ C) DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))""",
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_pattern_shapes_across_ranges(trade_data, trade_frame, shape) -> None:
    """SKIP TO a variable, empty matches, ALL MATCHES, NEXT in a measure, two ORDER BY
    columns: six small ranges, rows equal to the embedded engine's."""
    query = SHAPES[shape]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SinglePartitionWarning)
        df = match_recognize(trade_frame, query, ranges=6, overlap=48)
    _check(df, trade_data, query)
