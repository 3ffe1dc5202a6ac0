"""Structured Streaming vs the embedded engine: does the stream keep up with a target rate?

    python -m bench.spark_stream [--rates 50000,100000,200000,400000] [--batches 5]
    python -m bench.spark_stream --query Q2 --symbols 2000 --rates 200000 --batches 20
    python -m bench.spark_stream --key-buckets 0,4 --rates 200000   # per key vs 4 buckets
    python -m bench.spark_stream --rates 200000,400000 --interval 4  # longer micro-batches

A file source paced by Spark itself: for each target rate R the synthetic trades
(``synthetic_trades(R * interval * batches, symbols, seed=0)``, in ``ts`` order) are
written beforehand as ``batches`` Parquet files of R * interval rows each, read with
``maxFilesPerTrigger=1`` under a ``--interval`` (1 s) processing-time trigger. So
Spark is offered R rows per second: while a micro-batch takes less than the
interval the next one waits for its trigger, once it takes longer the next starts
at once and the stream falls behind. Writing the files while the query runs would
measure the file system and the listing as much as the query; pre-written files
with one per trigger offer the same rate without a writer competing for the two
cores.

Columns, per rate: ``processed rows/s`` is Spark's own figure (rows of the
micro-batch / its trigger execution time, averaged over the timed micro-batches:
what the stream could take at most); ``achieved rows/s`` is the timed rows over
the wall time from the first timed micro-batch's start to the start of the one
after the last (what it took, at the offered rate); ``batch ms`` the median and maximum
micro-batch duration. It keeps up when the achieved rate is at least 95% of the
offered one and the median micro-batch fits in the interval. The first
micro-batch of each run (every key new, no state to restore) is not timed, nor
the last (one end-marker row per symbol, which ends every key's partition so that
the result can be compared); a warm-up stream first starts the Python workers and
compiles the query's kernels.

``embedded rows/s`` runs the same query (its implicit order written as ``ORDER BY
ts``) over the same rows in the embedded engine (after its own warm-up), and ``ratio`` is
processed / embedded rows/s, both measured in this run. ``same`` compares the
stream's result rows (everything its Parquet sink wrote) with the embedded
engine's, as sorted Arrow tables.

``groups`` is how rows are grouped into state groups: ``key`` one group per
symbol (the default of :func:`match_recognize_stream`), ``N buckets`` its
``key_buckets=N``; ``--key-buckets 0,N`` runs both, one after the other, on the
same files.

The output goes to a Parquet file sink with a checkpoint: the exactly-once
configuration, so its cost is counted. On a shared machine the figures are noisy;
compare rows of one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import matchsql
from bench.queries import DEJAVU
from bench.spark_scaleout import spark_session, with_order
from matchsql.storage.demo import synthetic_trades

END = "eos"


def write_files(directory: Path, data: pa.Table, per_file: int) -> int:
    """``data`` as Parquet files of ``per_file`` rows plus one end-marker file; the count.

    File modification times follow the file order, which is the order a file source
    lists them in."""
    directory.mkdir(parents=True)
    tables = [data.slice(i, per_file) for i in range(0, data.num_rows, per_file)]
    symbols = pc.unique(data["symbol"])
    markers = pa.table(
        {f.name: pa.nulls(len(symbols), f.type) for f in data.schema}, schema=data.schema
    ).set_column(data.schema.get_field_index("symbol"), "symbol", symbols)
    for i, table in enumerate([*tables, markers]):
        path = directory / f"part-{i:05d}.parquet"
        flag = pa.array([table is markers] * table.num_rows)
        pq.write_table(table.append_column(END, flag), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return len(tables) + 1


def run_stream(
    spark,
    query: str,
    directory: Path,
    root: Path,
    files: int,
    interval: float,
    buckets: int | None = None,
):
    """Run the stream over ``directory`` until all ``files`` are processed; its progress."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from matchsql.integrations.spark import match_recognize_stream

    schema = synthetic_trades(1, 1, 0).schema.append(pa.field(END, pa.bool_()))
    source = (
        spark.readStream.schema(from_arrow_schema(schema))
        .option("maxFilesPerTrigger", 1)
        .parquet(str(directory))
    )
    matches = match_recognize_stream(
        source, query, input_order="ts", end_marker=END, key_buckets=buckets
    )
    running = (
        matches.writeStream.format("parquet")
        .option("path", str(root / "out"))
        .option("checkpointLocation", str(root / "checkpoint"))
        .outputMode("append")
        .trigger(processingTime=f"{interval} seconds")
        .start()
    )
    progress: dict[int, dict] = {}
    try:
        while len([p for p in progress.values() if p["numInputRows"]]) < files:
            if running.exception() is not None:
                raise RuntimeError(str(running.exception()))
            for p in running.recentProgress:
                progress[p["batchId"]] = p
            time.sleep(0.2)
    finally:
        running.stop()
    return [progress[b] for b in sorted(progress) if progress[b]["numInputRows"]]


def _start(p: dict) -> float:
    return datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()


