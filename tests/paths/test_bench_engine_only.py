"""The benches' engine-only runner (``bench.paths.engine_only``, which ``bench.revisions``
and ``bench.paths`` time) drives the routers directly, beside the session: it must keep
giving the rows the SQL path gives, or a router's change breaks the benches unseen."""

from __future__ import annotations

import duckdb

import matchsql
from bench.paths import engine_only, spec_for

SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n "
    "ONE ROW PER MATCH PATTERN (A B+ C+) DEFINE B AS v < PREV(v), C AS v > PREV(v))"
)
TABLE = (
    "SELECT i % 37 AS k, i AS ts, (hash(i) % 1000)::BIGINT AS v FROM range(20000) r(i) "
    "ORDER BY k, ts"
)


def test_engine_only_gives_the_sql_paths_row_count() -> None:
    con = duckdb.connect()
    con.sql(f"CREATE TABLE t AS {TABLE}")
    batches = con.sql("SELECT * FROM t").to_arrow_table().to_batches(max_chunksize=1000)
    expected = matchsql.connect(demo=False)
    expected.sql(f"CREATE TABLE t AS {TABLE}")
    rows = len(expected.sql(SQL).fetchall())
    assert rows > 500
    assert engine_only(spec_for(con, SQL, "t"), batches) == rows
