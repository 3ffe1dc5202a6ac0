"""Each statement's errors are its own (matchsql/session/failure.py).

An error raised inside an Arrow reader that DuckDB reads (a MATCH_RECOGNIZE's
matches) reaches matchsql as DuckDB's error with only the text; the statement's
own :class:`~matchsql.session.failure.StatementFailure` keeps the matchsql error.
Before it, one list on the executor held it: a statement that failed in DuckDB
before running its own readers reported the previous statement's matcher error,
and a Result read after the next statement began read that statement's list.
"""

from __future__ import annotations

import duckdb
import pytest

import matchsql
from matchsql.config import Config
from matchsql.session.executor import Executor

TABLE = (
    "CREATE TABLE t AS SELECT range AS i, "
    "CASE WHEN range < 5 THEN '1' ELSE 'x' END AS s FROM range(10)"
)
#: A direct MATCH_RECOGNIZE whose DEFINE divides by zero at i = 5.
DIVIDES = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY i MEASURES count(*) AS n "
    "ONE ROW PER MATCH PATTERN (a+) DEFINE a AS 10 % (i - 5) > 0)"
)
#: The same through DuckDB (a projection): its matches are read when its rows are.
DIVIDES_IN_DUCKDB = DIVIDES.replace("SELECT *", "SELECT n + 1 AS m")
#: A MATCH_RECOGNIZE over a temporary view that fails in DuckDB (a cast) while the
#: statement is set up, before any matcher runs.
CASTS = (
    "SELECT * FROM v MATCH_RECOGNIZE (ORDER BY i MEASURES count(*) AS n "
    "ONE ROW PER MATCH PATTERN (a+) DEFINE a AS c > 0)"
)
#: Another statement whose matchers fail, at i = 3 of a longer text.
OTHER = (
    "SELECT n * 2 AS twice FROM t MATCH_RECOGNIZE (ORDER BY i MEASURES count(*) AS n "
    "ONE ROW PER MATCH PATTERN (a+) DEFINE a AS 7 % (i - 3) > 0)"
)


def pointed_at(err: matchsql.Error) -> str:
    assert err.sql is not None and err.line is not None and err.column is not None
    return err.sql.splitlines()[err.line - 1][err.column - 1 :]


def test_a_statement_does_not_report_the_previous_statements_error():
    # Wrong before: the cast error came back as the division by zero of the statement before.
    con = matchsql.connect(demo=False)
    con.sql(TABLE)
    con.sql("CREATE TEMP VIEW v AS SELECT i, CAST(s AS INT) AS c FROM t")
    with pytest.raises(matchsql.ExecutionError, match="Division by zero"):
        con.sql(DIVIDES).fetchall()
    with pytest.raises(matchsql.Error, match="Could not convert string 'x'") as caught:
        con.sql(CASTS)
    assert "Division" not in str(caught.value)


def test_a_result_read_after_the_next_statement_reports_its_own_error():
    # Through the API the next statement closes an unfinished Result (one open result
    # per connection, as in DuckDB); the executor's record of the open Result is
    # dropped here so that this one is read after the next statement ran. Before, its
    # error was the next statement's (one list for both), located in the next text.
    executor = Executor(duckdb.connect(), Config())
    try:
        executor.run(TABLE)
        first = executor.run(DIVIDES_IN_DUCKDB)
        executor._open_result = None  # keep it open through the next statement
        with pytest.raises(matchsql.ExecutionError, match=r"7 % \(i - 3\)"):
            executor.run(OTHER).fetchall()
        with pytest.raises(matchsql.ExecutionError, match="Division by zero") as caught:
            first.fetchall()
        assert caught.value.sql == DIVIDES_IN_DUCKDB
        assert pointed_at(caught.value).startswith("i - 5) > 0)")
    finally:
        executor.close()


def test_the_direct_route_reports_its_own_error_after_the_next_statement():
    executor = Executor(duckdb.connect(), Config())
    try:
        executor.run(TABLE)
        first = executor.run(DIVIDES)
        executor._open_result = None
        executor.run("SELECT 42").fetchall()
        with pytest.raises(matchsql.ExecutionError, match="Division by zero") as caught:
            first.fetchall()
        assert pointed_at(caught.value).startswith("i - 5) > 0)")
    finally:
        executor.close()
