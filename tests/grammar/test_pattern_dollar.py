"""``$`` inside PATTERN ( ... ) is the end anchor; everywhere else it keeps DuckDB's meaning.

DuckDB reads ``$tag$ ... $tag$`` as a dollar-quoted string and ``$1`` as a
parameter; the matchsql tokenizer must not let those rules reach into a row
pattern (``PATTERN (^B | $C$)``) nor change them outside one.
"""

from __future__ import annotations

import pytest
import sqlglot

import matchsql
from matchsql.grammar.dialect import MatchSQL
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.sqltext import is_complete, open_construct, split_script, split_statements
from matchsql.grammar.statements import parse
from matchsql.plan.pattern import Anchor, AnchorKind, Label


def mr(pattern: str, define: str = "B AS true") -> str:
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c "
        f"ALL ROWS PER MATCH PATTERN ({pattern}) DEFINE {define})"
    )


def pattern_of(sql: str):
    node = next(parse(sql)[0].find_all(MatchRecognizeTable))
    return node.args["pattern"].this


def leaves(node) -> list:
    return [n for n in node.walk() if isinstance(n, Anchor | Label)]


def describe(node) -> list[str]:
    return [
        "$"
        if isinstance(n, Anchor) and n.kind == AnchorKind.END
        else "^"
        if isinstance(n, Anchor)
        else n.name
        for n in leaves(node)
    ]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("^B | $C$", ["^", "B", "$", "C", "$"]),
        ("A $B", ["A", "$", "B"]),
        ("$A$ $B$", ["$", "A", "$", "$", "B", "$"]),
        ("A$", ["A", "$"]),
        ("(A $)+ B", ["A", "$", "B"]),
        ('"x$y" $', ["x$y", "$"]),
    ],
)
def test_dollar_before_a_variable_is_an_anchor(pattern: str, expected: list[str]) -> None:
    assert describe(pattern_of(mr(pattern))) == expected


def test_two_match_recognize_with_dollar_patterns() -> None:
    sql = (
        "SELECT * FROM (SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES "
        "CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN ($A$) DEFINE A AS true)) "
        "MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS k "
        "ALL ROWS PER MATCH PATTERN (^B $C$) DEFINE B AS true)"
    )
    nodes = list(parse(sql)[0].find_all(MatchRecognizeTable))
    assert sorted(describe(n.args["pattern"].this) for n in nodes) == [
        ["$", "A", "$"],
        ["^", "B", "$", "C", "$"],
    ]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT $1, $2 + 1",
        "SELECT $$a;b$$ AS s",
        "SELECT $tag$it's $1$tag$ AS s",
        "SELECT $$x$$ || 'y' FROM t WHERE id = $1",
        "SELECT pattern ($1) FROM t",
    ],
)
def test_dollar_outside_a_pattern_is_unchanged(sql: str) -> None:
    ours = sqlglot.parse_one(sql, read=MatchSQL)
    duck = sqlglot.parse_one(sql, read="duckdb")
    assert ours == duck


def test_dollar_string_next_to_a_match_recognize_is_unchanged() -> None:
    sql = (
        "SELECT c, $$a$b$$ AS s FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES "
        "CLASSIFIER() AS c ONE ROW PER MATCH PATTERN (A $) DEFINE A AS v = $x$a$x$)"
    )
    tree = parse(sql)[0]
    # the select list keeps DuckDB's RawString; inside MATCH_RECOGNIZE it is a plain string
    assert [n.this for n in tree.find_all(sqlglot.exp.RawString)] == ["a$b"]
    assert [n.this for n in tree.find_all(sqlglot.exp.Literal) if n.is_string] == ["a"]
    assert describe(pattern_of(sql)) == ["A", "$"]


def test_unterminated_dollar_string_outside_a_pattern_still_fails() -> None:
    with pytest.raises(matchsql.ParseError, match="unterminated"):
        parse(mr("A $") + " WHERE c = $q$open")


def test_statements_split_around_dollar_patterns() -> None:
    text = mr("^B | $C$") + "; SELECT $$a;b$$"
    assert [s for s, _ in split_statements(text)] == [mr("^B | $C$"), "SELECT $$a;b$$"]
    assert [s.text for s in split_script(text)] == [mr("^B | $C$"), "SELECT $$a;b$$"]
    assert is_complete(mr("$A$") + ";")
    assert not is_complete("SELECT 1 FROM t MATCH_RECOGNIZE (PATTERN ($A;")
    assert open_construct("SELECT $x$ open") == "$x$"


@pytest.fixture
def con() -> matchsql.Connection:
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE t AS SELECT * FROM (VALUES (1, 'b'), (2, 'a'), (3, 'c')) v(id, v)")
    return con


def test_dollar_strings_and_parameters_still_run(con: matchsql.Connection) -> None:
    assert con.sql("SELECT $$a;b$$, $t$x$y$t$").fetchall() == [("a;b", "x$y")]
    con.sql("PREPARE p AS SELECT $1 + 1")
    # the statement DuckDB prepared keeps its parameter
    assert con.duckdb.execute("EXECUTE p(41)").fetchall() == [(42,)]


def test_end_anchor_before_a_variable_runs(con: matchsql.Connection) -> None:
    # ^B matches row 1; $C$ needs C after the end of the partition: never.
    got = con.sql(f"SELECT id, c FROM ({mr('^B | $C$')}) ORDER BY id").fetchall()
    assert got == [(1, "B")]


def test_pattern_body_scan_skips_quotes() -> None:
    # a quoted variable may hold ')' and a function called pattern may take a string
    assert [s.text for s in split_script("SELECT pattern(')'); SELECT 1")] == [
        "SELECT pattern(')')",
        "SELECT 1",
    ]
    sql = mr('"x)$" $', define='"x)$" AS true')
    assert describe(pattern_of(sql)) == ["x)$", "$"]
