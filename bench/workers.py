"""Worker processes: one-time queries on 1 and 2 workers, a scaling model, migration pauses.

    python -m bench.workers [--rows 1000000] [--partitions 500] [--repeat 3]
                            [--migration-rows 1000,10000,100000,1000000]

Three tables, all ratios between figures of this run:

1. **One-time queries** (the partitioned :mod:`bench.paths` queries over synthetic trades):
   wall time with ``workers = 1`` (``threads = 1``, and ``threads = 2``, the
   in-process thread pool) and ``workers = 2``; best of ``--repeat`` runs.
   The CPU columns come from the ``workers = 2`` run: the router process
   (DuckDB's sort and scan, routing, merging: the serial part) and the
   matching CPU of each worker.
2. **Scaling model**: from the measured matching CPU per bucket (64 buckets)
   and the router's CPU, the speed-up on N cores if each process had a core
   of its own: the single process's CPU (``workers = 1``, ``threads = 1``)
   over ``max(router CPU, LPT makespan of the buckets over N workers)``.
   Scaling stops where the router's serial CPU (DuckDB's sort and scan,
   routing, merging) or the largest bucket dominates. "2 cores" is this
   machine: the router and two workers share two cores, so the bound is
   also (router + matching CPU) / 2.
3. **Migration pause** per bucket as a function of its open state: one
   partition holds an open match attempt of R buffered rows when its bucket
   is moved (State Transfer); the pause runs from the snapshot request to the
   switch of routing (queue at the source, snapshot, transfer, restore) and
   the rows of that bucket buffered meanwhile (after a warm-up run of the same
   query, so no worker is loading compiled code). The other buckets keep being
   routed during the pause; per-tuple latency of continuous queries is not
   measured here (they do not run on workers yet).

The machine is shared (other jobs run on its 2 cores), so wall times are
noisy; the CPU figures and the model are much steadier. The header prints
the load average.
"""

from __future__ import annotations

import argparse
import heapq
import os
import time

import matchsql
from bench.paths import QUERIES
from matchsql.storage.demo import synthetic_trades
from matchsql.workers.balance import Load
from matchsql.workers.router import BUCKETS, bucket_of

#: The bench.paths queries with PARTITION BY (Q1 and Q3 match one partition: nothing to spread).
PARTITIONED = {name: sql for name, sql in QUERIES.items() if "PARTITION BY" in sql}


def _best(con: matchsql.Connection, sql: str, repeat: int) -> tuple[float, float, int]:
    """Best wall time, the router process's CPU in that run, and the output rows."""
    best = (float("inf"), 0.0, 0)
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        rows = con.sql(sql).arrow().num_rows
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if wall < best[0]:
            best = (wall, cpu, rows)
    return best


def makespan(works: list[float], workers: int) -> float:
    """Longest-processing-time-first placement of bucket works on ``workers``."""
    loads = [0.0] * workers
    heapq.heapify(loads)
    for work in sorted(works, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + work)
    return max(loads)


def one_time(rows: int, partitions: int, repeat: int) -> dict[str, tuple[float, float, list[float]]]:
    con = matchsql.connect(demo=False)
    con.duckdb.register("trade_src", synthetic_trades(rows, partitions))
    con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    con.duckdb.unregister("trade_src")
    con.sql("CREATE VIEW orders AS SELECT symbol AS custkey, ts AS orderdate, "
            "price AS totalprice FROM trade")
    print(f"\n1. one-time queries, {rows:,} rows, {partitions} partitions (best of {repeat})")
    header = (f"{'query':<9}{'matches':>10}{'w1 1T s':>9}{'w1 2T s':>9}{'w2 s':>8}"
              f"{'w2/w1 1T':>9}{'w2/w1 2T':>9}{'router CPU':>11}{'worker CPU':>14}")
    print(header)
    print("-" * len(header))
    model: dict[str, tuple[float, float, list[float]]] = {}
    for name, sql in PARTITIONED.items():
        con.sql("SET workers = 2")
        con.sql(sql).arrow()  # starts the pool, warms the workers' compiled code
        timed = {}
        for workers, threads in ((1, 1), (1, 2), (2, 2)):
            con.sql(f"SET workers = {workers}")
            con.sql(f"SET threads = {threads}")
            timed[(workers, threads)] = _best(con, sql, repeat)
        router = con._executor.workers.last
        w2, router_cpu, matches = timed[(2, 2)]
        worker_cpu = "/".join(f"{c:.2f}" for c in router.worker_cpu_s)
        model[name] = (timed[(1, 1)][1], router_cpu, list(router.bucket_cpu_s.values()))
        counts = {v[2] for v in timed.values()}
        note = "" if len(counts) == 1 else "  (row counts differ!)"
        print(f"{name:<9}{matches:>10,}{timed[(1, 1)][0]:>9.3f}{timed[(1, 2)][0]:>9.3f}"
              f"{w2:>8.3f}{timed[(1, 1)][0] / w2:>9.2f}{timed[(1, 2)][0] / w2:>9.2f}"
              f"{router_cpu:>10.2f}s{worker_cpu:>13}s{note}")
    con.close()
    return model


