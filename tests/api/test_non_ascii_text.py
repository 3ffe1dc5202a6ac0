"""Non-ASCII text anywhere in a statement: positions are characters of the user's text.

DuckDB's tokenizer counts UTF-8 bytes; a ``'é'`` before ``MATCH_RECOGNIZE`` once
shifted every later position by a byte, so the statement was cut in the wrong
place. Each statement kind runs here with non-ASCII text before, inside and after
the pattern, and its rows are compared with the same statement over ASCII text;
errors must point at the character they name.
"""

from __future__ import annotations

import pytest

import matchsql
from matchsql.grammar.sqltext import char_offsets

WORDS = ["é", "Zoë", "日本", "🙂🙂"]

QUERY = (
    "SELECT '{w}' AS x, * FROM (FROM trade WHERE symbol <> '{w}') MATCH_RECOGNIZE ("
    "PARTITION BY symbol ORDER BY ts MEASURES count(*) AS c, '{w}' AS k "
    "ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS price > PREV(price) AND symbol <> '{w}')"
    " WHERE k || '-' <> '{w}' ORDER BY symbol, c"
)


def ascii_rows(con, statement: str, word: str) -> list[tuple]:
    """The rows of ``statement`` written with ``a`` for ``word``, with ``word`` put back."""
    rows = con.sql(statement.replace(word, "a")).fetchall()
    return [tuple(word if value == "a" else value for value in row) for row in rows]


@pytest.fixture(scope="module")
def con():
    connection = matchsql.connect()
    yield connection
    connection.close()


def test_char_offsets_turns_utf8_byte_offsets_into_characters() -> None:
    text = "a'é'日🙂b"
    data = text.encode("utf-8")
    byte_offsets = [
        i for i in range(len(data) + 1) if i == len(data) or (data[i] & 0xC0) != 0x80
    ]  # each character's start
    assert char_offsets(text, byte_offsets) == list(range(len(text) + 1))
    assert char_offsets("plain", [0, 3, 5]) == [0, 3, 5]


@pytest.mark.parametrize("word", WORDS)
def test_select_with_match_recognize(con, word: str) -> None:
    statement = QUERY.format(w=word)
    rows = con.sql(statement).fetchall()
    assert rows and rows == ascii_rows(con, statement, word)
    assert rows[0][0] == word and rows[0][-1] == word


@pytest.mark.parametrize("word", WORDS)
def test_a_script_of_several_statements(con, word: str) -> None:
    """The split of a script: non-ASCII text in an earlier statement shifts no later one."""
    statement = QUERY.format(w=word)
    script = f"SELECT '{word}' AS one; SELECT '{word}{word}' AS two; {statement}"
    rows = con.sql(script).fetchall()
    assert rows == ascii_rows(con, statement, word)


@pytest.mark.parametrize("word", WORDS)
def test_explain(con, word: str) -> None:
    text = "\n".join(r[0] for r in con.sql("EXPLAIN " + QUERY.format(w=word)).fetchall())
    assert "PATTERN (A B+)" in text


@pytest.mark.parametrize("word", WORDS)
def test_create_view_and_select_from_it(con, word: str) -> None:
    statement = QUERY.format(w=word)
    con.sql(f'CREATE OR REPLACE TEMP VIEW "vue_{word}" AS {statement}')
    rows = con.sql(f"SELECT * FROM \"vue_{word}\" WHERE x = '{word}'").fetchall()
    assert sorted(rows) == sorted(ascii_rows(con, statement, word))
    con.sql(f'DROP VIEW "vue_{word}"')


@pytest.mark.parametrize("word", WORDS)
def test_prepare_and_execute(con, word: str) -> None:
    statement = QUERY.format(w=word).replace(" AND symbol <> '" + word + "'", " AND symbol <> ?")
    con.sql(f"PREPARE p AS {statement}")
    try:
        rows = con.sql(f"EXECUTE p('{word}')").fetchall()
    finally:
        con.sql("DEALLOCATE p")
    assert rows == ascii_rows(con, QUERY.format(w=word), word)


