"""Live-stream latency: enqueue -> dequeued, and enqueue -> match emitted, at fixed rates.

    python -m bench.stream_latency [--rates 10000,100000,1000000] [--seconds 2]

A separate producer process writes rows ``(i, flag, t_ns)`` at the target rate,
one ``write_batch`` per millisecond (rate/1000 rows each), with ``t_ns`` the
system-wide monotonic clock at the write. Two consumers are measured:

* ``queue`` - LiveReader.read; latency = clock when the batch is returned - t_ns
  of each row in it;
* ``match`` - ``SELECT * FROM s MATCH_RECOGNIZE (... PATTERN (A) DEFINE A AS
  A.flag = 1)`` (every 10th row matches) through ``con.sql``, matcher
  chosen by ``--path``; latency = clock when the match batch reaches the caller - t_ns of
  the matched row. When the matcher cannot keep up with the rate, latency
  grows with the backlog: the table shows the achieved consumer rate (rows
  from the first row consumed to end of stream) so this is visible. A short
  unmeasured run first lets the compiled matcher's JIT compile its kernels.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

import matchsql
from bench.stream_common import percentile, scratch_stream, spawn_producer
from matchsql.storage.catalog import Catalog
from matchsql.storage.live_reader import LiveReader

COLUMNS = "i BIGINT, flag BIGINT, t_ns BIGINT"
QUERY = (
    "SELECT * FROM {name} MATCH_RECOGNIZE(MEASURES A.t_ns AS t_ns ONE ROW PER MATCH "
    "PATTERN (A) DEFINE A AS A.flag = 1)"
)
PRODUCER = """
    import sys, time
    import numpy as np, pyarrow as pa
    from matchsql.storage import Producer
    name, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    per_tick = max(1, int(rate / 1000))
    pa.record_batch({"i": np.arange(3)})  # pyarrow's first conversion is slow: not measured
    producer = Producer.open(name)
    sent, start = 0, time.monotonic()
    total = int(rate * seconds)
    while sent < total:
        n = min(per_tick, total - sent)
        i = np.arange(sent, sent + n, dtype=np.int64)
        batch = pa.record_batch({"i": i, "flag": (i % 10 == 0).astype(np.int64),
                                 "t_ns": np.full(n, time.monotonic_ns(), dtype=np.int64)})
        producer.write_batch(batch)
        sent += n
        ahead = start + sent / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    producer.close()
    print(sent / (time.monotonic() - start))
"""


def _queue(name: str) -> tuple[list[float], int, float]:
    reader = LiveReader(Catalog(None).require(name), max_rows=1 << 20).open()
    latencies: list[np.ndarray] = []
    rows, first = 0, None
    try:
        while (item := reader.read()) is not None:
            now = time.monotonic_ns()
            first = first or now
            stamps = item[1].column("t_ns").to_numpy()
            latencies.append((now - stamps) / 1e6)
            rows += len(stamps)
    finally:
        reader.close()
    seconds = (time.monotonic_ns() - (first or 0)) / 1e9
    return sorted(np.concatenate(latencies).tolist()) if latencies else [], rows, seconds


def _match(con: matchsql.Connection, name: str) -> tuple[list[float], int, float]:
    latencies: list[np.ndarray] = []
    first = None
    for batch in con.sql(QUERY.format(name=name)).fetch_batches():
        now = time.monotonic_ns()
        first = first or now
        latencies.append((now - batch.column("t_ns").to_numpy()) / 1e6)
    seconds = (time.monotonic_ns() - (first or 0)) / 1e9
    values = sorted(np.concatenate(latencies).tolist()) if latencies else []
    return values, len(values) * 10, seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="10000,100000,1000000")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument(
        "--path", default="auto", help="execution_path of the matcher (auto, reference, ...)"
    )
    args = parser.parse_args(argv)
    con = matchsql.connect(demo=False, execution_path=args.path)
    pa.array([1]).to_numpy()  # pyarrow's first to_numpy() is slow (lazy imports): not measured
    print(
        f"{args.seconds:g} s per run; producer in a separate process, one write per ms; "
        f"execution_path={args.path}"
    )
    print(
        f"{'rate/s':>10} {'consumer':<8}{'rows':>11}{'rows/s':>12}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'max ms':>9}"
    )
    with scratch_stream(con, "bench_latency", COLUMNS) as name:  # warm-up: JIT not measured
        producer = spawn_producer(PRODUCER, name, "10000", "0.2")
        _match(con, name)
        producer.communicate(timeout=600)
    for rate in (int(r) for r in args.rates.split(",")):
        for stage in ("queue", "match"):
            with scratch_stream(con, "bench_latency", COLUMNS) as name:
                producer = spawn_producer(PRODUCER, name, str(rate), str(args.seconds))
                values, rows, elapsed = _queue(name) if stage == "queue" else _match(con, name)
                producer.communicate(timeout=600)
            print(
                f"{rate:>10,} {stage:<8}{rows:>11,}{rows / elapsed:>12,.0f}"
                f"{percentile(values, 0.5):>9.3f}{percentile(values, 0.99):>9.3f}"
                f"{(values[-1] if values else float('nan')):>9.3f}"
            )


if __name__ == "__main__":
    main()
