"""Live-stream throughput: separate producer process -> shared-memory queue -> consumer.

    python -m bench.stream_throughput [--rows 5000000] [--q1-rows 300000]

Stages, each with a fresh producer process writing synthetic trades
(symbol, price, volume, ts) with ``write_batch`` in ``--frame-rows`` frames:

* ``queue``   - the reader only drains the queue (LiveReader.read);
* ``router``  - plus HashPartitionRouter by symbol into no-op runs;
* ``Q1``      - the continuous DejaVu Q1 end to end (``con.sql`` over the
  stream, matcher chosen by ``--path``), i.e. what a user sees.

rows/s is rows / (consumer reaches end of stream - producer starts writing),
both on the system-wide monotonic clock (the producer generates its data
before it opens the stream); the producer's own write rate is shown next to it.
A 20k-row Q1 run first warms the compiled matcher up (numba compiles its
kernels once per process), so the table shows the sustained rate.
"""

from __future__ import annotations

import argparse
import time

import matchsql
from bench.queries import Q1
from bench.stream_common import scratch_stream, spawn_producer
from matchsql.execution.router.hashed import HashPartitionRouter
from matchsql.storage.catalog import Catalog
from matchsql.storage.live_reader import LiveReader

COLUMNS = "symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP"
PRODUCER = """
    import sys, time
    from matchsql.storage import Producer
    from matchsql.storage.demo import synthetic_trades
    name, rows, frame = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    batches = synthetic_trades(rows, 50, 1).to_batches(max_chunksize=frame)
    producer = Producer.open(name)
    start, clock = time.perf_counter(), time.monotonic_ns()
    for batch in batches:
        producer.write_batch(batch)
    producer.close()
    print(clock, rows / (time.perf_counter() - start))
"""


class _NoOp:
    def feed(self, batch):
        return []

    def finish(self):
        return []


def _drain(name: str, route: bool) -> int:
    reader = LiveReader(Catalog(None).require(name)).open()
    router = HashPartitionRouter(["symbol"], lambda key: _NoOp()) if route else None
    rows = 0
    try:
        while (item := reader.read()) is not None:
            rows += item[1].num_rows
            if router is not None:
                for _ in router.route(item[1]):
                    pass
    finally:
        reader.close()
    return rows


def _q1(con: matchsql.Connection, name: str) -> int:
    result = con.sql(Q1.replace("FROM trade ", f"FROM {name} ").rstrip(";"))
    return sum(batch.num_rows for batch in result.fetch_batches())


def run_stage(con: matchsql.Connection, stage: str, rows: int, frame: int) -> tuple:
    with scratch_stream(con, "bench_throughput", COLUMNS, "capacity = 1048576") as name:
        producer = spawn_producer(PRODUCER, name, str(rows), str(frame))
        if stage == "Q1":
            matches, got = _q1(con, name), rows
        else:
            matches, got = None, _drain(name, route=stage == "router")
        ended = time.monotonic_ns()
        out, _ = producer.communicate(timeout=600)
        clock, write_rate = out.split()
        seconds = (ended - int(clock)) / 1e9
    return stage, got, seconds, got / seconds, float(write_rate), matches


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--q1-rows", type=int, default=300_000)
    parser.add_argument("--frame-rows", type=int, default=65_536)
    parser.add_argument(
        "--path", default="auto", help="execution_path of the matcher (auto, reference, ...)"
    )
    args = parser.parse_args(argv)
    con = matchsql.connect(demo=False, execution_path=args.path)
    print(
        f"frames of {args.frame_rows:,} rows; producer in a separate process; "
        f"execution_path={args.path}"
    )
    print(
        f"{'stage':<8}{'rows':>12}{'seconds':>10}{'rows/s':>14}{'producer rows/s':>17}"
        f"{'matches':>10}"
    )
    run_stage(con, "Q1", 20_000, args.frame_rows)  # warm-up: JIT compilation is not measured
    for stage, rows in (("queue", args.rows), ("router", args.rows), ("Q1", args.q1_rows)):
        name, got, seconds, rate, write_rate, matches = run_stage(con, stage, rows, args.frame_rows)
        shown = "-" if matches is None else f"{matches:,}"
        print(f"{name:<8}{got:>12,}{seconds:>10.2f}{rate:>14,.0f}{write_rate:>17,.0f}{shown:>10}")


if __name__ == "__main__":
    main()
