"""Statement kinds: one classification over the statement's tokens, one dispatch table.

Each kind is classified from its tokens (strings, quoted names and comments
are single tokens); the executor dispatches every kind from one table.
"""

from __future__ import annotations

import duckdb
import pytest

import matchsql
from matchsql.grammar.continuous_ddl import ContinuousQueryAction, ShowContinuousQueries
from matchsql.grammar.sqltext import split_statements
from matchsql.grammar.stream_ddl import CreateStream, DropStream, ShowStreamReaders, ShowStreams
from matchsql.session.executor import HANDLERS
from matchsql.session.statement_kinds import (
    ContinuousDdl,
    Deallocate,
    DefineView,
    Execute,
    ExplainMatch,
    MatchQuery,
    Prepare,
    ResetSetting,
    SetSetting,
    ShowSetting,
    ShowStats,
    ShowWorkers,
    Sql,
    StreamDdl,
    classify,
    split,
)

MR = (
    "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES A.price AS p ONE ROW PER MATCH PATTERN (A B) "
    "DEFINE B AS price > PREV(price))"
)


def kind_of(text: str):
    """The classified statement of a one-statement ``text``, split as a session splits it."""
    pieces = split(text, duckdb.connect())
    assert len(pieces) == 1
    return classify(pieces[0])


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 'match_recognize' AS s",
        "SELECT 1 AS x -- match_recognize (",
        "SELECT 1 AS x /* MATCH_RECOGNIZE ( PATTERN (A) ) */",
        'SELECT 1 AS "match_recognize"',
        "SELECT $$ match_recognize $$ AS s",
    ],
)
def test_match_recognize_in_a_string_or_comment_is_plain_sql(text: str) -> None:
    assert type(kind_of(text)) is Sql


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 'match_recognize' AS s",
        "SELECT 2 AS x -- match_recognize",
        "SELECT 3 AS x /* match_recognize */",
    ],
)
def test_plain_sql_with_the_word_in_a_string_or_comment_runs_in_duckdb(text: str) -> None:
    con = matchsql.connect(demo=False)
    expected = duckdb.connect().sql(text).fetchall()
    assert con.sql(text).fetchall() == expected


def test_match_recognize_is_reserved_even_where_duckdb_takes_it_for_an_alias() -> None:
    con = matchsql.connect()
    with pytest.raises(matchsql.ParseError):
        con.sql("SELECT * FROM trade MATCH_RECOGNIZE")
    assert type(kind_of("SELECT * FROM trade MATCH_RECOGNIZE")) is MatchQuery


def test_the_word_in_a_string_next_to_a_matchsql_statement() -> None:
    """DuckDB's parser rejects the stream statement, so the matchsql dialect splits the
    text; the string still does not make the SELECT a MATCH_RECOGNIZE."""
    con = matchsql.connect(demo=False)
    rows = con.sql(
        "SHOW CONTINUOUS QUERIES; SELECT 'match_recognize; -- x' AS s -- match_recognize"
    ).fetchall()
    assert rows == [("match_recognize; -- x",)]
    pieces = split("SHOW CONTINUOUS QUERIES; SELECT 'match_recognize' AS s", duckdb.connect())
    assert [p.type for p in pieces] == [None, None]
    assert type(classify(pieces[1])) is Sql


def test_plain_text_is_split_by_duckdb_with_its_types() -> None:
    text = "  -- lead\nSELECT 'a;b' AS x ;  /* ; */ CREATE TABLE t (i INT);\n-- tail"
    pieces = split(text, duckdb.connect())
    assert [(p.text, p.offset) for p in pieces] == [
        ("-- lead\nSELECT 'a;b' AS x", 2),
        ("/* ; */ CREATE TABLE t (i INT)", text.index("/* ;")),
    ]
    assert [(p.text, p.offset) for p in pieces] == split_statements(text)  # the same cuts
    assert [p.type for p in pieces] == [duckdb.StatementType.SELECT, duckdb.StatementType.CREATE]


def test_match_recognize_and_explain() -> None:
    assert type(kind_of(MR)) is MatchQuery
    explained = kind_of("EXPLAIN " + MR)
    assert type(explained) is ExplainMatch and not explained.analyze
    assert explained.text[explained.head :] == MR
    analyzed = kind_of("EXPLAIN /* c */ ANALYZE " + MR)
    assert type(analyzed) is ExplainMatch and analyzed.analyze
    assert analyzed.text[analyzed.head :] == MR
    assert type(kind_of("EXPLAIN ANALYZE SELECT 1")) is Sql


