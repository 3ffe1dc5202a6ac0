"""The demo ``trade`` table (placeholder until the real generator lands)."""

import duckdb


def install_demo_trade(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE IF NOT EXISTS trade(symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
