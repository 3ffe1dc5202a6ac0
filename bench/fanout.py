"""Fan-out: 1, 2 and 4 readers of one live stream, each in its own process.

    python -m bench.fanout [--rows 6000000] [--q1-rows 6000000] [--repeat 3]

Each reader has its own cursor and reads every tuple. Stages:

* ``queue`` - every reader drains the stream (LiveReader.read, no matching);
* ``Q1``    - every reader runs the continuous DejaVu Q1 (``con.sql`` over the
  stream; numba compiled before the clock starts).

The trades are generated once, into an Arrow IPC file that every producer
memory-maps (so no run pays for making its data). The readers register first;
then a producer process writes ``rows`` trades with ``write_batch`` in
65,536-row frames. ``producer rows/s`` is its own write rate (a ``block``
stream: once the ring is full it writes as fast as the slowest reader reads);
``readers total rows/s`` is the tuples all readers received together over the
time from the producer's first write to the last reader's end of stream
(system-wide monotonic clock); ``vs 1 reader`` compares that with the single
reader's. ``readers CPU s`` and ``producer CPU s`` are the processes' own
user+system CPU seconds over the run (``getrusage``), and ``cores busy`` is
all of it over the run's seconds: on this 2-core machine readers that are
CPU-bound cannot go faster together than 2 cores' worth, whatever the stream
does, so this column says how much of the machine the run used. Each figure is
the median of ``repeat`` runs, the reader counts interleaved (a shared
machine's load drifts); the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from statistics import median

import pyarrow as pa

import matchsql
from bench.stream_common import scratch_stream, spawn_producer
from bench.stream_throughput import COLUMNS
from matchsql.storage.catalog import Catalog
from matchsql.storage.demo import synthetic_trades
from matchsql.storage.shm_ring import Ring

READER_COUNTS = (1, 2, 4)
FRAME_ROWS = 65_536

PRODUCER = """
    import resource, sys, time
    import pyarrow as pa
    from matchsql.storage import Producer
    name, path, rows, frame = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    pace = float(sys.argv[5])  # rows per second offered (0: as fast as the stream takes them)
    table = pa.ipc.open_file(pa.memory_map(path)).read_all()
    batches = table.slice(0, rows).combine_chunks().to_batches(max_chunksize=frame)
    producer = Producer.open(name)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    start, clock = time.perf_counter(), time.monotonic_ns()
    written = 0
    while written < rows:  # the queue stage writes the data more than once
        for batch in batches:
            if written >= rows:
                break
            if pace and (ahead := written / pace - (time.perf_counter() - start)) > 0:
                time.sleep(ahead)
            batch = batch.slice(0, rows - written)
            producer.write_batch(batch)
            written += batch.num_rows
    producer.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(clock, rows / (time.perf_counter() - start), usage.ru_utime + usage.ru_stime - cpu)
"""

READER = """
    import resource, sys, time
    import matchsql
    from bench.queries import Q1
    from matchsql.storage.catalog import Catalog
    from matchsql.storage.demo import synthetic_trades
    from matchsql.storage.live_reader import LiveReader
    name, stage = sys.argv[1], sys.argv[2]
    rows = 0
    if stage == "queue":
        reader = LiveReader(Catalog(None).require(name)).open()
    else:
        con = matchsql.connect(demo=False)
        trade = synthetic_trades(20_000, 50, 1)
        con.sql(Q1.rstrip(";")).fetchall()  # compile the matcher before the clock starts
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    print("ready", flush=True)
    if stage == "queue":
        while (item := reader.read()) is not None:
            rows += item[1].num_rows
        reader.close()
    else:
        result = con.sql(Q1.replace("FROM trade ", f"FROM {name} ").rstrip(";"))
        for batch in result.fetch_batches():
            rows += batch.num_rows  # matches
    ended = time.monotonic_ns()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(rows, ended, usage.ru_utime + usage.ru_stime - cpu, flush=True)
"""


def _readers(name: str) -> int:
    ring = Ring.attach(Catalog(None).require(name).segment)
    try:
        return len(ring.readers())
    finally:
        ring.close()


def run(
    con: matchsql.Connection, data: Path, stage: str, readers: int, rows: int, pace: float
) -> tuple:
    """(producer rows/s, readers' total rows/s, seconds, readers' CPU s, producer CPU s)."""
    with scratch_stream(con, "bench_fanout", COLUMNS, "capacity = 1048576") as name:
        procs = [spawn_producer(READER, name, stage) for _ in range(readers)]
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready"
        while _readers(name) < readers:  # a Q1 reader registers when its query starts
            time.sleep(0.005)
        producer = spawn_producer(PRODUCER, name, str(data), str(rows), str(FRAME_ROWS), str(pace))
        out, _ = producer.communicate(timeout=600)
        clock, write_rate, producer_cpu = out.split()
        ends, cpu = [], 0.0
        for proc in procs:
            _, ended, used = proc.communicate(timeout=600)[0].split()
            ends.append(int(ended))
            cpu += float(used)
        seconds = (max(ends) - int(clock)) / 1e9
    return float(write_rate), readers * rows / seconds, seconds, cpu, float(producer_cpu)


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=30_000_000, help="queue stage")
    parser.add_argument("--q1-rows", type=int, default=6_000_000)
    parser.add_argument("--paced-rows", type=int, default=3_000_000)
    parser.add_argument(
        "--pace",
        type=float,
        default=1_000_000,
        help="rows/s the producer offers in the Q1-paced stage",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stages", default="queue,Q1,Q1-paced")
    args = parser.parse_args(argv)
    stages = {
        "queue": (args.rows, 0.0),
        "Q1": (args.q1_rows, 0.0),
        "Q1-paced": (args.paced_rows, args.pace),
    }
    con = matchsql.connect(demo=False)
    with tempfile.TemporaryDirectory(prefix="matchsql-fanout-") as scratch:
        data = Path(scratch) / "trades.arrow"
        table = synthetic_trades(max(args.q1_rows, args.paced_rows), 50, 1)
        with pa.OSFile(str(data), "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
            out.write_table(table)
        del table
        print(f"# {os.cpu_count()} cores; load average before: {_load()}")
        print(
            f"{'stage':<9}{'readers':>8}{'rows each':>12}{'producer rows/s':>17}"
            f"{'readers total rows/s':>22}{'vs 1 reader':>13}{'seconds':>9}"
            f"{'readers CPU s':>15}{'rows/CPU s':>12}{'producer CPU s':>16}{'cores busy':>12}"
        )
        for stage in args.stages.split(","):
            rows, pace = stages[stage]
            runs: dict[int, list[tuple]] = {n: [] for n in READER_COUNTS}
            for _ in range(args.repeat):
                for readers in runs:
                    runs[readers].append(run(con, data, stage.split("-")[0], readers, rows, pace))
            single = None
            for readers, measured in runs.items():
                write_rate, total, seconds, cpu, producer_cpu = (
                    median(m[i] for m in measured) for i in range(5)
                )
                single = single or total
                print(
                    f"{stage:<9}{readers:>8}{rows:>12,}{write_rate:>17,.0f}{total:>22,.0f}"
                    f"{total / single:>12.2f}x{seconds:>9.2f}{cpu:>15.2f}"
                    f"{readers * rows / cpu:>12,.0f}{producer_cpu:>16.2f}"
                    f"{(cpu + producer_cpu) / seconds:>12.2f}"
                )
        print(f"# load average after: {_load()}")


if __name__ == "__main__":
    main()
