"""Carets at the right place: an unknown PARTITION BY or ORDER BY column, a PATTERN whose
``)`` is missing before DEFINE, and the errors DEFINE and MEASURES raise while they run
(a string that does not compare, a division by zero) point at the text that caused them."""

from __future__ import annotations

import pytest

import matchsql

BASE = (
    "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES count(*) AS n ONE ROW PER MATCH PATTERN (A B+) "
    "DEFINE B AS price > PREV(price))"
)


@pytest.fixture(scope="module")
def con():
    connection = matchsql.connect()
    yield connection
    connection.close()


def pointed_at(err: matchsql.Error) -> str:
    """The text from the error's column on."""
    return err.sql.splitlines()[err.line - 1][err.column - 1 :]


@pytest.mark.parametrize(
    ("old", "new", "error", "at"),
    [
        ("PARTITION BY symbol", "PARTITION BY symbl", matchsql.SemanticError, "symbl ORDER"),
        ("ORDER BY ts", "ORDER BY tss", matchsql.SemanticError, "tss MEASURES"),
        ("PARTITION BY symbol", 'PARTITION BY lower("Symbl")', matchsql.SemanticError, '"Symbl")'),
        ("PATTERN (A B+)", "PATTERN (A B+", matchsql.ParseError, "DEFINE B AS"),
        (
            "PATTERN (A B+) DEFINE B AS price > PREV(price)",
            "PATTERN (A B+ SUBSET U = (A, B) DEFINE B AS price > PREV(price)",
            matchsql.ParseError,
            "SUBSET U",
        ),
        ("price > PREV(price)", "price < 'abc'", matchsql.ExecutionError, "'abc')"),
    ],
)
def test_the_caret_points_at_the_cause(con, old: str, new: str, error, at: str) -> None:
    statement = BASE.replace(old, new)
    assert statement != BASE
    for script in (statement, f"SELECT 'é' AS first;\n{statement}"):
        with pytest.raises(error) as caught:
            con.execute(script).fetchall()
        assert caught.value.line is not None, caught.value
        assert pointed_at(caught.value).startswith(at), caught.value


@pytest.mark.parametrize(
    ("old", "new", "expression", "at"),
    [
        ("price > PREV(price)", "price // 0 > 1", "price // 0", "0 > 1"),
        ("price > PREV(price)", "price > 1 AND volume % 0 > 1", "volume % 0", "0 > 1)"),
        ("price > PREV(price)", "price / 2 > 1 AND price // 0 > 1", "price // 0", "0 > 1)"),
        ("count(*) AS n", "sum(volume // 0) AS n", "volume // 0", "0) AS n"),
    ],
)
def test_duckdb_names_what_it_computes(con, old: str, new: str, expression: str, at: str) -> None:
    """An expression over one row is DuckDB's to compute (a hidden column of the input
    scan), and so is its error, which names the expression; the caret points at the
    divisor in the statement."""
    statement = BASE.replace(old, new)
    for script in (statement, f"SELECT 'é' AS first;\n{statement}"):
        with pytest.raises(
            matchsql.ExecutionError, match=rf"Division by zero in expression \({expression}"
        ) as caught:
            con.execute(script).fetchall()
        assert caught.value.line is not None, caught.value
        assert pointed_at(caught.value).startswith(at), caught.value


def test_the_missing_parenthesis_is_named(con) -> None:
    with pytest.raises(matchsql.ParseError, match=r"missing '\)' to close PATTERN before DEFINE"):
        con.sql(BASE.replace("PATTERN (A B+)", "PATTERN (A B+"))


def test_a_variable_named_like_a_clause_is_still_a_variable(con) -> None:
    statement = BASE.replace(
        "PATTERN (A B+) DEFINE B AS", 'PATTERN (A "DEFINE"+) DEFINE "DEFINE" AS'
    )
    assert con.sql(statement).fetchall() == con.sql(BASE).fetchall()