def test_row_pattern_window_is_a_match_query() -> None:
    statement = kind_of(
        "SELECT count(*) OVER w FROM t WINDOW w AS (ORDER BY x "
        "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING "
        "PATTERN (A+) DEFINE A AS x > 0)"
    )
    assert type(statement) is MatchQuery
    assert statement.windowed and not statement.match


@pytest.mark.parametrize(
    "text, expected",
    [
        ("CREATE STREAM s (a INT)", CreateStream),
        ("DROP STREAM IF EXISTS s", DropStream),
        ("SHOW STREAMS", ShowStreams),
        ("show stream readers s", ShowStreamReaders),
    ],
)
def test_stream_statements(text: str, expected: type) -> None:
    statement = kind_of(text)
    assert type(statement) is StreamDdl and type(statement.node) is expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("SHOW CONTINUOUS QUERIES", ShowContinuousQueries),
        ("STOP CONTINUOUS QUERY q", ContinuousQueryAction),
        ("-- first a comment\nRESUME CONTINUOUS QUERY q", ContinuousQueryAction),
    ],
)
def test_continuous_query_statements(text: str, expected: type) -> None:
    statement = kind_of(text)
    assert type(statement) is ContinuousDdl and type(statement.node) is expected


def test_show_stats_and_workers() -> None:
    assert type(kind_of("show stats")) is ShowStats
    assert type(kind_of("SHOW WORKERS")) is ShowWorkers
    assert type(kind_of("SHOW tables")) is Sql


def test_settings() -> None:
    statement = kind_of("SET SESSION input_mode TO 'push'")
    assert type(statement) is SetSetting
    assert (statement.name, statement.value) == ("input_mode", "push")
    assert kind_of("set Batch_Size = 1024").name == "batch_size"
    assert type(kind_of("SHOW input_mode")) is ShowSetting
    assert type(kind_of("RESET input_mode")) is ResetSetting
    assert type(kind_of("SET memory_limit = '1GB'")) is Sql  # DuckDB's own


def test_prepared_statements() -> None:
    prepare = kind_of("PREPARE p AS " + MR)
    assert type(prepare) is Prepare and prepare.name == "p" and prepare.body == MR
    assert prepare.text[prepare.body_offset :] == MR
    execute = kind_of("EXECUTE P(1, 'a,b')")
    assert type(execute) is Execute and execute.name == "p"
    assert execute.arguments == "(1, 'a,b')"
    assert type(kind_of("DEALLOCATE PREPARE p")) is Deallocate
    assert kind_of("DEALLOCATE q").name == "q"


def test_create_view() -> None:
    assert type(kind_of("CREATE OR REPLACE TEMP VIEW v AS " + MR)) is DefineView
    assert type(kind_of("CREATE VIEW v AS SELECT 1")) is DefineView
    assert type(kind_of("CREATE TABLE v AS SELECT 1")) is Sql


def test_every_kind_has_one_handler() -> None:
    kinds = {
        Sql,
        MatchQuery,
        ExplainMatch,
        StreamDdl,
        ContinuousDdl,
        ShowStats,
        ShowWorkers,
        SetSetting,
        ShowSetting,
        ResetSetting,
        Prepare,
        Execute,
        Deallocate,
        DefineView,
    }
    assert set(HANDLERS) == kinds


def test_an_error_in_a_later_statement_points_into_the_whole_text() -> None:
    con = matchsql.connect(demo=False)
    text = "SELECT 1;\nCREATE STREAM s (a INT) WITH (colour = 1)"
    with pytest.raises(matchsql.ParseError) as info:
        con.sql(text)
    assert info.value.line == 2
    assert info.value.column == text.splitlines()[1].index("colour") + 1


def test_statements_run_in_order_until_an_error() -> None:
    """Each statement is classified just before it runs: an error in a later statement
    leaves the earlier ones done, as in DuckDB."""
    con = matchsql.connect(demo=False)
    with pytest.raises(matchsql.ParseError):
        con.sql("CREATE TABLE t AS SELECT 1 AS i; DROP STREAM")
    assert con.sql("SELECT i FROM t").fetchall() == [(1,)]


def test_a_string_with_the_word_does_not_start_the_engine() -> None:
    """Plain SQL never loads sqlglot: checked in a fresh process."""
    import subprocess
    import sys

    code = (
        "import sys, matchsql; c = matchsql.connect(demo=False); "
        "c.sql(\"SELECT 'match_recognize' -- match_recognize\").fetchall(); "
        "print('sqlglot' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False"
