"""matchsql's own tables (the continuous query definitions) stay out of what lists the user's
tables: ``.tables``, ``Connection.tables()`` and tab completion."""

from __future__ import annotations

import io

import duckdb
import pyarrow as pa

import matchsql
from matchsql.cli.completion import read_catalog, read_words
from matchsql.cli.shell import Shell
from matchsql.storage.stream_lifecycle import create_stream

SCHEMA = pa.schema([("k", pa.int64()), ("i", pa.int64()), ("v", pa.float64())])


def test_continuous_query_table_is_not_listed(tmp_path) -> None:
    path = str(tmp_path / "cq.duckdb")
    create_stream(
        duckdb.connect(),
        path,
        "ticks",
        [("k", "BIGINT"), ("i", "BIGINT"), ("v", "DOUBLE")],
        SCHEMA,
        archive=str(tmp_path / "hist") + "/",
    )
    con = matchsql.connect(path)
    con.sql("CREATE TABLE sink (k BIGINT, n BIGINT)")
    con.sql(
        "CREATE CONTINUOUS QUERY q AS INSERT INTO sink SELECT * FROM ticks "
        "MATCH_RECOGNIZE (PARTITION BY k ORDER BY i MEASURES count(*) AS n "
        "PATTERN (A B+) DEFINE B AS v > PREV(v))"
    )
    stored = [
        r[0] for r in con.duckdb.sql("SELECT table_name FROM information_schema.tables").fetchall()
    ]
    assert "__matchsql_continuous_queries" in stored  # it is there, only not listed
    assert con.tables() == ["sink"]
    assert read_catalog(con, read_words(con)).tables == ["sink"]
    out = io.StringIO()
    Shell(con, out=out, err=io.StringIO()).run_dot(".tables")
    assert out.getvalue().split() == ["sink"]
    con.sql("DROP CONTINUOUS QUERY q")
    con.close()
