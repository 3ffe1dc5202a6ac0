"""The driver program of the cluster tests, run in a process of its own:

    python -m tests.spark.cluster_client classic spark://127.0.0.1:PORT OUT_DIR

runs the bounded and the streaming queries on the standalone cluster, serves Spark
Connect from the same driver and runs the queries again through a Connect client
(``python -m tests.spark.cluster_client connect sc://127.0.0.1:PORT DIR``, a process of
its own), then checks the error when the executors' Python lacks matchsql, and that shipping
matchsql as a zip (``addPyFile``, what ``--py-files`` does) cures it. Results go to
``OUT_DIR/classic`` and ``OUT_DIR/connect``.

Why a separate process: a Python process holds one SparkContext (the test process
already has the local one), and a Spark Connect session switches pyspark into remote
mode for the whole process (``SPARK_CONNECT_MODE_ENABLED``), which the local session's
tests must not see. The program runs the queries and writes each result as an Arrow
file into ``OUT_DIR``; the tests compare them with the embedded engine's rows.
"""

from __future__ import annotations

import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from bench.queries import DEJAVU
from matchsql.integrations.spark import ExecutorSetupError, match_recognize, match_recognize_stream
from tests.spark.cluster import SOURCE_ROOT, executor_conf, free_port
from tests.spark.helpers import FileSource, frame, python_without_matchsql, run_available, trades

# Bounded queries: partitioned by key (mapInArrow over the hash partitions), without
# PARTITION BY (ORDER BY ranges matched in parallel, MATCH_NUMBER renumbered), and one with
# an outer statement (Spark SQL over the matches, which works differently over Connect).
BATCH = {
    "Q4": DEJAVU["Q4"],
    "Q3": DEJAVU["Q3"],
    "outer": """
        SELECT m.symbol, m.mn, m.first_ts, m.low FROM trade MATCH_RECOGNIZE (
          PARTITION BY symbol ORDER BY ts
          MEASURES MATCH_NUMBER() AS mn, FIRST(A.ts) AS first_ts, MIN(B.price) AS low
          PATTERN (A B{2,} C)
          DEFINE B AS price < PREV(price), C AS price > A.price
        ) AS m
        WHERE m.mn % 2 = 1 AND m.symbol <> '{x}'""",
}
STREAM = DEJAVU["Q4"]


def batch_data() -> pa.Table:
    return trades(4000, 5, seed=3)


def stream_data() -> pa.Table:
    return trades(1200, 3, seed=11)


def write(table: pa.Table, path: Path) -> None:
    with pa.ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)


def read(path: Path) -> pa.Table:
    with pa.ipc.open_file(path) as reader:
        return reader.read_all()


def run_batch(spark, out: Path) -> None:
    df = frame(spark, batch_data())
    for name, query in BATCH.items():
        write(match_recognize(df, query, input_order="ts").toArrow(), out / f"batch-{name}.arrow")


def run_stream(spark, out: Path) -> None:
    data = stream_data()
    source = FileSource(out, data)
    for start in range(0, data.num_rows, 400):
        source.add(data.slice(start, 400))
    source.add_end_markers(pc.unique(data["symbol"]).to_pylist())
    df = match_recognize_stream(source.stream(spark), STREAM, input_order="ts", end_marker="eos")
    run_available(df, out / "stream-out", out / "checkpoint")
    write(spark.read.parquet(str(out / "stream-out")).toArrow(), out / "stream.arrow")


def matchsql_zip(root: Path) -> Path:
    """matchsql's package as a zip archive, what a wheel of it holds (a wheel is a zip,
    but Spark puts only .zip, .egg and .jar files on the workers' path)."""
    path = root / "matchsql.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted((SOURCE_ROOT / "matchsql").rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                archive.write(file, file.relative_to(SOURCE_ROOT).as_posix())
    return path


def run_missing(spark, out: Path) -> None:
    """The executors' Python lacks matchsql: the call must fail with matchsql's error;
    once matchsql is shipped to them as a zip (``addPyFile``, as ``--py-files`` does),
    the same call works."""
    context = spark.sparkContext
    original = context.pythonExec
    context.pythonExec = str(python_without_matchsql(out))
    df = frame(spark, batch_data())
    try:
        try:
            match_recognize(df, BATCH["Q4"], input_order="ts").count()
        except ExecutorSetupError as exc:
            (out / "missing.txt").write_text(f"ExecutorSetupError\n{exc}")
        except Exception as exc:
            (out / "missing.txt").write_text(f"{type(exc).__name__}\n{exc}")
        else:
            (out / "missing.txt").write_text("no error")
        context.addPyFile(str(matchsql_zip(out)))
        # The reference matcher: numba's cache is keyed by the zip's stamp, so the compiled
        # paths would compile every kernel again here (~15 s), for nothing this checks.
        shipped = match_recognize(
            df, BATCH["Q4"], input_order="ts", config={"execution_path": "reference"}
        )
        write(shipped.toArrow(), out / "shipped.arrow")
    finally:
        context.pythonExec = original


def main(argv: list[str]) -> None:
    mode, url, out_dir = argv
    out = Path(out_dir)
    started = time.monotonic()

    def lap(what: str) -> None:
        with open(out / "timings.txt", "a") as f:
            f.write(f"{mode} {what} {time.monotonic() - started:.1f} s\n")

    if mode == "connect":
        spark = SparkSession.builder.remote(url).getOrCreate()
        run_batch(spark, out)
        lap("batch")
        run_stream(spark, out)
        lap("stream")
        spark.stop()
        return
    if mode != "classic":
        raise SystemExit(f"unknown mode {mode!r}")
    connect_port = free_port()
    spark = (
        SparkSession.builder.master(url)
        .appName("matchsql-cluster-tests")
        .config(map=executor_conf())
        # This driver also serves Spark Connect (the server's plugin, from the bundled
        # spark-connect jar): the Connect client below uses the same executors, where a
        # server of its own would start a driver and two executors more.
        .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
        .config("spark.connect.grpc.binding.port", str(connect_port))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    lap("session")
    run_batch(spark, out / "classic")
    lap("batch")
    run_stream(spark, out / "classic")
    lap("stream")
    connect_out = out / "connect"
    subprocess.run(
        [sys.executable, "-m", "tests.spark.cluster_client", "connect"]
        + [f"sc://127.0.0.1:{connect_port}", str(connect_out)],
        check=True,
    )
    lap("connect")
    run_missing(spark, out / "classic")
    lap("missing")
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
