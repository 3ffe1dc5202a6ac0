"""Issue 34, "every statement ends": statements that took seconds and then failed, or
would have, answer here by the fast route; checked by what they return and by the route
they take, not by the clock (a generous guard only stops a regression from hanging)."""

from __future__ import annotations

import time

import pytest

import matchsql
from matchsql.errors import LimitExceededError
from matchsql.grammar import subqueries
from matchsql.plan.bound import ValueSet

GUARD_SECONDS = 60
PATHS = ("reference", "row_local", "registers")


@pytest.fixture(scope="module")
def con():
    connection = matchsql.connect(demo=False)
    connection.duckdb.execute(
        "CREATE TABLE t AS SELECT i AS id, i % 3 AS p, (hash(i) % 50)::DOUBLE / 4 AS price, "
        "CASE WHEN i % 17 = 0 THEN NULL WHEN i % 13 = 0 THEN 'nan'::DOUBLE "
        "ELSE (hash(i) % 50)::DOUBLE / 4 END AS x, "
        "'S' || (hash(i) % 60) || CASE WHEN i % 7 = 0 THEN ''',\"[x]' ELSE '' END AS s, "
        "((hash(i) % 70) / 8)::DECIMAL(10,3) AS d, "
        "TIMESTAMP '2024-01-01' + INTERVAL (hash(i) % 90) MINUTE AS ts, "
        "(hash(i) % 80)::BIGINT AS k FROM range(3000) r(i)")
    connection.duckdb.execute("CREATE TABLE o AS SELECT * FROM t WHERE id % 2 = 0")
    yield connection
    connection.close()


def rows(con, sql: str) -> list[tuple]:
    began = time.monotonic()
    got = con.sql(sql).fetchall()
    assert time.monotonic() - began < GUARD_SECONDS
    return got


def explain(con, sql: str) -> str:
    return "\n".join(r[0] for r in con.sql("EXPLAIN " + sql).fetchall())


def on_path(con, path: str, sql: str) -> list[tuple]:
    con.sql(f"SET execution_path = '{path}'")
    try:
        return rows(con, sql)
    finally:
        con.sql("SET execution_path = 'auto'")


# -- navigation offsets past every match ---------------------------------------------------

NAVIGATION = ("SELECT * FROM {table} MATCH_RECOGNIZE (ORDER BY {key} MEASURES "
              "PREV(FIRST(B.price, 100000000), 100000000) AS n PATTERN (A B) DEFINE B AS true)")


def test_offsets_past_every_match_give_null_on_the_demo_table() -> None:
    # Took 11.5 s, then failed on max_buffered_rows naming "partition row -99499999": the
    # PREV was taken to reach 1e8 rows before every match (it never leaves the match),
    # and FIRST with an offset sent every match through the reference evaluator.
    con = matchsql.connect()
    sql = NAVIGATION.format(table="trade", key="ts")
    assert "measures: column-wise" in explain(con, sql)
    got = rows(con, sql)
    assert len(got) == 250_000 and set(got) == {(None,)}
    con.close()


@pytest.mark.parametrize("path", PATHS)
def test_offsets_past_every_match_hold_no_rows(con, path: str) -> None:
    # Nothing before a match is reachable, so a partition holds the open match only.
    con.sql("SET max_buffered_rows = 10")
    try:
        got = on_path(con, path, NAVIGATION.format(table="t", key="id"))
    finally:
        con.sql("RESET max_buffered_rows")
    assert len(got) == 1500 and set(got) == {(None,)}


@pytest.mark.parametrize("rows_per_match", ["ONE ROW PER MATCH", "ALL ROWS PER MATCH",
                                            "ALL ROWS PER MATCH WITH UNMATCHED ROWS"])
