"""Tab completion from the connection's catalog, and the highlighting lexer."""

from __future__ import annotations

import pytest
from prompt_toolkit.document import Document
from pygments.token import Keyword, Name, String, Text

import matchsql
from matchsql.cli.completion import SqlCompleter, read_catalog, read_words
from matchsql.cli.highlight import MatchSqlLexer


@pytest.fixture(scope="module")
def completer():
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE quotes (bid_price DOUBLE, ask_price DOUBLE, quoted_at TIMESTAMP)")
    con.sql("CREATE VIEW wide_quotes AS SELECT ask_price - bid_price AS spread FROM quotes")
    con.sql("CREATE STREAM ticks_live (tick_symbol VARCHAR, tick_price DOUBLE)")
    catalog = read_catalog(con, read_words(con))
    yield SqlCompleter(lambda: catalog)
    con.sql("DROP STREAM ticks_live")
    con.close()


def complete(completer: SqlCompleter, text: str) -> list[str]:
    return [c.text for c in completer.get_completions(Document(text), None)]


def test_tables_views_and_streams(completer) -> None:
    assert complete(completer, "SELECT * FROM quo")[0] == "quotes"
    assert complete(completer, "SELECT * FROM wide_")[0] == "wide_quotes"
    assert complete(completer, "SELECT * FROM ticks_")[0] == "ticks_live"


def test_columns_of_the_named_relation_come_first(completer) -> None:
    assert complete(completer, "SELECT * FROM quotes WHERE bid")[0] == "bid_price"
    assert complete(completer, "SELECT spr")[0] == "spread"  # any table's column, too
    # After an alias and a dot: only that relation's columns.
    assert complete(completer, "SELECT * FROM quotes q WHERE q.") == [
        "bid_price",
        "ask_price",
        "quoted_at",
    ]
    assert complete(completer, "SELECT nosuch.") == []
    text = "SELECT * FROM quotes AS q WHERE q.a"
    assert complete(completer, text) == ["ask_price"]
    assert complete(completer, "SELECT * FROM ticks_live t WHERE t.tick_p") == ["tick_price"]


def test_match_recognize_words_and_functions(completer) -> None:
    assert complete(completer, "SELECT * FROM quotes MATCH_REC") == ["MATCH_RECOGNIZE"]
    assert complete(completer, "... PAT")[0] == "PATTERN"
    assert complete(completer, "... DEFI")[0] == "DEFINE"
    assert complete(completer, "... MEAS") == ["MEASURES"]
    assert "ALL ROWS PER MATCH" in complete(completer, "... ALL")
    assert "AFTER MATCH SKIP" in complete(completer, "... AFT")
    assert complete(completer, "... DEFINE A AS PRE")[0] == "PREV"
    assert complete(completer, "MEASURES CLASSI") == ["CLASSIFIER"]
    assert "MATCH_NUMBER" in complete(completer, "MEASURES MATCH_N")


def test_duckdb_keywords_and_functions_take_the_typed_case(completer) -> None:
    assert complete(completer, "sel") == ["select"]
    assert complete(completer, "SEL") == ["SELECT"]
    assert "string_agg" in complete(completer, "SELECT string_a")
    assert "read_parquet" in complete(completer, "SELECT * FROM read_parq")


def test_dot_commands(completer) -> None:
    assert complete(completer, ".mo") == [".mode"]
    assert complete(completer, ".ou") == [".output"]
    assert complete(completer, "SELECT 1") == []  # no word prefix: nothing to offer


def test_a_new_table_completes_after_the_next_statement() -> None:
    con = matchsql.connect(demo=False)
    words = read_words(con)
    assert "zebra_cells" not in complete(SqlCompleter(lambda: read_catalog(con, words)), "zebra")
    con.sql("CREATE TABLE zebra_cells (stripes INTEGER)")
    assert complete(SqlCompleter(lambda: read_catalog(con, words)), "zebra") == ["zebra_cells"]
    con.close()


def _tokens(text: str) -> dict[str, object]:
    return {value: token for token, value in MatchSqlLexer().get_tokens(text) if value.strip()}


def test_lexer_marks_row_pattern_words() -> None:
    tokens = _tokens(
        "SELECT * FROM t MATCH_RECOGNIZE (MEASURES CLASSIFIER() AS c "
        "PATTERN (A+) DEFINE A AS price > PREV(price))"
    )
    assert tokens["SELECT"] in Keyword and tokens["MATCH_RECOGNIZE"] in Keyword
    assert tokens["PATTERN"] in Keyword and tokens["DEFINE"] in Keyword
    assert tokens["MEASURES"] in Keyword
    assert tokens["PREV"] is Name.Function and tokens["CLASSIFIER"] is Name.Function
    assert tokens["price"] is Name and tokens["A"] is Name


def test_lexer_reads_an_unfinished_string_as_a_string() -> None:
    tokens = _tokens("SELECT 'half typed")
    assert tokens["half"] in String and tokens["typed"] in String


def test_lexer_leaves_dot_commands_plain() -> None:
    tokens = list(MatchSqlLexer().get_tokens_unprocessed(".plot ts price file=/tmp/x.png"))
    assert tokens == [(0, Text, ".plot ts price file=/tmp/x.png")]
