"""A Python exception inside the engine reaches the user as a one-line matchsql.Error.

Each test breaks one engine function on purpose (monkeypatch) and checks
what the user sees: an :class:`ExecutionError` naming the cause in one line,
never a traceback, whichever route the rows take (straight out of the
matcher, or through an outer DuckDB query that reads the match stream).
"""

from __future__ import annotations

import pytest

import matchsql
from matchsql.engine import planner
from matchsql.errors import one_line

MR = (
    "t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS c ALL ROWS PER MATCH "
    "PATTERN (A+) DEFINE A AS x > 0)"
)
QUERIES = {
    "direct": f"SELECT * FROM {MR}",
    "through_duckdb": f"SELECT sum(c) FROM {MR}",
    "nested": f"SELECT * FROM (SELECT * FROM {MR}) WHERE c > 1",
}


def broken(*args: object, **kwargs: object) -> object:
    raise RuntimeError("planner exploded\n  second line of detail")


@pytest.fixture
def con() -> matchsql.Connection:
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE t AS SELECT * FROM (VALUES (1, 1), (2, 2), (3, 3)) v(id, x)")
    return con


def assert_one_line(err: matchsql.Error) -> None:
    text = str(err)
    assert "\n" not in text, text
    assert "Traceback" not in text
    assert 'File "' not in text
    assert "RuntimeError" in text and "planner exploded" in text


@pytest.mark.parametrize("name", sorted(QUERIES))
@pytest.mark.parametrize("target", ["choose_path", "new_partition_matcher"])
def test_planner_failure_is_one_line(con, monkeypatch, name: str, target: str) -> None:
    monkeypatch.setattr(planner, target, broken)
    with pytest.raises(matchsql.ExecutionError) as info:
        result = con.sql(QUERIES[name])
        assert result is not None
        result.fetchall()
    assert_one_line(info.value)


def test_connection_still_works_after_an_internal_error(con, monkeypatch) -> None:
    monkeypatch.setattr(planner, "new_partition_matcher", broken)
    with pytest.raises(matchsql.ExecutionError):
        con.sql(QUERIES["through_duckdb"]).fetchall()
    monkeypatch.undo()
    assert con.sql(QUERIES["through_duckdb"]).fetchall() == [(6,)]


def test_one_line_keeps_the_cause_and_drops_the_traceback() -> None:
    text = (
        "Invalid Input Error: reading the stream failed: boom. "
        'Detail: Python exception: Traceback (most recent call last):\n  File "x.py"'
    )
    assert one_line(text) == "Invalid Input Error: reading the stream failed: boom."
    assert one_line("first\nsecond") == "first"
