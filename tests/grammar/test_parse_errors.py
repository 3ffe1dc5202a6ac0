"""Syntax errors come back as located matchsql ParseErrors, never sqlglot exceptions."""

from __future__ import annotations

import pytest

from matchsql.errors import Error, ParseError, SemanticError, line_column
from matchsql.grammar.statements import parse


def where(exc: Error) -> tuple[int | None, int | None]:
    return exc.line, exc.column


# Each case names the text the error must point at (its last occurrence);
# None means the end of the statement.
@pytest.mark.parametrize(
    ("sql", "at", "fragment"),
    [
        ("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B | ))", "))", "end of pattern"),
        ("SELECT * FROM t MATCH_RECOGNIZE (PATTERN A B)", "A B", "Expecting ("),
        ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x)", ")", "Expecting PATTERN"),
        ("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)", None, "close MATCH_RECOGNIZE"),
        ("SELECT * FROM t MATCH_RECOGNIZE PATTERN (A)", "PATTERN", "Expecting ("),
        ("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS )", ")", "condition"),
        ("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A x > 1)", "x >", "AS"),
        ("SELECT * FROM t MATCH_RECOGNIZE (MEASURES x PATTERN (A))", "PATTERN", "AS name"),
        ("SELECT * FROM t MATCH_RECOGNIZE (MEASURES x y PATTERN (A))", "y PATTERN", "AS name"),
        ("SELECT * FROM t MATCH_RECOGNIZE (AFTER MATCH SKIP PATTERN (A))", "PATTERN", "PAST"),
        ("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) SUBSET U (A))", "(A))", "="),
        ("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A (B)", "(A (", "close PATTERN"),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (MEASURES 1 AS a MEASURES 2 AS b PATTERN (A))",
            "MEASURES 2",
            "Duplicate MEASURES",
        ),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (ONE ROW PER MATCH ALL ROWS PER MATCH PATTERN (A))",
            "ALL ROWS",
            "Duplicate ROWS PER MATCH",
        ),
        ("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) WITHIN)", ")", "WITHIN"),
        ("SELECT 'abc", "'abc", "unterminated"),
        ("SELECT * FROM t WHERE", None, "incomplete WHERE"),
        ("SELECT * FROM\nt MATCH_RECOGNIZE (\n  PATTERN (A{3,1})\n)", "{3,1}", "maximum"),
        ("SELECT * FROM t MATCH_RECOGNIZE (\n  PATTERN (A B)\n  DEFINE B AS B.x >\n)", "\n)", None),
        ("SELECT 1;\nSELECT * FROM t MATCH_RECOGNIZE (PATTERN (A|))", "))", "end of pattern"),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (MEASURES MATCH_NUMBER(1) AS m PATTERN (A))",
            "1)",
            "no arguments",
        ),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (MEASURES PREV() AS m PATTERN (A))",
            "PREV",
            "PREV takes",
        ),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (MEASURES LAST(x, 1, 2) AS m PATTERN (A))",
            "LAST",
            "LAST takes",
        ),
    ],
)
def test_syntax_error_positions(sql, at, fragment):
    with pytest.raises(ParseError) as info:
        parse(sql)
    if at is None:
        offset = len(sql.rstrip())
    else:
        offset = sql.rindex(at) + (1 if at.startswith("\n") else 0)
    assert where(info.value) == line_column(sql, offset)
    if fragment:
        assert fragment in info.value.message
    assert info.value.excerpt.endswith("^")


@pytest.mark.parametrize(
    ("nav", "column"),
    [("PREV(A.x, -1)", 54), ("NEXT(A.x, 1.5)", 53), ("FIRST(A.x, y)", 54), ("LAST(A.x, '2')", 53)],
)
def test_navigation_offsets_must_be_non_negative_integer_constants(nav, column):
    sql = f"SELECT * FROM t MATCH_RECOGNIZE (MEASURES {nav} AS m PATTERN (A))"
    with pytest.raises(SemanticError) as info:
        parse(sql)
    assert "non-negative integer constant" in info.value.message
    assert where(info.value) == (1, column)


def test_error_render_has_caret_excerpt():
    with pytest.raises(ParseError) as info:
        parse("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A **))")
    rendered = info.value.render()
    assert "(line 1, column 46)" in rendered
    assert rendered.splitlines()[-1] == " " * 45 + "^"


def test_no_sqlglot_exception_escapes():
    for bad in [
        "SELECT (",
        "SELECT * FROM t MATCH_RECOGNIZE (",
        ")",
        "SELECT * FROM t MATCH_RECOGNIZE",
    ]:
        with pytest.raises(ParseError):
            parse(bad)
