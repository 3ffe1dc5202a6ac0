"""Statements over a live stream in the session layer: plain SQL reads the stream, a
statement starts when its rows are read (not in con.sql()), Result.stats, SHOW STREAMS."""

from __future__ import annotations

import time

import pytest

import matchsql
from matchsql.storage.demo import synthetic_trades
from tests.streams.conftest import bounded

TRADES = "CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)"
PRODUCE = """
    import sys
    from matchsql.storage import Producer
    from matchsql.storage.demo import synthetic_trades
    with Producer.open("trades") as producer:
        for batch in synthetic_trades(int(sys.argv[1]), 5, 7).to_batches(max_chunksize=500):
            producer.write_batch(batch)
"""
RISES = (
    "SELECT {select} FROM {source} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES count(*) AS n PATTERN (A B+) DEFINE B AS price > PREV(price)){rest}"
)


def table_of(con, rows: int) -> str:
    """The producer's rows as a table, to compare with."""
    con.duckdb.register("trades_src", synthetic_trades(rows, 5, 7))
    con.sql("CREATE OR REPLACE TABLE trades_table AS SELECT * FROM trades_src")
    return "trades_table"


def test_plain_sql_over_a_stream_reads_it_to_its_end(con, spawn):
    con.sql(TRADES)
    producer = spawn(PRODUCE, "3000")
    grouped = "SELECT symbol, count(*), sum(volume) FROM {} GROUP BY symbol ORDER BY symbol"
    live = bounded(con.sql(grouped.format("trades")).fetchall)
    assert producer.wait() == 0
    assert live == con.sql(grouped.format(table_of(con, 3000))).fetchall()
    assert len(live) == 5


def test_a_missing_name_is_still_a_catalog_error(con):
    con.sql(TRADES)
    with pytest.raises(matchsql.CatalogError, match="no_such"):
        con.sql("SELECT count(*) FROM no_such")


def test_an_aggregate_over_a_stream_match_starts_when_read(con, spawn):
    con.sql(TRADES)
    # count(*) alone: DuckDB reads no column of the matches.
    query = RISES.format(select="count(*) AS matches", source="trades", rest="")
    started = time.monotonic()
    result = bounded(lambda: con.sql(query), timeout=10)  # no producer yet: must not wait
    assert time.monotonic() - started < 10
    assert result.columns == ["matches"]
    assert result.stats == {}  # filled when the query ends
    producer = spawn(PRODUCE, "4000")
    live = bounded(result.fetchall)
    assert producer.wait() == 0
    expected = con.sql(
        RISES.format(select="count(*)", source=table_of(con, 4000), rest="")
    ).fetchall()
    assert live == expected and live[0][0] > 0
    assert result.stats["records"] == 4000
    assert result.stats["result"] == live[0][0]  # one row per match
    assert con.last_stats is result.stats


def test_show_streams_says_ended_once_the_producer_closed(con, spawn):
    con.sql(TRADES)

    def is_ended() -> bool:
        rows = [row for row in con.sql("SHOW STREAMS").fetchall() if row[0] == "trades"]
        return rows[0][-1]

    assert not is_ended()  # no producer has written yet
    producer = spawn(PRODUCE, "1000")
    assert producer.wait() == 0
    assert is_ended()  # closed, the end marker not yet read
    assert bounded(con.sql("SELECT count(*) FROM trades").fetchall) == [(1000,)]
    assert is_ended()  # read to the end: still ended


@pytest.mark.parametrize("select", ["*", "count(*)"])
def test_no_output_column_over_a_stream_is_a_semantic_error(con, select):
    con.sql(TRADES)
    query = (
        f"SELECT {select} FROM trades MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B+) "
        "DEFINE B AS price > PREV(price))"
    )
    with pytest.raises(matchsql.SemanticError, match="no columns"):
        con.sql(query)