def figures(progress: list[dict], interval: float, rate: int) -> dict:
    """Timed micro-batches: all but the first (every key new) and the last (markers)."""
    timed = progress[1:-1]
    durations = [p["durationMs"]["triggerExecution"] for p in timed]
    rows = sum(p["numInputRows"] for p in timed)
    # Up to the next micro-batch's start: the timed batches' trigger slots when the
    # stream keeps up, their durations back to back when it falls behind.
    wall = _start(progress[-1]) - _start(timed[0])
    processed = rows / (sum(durations) / 1000)
    achieved = rows / wall
    median = statistics.median(durations)
    return {
        "processed": processed,
        "achieved": achieved,
        "median_ms": median,
        "max_ms": max(durations),
        "keeps_up": achieved >= 0.95 * rate and median <= interval * 1000,
    }


def sorted_table(table: pa.Table) -> pa.Table:
    """``table`` in a fixed row order, its timestamps without a time zone (Spark's sink
    writes them with one), for comparing results whose order is not defined."""
    fields = [
        pa.field(f.name, pa.timestamp(f.type.unit)) if pa.types.is_timestamp(f.type) else f
        for f in table.schema
    ]
    table = table.cast(pa.schema(fields))
    return table.take(pc.sort_indices(table, [(n, "ascending") for n in table.column_names]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rates", default="50000,100000,200000,400000", help="target rows/s, comma list"
    )
    parser.add_argument("--batches", type=int, default=5, help="files (micro-batches) per rate")
    parser.add_argument("--symbols", type=int, default=500, help="keys (PARTITION BY symbol)")
    parser.add_argument("--query", choices=["Q2", "Q4"], default="Q4")
    parser.add_argument("--interval", type=float, default=1.0, help="trigger interval, s")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--key-buckets",
        default="0,4",
        help="comma list: 0 = one state group per key, N = key_buckets=N (default: both)",
    )
    parser.add_argument("--skip-embedded", action="store_true")
    args = parser.parse_args(argv)
    if args.batches < 3:
        parser.error("--batches must be at least 3 (the first is not timed)")

    from matchsql.integrations.spark import SinglePartitionWarning

    warnings.simplefilter("ignore", SinglePartitionWarning)
    warnings.simplefilter("ignore", FutureWarning)
    query = DEJAVU[args.query]
    spark = spark_session(args.master)
    modes = [int(b) or None for b in args.key_buckets.split(",")]
    print(
        f"{'rate':>9}{'groups':>12}{'processed rows/s':>18}{'achieved rows/s':>17}{'batch ms':>15}"
        f"{'keeps up':>10}{'embedded rows/s':>17}{'ratio':>7}{'matches':>10}  same",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # Warm-up: Python workers start, import matchsql and compile the query's kernels.
        warm = synthetic_trades(6000, args.symbols, 1)
        files = write_files(root / "warm" / "in", warm, 2000)
        for n, buckets in enumerate(modes):
            warm_run = root / f"warm-{n}"
            run_stream(spark, query, root / "warm" / "in", warm_run, files, 0.1, buckets)
        if not args.skip_embedded:
            _embedded(warm, with_order(query))  # the embedded engine compiles its kernels too
        for rate in (int(r) for r in args.rates.split(",")):
            per_file = max(1, round(rate * args.interval))  # one trigger interval's rows
            data = synthetic_trades(per_file * args.batches, args.symbols, 0)
            source = root / str(rate) / "in"
            files = write_files(source, data, per_file)
            expected = None
            embedded_rate = 0.0
            if not args.skip_embedded:
                seconds, expected = _embedded(data, with_order(query))
                embedded_rate = data.num_rows / seconds
            for n, buckets in enumerate(modes):
                run = root / str(rate) / f"run-{n}"
                progress = run_stream(spark, query, source, run, files, args.interval, buckets)
                got = figures(progress, args.interval, rate)
                streamed = spark.read.parquet(str(run / "out")).toArrow()
                embedded = f"{'-':>17}{'-':>7}"
                same = "-"
                if expected is not None:
                    ratio = got["processed"] / embedded_rate
                    embedded = f"{embedded_rate:>17,.0f}{ratio:>7.2f}"
                    equal = sorted_table(streamed).equals(sorted_table(expected))
                    same = "yes" if equal else f"NO ({expected.num_rows} vs {streamed.num_rows})"
                groups = "key" if buckets is None else f"{buckets} buckets"
                batch_ms = f"{got['median_ms']:,.0f}/{got['max_ms']:,.0f}"
                print(
                    f"{rate:>9,}{groups:>12}{got['processed']:>18,.0f}{got['achieved']:>17,.0f}"
                    f"{batch_ms:>15}{'yes' if got['keeps_up'] else 'NO':>10}{embedded}"
                    f"{streamed.num_rows:>10,}  {same}",
                    flush=True,
                )
    spark.stop()
    print(
        f"\n{args.query}, {args.symbols} symbols, {args.batches} files per rate "
        f"({args.batches - 2} timed), trigger {args.interval} s, Spark {args.master}, "
        f"{os.cpu_count()} CPU cores; batch ms: median/max"
    )


def _embedded(data: pa.Table, query: str) -> tuple[float, pa.Table]:
    """Seconds the embedded engine takes for ``query`` over ``data``, and its rows."""
    con = matchsql.connect(demo=False)
    try:
        con.duckdb.register("src", data)
        con.sql("CREATE TABLE trade AS SELECT * FROM src")
        start = time.perf_counter()
        result = con.sql(query)
        batches = list(result.fetch_batches())
        seconds = time.perf_counter() - start
        return seconds, pa.Table.from_batches(batches, schema=result.schema)
    finally:
        con.close()


if __name__ == "__main__":
    main()
