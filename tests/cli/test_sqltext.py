"""Statement boundaries: a ``;`` ends a statement only outside strings, identifiers, comments."""

from __future__ import annotations

import pytest

from matchsql.grammar.sqltext import is_blank, is_complete, open_construct, split_script


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 1;",
        "SELECT 1;  ",
        "SELECT 1; -- trailing comment",
        "SELECT 1; /* trailing */",
        "SELECT ';' AS semi;",
        "SELECT 'it''s;' ;",
        'SELECT 1 AS "a;b";',
        "SELECT 1 -- ; not the end\n;",
        "SELECT /* ; */ 1;",
        "SELECT $$a;b$$;",
        "SELECT $tag$ ; $$ ; $tag$;",
        "SELECT E'\\';';",
        "SELECT 1; SELECT 2;",
        "SELECT * FROM trade MATCH_RECOGNIZE (PATTERN (A B+ $) DEFINE B AS price > PREV(price));",
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN ({- A -} B*) DEFINE A AS true);",
    ],
)
def test_complete(text: str) -> None:
    assert is_complete(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "-- only a comment;",
        "SELECT 1",
        "SELECT ';",
        "SELECT 'it''s;",
        'SELECT 1 AS "a;',
        "SELECT 1 -- ;",
        "SELECT /* ; ",
        "SELECT $$ ; ",
        "SELECT E'\\';",
        "SELECT 1; SELECT 2",
        "SELECT * FROM trade MATCH_RECOGNIZE (PATTERN (A+) DEFINE A AS price > 1",
    ],
)
def test_incomplete(text: str) -> None:
    assert not is_complete(text)


def test_open_construct() -> None:
    assert open_construct("SELECT 'abc") == "'"
    assert open_construct('SELECT "abc') == '"'
    assert open_construct("SELECT /* x") == "/*"
    assert open_construct("SELECT $q$ x") == "$q$"
    assert open_construct("SELECT 'abc'") is None
    assert open_construct("SELECT price$ FROM t") is None


def test_split_script_keeps_offsets_and_lines() -> None:
    script = "SELECT 1;\n\n-- a comment\nSELECT ';'\n  AS x;\n/* tail */ SELECT 3"
    statements = split_script(script)
    assert [s.text for s in statements] == ["SELECT 1", "SELECT ';'\n  AS x", "SELECT 3"]
    assert [s.line for s in statements] == [1, 4, 6]
    assert all(script[s.offset :].startswith(s.text) for s in statements)


def test_split_script_drops_blank_statements() -> None:
    assert split_script(";;  -- nothing\n;") == []
    assert is_blank("  -- x\n /* y */ ")
    assert not is_blank(" x -- y")


def test_unterminated_string_runs_to_the_end() -> None:
    statements = split_script("SELECT 1; SELECT 'abc; SELECT 2;")
    assert [s.text for s in statements] == ["SELECT 1", "SELECT 'abc; SELECT 2;"]
