"""DuckDB's functions over a live stream: the same matches as over a table of its rows.

The stream's batches get the query's derived columns from DuckDB as they are
read, and DuckDB computes the measures over the matches, in pull and push mode.
"""

from __future__ import annotations

import pytest

from tests.streams.conftest import bounded
from tests.streams.test_session_streams import PRODUCE, TRADES, table_of

QUERY = (
    "SELECT * FROM {source} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES concat_ws('/', lower(FIRST(symbol)), strftime(LAST(ts), '%H:%M:%S')) AS tag, "
    "median(B.price) AS med, count(*) AS n ONE ROW PER MATCH PATTERN (A B+) "
    "DEFINE B AS round(B.price, 0) < round(PREV(B.price), 0) AND length(symbol) > 0)"
)


@pytest.mark.parametrize("mode", ["pull", "push"])
def test_functions_over_a_stream(con, spawn, mode):
    con.sql(TRADES)
    con.sql(f"SET input_mode = '{mode}'")
    producer = spawn(PRODUCE, "3000")
    live = bounded(con.sql(QUERY.format(source="trades")).fetchall)
    assert producer.wait() == 0
    expected = con.sql(QUERY.format(source=table_of(con, 3000))).fetchall()
    assert len(live) > 20
    assert sorted(live, key=repr) == sorted(expected, key=repr)
