"""Column-wise COUNT/SUM/AVG/MIN/MAX measures equal the reference evaluator's.

Random queries from the property strategies get a MEASURES list of
aggregates over columns, variables and subsets, RUNNING and FINAL; every
compiled path must give the reference's rows, in one batch and split into
random batches. Fixed cases cover what random small integers do not reach:
sums past 2**53 (exact Python integers), strings and dates for MIN/MAX, and
that such measures really are computed column-wise (EXPLAIN says so).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

import matchsql
from tests.paths.test_random_paths import SETTINGS, _check
from tests.property.strategies import partitions, queries

AGGREGATES = (
    "SUM(x) AS s, AVG(U.y) AS a, MIN(B.x) AS lo, MAX(y) AS hi, COUNT(A.x) AS c, "
    "FINAL MAX(U.x) AS fm, FINAL AVG(x) AS fa, RUNNING SUM(B.y) AS sb, "
    "MIN(x) AS mx, COUNT(y) AS cy"
)


@SETTINGS
@given(sql=queries(), rows=partitions, data=st.data())
def test_random_aggregate_measures(sql: str, rows: list[dict], data: st.DataObject) -> None:
    head, _, rest = sql.partition("MEASURES ")
    _, _, tail = rest.partition("\n")
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=3))
    _check(f"{head}MEASURES {AGGREGATES}\n{tail}", rows, splits)


def run(con: matchsql.Connection, query: str, path: str) -> list[tuple]:
    con.sql(f"SET execution_path = '{path}'")
    result = con.sql(query)
    assert result is not None
    return result.fetchall()


@pytest.fixture
def con() -> matchsql.Connection:
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE w (id INTEGER, big BIGINT, s VARCHAR, d DATE)")
    con.sql(
        "INSERT INTO w VALUES "
        "(1, 9007199254740993, 'pear', DATE '2024-03-01'), "
        "(2, 9007199254740993, NULL, DATE '2023-12-31'), "
        "(3, -5, 'apple', NULL), "
        "(4, 7, 'quince', DATE '2024-01-15')"
    )
    return con


QUERY = (
    "SELECT {key}s1, a1, lo, hi, ld FROM w MATCH_RECOGNIZE (ORDER BY id "
    "MEASURES sum(big) AS s1, avg(B.big) AS a1, min(s) AS lo, max(B.s) AS hi, "
    "min(d) AS ld {rows} PATTERN (A B+) DEFINE A AS true)"
)


@pytest.mark.parametrize("path", ["registers", "row_local"])
@pytest.mark.parametrize("rows", ["ALL ROWS PER MATCH", "ONE ROW PER MATCH"])
def test_wide_values_strings_and_dates(con: matchsql.Connection, path: str, rows: str) -> None:
    key = "id, " if rows.startswith("ALL") else ""
    query = QUERY.format(key=key, rows=rows) + (" ORDER BY id" if key else "")
    expected = run(con, query, "reference")
    assert run(con, query, path) == expected
    two = 2 * 9007199254740993
    if rows.startswith("ALL"):
        # one match A B B B: running values, read off the table by hand
        assert expected == [
            (1, Decimal(9007199254740993), None, "pear", None, dt.date(2024, 3, 1)),
            (2, Decimal(two), 9007199254740993.0, "pear", None, dt.date(2023, 12, 31)),
            # AVG divides the exact sum as a double, as DuckDB does: float(sum) / count
            (
                3,
                Decimal(two - 5),
                float(9007199254740993 - 5) / 2,
                "apple",
                "apple",
                dt.date(2023, 12, 31),
            ),
            (
                4,
                Decimal(two + 2),
                float(9007199254740993 + 2) / 3,
                "apple",
                "quince",
                dt.date(2023, 12, 31),
            ),
        ]


def test_explain_says_column_wise(con: matchsql.Connection) -> None:
    con.sql("SET execution_path = 'registers'")
    query = QUERY.format(key="", rows="ALL ROWS PER MATCH").replace(
        "SELECT s1, a1, lo, hi, ld", "SELECT *"
    )
    lines = [r[0] for r in con.sql("EXPLAIN " + query).fetchall()]
    assert any("output: column-wise rows" in line for line in lines), lines


FLOAT_QUERY = (
    "SELECT * FROM f MATCH_RECOGNIZE (PARTITION BY p ORDER BY id "
    "MEASURES sum(v) AS s, avg(A.v) AS a, FINAL sum(B.v) AS fb, count(v) AS c {rows} "
    "AFTER MATCH SKIP {skip} PATTERN ({pattern}) DEFINE A AS v > 0, B AS v <= PREV(v))"
)
finite = st.one_of(
    st.none(),
    st.floats(-1e6, 1e6, allow_nan=False, width=64),
    st.sampled_from([0.1, 0.2, 0.3, 1e16, -1e16, 1.0]),
)


@SETTINGS
@given(
    values=st.lists(st.tuples(st.sampled_from("pq"), finite), max_size=12),
    rows=st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH"]),
    skip=st.sampled_from(["PAST LAST ROW", "TO NEXT ROW"]),
    pattern=st.sampled_from(["A+ B*", "(A | B)+", "A B+", "A* B?"]),
)
def test_float_sums_round_as_the_reference(
    values: list, rows: str, skip: str, pattern: str
) -> None:
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE f (p VARCHAR, id INTEGER, v DOUBLE)")
    if values:
        con.duckdb.executemany(
            "INSERT INTO f VALUES (?, ?, ?)", [(p, i, v) for i, (p, v) in enumerate(values)]
        )
    query = FLOAT_QUERY.format(rows=rows, skip=skip, pattern=pattern) + " ORDER BY ALL"
    expected = run(con, query, "reference")
    for path in ("registers", "row_local"):
        try:
            got = run(con, query, path)
        except matchsql.ExecutionError as exc:
            assert "does not apply" in str(exc)
            continue
        assert got == expected, (path, query)


def test_explain_float_sums_column_wise() -> None:
    con = matchsql.connect(demo=False, execution_path="registers")
    con.sql("CREATE TABLE f (p VARCHAR, id INTEGER, v DOUBLE)")
    query = FLOAT_QUERY.format(rows="ALL ROWS PER MATCH", skip="PAST LAST ROW", pattern="A+ B*")
    lines = [r[0] for r in con.sql("EXPLAIN " + query).fetchall()]
    assert any("output: column-wise rows" in line for line in lines), lines
