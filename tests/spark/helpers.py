"""Helpers shared by the Spark tests: DataFrames from Arrow, the embedded engine's rows,
a file source for streams (also used by the cluster tests' client process)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

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
    return table_rows(df.toArrow())


def table_rows(table: pa.Table) -> list[tuple]:
    """An Arrow table's rows as tuples of Python values."""
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


class FileSource:
    """A directory that receives the stream's input one Parquet file at a time."""

    def __init__(self, root: Path, data: pa.Table) -> None:
        self.dir = root / "in"
        self.dir.mkdir()
        self.data = data
        self.files = 0

    def add(self, table: pa.Table) -> None:
        path = self.dir / f"part-{self.files:04d}.parquet"
        pq.write_table(table.append_column("eos", pa.array([False] * table.num_rows)), path)
        stamp = 1_700_000_000 + self.files  # file order = modification order
        os.utime(path, (stamp, stamp))
        self.files += 1

    def add_end_markers(self, symbols: list[str]) -> None:
        """One marker row per symbol: every key's partition ends."""
        n = len(symbols)
        columns = {f.name: pa.nulls(n, f.type) for f in self.data.schema}
        columns["symbol"] = pa.array(symbols)
        markers = pa.table(columns, schema=self.data.schema)
        path = self.dir / f"part-{self.files:04d}.parquet"
        pq.write_table(markers.append_column("eos", pa.array([True] * n)), path)
        stamp = 1_700_000_000 + self.files
        os.utime(path, (stamp, stamp))
        self.files += 1

    def stream(self, spark):
        from pyspark.sql.pandas.types import from_arrow_schema

        schema = self.data.schema.append(pa.field("eos", pa.bool_()))
        return (
            spark.readStream.schema(from_arrow_schema(schema))
            .option("maxFilesPerTrigger", 1)
            .parquet(str(self.dir))
        )


def run_available(df, out: Path, checkpoint: Path):
    """Process everything available now, then stop (a bounded run of a streaming query)."""
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query


def python_without_matchsql(root: Path) -> Path:
    """An interpreter that has this one's packages (pyspark, pyarrow, ...) but not
    matchsql: a bare virtualenv whose .pth file adds this site-packages directory (the
    editable install of matchsql is a .pth there, which a path added so is not read),
    started with -I so that neither the PYTHONPATH the executors get nor the working
    directory (a checkout, in local mode) brings it back."""
    env_dir = root / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    site = subprocess.run(
        [
            str(env_dir / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "shared.pth").write_text(sysconfig.get_path("purelib") + "\n")
    wrapper = root / "python-without-matchsql"
    wrapper.write_text(f'#!/bin/sh\nexec "{env_dir}/bin/python" -I "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper
