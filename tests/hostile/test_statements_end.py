"""Issue 34, "every statement ends": statements that took seconds and then failed, or
would have, answer here by the fast route; checked by what they return and by the route
they take, not by the clock (a generous guard only stops a regression from hanging)."""

from __future__ import annotations

import gc
import multiprocessing
import threading
import time

import numpy as np
import pytest

import matchsql
from matchsql.engine.compiled import batch, chunks
from matchsql.engine.compiled import compiled_matcher as compiled
from matchsql.errors import LimitExceededError
from matchsql.execution.workers.pool import WorkerPool
from matchsql.grammar import subqueries
from matchsql.plan.bound import ValueSet
from matchsql.runtime.cancel import Cancellation

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
        "(hash(i) % 80)::BIGINT AS k FROM range(3000) r(i)"
    )
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

NAVIGATION = (
    "SELECT * FROM {table} MATCH_RECOGNIZE (ORDER BY {key} MEASURES "
    "PREV(FIRST(B.price, 100000000), 100000000) AS n PATTERN (A B) DEFINE B AS true)"
)


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


@pytest.mark.parametrize(
    "rows_per_match",
    ["ONE ROW PER MATCH", "ALL ROWS PER MATCH", "ALL ROWS PER MATCH WITH UNMATCHED ROWS"],
)
@pytest.mark.parametrize(
    "measure",
    [
        "FIRST(B.price, 2)",
        "LAST(B.price, 1)",
        "PREV(FIRST(B.price, 3), 2)",
        "NEXT(LAST(A.price, 1), 3)",
        "LAST(U.price, 2)",
        "FIRST(U.price, 1)",
        "PREV(LAST(B.price, 2), 5)",
        "FIRST(A.price, 100000000)",
        "FINAL LAST(B.price, 1)",
    ],
)
def test_logical_offsets_over_variables_agree_on_every_path(
    con, rows_per_match: str, measure: str
) -> None:
    # FIRST/LAST(var.x, k > 0) are column-wise now (a rank search over the labels).
    shown = "p, v" if rows_per_match == "ONE ROW PER MATCH" else "p, id, v"  # no NaN x
    sql = (
        f"SELECT {shown} FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES {measure} "
        f"AS v {rows_per_match} PATTERN (A+ B{{1,4}} A*) SUBSET U = (A, B) "
        "DEFINE A AS price > 6, B AS price <= 6) ORDER BY ALL"
    )
    if rows_per_match == "ONE ROW PER MATCH":
        assert "measures: column-wise" in explain(con, sql)
    reference = on_path(con, "reference", sql)
    assert any(row[-1] is not None for row in reference) or "100000000" in measure
    for path in PATHS[1:]:
        assert on_path(con, path, sql) == reference, path


def test_a_reachable_offset_names_the_attempt_and_the_reach(con) -> None:
    # The row named used to be the first held row, before the partition (-99499999).
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES PREV(price, 2000) AS n "
        "PATTERN (A B) DEFINE B AS true)"
    )
    con.sql("SET max_buffered_rows = 1000")
    try:
        for path in PATHS:
            with pytest.raises(
                LimitExceededError,
                match=r"partition row [1-9]\d* and navigation reaching 2000 "
                r"rows before it",
            ):
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
    sql = (
        "SELECT * FROM trade MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
        "PATTERN (A B) DEFINE B AS price IN (SELECT price FROM trade))"
    )
    text = explain(con, sql)
    assert "IN (SELECT UNNEST(CAST('[" in text and "characters) AS DOUBLE[]" in text
    assert len(runs) == 1  # the subquery ran once for the statement
    runs.clear()
    got = rows(con, sql)
    assert len(runs) == 1
    assert len(got) == 250_000 and set(got) == {(2,)}
    con.close()


