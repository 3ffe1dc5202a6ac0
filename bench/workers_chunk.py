"""Rows per message to a worker: the CPU split of a one-time query, side by side.

    python -m bench.workers_chunk [--rows 1000000] [--partitions 500] [--rounds 3]
                                  [--chunks 16384,65536,262144] [--queries Q2,Q4]

For each query, in turns (so that a change of the machine's load hits every
one): ``workers = 1`` (``threads = 1``) and ``workers = 2`` in the sorted mode
with each message size. Printed per run: wall time, the router process's CPU
(DuckDB's sort and scan, cutting, sending, merging), each worker's CPU (as it
reports it) and the bound that two cores put on the speed-up, one process's
CPU over (router + workers CPU) / 2; then the medians over the rounds. The
worker matches a message's complete partitions in one kernel call, so the
message size sets how many calls (and partition runs cut by a message's
edge) the same rows cost. The last run of each round, "copy", is the
default size with the router's payload built in memory and then copied into
the ring, as before it was written straight into the ring.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import matchsql
import matchsql.execution.workers.worker_router as router_module
from bench.paths import QUERIES
from matchsql.execution.workers.frames import Packed
from matchsql.execution.workers.worker_router import CHUNK_ROWS
from matchsql.storage.demo import synthetic_trades


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunks", default="16384,65536,262144")
    parser.add_argument("--queries", default="Q2,Q4")
    args = parser.parse_args(argv)
    chunks = [int(c) for c in args.chunks.split(",")]
    load = os.getloadavg()
    print(
        f"{os.cpu_count()} CPU core(s), load average {load[0]:.1f} {load[1]:.1f} "
        f"{load[2]:.1f} (a shared machine: wall times are noisy)"
    )
    con = matchsql.connect(demo=False)
    con.duckdb.execute("SET enable_progress_bar = false")
    con.duckdb.register("trade_src", synthetic_trades(args.rows, args.partitions))
    con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    con.duckdb.unregister("trade_src")
    con.sql(
        "CREATE VIEW orders AS SELECT symbol AS custkey, ts AS orderdate, "
        "price AS totalprice FROM trade"
    )
    con.sql("SET threads = 1")
    session = con._executor.workers
    session.mode = "sorted"
    defaults = router_module.WorkerRouter.__init__.__kwdefaults__
    assert defaults is not None
    header = (
        f"{'query':<6}{'run':>15}{'wall s':>8}{'CPU s':>7}{'router':>8}{'workers':>14}"
        f"{'w sum':>7}{'bound':>7}{'w1/w2':>7}"
    )
    try:
        for name in args.queries.split(","):
            sql = QUERIES[name]
            con.sql("SET workers = 2")
            con.sql(sql).arrow()  # the pool and its compiled code
            got: dict[str, list[tuple[float, float, float, float]]] = {}
            print(f"\n{name}, {args.rows:,} rows, {args.partitions} partitions")
            print(header)
            print("-" * len(header))
            for _ in range(args.rounds):
                con.sql("SET workers = 1")
                wall, cpu = _timed(con, sql)
                got.setdefault("w1", []).append((wall, cpu, 0.0, 0.0))
                single = cpu
                print(f"{name:<6}{'w1':>15}{wall:>8.3f}{cpu:>7.3f}")
                con.sql("SET workers = 2")
                for chunk, copied in [(c, False) for c in chunks] + [(CHUNK_ROWS, True)]:
                    # The router's message size (and its back-pressure, 4 messages).
                    router_module.WorkerRouter.__init__.__kwdefaults__ = dict(
                        defaults, chunk_rows=chunk, max_queued_rows=4 * chunk
                    )
                    # "copy": the payload built in memory, then copied into the ring (as
                    # before the rows were written straight into it).
                    router_module.Packed = _copied if copied else Packed
                    wall, cpu = _timed(con, sql)
                    chunk = f"{chunk} copy" if copied else chunk
                    workers = session.last.worker_cpu_s
                    bound = single / ((cpu + sum(workers)) / 2)
                    got.setdefault(f"w2 {chunk}", []).append((wall, cpu, sum(workers), bound))
                    split = "/".join(f"{w:.3f}" for w in workers)
                    print(
                        f"{name:<6}{f'w2 {chunk}':>15}{wall:>8.3f}{'':>7}{cpu:>8.3f}"
                        f"{split:>14}{sum(workers):>7.3f}{bound:>6.2f}x"
                        f"{got['w1'][-1][0] / wall:>6.2f}x"
                    )
            print("medians:")
            w1 = statistics.median(w for w, _, _, _ in got["w1"])
            for run, values in got.items():
                wall = statistics.median(v[0] for v in values)
                cpu = statistics.median(v[1] for v in values)
                if run == "w1":
                    print(f"{name:<6}{run:>15}{wall:>8.3f}{cpu:>7.3f}")
                    continue
                workers = statistics.median(v[2] for v in values)
                bound = statistics.median(v[3] for v in values)
                print(
                    f"{name:<6}{run:>15}{wall:>8.3f}{'':>7}{cpu:>8.3f}{'':>14}"
                    f"{workers:>7.3f}{bound:>6.2f}x{w1 / wall:>6.2f}x"
                )
    finally:
        router_module.WorkerRouter.__init__.__kwdefaults__ = defaults
        router_module.Packed = Packed
        con.close()


def _copied(entries: list, batches: list) -> memoryview:
    return Packed(entries, batches).bytes()


def _timed(con: matchsql.Connection, sql: str) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    con.sql(sql).arrow()
    return time.perf_counter() - wall, time.process_time() - cpu


if __name__ == "__main__":
    main()
