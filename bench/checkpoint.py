"""Checkpoint overhead of a named continuous query: off, every 1 s, every 10 s.

    python -m bench.checkpoint [--rows 3000000] [--rate 200000] [--seconds 12] [--repeat 3]

The query is the DejaVu Q1 over a live stream of synthetic trades (50
symbols, so 50 partition matchers in every snapshot) with a Parquet archive,
as ``CREATE CONTINUOUS QUERY q WITH (checkpoint_interval = s) AS INSERT INTO
sink SELECT * FROM trades MATCH_RECOGNIZE (...)`` in a file database.

* **throughput**: a producer process writes ``rows`` trades as fast as the
  ring lets it; rows/s = rows / (time from its first write until the query's
  position reaches the last tuple).
* **latency**: a producer writes ``rate`` trades/s in 1,000-row frames for
  ``seconds``; a batch's latency is from its tuples' mean enqueue instant to
  the moment the query has matched it (and written the checkpoint that
  followed it, if one did). p50/p99/max over the batches.

``off`` inserts the matches into the sink each second and saves no state
(at most once after a crash); the others commit sink rows, matcher
state and position in one DuckDB transaction. ``snapshot`` is the largest
matcher-state snapshot written. Each figure is the median of ``repeat`` runs,
the settings interleaved (a shared machine's load drifts).
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path
from statistics import median

import matchsql
from bench.queries import Q1
from bench.stream_common import percentile, spawn_producer
from bench.stream_throughput import COLUMNS
from matchsql.storage.demo import synthetic_trades

SATURATE = """
    import sys, time
    from matchsql.storage import Producer
    from matchsql.storage.demo import synthetic_trades
    database, rows = sys.argv[1], int(sys.argv[2])
    batches = synthetic_trades(rows, 50, 1).to_batches(max_chunksize=65536)
    producer = Producer.open("trades", database=database)
    clock = time.monotonic_ns()
    for batch in batches:
        producer.write_batch(batch)
    producer.close()
    print(clock)
"""
PACED = """
    import sys, time
    from matchsql.storage import Producer
    from matchsql.storage.demo import synthetic_trades
    database, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    frames = synthetic_trades(int(rate * seconds), 50, 1).to_batches(max_chunksize=1000)
    producer = Producer.open("trades", database=database)
    start = time.monotonic()
    for n, frame in enumerate(frames):
        delay = start + n * 1000 / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        producer.write_batch(frame)
    producer.close()
"""
SETTINGS = (("off", 0.0), ("every 1 s", 1.0), ("every 10 s", 10.0))
_RUNS = itertools.count()


def _query(name: str) -> str:
    return Q1.replace("FROM trade ", f"FROM {name} ").rstrip(";")


def run(directory: Path, label: str, interval: float, mode: str, args) -> dict:
    database = str(directory / f"{label.replace(' ', '_')}_{mode}_{next(_RUNS)}.duckdb")
    con = matchsql.connect(database)
    con.sql(
        f"CREATE STREAM trades ({COLUMNS}) WITH (capacity = 1048576, "
        f"archive = '{directory / (Path(database).stem + '_hist')}/')"
    )
    trade = synthetic_trades(1_000, 50, 1)  # noqa: F841 - the sink's shape, and a warm-up
    con.sql(f"CREATE TABLE sink AS SELECT * FROM ({_query('trade')}) LIMIT 0")
    con.sql(
        f"CREATE CONTINUOUS QUERY q WITH (checkpoint_interval = {interval}) AS "
        f"INSERT INTO sink {_query('trades')}"
    )
    runner = con._executor.continuous.runners["q"]
    runner.latencies_ns = []
    if mode == "throughput":
        producer = spawn_producer(SATURATE, database, str(args.rows))
        clock = int(producer.stdout.readline())
        while runner.position < args.rows:
            time.sleep(0.002)
        seconds = (time.monotonic_ns() - clock) / 1e9
        producer.communicate(timeout=600)
        result = {"rows/s": args.rows / seconds}
    else:
        producer = spawn_producer(PACED, database, str(args.rate), str(args.seconds))
        producer.communicate(timeout=600)
        total = int(args.rate * args.seconds)
        while runner.position < total:
            time.sleep(0.01)
        values = sorted(v / 1e6 for v in runner.latencies_ns)
        result = {
            "p50": percentile(values, 0.5),
            "p99": percentile(values, 0.99),
            "max": values[-1] if values else float("nan"),
        }
    shown = con.sql("SHOW CONTINUOUS QUERIES")
    row = dict(zip(shown.columns, shown.fetchall()[0]))
    snap = runner.snapshot_bytes
    con.sql("DROP CONTINUOUS QUERY q")
    con.sql("DROP STREAM trades")
    con.close()
    return {**result, "checkpoints": row["checkpoints"], "snapshot": snap or 0}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--rate", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(
        f"Q1 over 50 symbols; throughput: {args.rows:,} rows as fast as possible; latency: "
        f"{args.rate:,} rows/s for {args.seconds:g} s in 1,000-row frames"
    )
    print(
        f"{'checkpoints':<12}{'rows/s':>12}{'vs off':>8}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'max ms':>9}{'checkpoints':>13}{'snapshot KiB':>14}"
    )
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        run(directory, "warm-up", 1.0, "throughput", argparse.Namespace(rows=100_000))
        runs: dict[str, list[tuple[dict, dict]]] = {label: [] for label, _ in SETTINGS}
        for _ in range(args.repeat):
            for label, interval in SETTINGS:
                runs[label].append(
                    (
                        run(directory, label, interval, "throughput", args),
                        run(directory, label, interval, "latency", args),
                    )
                )
    base = None
    for label, _ in SETTINGS:
        fast = {k: median(f[k] for f, _ in runs[label]) for k in runs[label][0][0]}
        paced = {k: median(p[k] for _, p in runs[label]) for k in runs[label][0][1]}
        base = base or fast["rows/s"]
        print(
            f"{label:<12}{fast['rows/s']:>12,.0f}{fast['rows/s'] / base - 1:>+8.1%}"
            f"{paced['p50']:>9.1f}{paced['p99']:>9.1f}{paced['max']:>9.1f}"
            f"{fast['checkpoints']:>6.0f}/{paced['checkpoints']:<6.0f}"
            f"{max(fast['snapshot'], paced['snapshot']) / 1024:>14,.0f}"
        )


if __name__ == "__main__":
    main()
