"""ONE ROW PER MATCH exports only the input columns it reads; ALL ROWS PER MATCH all of them.

A view column that fails when computed shows which columns DuckDB had to export.
"""

from __future__ import annotations

import pytest

import matchsql

ONE_ROW = """SELECT * FROM {src} MATCH_RECOGNIZE(PARTITION BY k ORDER BY ts
  MEASURES MATCH_NUMBER() AS mn, FIRST(X) AS fx, LAST(b.x) AS lx, COUNT(*) AS c
  ONE ROW PER MATCH PATTERN (a b+) DEFINE b AS b.X > PREV(x))"""

ALL_ROWS = """SELECT * FROM {src} MATCH_RECOGNIZE(PARTITION BY k ORDER BY ts
  MEASURES CLASSIFIER() AS cls ALL ROWS PER MATCH PATTERN (a b+) DEFINE b AS x > PREV(x))"""

NO_ORDER = """SELECT * FROM {src} MATCH_RECOGNIZE(PARTITION BY k
  MEASURES FIRST(ts) AS s, LAST(ts) AS e ONE ROW PER MATCH
  PATTERN (a b+) DEFINE b AS x > PREV(x))"""


@pytest.fixture(params=[1, 2], ids=["threads=1", "threads=2"])
def con(request):
    con = matchsql.connect(demo=False, threads=request.param, batch_size=16)
    con.sql(
        "CREATE TABLE t AS SELECT i % 4 AS k, i AS ts, (i * 7) % 5 AS x, "
        "repeat('y', 10) AS pad FROM range(200) r(i)"
    )
    con.sql("CREATE VIEW v AS SELECT k, ts, x, pad, error('never read') AS boom FROM t")
    return con


@pytest.mark.parametrize("query", [ONE_ROW, NO_ORDER])
def test_one_row_per_match_reads_only_the_columns_it_uses(con, query):
    want = con.sql(query.format(src="t")).fetchall()
    assert want
    assert con.sql(query.format(src="v")).fetchall() == want


def test_all_rows_per_match_reads_every_column(con):
    assert con.sql(ALL_ROWS.format(src="t")).fetchall()
    with pytest.raises(matchsql.Error, match="never read"):
        con.sql(ALL_ROWS.format(src="v")).fetchall()
