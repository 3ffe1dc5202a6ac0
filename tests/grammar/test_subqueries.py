"""Uncorrelated subqueries in MEASURES/DEFINE: the constant keeps DuckDB's value and type.

Each subquery value goes through the fold (a literal or a CAST of one) and
back out as a measure; it must equal what DuckDB returns for the same
SELECT. Types without a literal form are refused with a located error
before any value is fetched.
"""

from __future__ import annotations

import pytest

import matchsql
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.grammar.subqueries import fold_subqueries


@pytest.fixture(scope="module")
def con() -> matchsql.Connection:
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE t AS SELECT * FROM (VALUES (1, 10), (2, 8)) v(id, x)")
    return con


def measure_query(expr: str) -> str:
    return (
        f"SELECT m FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES (SELECT {expr}) AS m "
        "ONE ROW PER MATCH PATTERN (A) DEFINE A AS id = 1)"
    )


@pytest.mark.parametrize(
    "expr",
    [
        "1::HUGEINT",
        "1::UBIGINT",
        "-7::TINYINT",
        "9223372036854775807::BIGINT",
        "-3",
        "2.5::DOUBLE",
        "0.1::FLOAT",
        "1.25::DECIMAL(5,2)",
        "DATE '2024-01-02'",
        "TIMESTAMP '2024-01-02 03:04:05.123456'",
        "NULL",
        "NULL::DECIMAL(5,2)",
        "'it''s'",
        "true",
        "max(x) FROM t",
    ],
)
def test_constant_keeps_duckdb_value_and_type(con: matchsql.Connection, expr: str) -> None:
    ours = con.sql(measure_query(expr)).arrow()
    duck = con.duckdb.sql(f"SELECT (SELECT {expr}) AS m").to_arrow_table()
    assert ours.schema.field("m").type == duck.schema.field("m").type
    assert ours.to_pylist() == duck.to_pylist()


@pytest.mark.parametrize(
    ("expr", "kind"),
    [
        ("[1, 2]", "INTEGER[]"),
        ("INTERVAL 1 DAY", "INTERVAL"),
        ("TIME '01:02:03'", "TIME"),
    ],
)
def test_types_without_a_literal_are_refused(
    con: matchsql.Connection, expr: str, kind: str
) -> None:
    with pytest.raises(matchsql.SemanticError, match=f"type {kind.replace('[', '.')}"):
        con.sql(measure_query(expr)).fetchall()


def test_fold_rewrites_in_place(con: matchsql.Connection) -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES (SELECT 2::BIGINT) AS m "
        "PATTERN (A) DEFINE A AS x IN (SELECT 8 UNION SELECT NULL) "
        "AND EXISTS (SELECT 1) AND x IN (SELECT 1 WHERE false))"
    )
    node = next(parse(sql)[0].find_all(MatchRecognizeTable))
    fold_subqueries(node, {"A"}, sql, con.duckdb)
    measure = node.args["measures"][0].this.sql(dialect="duckdb")
    define = node.args["define"][0].expression.sql(dialect="duckdb")
    assert measure == "CAST('2' AS BIGINT)"
    assert "SELECT" not in define
    assert "EXISTS" not in define and "TRUE" in define and "FALSE" in define
    assert "IN (8, NULL)" in define or "IN (NULL, 8)" in define


def test_subquery_values_are_fetched_once_per_query(con: matchsql.Connection) -> None:
    # random() differs per evaluation: one evaluation gives every row the same value
    query = (
        "SELECT count(DISTINCT m) FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES "
        "(SELECT random()) AS m ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS true)"
    )
    assert con.sql(query).fetchall() == [(1,)]