@pytest.mark.parametrize(
    "condition",
    [
        "x IN (SELECT x FROM o)",
        "s IN (SELECT s FROM o)",
        "d IN (SELECT d FROM o)",
        "ts IN (SELECT ts FROM o)",
        "price IN (SELECT k FROM o)",
        "k IN (SELECT d FROM o)",
        # Not one row's function: the reference evaluator looks the value up in the set.
        "(A.x + B.x) IN (SELECT x FROM o)",
        "(A.k + B.k) IN (SELECT d FROM o)",
        "A.s || B.s IN (SELECT s || s FROM o)",
        "(A.x + B.x) NOT IN (SELECT x FROM o)",
    ],
)
def test_folded_sets_answer_as_literal_lists(con, monkeypatch, condition: str) -> None:
    # NULL, NaN, quotes, commas and brackets in strings, decimals, timestamps and mixed
    # types: the folded set (DuckDB's list text, the evaluator's lookup) answers as the
    # literal IN list does.
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES "
        f"FIRST(A.id) AS f, count(*) AS n, {condition} AS m PATTERN (A B+) "
        f"DEFINE B AS {condition}) ORDER BY ALL"
    )
    monkeypatch.setattr(subqueries, "INLINE_VALUES", 0)
    folded = rows(con, sql)
    monkeypatch.setattr(subqueries, "INLINE_VALUES", 100_000)
    assert rows(con, sql) == folded


def test_value_set_rules() -> None:
    values = ValueSet([1.5, None, float("nan"), 2.0, 1.5])
    assert values.null and values.nan and values.kind is float
    assert values.values == frozenset({1.5, 2.0}) and len(values) == 4
    assert ValueSet(["a", 1]).kind is None


# -- WITH UNMATCHED ROWS column-wise -------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, condition",
    [
        ("A+ B", "A AS price > PREV(price), B AS price < 3"),
        ("A* C?", "A AS price > 6, C AS price < 1"),  # empty matches among unmatched rows
    ],
)
@pytest.mark.parametrize("skip", ["PAST LAST ROW", "TO NEXT ROW"])
def test_unmatched_rows_are_column_wise_and_agree(
    con, pattern: str, condition: str, skip: str
) -> None:
    # The compiled paths built every row of WITH UNMATCHED ROWS through the reference
    # evaluator: 585,862 rows took 12.7 s under load; unmatched rows are now empty
    # matches whose measures are NULL.
    sql = (
        f"SELECT p, id, n, m, c, total, nx FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id "
        "MEASURES count(*) AS n, MATCH_NUMBER() AS m, CLASSIFIER() AS c, sum(price) AS total, "
        f"NEXT(price, 2) AS nx ALL ROWS PER MATCH WITH UNMATCHED ROWS AFTER MATCH SKIP {skip} "
        f"PATTERN ({pattern}) DEFINE {condition}) ORDER BY ALL"
    )
    con.sql("SET execution_path = 'row_local'")
    try:
        assert "unmatched rows with NULL measures" in explain(con, sql)
    finally:
        con.sql("SET execution_path = 'auto'")
    reference = on_path(con, "reference", sql)
    # unmatched rows (n NULL) or empty matches (n 0) beside matched rows
    assert any(row[2] is None or row[2] == 0 for row in reference)
    assert any(row[2] for row in reference)
    for path in PATHS[1:]:
        assert on_path(con, path, sql) == reference, path


# -- interrupts reach every kind of work ----------------------------------------------------

#: A DuckDB subquery that would run for hours.
ENDLESS = "(SELECT max(a.x + b.x) FROM range(1000000) a(x), range(1000000) b(x))"


def interrupted_within_guard(con, sql: str, after: float = 0.3) -> None:
    """``sql`` interrupted ``after`` s in ends with the interrupt error (before the guard)."""
    timer = threading.Timer(after, con.interrupt)
    timer.start()
    began = time.monotonic()
    try:
        with pytest.raises(matchsql.ExecutionError, match="^statement interrupted$"):
            con.sql(sql).fetchall()
    finally:
        timer.cancel()
        timer.join()
    assert time.monotonic() - began < GUARD_SECONDS


def test_interrupt_stops_a_subquery_while_the_statement_is_analysed(con) -> None:
    # The subquery ran on analysis' own cursor, which no interrupt reached: it ran to its
    # end (2.7 s after the interrupt, for one of 20,000 x 20,000 rows).
    rows(
        con,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n "
        "PATTERN (A B) DEFINE B AS price < (SELECT 3))",
    )  # imports done before
    interrupted_within_guard(
        con,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES "
        f"count(*) AS n PATTERN (A B) DEFINE B AS price < {ENDLESS})",
    )
    assert rows(con, "SELECT 1") == [(1,)]  # the connection goes on


def test_compiled_matches_are_pended_in_blocks_between_interrupt_checks(con, monkeypatch) -> None:
    # One conversion of all of a run's labels held an interrupt for a second; blocks of
    # LABEL_BLOCK labels are pended with the cancellation checked between them.
    blocks: list[int] = []
    pend = compiled.CompiledMatcher._matches

    def first_interrupts(self, records, labels) -> None:
        blocks.append(len(records))
        if len(blocks) == 1:
            con.interrupt()
        pend(self, records, labels)

    monkeypatch.setattr(compiled, "LABEL_BLOCK", 64)
    monkeypatch.setattr(compiled.CompiledMatcher, "_matches", first_interrupts)
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n "
        "ALL ROWS PER MATCH PATTERN (A+ B) DEFINE A AS price > 1, B AS price <= 1)"
    )
    con.sql("SET execution_path = 'row_local'")
    try:
        with pytest.raises(matchsql.ExecutionError, match="^statement interrupted$"):
            con.sql(sql).fetchall()
    finally:
        con.sql("SET execution_path = 'auto'")
    assert len(blocks) == 1  # the next block saw the interrupt


def test_joined_labels_are_copied_between_interrupt_checks(monkeypatch) -> None:
    monkeypatch.setattr(chunks, "COPY_LABELS", 10)
    run = chunks.Run(0, 0, 0, chunks.NO_RECORDS, chunks.NO_LABELS)
    records = np.array([[0, 0, 50, 1, 0]], np.int64)
    pieces = [(records, np.arange(50, dtype=np.int16))] * 3
    checks: list[int] = []
    joined = chunks.joined(run, pieces, lambda: checks.append(1))
    assert len(checks) == 15 and list(joined.labels[:60]) == [*range(50), *range(10)]
    token = Cancellation()
    token.cancel()
    with pytest.raises(matchsql.ExecutionError, match="interrupted"):
        chunks.joined(run, pieces, token.check)


def test_a_starting_worker_pool_stops_at_the_interrupt() -> None:
    # Starting the pool (seconds on a busy machine) waited to its end: 3-4 s per interrupt.
    token = Cancellation()
    token.cancel()
    with pytest.raises(matchsql.ExecutionError, match="interrupted"):
        WorkerPool(2, cancel=token)
    assert not [
        child
        for child in multiprocessing.active_children()
        if child.name.startswith("matchsql-worker")
    ]


def test_batched_all_rows_output_in_blocks_agrees(con, monkeypatch) -> None:
    # Whole partitions matched together output ALL ROWS in blocks of LABEL_BLOCK rows,
    # the interrupt checked between (one output of a batch's rows held it 180 ms).
    sql = (
        "SELECT p, id, n, fa FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES "
        "count(*) AS n, FIRST(A.price) AS fa ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW "
        "PATTERN (A+ B) DEFINE A AS price > 2, B AS price <= 2) ORDER BY p, id, n"
    )
    con.sql("SET execution_path = 'row_local'")
    try:
        assert "batched: yes" in explain(con, sql)
    finally:
        con.sql("SET execution_path = 'auto'")
    monkeypatch.setattr(batch, "LABEL_BLOCK", 50)
    assert on_path(con, "row_local", sql) == on_path(con, "reference", sql)


def test_the_engine_is_frozen_out_of_full_collections(con) -> None:
    # A full collection walked the engine's objects: 85 ms where no interrupt can land.
    for _ in range(2):
        rows(
            con,
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n "
            "PATTERN (A B) DEFINE B AS price < PREV(price))",
        )
    assert gc.get_freeze_count() > 0
