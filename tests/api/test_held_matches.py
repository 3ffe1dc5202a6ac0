"""Statements around a MATCH_RECOGNIZE read its matches before they run (session/held.py):
the same rows as when the matches stream into the running statement, errors
as matchsql errors, nothing run before the first read, LIMIT still streaming."""

from __future__ import annotations

import pytest

import matchsql
from matchsql.errors import LimitExceededError
from matchsql.session import held

MR = (
    "SELECT * FROM t MATCH_RECOGNIZE(PARTITION BY p ORDER BY ts MEASURES "
    "MATCH_NUMBER() AS mn, FIRST(x) AS fx, COUNT(*) AS n PATTERN (A B+ C+) "
    "DEFINE B AS x < PREV(x), C AS x > PREV(x))"
)

AROUND = [
    f"SELECT count(*), sum(n) FROM ({MR})",
    f"SELECT s.label, count(*), max(m.fx) FROM ({MR}) m JOIN labels s ON s.p = m.p "
    "GROUP BY s.label ORDER BY s.label",
    f"SELECT p, count(*), sum(n) FROM ({MR}) GROUP BY p ORDER BY p",
    f"WITH m AS ({MR}) SELECT p, max(mn) FROM m GROUP BY p ORDER BY p",
    f"SELECT * FROM ({MR}) ORDER BY p, mn",
]


@pytest.fixture
def con():
    con = matchsql.connect(demo=False, threads=1)
    con.sql(
        "CREATE TABLE t AS SELECT 's' || (range % 4) AS p, range AS ts, "
        "(range * 7919) % 11 AS x FROM range(5000)"
    )
    con.sql(
        "CREATE TABLE labels AS SELECT 's' || range AS p, 'label ' || (range % 2) AS label "
        "FROM range(4)"
    )
    return con


@pytest.fixture
def holds(monkeypatch) -> list[int]:
    """How many match streams were held, per call of held.hold."""
    calls: list[int] = []
    original = held.hold

    def spy(reader):
        calls.append(1)
        return original(reader)

    monkeypatch.setattr(held, "hold", spy)
    return calls


def _streamed(con, sql: str) -> list[tuple]:
    held.ENABLED = False
    try:
        return con.sql(sql).fetchall()
    finally:
        held.ENABLED = True


@pytest.mark.parametrize("sql", AROUND)
def test_held_matches_give_the_streamed_rows(con, holds, sql):
    expected = _streamed(con, sql)
    assert not holds
    assert con.sql(sql).fetchall() == expected
    assert len(holds) == 1
    assert expected and expected[0][0] is not None


@pytest.mark.parametrize("sql", AROUND[:3])
def test_matches_over_the_budget_go_on_streaming(con, monkeypatch, sql):
    expected = _streamed(con, sql)
    monkeypatch.setattr(held, "HELD_BYTES", 64)  # one batch: the rest streams
    assert con.sql(sql).fetchall() == expected


def test_nothing_runs_before_the_first_read(con, holds):
    result = con.sql(AROUND[0])
    assert not holds
    assert result.fetchall()[0][0] > 0
    assert len(holds) == 1


def test_a_statement_with_limit_streams(con, holds):
    sql = f"SELECT * FROM ({MR}) WHERE n > 2 LIMIT 3"
    rows = con.sql(sql).fetchall()
    assert not holds
    assert len(rows) == 3 and all(r[3] > 2 for r in rows)


def test_create_table_as_holds_the_matches_first(con, holds):
    con.sql(f"CREATE TABLE counts AS SELECT p, count(*) AS c FROM ({MR}) GROUP BY p")
    assert len(holds) == 1
    assert (
        con.sql("SELECT sum(c) FROM counts").fetchall()
        == con.sql(f"SELECT count(*) FROM ({MR})").fetchall()
    )


def test_an_error_while_held_is_a_matchsql_error(con):
    con.sql("SET max_buffered_rows = 10")
    sql = (
        "SELECT count(*) FROM (SELECT * FROM t MATCH_RECOGNIZE(ORDER BY ts "
        "MEASURES COUNT(*) AS n PATTERN (A+ B) DEFINE A AS true, B AS x = 100))"
    )
    with pytest.raises(LimitExceededError, match="max_buffered_rows=10"):
        con.sql(sql).fetchall()


def test_nested_match_recognize_around_another(con):
    sql = (
        f"SELECT count(*) FROM (SELECT * FROM ({MR}) MATCH_RECOGNIZE(PARTITION BY p "
        "ORDER BY mn MEASURES COUNT(*) AS k PATTERN (A B) DEFINE B AS n > A.n))"
    )
    assert con.sql(sql).fetchall() == _streamed(con, sql)
