"""The embedded demo ``trade`` table and the synthetic trade generator behind it."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from matchsql.storage.demo import (
    DEMO_ROWS,
    DEMO_SYMBOLS,
    SCHEMA,
    install_demo_trade,
    synthetic_trades,
)


def _checksum(con: duckdb.DuckDBPyConnection) -> tuple:
    return con.execute(
        "SELECT count(*), sum(hash(symbol, price, volume, ts)), sum(hash(rowid, symbol)) FROM trade"
    ).fetchone()


def test_demo_table_shape_and_size() -> None:
    con = duckdb.connect()
    started = time.perf_counter()
    install_demo_trade(con)
    elapsed = time.perf_counter() - started  # the < 2 s budget is checked in bench/, not here
    assert elapsed > 0
    columns = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_name = 'trade' ORDER BY ordinal_position"
    ).fetchall()
    assert columns == [
        ("symbol", "VARCHAR"),
        ("price", "DOUBLE"),
        ("volume", "BIGINT"),
        ("ts", "TIMESTAMP"),
    ]
    rows, symbols, nulls = con.execute(
        "SELECT count(*), count(DISTINCT symbol), "
        "count(*) - count(symbol) - count(price) - count(volume) - count(ts) + 3 * count(*) "
        "FROM trade"
    ).fetchone()
    assert rows == DEMO_ROWS == 500_000
    assert symbols == DEMO_SYMBOLS == 50
    assert nulls == 0


def test_demo_values_look_like_trades() -> None:
    con = duckdb.connect()
    install_demo_trade(con)
    low, high, cents, lots, first, last, bad_hours, weekend = con.execute("""
        SELECT min(price), max(price),
               bool_and(abs(price * 100 - round(price * 100)) < 1e-6),
               bool_and(volume > 0 AND volume % 100 = 0),
               min(ts), max(ts),
               count(*) FILTER (WHERE ts::TIME < TIME '09:30' OR ts::TIME >= TIME '16:00'),
               count(*) FILTER (WHERE dayofweek(ts) IN (0, 6))
        FROM trade""").fetchone()
    assert 0 < low < high
    assert cents and lots
    assert first >= dt.datetime(2006, 1, 1) and last < dt.datetime(2006, 2, 1)
    assert bad_hours == 0 and weekend == 0
    # Every symbol has its own price level and moves both ways.
    levels = con.execute(
        "SELECT count(DISTINCT round(price_level)) FROM "
        "(SELECT avg(price) AS price_level FROM trade GROUP BY symbol)"
    ).fetchone()
    assert levels[0] >= 30
    falls, rises = con.execute("""
        SELECT count(*) FILTER (WHERE price < prev), count(*) FILTER (WHERE price > prev)
        FROM (SELECT price, lag(price) OVER (PARTITION BY symbol ORDER BY ts) AS prev FROM trade)
        """).fetchone()
    assert falls > 10_000 and rises > 10_000


def test_demo_rows_are_in_strict_time_order() -> None:
    con = duckdb.connect()
    install_demo_trade(con)
    # Insertion order (rowid) must be time order: the seed queries have no ORDER BY.
    out_of_order = con.execute("""
        SELECT count(*) FROM (SELECT ts, lag(ts) OVER (ORDER BY rowid) AS prev FROM trade)
        WHERE ts <= prev""").fetchone()[0]
    assert out_of_order == 0
    scanned = con.execute("SELECT ts FROM trade").fetchnumpy()["ts"]
    assert np.all(np.diff(scanned.astype("datetime64[us]").astype(np.int64)) > 0)


def test_demo_is_deterministic() -> None:
    first, second = duckdb.connect(), duckdb.connect()
    install_demo_trade(first)
    install_demo_trade(second)
    assert _checksum(first) == _checksum(second)


def test_install_skips_existing_table() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE trade(symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
    con.execute("INSERT INTO trade VALUES ('X', 1.0, 100, TIMESTAMP '2006-01-03 10:00:00')")
    install_demo_trade(con)
    assert con.execute("SELECT count(*) FROM trade").fetchone()[0] == 1


def test_synthetic_trades_generator() -> None:
    table = synthetic_trades(10_000, 7, seed=3)
    assert isinstance(table, pa.Table)
    assert table.schema == SCHEMA
    assert table.num_rows == 10_000
    assert len(set(table.column("symbol").to_pylist())) == 7
    ts = table.column("ts").cast(pa.int64()).to_numpy()
    assert np.all(np.diff(ts) > 0)
    assert table.equals(synthetic_trades(10_000, 7, seed=3))
    assert not table.equals(synthetic_trades(10_000, 7, seed=4))


def test_synthetic_trades_beyond_the_real_tickers() -> None:
    table = synthetic_trades(5_000, 80)
    names = set(table.column("symbol").to_pylist())
    assert "MSFT" in names and any(n.startswith("SYM") for n in names)
    assert synthetic_trades(0, 3).num_rows == 0


def test_the_front_pages_give_the_demo_tables_real_partition_sizes() -> None:
    # The README and the manual's home page say how many trades the busiest, the
    # median and the quietest symbols have; the generator is what they must match.
    con = duckdb.connect()
    install_demo_trade(con)
    counts = con.execute(
        "SELECT symbol, count(*) AS n FROM trade GROUP BY symbol ORDER BY n DESC, symbol"
    ).fetchall()
    (busiest, most), (quietest, fewest) = counts[0], counts[-1]
    median = int(np.median([n for _, n in counts]))
    root = Path(__file__).resolve().parents[2]
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    home = " ".join((root / "docs" / "index.md").read_text(encoding="utf-8").split())
    assert DEMO_ROWS // DEMO_SYMBOLS == 10_000
    assert (
        f"10,000 a symbol on average but spread as in real trading: from {most:,} trades "
        f"of {busiest} down to {fewest:,} of {quietest}"
    ) in readme
    assert (
        f"{busiest}, the busiest, has {most:,} trades" in home
        and f"the median symbol {median:,} and {quietest}, the quietest, {fewest:,}" in home
    )
