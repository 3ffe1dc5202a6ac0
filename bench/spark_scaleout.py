"""Spark scale-out vs the embedded engine: DejaVu Q1-Q4, rows/s of each.

    python -m bench.spark_scaleout [--rows 200000] [--symbols 500] [--master local[2]]
    python -m bench.spark_scaleout --rows 10000000 --symbols 500     # the full-size run
    python -m bench.spark_scaleout --data events --rows 334000 --symbols 4000

Both sides run the same query with the same settings (the planner's choice of
path) over the same rows: ``--data trades`` (default) the synthetic trades
(``synthetic_trades(rows, symbols, seed=0)``) and DejaVu Q1-Q4; ``--data
events`` the short-partition event data of :mod:`bench.events` (``--symbols``
aircraft) and its queries. The embedded engine reads a DuckDB table; Spark reads
the same rows from a Parquet file and runs :func:`matchsql.integrations.spark.match_recognize`
(the rows hash-partitioned by key, each task matching all of its keys). The queries' implicit input
order is written as ``ORDER BY ts`` on
both sides, so the results must be equal; the table says whether they are
(row counts). Spark's session start-up and a warm-up run of each query on
5,000 rows (Python workers start, import matchsql, compile the query's
kernels) are not counted; everything from reading the Parquet file to the
last match is. Q1/Q3 have no PARTITION BY: Spark matches them as ORDER BY
ranges in parallel (:mod:`matchsql.integrations.spark.ranges`); ``--ranges 1`` runs them as one
task, as before.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

import pyarrow.parquet as pq

import matchsql
from bench.events import QUERIES as EVENT_QUERIES
from bench.events import flights, statement
from bench.queries import DEJAVU
from matchsql.storage.demo import synthetic_trades


def with_order(query: str) -> str:
    """The query with its implicit input order (ts) written out."""
    if "PARTITION BY symbol" in query:
        return query.replace("PARTITION BY symbol", "PARTITION BY symbol ORDER BY ts")
    return query.replace("MATCH_RECOGNIZE(\n", "MATCH_RECOGNIZE(\n  ORDER BY ts\n", 1)


def spark_session(master: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("matchsql-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, _cores(master))))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _cores(master: str) -> int:
    inside = master[master.find("[") + 1 : master.find("]")] if "[" in master else "1"
    return (os.cpu_count() or 2) if inside == "*" else int(inside)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--symbols", type=int, default=500)
    parser.add_argument(
        "--queries", default=None, help="comma list (default: every query of --data)"
    )
    parser.add_argument("--data", choices=["trades", "events"], default="trades")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--skip-embedded",
        action="store_true",
        help="time Spark only (the embedded run is serial and slow at 10M)",
    )
    parser.add_argument(
        "--ranges",
        type=int,
        default=None,
        help="ORDER BY ranges of a query without PARTITION BY (1: one task, as before "
        "issue 38; default: the Spark default parallelism)",
    )
    args = parser.parse_args(argv)

    from matchsql.integrations.spark import SinglePartitionWarning, match_recognize

    if args.data == "events":
        data = flights(args.rows, args.symbols)
        table = "flights"
        queries = {name: statement(name) for name in EVENT_QUERIES}
    else:
        data = synthetic_trades(args.rows, args.symbols, 0)
        table = "trade"
        queries = {name: with_order(query) for name, query in DEJAVU.items()}
    con = matchsql.connect(demo=False)
    con.duckdb.register("src", data)
    con.sql(f"CREATE TABLE {table} AS SELECT * FROM src")
    spark = spark_session(args.master)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trade.parquet")
        pq.write_table(data, path, row_group_size=max(1, args.rows // 8))
        df = spark.read.parquet(path)
        warm = df.limit(5000)
        print(
            f"{'query':<6}{'embedded s':>11}{'embedded rows/s':>16}"
            f"{'spark s':>9}{'spark rows/s':>14}{'matches':>11}  same"
        )
        for name in args.queries.split(",") if args.queries else list(queries):
            query = queries[name]
            embedded_s = embedded_n = None
            if not args.skip_embedded:
                start = time.perf_counter()
                # Count Arrow batches: neither side turns matches into Python tuples.
                embedded_n = sum(b.num_rows for b in con.sql(query).fetch_batches())
                embedded_s = time.perf_counter() - start
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SinglePartitionWarning)
                # Warm up: Python workers start, import matchsql and JIT-compile the
                # query's kernels once per process; that is start-up, not throughput.
                match_recognize(warm, query, ranges=args.ranges).count()
                start = time.perf_counter()
                spark_n = match_recognize(df, query, ranges=args.ranges).count()
                spark_s = time.perf_counter() - start
            results.append((name, embedded_s, embedded_n, spark_s, spark_n))
            _print_row(args.rows, results[-1])
    spark.stop()
    print(
        f"\n{args.rows:,} rows, {args.symbols} symbols, Spark {args.master}, "
        f"{os.cpu_count()} CPU cores"
    )


def _print_row(rows: int, result: tuple) -> None:
    name, embedded_s, embedded_n, spark_s, spark_n = result
    if embedded_s is None:
        embedded = "            -"
        same = "-"
    else:
        embedded = f"{rows / embedded_s:>13,.0f}"
        same = "yes" if embedded_n == spark_n else f"NO ({embedded_n} vs {spark_n})"
    es = f"{embedded_s:>11.1f}" if embedded_s is not None else f"{'-':>11}"
    print(
        f"{name:<6}{es}{embedded:>16}{spark_s:>9.1f}{rows / spark_s:>14,.0f}{spark_n:>11,}  {same}",
        flush=True,
    )


if __name__ == "__main__":
    main()
