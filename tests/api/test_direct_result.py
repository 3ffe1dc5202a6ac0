"""``SELECT * FROM t MATCH_RECOGNIZE (...)`` returns the matches without an outer
DuckDB query: same rows, same Arrow schema and same errors as the DuckDB route."""

from __future__ import annotations

import pytest

import matchsql
from matchsql.errors import ExecutionError
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.session.query_shape import direct_select

QUERIES = [
    """SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
         MEASURES MATCH_NUMBER() AS mn, FIRST(ts) AS t0, LAST(price) AS p, CLASSIFIER() AS c,
                  COUNT(*) AS n, AVG(B.price) AS avg_b
         PATTERN (A B+ C+) DEFINE B AS price < PREV(price), C AS price > PREV(price))""",
    """SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
         MEASURES RUNNING COUNT(*) AS k ALL ROWS PER MATCH
         PATTERN (A B{1,3}) DEFINE B AS price < A.price)""",
    # One day of trades (about 1/20 of the table): unpartitioned, this one is the
    # slow one on the whole table, and the rows' number does not matter here.
    """SELECT * FROM (SELECT symbol, ts, CAST(price AS DECIMAL(10, 2)) AS d FROM trade
                    WHERE ts < TIMESTAMP '2006-01-04')
         MATCH_RECOGNIZE (ORDER BY ts MEASURES LAST(d) AS last_d, symbol AS s
         ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) DEFINE B AS d > A.d)""",
]


@pytest.fixture(scope="module")
def con():
    connection = matchsql.connect()
    yield connection
    connection.close()


@pytest.mark.parametrize("sql", QUERIES)
def test_same_rows_and_schema_as_through_duckdb(con, sql: str) -> None:
    direct = con.sql(sql).arrow()
    routed = con.sql(f"SELECT * FROM ({sql}) AS sub").arrow()
    assert direct.num_rows > 0
    assert direct.schema.equals(routed.schema)
    assert direct.equals(routed)


def test_runtime_error_is_a_matchsql_error_and_the_connection_goes_on(con) -> None:
    sql = (
        "SELECT * FROM trade MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n "
        "AFTER MATCH SKIP TO LAST B PATTERN (A B?) DEFINE B AS price < 0)"
    )
    with pytest.raises(ExecutionError, match="SKIP TO LAST B failed"):
        con.sql(sql).fetchall()
    assert con.sql("SELECT 42").fetchall() == [(42,)]


@pytest.mark.parametrize(
    ("sql", "direct"),
    [
        (
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x MEASURES COUNT(*) AS n PATTERN (A) "
            "DEFINE A AS x > 0)",
            True,
        ),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x MEASURES COUNT(*) AS n PATTERN (A) "
            "DEFINE A AS x > 0) AS m",
            True,
        ),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x MEASURES COUNT(*) AS n PATTERN (A) "
            "DEFINE A AS x > 0) AS m(k)",
            False,
        ),
        (
            "SELECT n FROM t MATCH_RECOGNIZE (ORDER BY x MEASURES COUNT(*) AS n PATTERN (A) "
            "DEFINE A AS x > 0)",
            False,
        ),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x MEASURES COUNT(*) AS n PATTERN (A) "
            "DEFINE A AS x > 0) ORDER BY n",
            False,
        ),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x MEASURES COUNT(*) AS n PATTERN (A) "
            "DEFINE A AS x > 0) WHERE n > 1",
            False,
        ),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x MEASURES COUNT(*) AS n PATTERN (A) "
            "DEFINE A AS x > 0), u",
            False,
        ),
    ],
)
def test_only_the_bare_form_bypasses_duckdb(sql: str, direct: bool) -> None:
    tree = parse(sql)[0]
    nodes = list(tree.find_all(MatchRecognizeTable))
    assert (direct_select(tree, nodes) is not None) == direct
