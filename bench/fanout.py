"""Fan-out: 1, 2 and 4 readers of one live stream, each in its own process.

    python -m bench.fanout [--rows 2000000] [--q1-rows 300000] [--repeat 3]

Each reader has its own cursor and reads every tuple. Stages:

* ``queue`` - every reader drains the stream (LiveReader.read, no matching);
* ``Q1``    - every reader runs the continuous DejaVu Q1 (``con.sql`` over the
  stream; numba compiled before the clock starts).

The readers register first; then a producer process writes ``rows`` synthetic
trades with ``write_batch`` in 65,536-row frames. ``producer rows/s`` is its
own write rate; ``readers total rows/s`` is the tuples all readers received
together over the time from the producer's first write to the last reader's
end of stream (system-wide monotonic clock); ``vs 1 reader`` compares that
with the single reader's. Each figure is the median of ``repeat`` runs, the
reader counts interleaved (a shared machine's load drifts).
"""

from __future__ import annotations

import argparse
import time
from statistics import median

import matchsql
from bench.stream_common import scratch_stream, spawn_producer
from bench.stream_throughput import COLUMNS, PRODUCER
from matchsql.storage.catalog import Catalog
from matchsql.storage.shm_ring import Ring

READER = """
    import sys, time
    import matchsql
    from bench.queries import Q1
    from matchsql.storage.catalog import Catalog
    from matchsql.storage.demo import synthetic_trades
    from matchsql.storage.live_reader import LiveReader
    name, stage = sys.argv[1], sys.argv[2]
    rows = 0
    if stage == "queue":
        reader = LiveReader(Catalog(None).require(name)).open()
        print("ready", flush=True)
        while (item := reader.read()) is not None:
            rows += item[1].num_rows
        reader.close()
    else:
        con = matchsql.connect(demo=False)
        trade = synthetic_trades(20_000, 50, 1)
        con.sql(Q1.rstrip(";")).fetchall()  # compile the matcher before the clock starts
        print("ready", flush=True)
        result = con.sql(Q1.replace("FROM trade ", f"FROM {name} ").rstrip(";"))
        for batch in result.fetch_batches():
            rows += batch.num_rows  # matches
    print(rows, time.monotonic_ns(), flush=True)
"""


def _readers(name: str) -> int:
    ring = Ring.attach(Catalog(None).require(name).segment)
    try:
        return len(ring.readers())
    finally:
        ring.close()


def run(con: matchsql.Connection, stage: str, readers: int, rows: int) -> tuple:
    with scratch_stream(con, "bench_fanout", COLUMNS, "capacity = 1048576") as name:
        procs = [spawn_producer(READER, name, stage) for _ in range(readers)]
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready"
        while _readers(name) < readers:  # a Q1 reader registers when its query starts
            time.sleep(0.005)
        producer = spawn_producer(PRODUCER, name, str(rows), "65536")
        out, _ = producer.communicate(timeout=600)
        clock, write_rate = out.split()
        ends = []
        for proc in procs:
            got, ended = proc.communicate(timeout=600)[0].split()
            ends.append(int(ended))
        seconds = (max(ends) - int(clock)) / 1e9
    return float(write_rate), readers * rows / seconds, seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--q1-rows", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    con = matchsql.connect(demo=False)
    print(f"{'stage':<7}{'readers':>8}{'rows each':>12}{'producer rows/s':>17}"
          f"{'readers total rows/s':>22}{'vs 1 reader':>13}{'seconds':>9}")
    for stage, rows in (("queue", args.rows), ("Q1", args.q1_rows)):
        runs: dict[int, list[tuple]] = {n: [] for n in (1, 2, 4)}
        for _ in range(args.repeat):
            for readers in runs:
                runs[readers].append(run(con, stage, readers, rows))
        single = None
        for readers, measured in runs.items():
            write_rate, total, seconds = (median(m[i] for m in measured) for i in range(3))
            single = single or total
            print(f"{stage:<7}{readers:>8}{rows:>12,}{write_rate:>17,.0f}{total:>22,.0f}"
                  f"{total / single:>12.2f}x{seconds:>9.2f}")


if __name__ == "__main__":
    main()
