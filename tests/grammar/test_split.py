"""split_statements: the one splitter's statements as written, robust to text no parser
takes; parse of a text seen before."""

from __future__ import annotations

import pytest
from sqlglot import exp

from matchsql.errors import ParseError
from matchsql.grammar.sqltext import split_statements
from matchsql.grammar.statements import parse


def texts(sql: str) -> list[str]:
    return [text for text, _ in split_statements(sql)]


def test_offsets_point_at_each_statement():
    sql = "SELECT 1;  SELECT 2 ;\n\nSELECT 3"
    parts = split_statements(sql)
    assert parts == [("SELECT 1", 0), ("SELECT 2", 11), ("SELECT 3", 23)]
    for text, offset in parts:
        assert sql[offset : offset + len(text)] == text


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT ';' AS x; SELECT 2", ["SELECT ';' AS x", "SELECT 2"]),
        ("SELECT 'it''s; here'; SELECT 2", ["SELECT 'it''s; here'", "SELECT 2"]),
        ('SELECT "a;b" FROM t; SELECT 2', ['SELECT "a;b" FROM t', "SELECT 2"]),
        ("SELECT 1 -- no; split\n; SELECT 2", ["SELECT 1 -- no; split", "SELECT 2"]),
        ("SELECT /* ; */ 1; SELECT 2", ["SELECT /* ; */ 1", "SELECT 2"]),
        ("SELECT $$a;b$$; SELECT 2", ["SELECT $$a;b$$", "SELECT 2"]),
        ("SELECT E'a\\';b'; SELECT 2", ["SELECT E'a\\';b'", "SELECT 2"]),
        ("SELECT 1;;; SELECT 2;", ["SELECT 1", "SELECT 2"]),
        ("  \n ; -- only a comment\n;", []),
        ("", []),
        ("SELECT 1", ["SELECT 1"]),
    ],
)
def test_semicolons_in_strings_and_comments(sql, expected):
    assert texts(sql) == expected


def test_statements_sqlglot_cannot_parse_still_split():
    sql = "CREATE STREAM s (x INT); SET threads = 4; PRAGMA version; FROM t SELECT x"
    assert texts(sql) == [
        "CREATE STREAM s (x INT)",
        "SET threads = 4",
        "PRAGMA version",
        "FROM t SELECT x",
    ]


def test_untokenizable_text_falls_back_to_scanner():
    sql = "SELECT 'a;b'; SELECT 'unterminated; SELECT 3"
    assert texts(sql) == ["SELECT 'a;b'", "SELECT 'unterminated; SELECT 3"]


def test_match_recognize_statement_kept_whole():
    sql = "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B*) DEFINE B AS B.s = ';');\nSELECT 2"
    parts = split_statements(sql)
    assert parts[0][0].endswith("= ';')")
    assert parts[1] == ("SELECT 2", sql.index("SELECT 2"))


def test_leading_comment_is_part_of_statement():
    sql = "SELECT 1;\n-- the second\nSELECT 2"
    ((_, _), (text, offset)) = split_statements(sql)
    assert text == "-- the second\nSELECT 2"
    assert offset == sql.index("--")


def test_a_text_parsed_again_gives_new_trees_and_its_errors_again() -> None:
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.x AS ax "
        "PATTERN (A B+) DEFINE B AS B.x > PREV(B.x))"
    )
    first = parse(text)[0]
    first.find(exp.Table).replace(exp.to_table("rewritten"))  # callers rewrite their trees
    again = parse(text)[0]
    assert again.find(exp.Table).name == "t"
    assert again is not first
    bad = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B+) DEFINE B AS )"
    for _ in range(2):
        with pytest.raises(ParseError) as caught:
            parse(bad)
        assert (caught.value.line, caught.value.column) == (1, bad.rindex(")") + 1)
    pieces = split_statements("SELECT 1; SELECT 2")
    pieces.append(("changed", 0))
    assert split_statements("SELECT 1; SELECT 2") == [("SELECT 1", 0), ("SELECT 2", 10)]
