"""Spark -> live stream -> continuous MATCH_RECOGNIZE.

    python examples/spark_pipeline.py                  # files landing in a temp dir
    python examples/spark_pipeline.py --source rate    # Spark's rate source, until Ctrl-C
    python examples/spark_pipeline.py --show           # also print the matches here

A Structured Streaming query (Parquet files as they land, or the ``rate``
source shaped into trades) writes each micro-batch into the live stream
``trades`` with :func:`matchsql.integrations.spark.write_stream`. While it runs, open the
REPL in another terminal (same user, same machine) and type the continuous
query the script prints; matches appear as Spark's micro-batches arrive::

    $ matchsql
    matchsql> SELECT * FROM trades MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts ...);

The stream lives as long as this script (its creator); with ``--show`` the
script runs the same query itself and prints the matches. The script makes a
stream of its own: where one of that name exists it says so and stops (exit
status 2) without starting Spark; ``--stream NAME`` picks another name.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import matchsql

sys.path.insert(0, str(Path(__file__).resolve().parent))

# A V: at least three falling trades, then at least three rising ones.
QUERY = """SELECT * FROM {stream} MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES MATCH_NUMBER() AS m, FIRST(A.ts) AS start_ts, A.price AS top,
           LAST(D.price) AS bottom, LAST(U.price) AS rebound
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A D{{3,}} U{{3,}})
  DEFINE D AS price < PREV(price), U AS price > PREV(price)
)"""

COLUMNS = "symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP"


def spark_session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("matchsql-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def file_source(spark, directory: Path):
    from pyspark.sql.pandas.types import from_arrow_schema

    from matchsql.storage.demo import SCHEMA

    return (
        spark.readStream.schema(from_arrow_schema(SCHEMA))
        .option("maxFilesPerTrigger", 1)
        .parquet(str(directory))
    )


def rate_source(spark, rows_per_second: int, symbols: int):
    """The rate source's ``(timestamp, value)`` shaped into trades of ``symbols`` tickers.

    Each ticker's price is a sum of sine waves (a slow swing with ripples),
    so falls followed by rebounds, which the example pattern looks for,
    keep occurring.
    """
    from pyspark.sql import functions as F

    value = F.col("value")
    ticker = value % symbols
    n = F.floor(value / symbols)  # the ticker's own trade number
    wave = (
        F.sin(n / F.lit(4.0) + ticker) * 2
        + F.sin(n * F.lit(0.9) + ticker * 2) * 0.8
        + F.sin(n * F.lit(2.9)) * 0.3
    )
    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rows_per_second)
        .load()
        .select(
            F.concat(F.lit("SYM"), F.lpad(ticker.cast("string"), 3, "0")).alias("symbol"),
            F.round(F.lit(50.0) + wave, 2).alias("price"),
            ((value % 10 + 1) * 100).alias("volume"),
            F.col("timestamp").cast("timestamp_ntz").alias("ts"),
        )
    )


def show_matches(con: matchsql.Connection, stream: str, failed: list[matchsql.Error]) -> None:
    """Print the continuous query's matches as they become final; an error is printed as
    the REPL prints one and kept in ``failed`` (the script's exit status says so)."""
    try:
        result = con.sql(QUERY.format(stream=stream))
        print("  ".join(result.columns), flush=True)
        for batch in result.fetch_batches():  # each batch: the matches that just became final
            for row in batch.to_pylist():
                print("  ".join(str(v) for v in row.values()), flush=True)
    except matchsql.Error as exc:
        failed.append(exc)
        print(f"Error: {exc}", file=sys.stderr, flush=True)


def create_stream(con: matchsql.Connection, stream: str) -> None:
    """The script's own stream; where one of that name exists, exit with status 2 (its rows
    are someone else's: never append to them)."""
    try:
        con.sql(f"CREATE STREAM {stream} ({COLUMNS})")
    except matchsql.Error as exc:
        con.close()
        print(
            f"Error: {exc}\nThis example writes into a stream of its own; name another "
            f"with --stream NAME.",
            file=sys.stderr,
        )
        sys.exit(2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=["files", "rate"], default="files")
    parser.add_argument("--stream", default="trades")
    parser.add_argument(
        "--database",
        default=None,
        help="DuckDB file whose stream namespace to use (default: in-memory)",
    )
    parser.add_argument("--rows", type=int, default=20_000, help="trades landed as files")
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between files")
    parser.add_argument("--rate", type=int, default=200, help="rows/s of the rate source")
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="stop the rate source after this long (default: at Ctrl-C)",
    )
    parser.add_argument("--show", action="store_true", help="print the matches here too")
    args = parser.parse_args(argv)

    con = matchsql.connect(args.database or ":memory:", demo=False)
    create_stream(con, args.stream)  # before Spark starts: it takes seconds

    from matchsql.integrations.spark import write_stream

    spark = spark_session()
    work = Path(tempfile.mkdtemp(prefix="matchsql-pipeline-"))
    if args.source == "files":
        from trade_files import land_files

        landing = work / "landing"
        landing.mkdir()
        df = file_source(spark, landing)
        feeder = threading.Thread(
            target=land_files,
            daemon=True,
            args=(landing,),
            kwargs={"rows": args.rows, "symbols": 20, "files": args.files, "every": args.every},
        )
    else:
        df = rate_source(spark, args.rate, 20)
        feeder = None

    writer = write_stream(
        df,
        stream=args.stream,
        database=args.database,
        order_by="ts",
        checkpoint_location=str(work / "checkpoint"),
    )
    print(
        f"Spark is writing into live stream {args.stream!r}. In another terminal run "
        f"`matchsql{' -d ' + args.database if args.database else ''}` and type:\n\n"
        f"{QUERY.format(stream=args.stream)};\n",
        flush=True,
    )
    failed: list[matchsql.Error] = []
    shower = threading.Thread(target=show_matches, args=(con, args.stream, failed), daemon=True)
    if args.show:
        shower.start()
    try:
        if feeder is not None:
            feeder.start()
            feeder.join()
            writer.processAllAvailable()  # every landed file is in the stream
            print("all files are in the stream; ending it", flush=True)
            writer.stop()  # end of stream: the continuous queries finish
            if args.show:
                shower.join(timeout=60)
        else:
            deadline = time.monotonic() + args.seconds if args.seconds else None
            # Sleep in Python, not inside a Spark call, so Ctrl-C stops cleanly.
            while writer.isActive and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.5)
            print("stopping; ending the stream", flush=True)
            writer.stop()
            if args.show:
                shower.join(timeout=60)
    except KeyboardInterrupt:
        writer.stop()
    finally:
        spark.stop()
        con.close()
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