def scaling(model: dict[str, tuple[float, float, list[float]]]) -> None:
    print("\n2. scaling model: speed-up over one process = its CPU / max(router CPU, LPT "
          "makespan of the 64 buckets' matching CPU on N workers), a core per process")
    counts = (1, 2, 4, 8, 16, 32)
    header = (f"{'query':<9}{'w1 CPU':>8}{'router':>8}{'match':>8}"
              + "".join(f"{f'N={n}':>8}" for n in counts) + f"{'stops at':>10}"
              + f"{'2 cores':>9}")
    print(header)
    print("-" * len(header))
    for name, (single, router_cpu, works) in model.items():
        speed = [single / max(router_cpu, makespan(works, n)) for n in counts]
        stop = next((n for n, s, nxt in zip(counts, speed, speed[1:]) if nxt < s * 1.05),
                    counts[-1])
        # This machine: router and 2 workers share 2 cores (a fixed total of CPU to spread).
        two_cores = single / max(router_cpu, makespan(works, 2), (router_cpu + sum(works)) / 2)
        print(f"{name:<9}{single:>7.2f}s{router_cpu:>7.2f}s{sum(works):>7.2f}s"
              + "".join(f"{s:>7.2f}x" for s in speed) + f"{f'N={stop}':>10}"
              + f"{two_cores:>8.2f}x")


class MoveWhenOpen:
    """Moves the hot bucket to the other worker once ``after`` of its rows were routed."""

    def __init__(self, bucket: int, after: int) -> None:
        self.bucket = bucket
        self.after = after
        self.done = False

    def decide(self, load: Load) -> list[tuple[int, int]]:
        if self.done or load.total.get(self.bucket, 0) < self.after:
            return []
        self.done = True
        return [(self.bucket, 1 - load.owner[self.bucket])]


def migration(sizes: list[int]) -> None:
    print("\n3. migration pause of one bucket vs its open state (one open match attempt "
          "of R buffered rows)")
    header = (f"{'R rows':>10}{'pause ms':>10}{'state MiB':>11}{'open runs':>10}"
              f"{'buffered':>10}{'rows ok':>8}")
    print(header)
    print("-" * len(header))
    # 40 other partitions; the hot one's key is picked in a bucket of its own, so the
    # bucket's routed rows are the hot partition's.
    others = {bucket_of((f"k{i}",), BUCKETS) for i in range(40)}
    hot = next(f"h{j}" for j in range(10_000) if bucket_of((f"h{j}",), BUCKETS) not in others)
    bucket = bucket_of((hot,), BUCKETS)
    query = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
             "FIRST(ts) AS s, LAST(ts) AS e, COUNT(*) AS n ONE ROW PER MATCH "
             "PATTERN (A B* C) DEFINE C AS v < 0)")
    for size in sizes:
        total = size + size // 10 + 1_000
        setup = (f"CREATE OR REPLACE TABLE t AS SELECT '{hot}' AS p, i AS ts, "
                 f"CASE WHEN i = {total - 1} THEN -1 ELSE i % 97 END AS v FROM range({total}) r(i) "
                 f"UNION ALL SELECT 'k' || (i % 40) AS p, i AS ts, "
                 f"CASE WHEN i % 11 = 0 THEN -1 ELSE 1 END AS v FROM range(200000) r(i)")
        # Small input batches: the router decides between batches, so the move comes
        # right after R rows of the hot partition, which then has more rows to come.
        options = {"max_buffered_rows": max(2 * total, 100_000),
                   "batch_size": min(65_536, max(256, size // 8))}
        single = matchsql.connect(demo=False, **options)
        con = matchsql.connect(demo=False, workers=2, **options)
        try:
            single.sql(setup)
            con.sql(setup)
            expected = single.sql(query).fetchall()
            session = con._executor.workers
            session.policy_factory = lambda: MoveWhenOpen(bucket, 1 << 62)  # never moves
            con.sql(query).fetchall()  # warm: the workers load the compiled query first
            session.policy_factory = lambda size=size: MoveWhenOpen(bucket, size)
            got = con.sql(query).fetchall()
            moves = [m for m in session.last.migrations if m.bucket == bucket]
            if not moves:
                print(f"{size:>10,}  (no migration happened)")
                continue
            m = moves[0]
            print(f"{size:>10,}{m.pause_s * 1e3:>10.1f}{m.state_bytes / 2**20:>11.2f}"
                  f"{m.open_partitions:>10}{m.buffered_rows:>10,}{str(got == expected):>8}")
        finally:
            single.close()
            con.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--migration-rows", default="1000,10000,100000,1000000")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPU core(s), load average {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f} (a shared machine: wall times are noisy)")
    model = one_time(args.rows, args.partitions, args.repeat)
    scaling(model)
    migration([int(s) for s in args.migration_rows.split(",") if s])


if __name__ == "__main__":
    main()