@pytest.mark.parametrize("word", WORDS)
def test_python_parameters_next_to_non_ascii_text(con, word: str) -> None:
    statement = QUERY.format(w=word).replace("'" + word + "') MATCH", "?) MATCH")
    assert con.execute(statement, [word]).fetchall() == ascii_rows(con, QUERY.format(w=word), word)


@pytest.mark.parametrize("word", WORDS)
@pytest.mark.parametrize("where", ["before", "inside", "after"])
def test_error_positions_count_characters(con, word: str, where: str) -> None:
    """The error's column is the character it names, in a script of two statements."""
    statement = QUERY.format(w=word).replace("PREV(price)", "PREV(pricey)")
    if where == "inside":
        statement = statement.replace("count(*) AS c", f"'{word}' AS c0, count(*) AS c")
    elif where == "after":  # non-ASCII text after the error only
        statement = statement.replace(f"SELECT '{word}' AS x,", "SELECT 'a' AS x,").replace(
            f"symbol <> '{word}')", "symbol <> 'a')", 1
        )
    script = f"SELECT '{word}';\n{statement}"
    with pytest.raises(matchsql.CatalogError) as caught:
        con.sql(script)
    err = caught.value
    line = script.splitlines()[err.line - 1]
    assert line[err.column - 1 :].startswith("pricey")


def test_the_caret_sits_under_the_character_on_a_terminal(con) -> None:
    """Wide characters (East Asian, emoji) take two terminal columns: the caret moves with
    them, so that it shows under the named word."""
    with pytest.raises(matchsql.CatalogError) as caught:
        con.sql(
            "SELECT '日本🙂' AS x, nope FROM trade MATCH_RECOGNIZE (ORDER BY ts "
            "PATTERN (A) DEFINE A AS nope > 0)"
        )
    text, caret = caught.value.excerpt.splitlines()
    column = caught.value.column
    assert text[column - 1 :].startswith("nope")
    # the terminal columns before the word: 8 + 3 wide characters counted twice
    assert caret == " " * (column - 1 + 3) + "^"


WINDOW = """SELECT '{w}' AS x, id, f OVER w AS f FROM letters
WINDOW w AS (ORDER BY id MEASURES FIRST(id) AS f
  ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING
  PATTERN (A B) DEFINE A AS v = '{w}', B AS v = 'b')
WHERE v <> '{w}{w}' ORDER BY id"""


@pytest.mark.parametrize("word", WORDS)
def test_a_row_pattern_window(word: str) -> None:
    con = matchsql.connect(demo=False)
    con.sql(
        f"CREATE TABLE letters AS SELECT * FROM (VALUES (1, '{word}'), (2, 'b'), "
        f"(3, '{word}'), (4, 'b')) t(id, v)"
    )
    rows = con.sql(WINDOW.format(w=word)).fetchall()
    assert rows == [(word, 1, 1), (word, 2, None), (word, 3, 3), (word, 4, None)]
    with pytest.raises(matchsql.Error) as caught:
        con.sql(WINDOW.format(w=word).replace("FIRST(id)", "FIRST(idx)")).fetchall()
    err = caught.value
    assert err.sql.splitlines()[err.line - 1][err.column - 1 :].startswith("idx")


@pytest.mark.parametrize("word", WORDS)
def test_create_table_as_insert_and_with(con, word: str) -> None:
    """A MATCH_RECOGNIZE inside CREATE TABLE AS, INSERT ... SELECT and a WITH query."""
    statement = QUERY.format(w=word).removesuffix(" ORDER BY symbol, c")
    expected = sorted(ascii_rows(con, statement, word))
    con.sql(f"SELECT '{word}'; CREATE OR REPLACE TEMP TABLE made AS {statement}")
    assert sorted(con.sql("SELECT * FROM made").fetchall()) == expected
    con.sql(f"DELETE FROM made; SELECT '{word}'; INSERT INTO made {statement}")
    assert sorted(con.sql("SELECT * FROM made").fetchall()) == expected
    rows = con.sql(f"WITH m AS ({statement}) SELECT * FROM m WHERE x = '{word}'").fetchall()
    assert sorted(rows) == expected
    con.sql("DROP TABLE made")
