"""Stream and continuous query statements with non-ASCII text before, inside and after the
pattern: DuckDB's parser rejects them, so they are split by the matchsql dialect; an
earlier plain statement with ``'é'`` must not shift where they start."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

import matchsql
from matchsql.errors import CatalogError
from matchsql.storage.stream_lifecycle import create_stream

WORDS = ["a", "é", "日本", "🙂"]
SCHEMA = pa.schema([("k", pa.string()), ("i", pa.int64()), ("v", pa.float64())])
COLUMNS = [("k", "VARCHAR"), ("i", "BIGINT"), ("v", "DOUBLE")]


def pattern(word: str) -> str:
    return (
        f"MATCH_RECOGNIZE (PARTITION BY k ORDER BY i MEASURES '{word}' AS w, "
        f"count(*) AS n ONE ROW PER MATCH PATTERN (A B+) "
        f"DEFINE B AS v > PREV(v) AND k <> '{word}')"
    )


@pytest.mark.parametrize("word", WORDS)
def test_create_stream_after_a_statement_with_non_ascii_text(con, word: str) -> None:
    con.sql(
        f"SELECT '{word}' AS before; CREATE STREAM s (\"prix_{word}\" VARCHAR, x INT); "
        f"SELECT '{word}' AS after"
    )
    assert [row[0] for row in con.sql("SHOW STREAMS").fetchall()] == ["s"]
    con.sql(f"SELECT '{word}'; DROP STREAM s")
    assert con.sql("SHOW STREAMS").fetchall() == []


@pytest.mark.parametrize("word", WORDS)
def test_continuous_query_with_non_ascii_text(tmp_path, word: str) -> None:
    path = str(tmp_path / "cq.duckdb")
    create_stream(
        duckdb.connect(), path, "ticks", COLUMNS, SCHEMA, archive=str(tmp_path / "hist") + "/"
    )
    con = matchsql.connect(path)
    con.sql("CREATE TABLE sink (k VARCHAR, w VARCHAR, n BIGINT)")
    con.sql(
        f"SELECT '{word}' AS x; CREATE CONTINUOUS QUERY q AS INSERT INTO sink "
        f"SELECT * FROM ticks {pattern(word)} WHERE w <> '{word}{word}'"
    )
    assert [row[0] for row in con.sql("SHOW CONTINUOUS QUERIES").fetchall()] == ["q"]
    with pytest.raises(CatalogError) as caught:
        con.sql(
            f"SELECT '{word}';\nCREATE CONTINUOUS QUERY r AS INSERT INTO sink SELECT * "
            f"FROM ticks {pattern(word).replace('PREV(v)', 'PREV(vv)')}"
        )
    err = caught.value
    assert err.sql.splitlines()[err.line - 1][err.column - 1 :].startswith("vv)")
    con.sql(f"SELECT '{word}'; DROP CONTINUOUS QUERY q")
    con.close()
