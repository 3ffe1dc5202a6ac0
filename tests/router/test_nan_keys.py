"""NaN partition keys: every NaN of a PARTITION BY column is one partition, as in
DuckDB's GROUP BY, although NaN != NaN in Python and in Arrow's ``equal``.

The check: the table with each NaN key replaced by 2.0 (which sorts where NaN
sorts, above 1.0) must give the same matches, partition for partition. Batches of
7 rows cut the NaN partition many times, so the routers must see one partition
continue across batch edges.
"""

from __future__ import annotations

import math

import pytest

import matchsql

QUERY = """SELECT * FROM {table} MATCH_RECOGNIZE (
  PARTITION BY k ORDER BY ts
  MEASURES MATCH_NUMBER() AS mn, A.ts AS a_ts, LAST(B.ts) AS b_ts
  ONE ROW PER MATCH
  PATTERN (A B+)
  DEFINE B AS x > PREV(x)
)"""


def _label(key: float | None) -> str:
    """The partition's name: NaN and its stand-in 2.0 are both "nan"."""
    if key is None:
        return "null"
    return "nan" if math.isnan(key) or key == 2.0 else str(key)


def _rows(con: matchsql.Connection, table: str) -> list[tuple]:
    return sorted((_label(r[0]), *r[1:]) for r in con.sql(QUERY.format(table=table)).fetchall())


@pytest.mark.parametrize(
    ("path", "threads", "workers"),
    [("auto", 1, 1), ("auto", 2, 1), ("reference", 1, 1), ("auto", 1, 2)],
)
def test_nan_keys_are_one_partition(path: str, threads: int, workers: int) -> None:
    con = matchsql.connect(demo=False, threads=threads, execution_path=path)
    con.sql("SET batch_size = 7")
    con.sql(f"SET workers = {workers}")
    con.sql("""CREATE TABLE t AS SELECT
        CASE i % 3 WHEN 0 THEN 'NaN'::DOUBLE WHEN 1 THEN 1.0 ELSE NULL END AS k,
        i AS ts, ((i * 7) % 11)::DOUBLE AS x FROM range(300) r(i)""")
    con.sql("CREATE TABLE u AS SELECT CASE WHEN isnan(k) THEN 2.0 ELSE k END AS k, ts, x FROM t")
    got, expected = _rows(con, "t"), _rows(con, "u")
    con.close()
    assert got == expected
    nan_matches = [r for r in got if r[0] == "nan"]
    assert len(nan_matches) >= 5  # the NaN rows are one partition with matches across batches
    assert max(r[1] for r in nan_matches) == len(nan_matches)  # numbered 1..n in it