@pytest.mark.parametrize("measure", [
    "FIRST(B.price, 2)", "LAST(B.price, 1)", "PREV(FIRST(B.price, 3), 2)",
    "NEXT(LAST(A.price, 1), 3)", "LAST(U.price, 2)", "FIRST(U.price, 1)",
    "PREV(LAST(B.price, 2), 5)", "FIRST(A.price, 100000000)", "FINAL LAST(B.price, 1)",
])
def test_logical_offsets_over_variables_agree_on_every_path(con, rows_per_match: str,
                                                            measure: str) -> None:
    # FIRST/LAST(var.x, k > 0) are column-wise now (a rank search over the labels).
    shown = "p, v" if rows_per_match == "ONE ROW PER MATCH" else "p, id, v"  # no NaN x
    sql = (f"SELECT {shown} FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES {measure} "
           f"AS v {rows_per_match} PATTERN (A+ B{{1,4}} A*) SUBSET U = (A, B) "
           "DEFINE A AS price > 6, B AS price <= 6) ORDER BY ALL")
    if rows_per_match == "ONE ROW PER MATCH":
        assert "measures: column-wise" in explain(con, sql)
    reference = on_path(con, "reference", sql)
    assert any(row[-1] is not None for row in reference) or "100000000" in measure
    for path in PATHS[1:]:
        assert on_path(con, path, sql) == reference, path


def test_a_reachable_offset_names_the_attempt_and_the_reach(con) -> None:
    # The row named used to be the first held row, before the partition (-99499999).
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES PREV(price, 2000) AS n "
           "PATTERN (A B) DEFINE B AS true)")
    con.sql("SET max_buffered_rows = 1000")
    try:
        for path in PATHS:
            with pytest.raises(LimitExceededError,
                               match=r"partition row [1-9]\d* and navigation reaching 2000 "
                                     r"rows before it"):
                on_path(con, path, sql)
    finally:
        con.sql("RESET max_buffered_rows")


# -- IN (SELECT ...) over many values ------------------------------------------------------


def test_in_subquery_of_the_demo_table_is_one_folded_set(monkeypatch) -> None:
    # 10,960 distinct prices were 10,960 literal nodes: 8.7 s of typing, push-down and
    # copies of the expression before the first row, under load.
    runs: list[str] = []
    run = subqueries._Folder.run

    def counted(self, node, text, values=None):
        runs.append(text)
        return run(self, node, text, values)

    monkeypatch.setattr(subqueries._Folder, "run", counted)
    con = matchsql.connect()
    sql = ("SELECT * FROM trade MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
           "PATTERN (A B) DEFINE B AS price IN (SELECT price FROM trade))")
    text = explain(con, sql)
    assert "IN (SELECT UNNEST(CAST('[" in text and "characters) AS DOUBLE[]" in text
    assert len(runs) == 1  # the subquery ran once for the statement
    runs.clear()
    got = rows(con, sql)
    assert len(runs) == 1
    assert len(got) == 250_000 and set(got) == {(2,)}
    con.close()


@pytest.mark.parametrize("condition", [
    "x IN (SELECT x FROM o)", "s IN (SELECT s FROM o)", "d IN (SELECT d FROM o)",
    "ts IN (SELECT ts FROM o)", "price IN (SELECT k FROM o)", "k IN (SELECT d FROM o)",
    # Not one row's function: the reference evaluator looks the value up in the set.
    "(A.x + B.x) IN (SELECT x FROM o)", "(A.k + B.k) IN (SELECT d FROM o)",
    "A.s || B.s IN (SELECT s || s FROM o)", "(A.x + B.x) NOT IN (SELECT x FROM o)",
])
def test_folded_sets_answer_as_literal_lists(con, monkeypatch, condition: str) -> None:
    # NULL, NaN, quotes, commas and brackets in strings, decimals, timestamps and mixed
    # types: the folded set (DuckDB's list text, the evaluator's lookup) answers as the
    # literal IN list does.
    sql = (f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES "
           f"FIRST(A.id) AS f, count(*) AS n, {condition} AS m PATTERN (A B+) "
           f"DEFINE B AS {condition}) ORDER BY ALL")
    monkeypatch.setattr(subqueries, "INLINE_VALUES", 0)
    folded = rows(con, sql)
    monkeypatch.setattr(subqueries, "INLINE_VALUES", 100_000)
    assert rows(con, sql) == folded


def test_value_set_rules() -> None:
    values = ValueSet([1.5, None, float("nan"), 2.0, 1.5])
    assert values.null and values.nan and values.kind is float
    assert values.values == frozenset({1.5, 2.0}) and len(values) == 4
    assert ValueSet(["a", 1]).kind is None
