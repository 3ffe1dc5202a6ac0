"""Helpers shared by the Spark tests: DataFrames from Arrow, the embedded engine's rows."""

from __future__ import annotations

import pyarrow as pa

import matchsql
from matchsql.storage.demo import synthetic_trades


def frame(spark, table: pa.Table):
    """A Spark DataFrame holding ``table``; timestamps stay TIMESTAMP_NTZ, as in DuckDB."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame(table, schema=from_arrow_schema(table.schema))


def embedded(name: str, table: pa.Table, query: str) -> list[tuple]:
    """``query``'s rows from the embedded engine, with ``table`` as the DuckDB table ``name``."""
    con = matchsql.connect(demo=False)
    try:
        con.duckdb.register("__input", table)
        con.sql(f'CREATE TABLE "{name}" AS SELECT * FROM __input')
        con.duckdb.unregister("__input")
        result = con.sql(query)
        return result.fetchall() if result is not None else []
    finally:
        con.close()


def rows(df) -> list[tuple]:
    """A Spark DataFrame's rows as tuples of the Python values DuckDB would give."""
    table = df.toArrow()
    return [tuple(row.values()) for row in table.to_pylist()]


def canonical(values: list[tuple]) -> list[tuple]:
    """Rows in a fixed order, for comparing results whose order is not defined."""
    return sorted(values, key=repr)


def trades(rows_: int = 4000, symbols: int = 5, seed: int = 3) -> pa.Table:
    return synthetic_trades(rows_, symbols, seed)


def with_order(query: str) -> str:
    """A DejaVu query with its implicit input order (ts) written as ORDER BY ts."""
    if "PARTITION BY symbol" in query:
        return query.replace("PARTITION BY symbol", "PARTITION BY symbol ORDER BY ts")
    return query.replace("MATCH_RECOGNIZE(\n", "MATCH_RECOGNIZE(\n  ORDER BY ts\n", 1)
