"""Worker processes: one-time and continuous queries on 1 and 2 workers, a scaling model,
migration pauses with the other buckets' latency.

    python -m bench.workers [--rows 1000000] [--partitions 500] [--repeat 3]
                            [--stream-rows 300000]
                            [--migration-rows 1000,10000,100000,1000000]

Seven tables, all ratios between figures of this run:

1. **One-time queries** (the partitioned :mod:`bench.paths` queries over synthetic trades):
   wall time with ``workers = 1`` (``threads = 1``, and ``threads = 2``, the
   in-process thread pool) and ``workers = 2`` in both modes: "scatter" (the
   router scans unsorted, the workers sort their own rows) and "sorted"
   (the router reads the input in order as one process does); best of
   ``--repeat`` runs. The CPU columns come from the scatter run: the router
   process (DuckDB's scan, Arrow take, sending, merging: the serial part) and
   each worker's matching CPU (its sort included). Table 1b puts the "sorted" mode
   (the default: input in order is grouped in the router and shared with the
   workers through one segment, matchsql/execution/workers/shared_rows.py) beside
   ``workers = 1``: walls, CPU of each process, the CPU ratio and the
   bound that two cores put on the speed-up, and whether the input skipped DuckDB's
   sort (read in its own order, matchsql/session/ordered_input.py) in each run.
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
   query, so no worker is loading compiled code). "sorted" mode: there a
   bucket's open state is matcher runs (in scatter mode it is buffered rows).
4. **Continuous queries**: live-ordered batches (time order, all partitions
   mixed) through the hash router of ``workers = 1`` and the workers'
   :class:`~matchsql.execution.workers.stream_router.StreamRouter` with 2 workers (the
   stream's reader, the same for both, is left out). The batches are a
   backlog (each next one at hand: ``route(batch, more=True)``), so the
   workers' router keeps one batch in flight while it cuts the next.
5. **Migration of a continuous query's bucket**: one partition holds an open
   match attempt of R rows; batches of the other partitions arrive on a fixed
   clock, and each one's latency runs from its arrival to its matches. The
   move happens between batches (nothing in flight), so batches arriving
   during the pause wait for it: the table gives their p99 latency before the
   move and during it. The hot partition's rows go in first, in batches of
   50,000 (its run keeps them all: one open attempt), and its attempt ends in
   a match before the end of stream.
6. **Input modes**: the queries of table 4 with pull, push and adaptive input
   (``U = 1``), in one process and on 2 workers, and the push side's largest
   count of held tuples (InputHolders plus the runs' buffered rows).
7. **Timeline** of the one-time queries on 2 workers (sorted mode): when the
   router has its ordered input, sends its first and last message and has the
   last matches; when each worker served its first and last message, how long
   it was busy and its process's CPU; with and without the rule that keeps a
   partition open at a message's end for the next message, beside
   ``workers = 1``. It shows the serial part (before the first message) and
   where the CPU beyond one process's goes.

The machine is shared (other jobs run on its 2 cores), so wall times are
noisy; the CPU figures and the model are much steadier. The header prints
the load average.
"""

from __future__ import annotations

import argparse
import heapq
import os
import time

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import matchsql
from bench.paths import QUERIES
from matchsql.config import Config
from matchsql.engine.planner import new_partition_matcher
from matchsql.execution.adaptive.metrics import InputMetrics
from matchsql.execution.adaptive.modes import InputOptions
from matchsql.execution.adaptive.push import LocalRuns, PushInput
from matchsql.execution.router.hashed import HashPartitionRouter
from matchsql.execution.workers import worker_router as router_module
from matchsql.execution.workers.balance import Load
from matchsql.execution.workers.pool import WorkerPool
from matchsql.execution.workers.stream_router import StreamRouter
from matchsql.execution.workers.worker_router import BUCKETS, bucket_of
from matchsql.grammar.analyze import analyze
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.runtime.cancel import Cancellation
from matchsql.session import matching as matching_module
from matchsql.session.ordered_input import InputQueries
from matchsql.storage.demo import synthetic_trades

#: The bench.paths queries with PARTITION BY (Q1 and Q3 match one partition: nothing to spread).
PARTITIONED = {name: sql for name, sql in QUERIES.items() if "PARTITION BY" in sql}


class InputPaths:
    """How each MATCH_RECOGNIZE got its ordered input (matchsql/session/ordered_input.py):
    the last run's decision, read off the functions of the one rule (one process reads
    batches, the workers' router the grouped rows)."""

    NAMES = ("input_batches", "ordered_rows")

    def __init__(self) -> None:
        self.last: InputQueries | None = None
        self._originals = {name: getattr(matching_module, name) for name in self.NAMES}
        for name, original in self._originals.items():
            setattr(matching_module, name, self._recording(original))

    def _recording(self, original):
        def recording(queries: InputQueries, *args):
            self.last = queries
            return original(queries, *args)

        return recording

    def took(self) -> str:
        """'yes' where the sort was skipped, 'no' where DuckDB sorted, '-' where unknown."""
        done = None if self.last is None else self.last.presorted
        self.last = None
        return "-" if done is None else ("yes" if done else "no")

    def close(self) -> None:
        for name, original in self._originals.items():
            setattr(matching_module, name, original)


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


def _trades(rows: int, partitions: int) -> matchsql.Connection:
    """A connection with the synthetic ``trade`` table (in time order) and its ``orders`` view."""
    con = matchsql.connect(demo=False)
    con.duckdb.execute("SET enable_progress_bar = false")
    con.duckdb.register("trade_src", synthetic_trades(rows, partitions))
    con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    con.duckdb.unregister("trade_src")
    con.sql(
        "CREATE VIEW orders AS SELECT symbol AS custkey, ts AS orderdate, "
        "price AS totalprice FROM trade"
    )
    return con


def one_time(
    rows: int, partitions: int, repeat: int
) -> dict[str, tuple[float, float, list[float]]]:
    con = _trades(rows, partitions)
    print(f"\n1. one-time queries, {rows:,} rows, {partitions} partitions (best of {repeat})")
    header = (
        f"{'query':<9}{'matches':>10}{'w1 1T s':>9}{'w1 2T s':>9}{'w2 sort s':>10}"
        f"{'w2 s':>8}{'w2/w1 1T':>9}{'w2/w1 2T':>9}{'router CPU':>11}{'worker CPU':>14}"
    )
    print(header)
    print("-" * len(header))
    model: dict[str, tuple[float, float, list[float]]] = {}
    session = con._executor.workers
    paths = InputPaths()
    sorted_lines: list[str] = []
    for name, sql in PARTITIONED.items():
        con.sql("SET workers = 2")
        con.sql(sql).arrow()  # starts the pool, warms the workers' compiled code
        timed = {}
        # Side by side, in turns, so that a change of the machine's load hits every one.
        runs = {
            (1, 1, "scatter"): [],
            (1, 2, "scatter"): [],
            (2, 2, "sorted"): [],
            (2, 2, "scatter"): [],
        }
        cpu: dict[str, tuple[float, list[float], list[float]]] = {}
        skipped: dict[tuple[int, int, str], str] = {}
        for _ in range(repeat):
            for (workers, threads, mode), got in runs.items():
                con.sql(f"SET workers = {workers}")
                con.sql(f"SET threads = {threads}")
                session.mode = mode
                got.append(_best(con, sql, 1))
                skipped[(workers, threads, mode)] = paths.took()
                if workers == 2:  # router CPU, each worker's CPU, matching CPU per bucket
                    cpu[mode] = (
                        got[-1][1],
                        list(session.last.worker_cpu_s),
                        list(session.last.bucket_cpu_s.values()),
                    )
        for run, got in runs.items():
            timed[run] = min(got)
        w2, router_cpu, matches = timed[(2, 2, "scatter")]
        worker_cpu = "/".join(f"{c:.2f}" for c in cpu["scatter"][1])
        single = timed[(1, 1, "scatter")][1]
        for mode, (router, workers_cpu, buckets) in cpu.items():
            # Per-bucket work in proportion to its matching CPU, in all the workers' CPU
            # (their sort and the transfers included).
            scale = sum(workers_cpu) / max(sum(buckets), 1e-9)
            model[f"{name} {mode}"] = (single, router, [b * scale for b in buckets])
        counts = {v[2] for v in timed.values()}
        note = "" if len(counts) == 1 else "  (row counts differ!)"
        w1 = timed[(1, 1, "scatter")][0]
        print(
            f"{name:<9}{matches:>10,}{w1:>9.3f}{timed[(1, 2, 'scatter')][0]:>9.3f}"
            f"{timed[(2, 2, 'sorted')][0]:>10.3f}{w2:>8.3f}{w1 / w2:>9.2f}"
            f"{timed[(1, 2, 'scatter')][0] / w2:>9.2f}"
            f"{router_cpu:>10.2f}s{worker_cpu:>13}s{note}"
        )
        # The sorted mode (the default) against one process, wall and CPU of the same runs.
        w2s, router_s = timed[(2, 2, "sorted")][:2]
        workers_s = sum(cpu["sorted"][1])
        both = router_s + workers_s
        sorted_lines.append(
            f"{name:<9}{w1:>8.3f}{w2s:>8.3f}{w1 / w2s:>7.2f}x{single:>8.2f}s{router_s:>9.2f}s"
            f"{'/'.join(f'{c:.2f}' for c in cpu['sorted'][1]):>12}s{single / both:>9.2f}x"
            f"{single / (both / 2):>7.2f}x"  # (the router runs DuckDB on both cores)
            f"{skipped[(1, 1, 'scatter')] + '/' + skipped[(2, 2, 'sorted')]:>10}"
        )
    paths.close()
    con.close()
    load = os.getloadavg()
    print(
        f"\n1b. sorted mode (the default: the router reads the input as one process does; "
        f"grouped input is shared with the workers, sorted input goes out in pieces) "
        f"against workers = 1, threads = 1: walls "
        f"and CPU of the runs above; 'CPU w1/w2' = one process's CPU over the router's and "
        f"workers' together, 'bound' = the speed-up two cores allow with that CPU; 'sort "
        f"skipped' = input taken in its own order without DuckDB's sort (w1/w2). Load "
        f"average now {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )
    header = (
        f"{'query':<9}{'w1 s':>8}{'w2 s':>8}{'w2/w1':>8}{'w1 CPU':>9}{'router':>10}"
        f"{'workers':>13}{'CPU w1/w2':>10}{'bound':>8}{'sort skip':>10}"
    )
    print(header)
    print("-" * len(header))
    for line in sorted_lines:
        print(line)
    return model


def scaling(model: dict[str, tuple[float, float, list[float]]]) -> None:
    print(
        "\n2. scaling model: speed-up over one process = its CPU / max(router CPU, LPT "
        "makespan of the 64 buckets' work on N workers), a core per process; a bucket's work "
        "is the workers' CPU (sort, transfers, matching) shared in proportion to its "
        "matching CPU; both modes of workers = 2"
    )
    counts = (1, 2, 4, 8, 16, 32)
    header = (
        f"{'query':<17}{'w1 CPU':>8}{'router':>8}{'workers':>8}"
        + "".join(f"{f'N={n}':>8}" for n in counts)
        + f"{'stops at':>10}"
        + f"{'2 cores':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, (single, router_cpu, works) in model.items():
        speed = [single / max(router_cpu, makespan(works, n)) for n in counts]
        stop = next(
            (n for n, s, nxt in zip(counts, speed, speed[1:]) if nxt < s * 1.05), counts[-1]
        )
        # This machine: router and 2 workers share 2 cores (a fixed total of CPU to spread).
        two_cores = single / max(router_cpu, makespan(works, 2), (router_cpu + sum(works)) / 2)
        print(
            f"{name:<17}{single:>7.2f}s{router_cpu:>7.2f}s{sum(works):>7.2f}s"
            + "".join(f"{s:>7.2f}x" for s in speed)
            + f"{f'N={stop}':>10}"
            + f"{two_cores:>8.2f}x"
        )


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
    print(
        "\n3. migration pause of one bucket vs its open state (one open match attempt "
        "of R buffered rows)"
    )
    header = (
        f"{'R rows':>10}{'pause ms':>10}{'state MiB':>11}{'open runs':>10}"
        f"{'buffered':>10}{'rows ok':>8}"
    )
    print(header)
    print("-" * len(header))
    # 40 other partitions; the hot one's key is picked in a bucket of its own, so the
    # bucket's routed rows are the hot partition's (buckets of hashed keys here: see
    # RANGE_BUCKETS).
    router_module.RANGE_BUCKETS = False
    try:
        _migration(sizes)
    finally:
        router_module.RANGE_BUCKETS = True


def _migration(sizes: list[int]) -> None:
    others = {bucket_of((f"k{i}",), BUCKETS) for i in range(40)}
    hot = next(f"h{j}" for j in range(10_000) if bucket_of((f"h{j}",), BUCKETS) not in others)
    bucket = bucket_of((hot,), BUCKETS)
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
        "FIRST(ts) AS s, LAST(ts) AS e, COUNT(*) AS n ONE ROW PER MATCH "
        "PATTERN (A B* C) DEFINE C AS v < 0)"
    )
    for size in sizes:
        total = size + size // 10 + 1_000
        setup = (
            f"CREATE OR REPLACE TABLE t AS SELECT '{hot}' AS p, i AS ts, "
            f"CASE WHEN i = {total - 1} THEN -1 ELSE i % 97 END AS v FROM range({total}) r(i) "
            f"UNION ALL SELECT 'k' || (i % 40) AS p, i AS ts, "
            f"CASE WHEN i % 11 = 0 THEN -1 ELSE 1 END AS v FROM range(200000) r(i)"
        )
        # Small input batches: the router decides between batches, so the move comes
        # right after R rows of the hot partition, which then has more rows to come.
        options = {
            "max_buffered_rows": max(2 * total, 100_000),
            "batch_size": min(65_536, max(256, size // 8)),
        }
        single = matchsql.connect(demo=False, **options)
        con = matchsql.connect(demo=False, workers=2, **options)
        try:
            single.sql(setup)
            con.sql(setup)
            expected = single.sql(query).fetchall()
            session = con._executor.workers
            session.mode = "sorted"  # open runs (scatter mode's open state is buffered rows)
            session.policy_factory = lambda: MoveWhenOpen(bucket, 1 << 62)  # never moves
            con.sql(query).fetchall()  # warm: the workers load the compiled query first
            session.policy_factory = lambda size=size: MoveWhenOpen(bucket, size)
            got = con.sql(query).fetchall()
            moves = [m for m in session.last.migrations if m.bucket == bucket]
            if not moves:
                print(f"{size:>10,}  (no migration happened)")
                continue
            m = moves[0]
            print(
                f"{size:>10,}{m.pause_s * 1e3:>10.1f}{m.state_bytes / 2**20:>11.2f}"
                f"{m.open_partitions:>10}{m.buffered_rows:>10,}{str(got == expected):>8}"
            )
        finally:
            single.close()
            con.close()


def _spec(sql: str, schema: pa.Schema):
    """The MatchSpec of ``sql``'s MATCH_RECOGNIZE over a relation of ``schema``."""
    node = next(parse(sql)[0].find_all(MatchRecognizeTable))
    return analyze(node, schema, sql=sql, con=duckdb.connect())


def _stream_batches(rows: int, partitions: int, batch: int) -> list[pa.RecordBatch]:
    """Synthetic trades in time order (every partition mixed in each batch), as live."""
    table = synthetic_trades(rows, partitions)
    table = table.take(pc.sort_indices(table, [("ts", "ascending"), ("symbol", "ascending")]))
    return table.to_batches(max_chunksize=batch)


def _live_queries(batches: list[pa.RecordBatch], config: Config):
    """``(name, spec, new_run)`` of each partitioned query the live trades can feed."""
    for name, sql in PARTITIONED.items():
        if "FROM trade " not in sql:
            continue  # the live rows are trades (Q4 reads a view of other names)
        spec = _spec(sql, batches[0].schema)

        def new_run(key: tuple, spec=spec):
            return new_partition_matcher(spec, key, config, live=True)

        yield name, spec, new_run


def _live_router(workers: int, spec, new_run, pool: WorkerPool, config: Config):
    """The router of a continuous query: in this process, or on the workers of ``pool``."""
    if workers == 1:
        return HashPartitionRouter(spec.partition_by, new_run)
    return StreamRouter(pool, spec, config, Cancellation(), new_run, live=True)


def continuous(rows: int, partitions: int, repeat: int) -> None:
    print(
        f"\n4. continuous queries, {rows:,} live rows in time order, {partitions} partitions, "
        f"batches of 20,000 (best of {repeat})"
    )
    header = (
        f"{'query':<9}{'matches':>10}{'w1 s':>8}{'w2 s':>8}{'w2/w1':>7}{'w1 CPU':>8}"
        f"{'router CPU':>11}{'worker CPU':>14}"
    )
    print(header)
    print("-" * len(header))
    batches = _stream_batches(rows, partitions, 20_000)
    config = Config(workers=2, threads=1)
    pool = WorkerPool(2)
    try:
        for name, spec, new_run in _live_queries(batches, config):
            best = {1: (float("inf"), 0.0, 0), 2: (float("inf"), 0.0, 0)}
            last = None
            for _ in range(repeat + 1):  # the first round warms both
                for workers in (1, 2):
                    router = _live_router(workers, spec, new_run, pool, config)
                    cpu, wall = time.process_time(), time.perf_counter()
                    out = sum(
                        b.num_rows
                        for i, batch in enumerate(batches)
                        for b in router.route(batch, more=i + 1 < len(batches))
                    )
                    out += sum(b.num_rows for b in router.finish())
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    if wall < best[workers][0]:
                        best[workers] = (wall, cpu, out)
                    if workers == 2:
                        last = router
            assert last is not None
            w1, w2 = best[1][0], best[2][0]
            worker_cpu = "/".join(f"{c:.2f}" for c in last.worker_cpu_s)
            same = "" if best[1][2] == best[2][2] else "  (row counts differ!)"
            print(
                f"{name:<9}{best[2][2]:>10,}{w1:>8.3f}{w2:>8.3f}{w1 / w2:>7.2f}"
                f"{best[1][1]:>7.2f}s{best[2][1]:>10.2f}s{worker_cpu:>13}s{same}"
            )
    finally:
        pool.kill()


def stream_migration(sizes: list[int]) -> None:
    print(
        "\n5. continuous query: migration pause of one bucket vs its open state (one open "
        "match attempt of R rows), and the latency (ms) of the other partitions' batches "
        "(500 rows of 40 partitions each, arriving every 3x their mean service time)"
    )
    header = (
        f"{'R rows':>10}{'pause ms':>10}{'state MiB':>11}{'clock ms':>9}{'p50 before':>11}"
        f"{'p99 before':>11}{'p99 during':>11}{'max during':>11}{'waited':>8}"
    )
    print(header)
    print("-" * len(header))
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
        "FIRST(ts) AS s, LAST(ts) AS e, COUNT(*) AS n ONE ROW PER MATCH "
        "PATTERN (A B* C) DEFINE C AS v < 0)"
    )
    schema = pa.schema([("p", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
    others = {bucket_of((f"k{i}",), BUCKETS) for i in range(40)}
    hot = next(f"h{j}" for j in range(10_000) if bucket_of((f"h{j}",), BUCKETS) not in others)
    bucket = bucket_of((hot,), BUCKETS)
    spec = _spec(sql, schema)
    pool = WorkerPool(2)
    try:
        for size in sizes:
            config = Config(workers=2, max_buffered_rows=max(2 * size, 100_000))

            def new_run(key: tuple, config=config):
                return new_partition_matcher(spec, key, config, live=True)

            router = StreamRouter(pool, spec, config, Cancellation(), new_run, live=True)
            ts = 0
            for low in range(0, size, 50_000):  # the hot partition's open attempt
                n = min(50_000, size - low)
                list(
                    router.route(
                        pa.record_batch(
                            [
                                pa.array([hot] * n),
                                pa.array(range(ts, ts + n), pa.int64()),
                                pa.array(np.ones(n, np.int64)),
                            ],
                            schema=schema,
                        )
                    )
                )
                ts += n

            def others_batch(ts: int) -> pa.RecordBatch:
                keys = [f"k{i % 40}" for i in range(500)]
                values = np.where(np.arange(500) % 11 == 0, -1, 1)
                return pa.record_batch(
                    [pa.array(keys), pa.array(range(ts, ts + 500), pa.int64()), pa.array(values)],
                    schema=schema,
                )

            for _ in range(10):  # new runs, first calls: not part of the service time
                list(router.route(others_batch(ts)))
                ts += 500
            warm = time.perf_counter()
            for _ in range(30):  # the service time sets the clock: no queue builds up
                list(router.route(others_batch(ts)))
                ts += 500
            interval_s = 3 * (time.perf_counter() - warm) / 30
            latency: list[tuple[float, float]] = []  # (arrival, latency)
            moved = None
            start = time.perf_counter()
            for i in range(400):
                arrival = start + i * interval_s
                while time.perf_counter() < arrival:
                    pass
                list(router.route(others_batch(ts)))
                ts += 500
                latency.append((arrival, time.perf_counter() - arrival))
                if i == 250:
                    begun = time.perf_counter()
                    router.migrate(bucket, 1 - router.owner[bucket])
                    moved = (begun, time.perf_counter())
            # The hot attempt ends in a match (a C row) before the end of stream: an attempt
            # still open there fails, and each later start row is tried again to the end,
            # which is quadratic in R (minutes at 10^6 rows) and not what is measured here.
            list(
                router.route(
                    pa.record_batch(
                        [pa.array([hot]), pa.array([ts], pa.int64()), pa.array([-1], pa.int64())],
                        schema=schema,
                    )
                )
            )
            list(router.finish())
            record = router.migrations[-1]
            assert moved is not None
            before = sorted(lat for at, lat in latency if at < moved[0])
            during = sorted(lat for at, lat in latency if moved[0] <= at <= moved[1]) or [
                latency[251][1]
            ]  # the pause was shorter than the clock: the next batch
            print(
                f"{size:>10,}{record.pause_s * 1e3:>10.1f}{record.state_bytes / 2**20:>11.2f}"
                f"{interval_s * 1e3:>9.1f}{_pct(before, 50) * 1e3:>11.1f}"
                f"{_pct(before, 99) * 1e3:>11.1f}{_pct(during, 99) * 1e3:>11.1f}"
                f"{during[-1] * 1e3:>11.1f}{len(during):>8}"
            )
    finally:
        pool.kill()


def input_modes(rows: int, partitions: int, repeat: int) -> None:
    print(
        f"\n6. continuous queries by input mode, {rows:,} live rows in time order, "
        f"{partitions} partitions, batches of 20,000 (best of {repeat}): pull routes each "
        "batch (the next one at hand: on the workers one batch stays in flight while the "
        "next is cut); push and adaptive read in a push thread into "
        "InputHolders, and the query thread matches every ready holder at once (on the "
        "workers) or one at a time (in this process)"
    )
    header = (
        f"{'query':<9}{'mode':<10}{'matches':>10}{'w1 s':>8}{'w2 s':>8}{'w2/w1':>7}"
        f"{'max mem w2':>12}"
    )
    print(header)
    print("-" * len(header))
    batches = _stream_batches(rows, partitions, 20_000)
    config = Config(workers=2, threads=1)
    pool = WorkerPool(2)
    try:
        for name, spec, new_run in _live_queries(batches, config):
            for mode in ("pull", "push", "adaptive"):
                options = InputOptions.for_pattern(spec.pattern, mode, 1)
                best = {1: (float("inf"), 0, 0), 2: (float("inf"), 0, 0)}
                for _ in range(repeat + 1):  # the first round warms both
                    for workers in (1, 2):
                        router = _live_router(workers, spec, new_run, pool, config)
                        metrics = InputMetrics()
                        wall = time.perf_counter()
                        if mode == "pull":
                            out = sum(
                                b.num_rows
                                for i, batch in enumerate(batches)
                                for b in router.route(batch, more=i + 1 < len(batches))
                            )
                            out += sum(b.num_rows for b in router.finish())
                            held = 0
                        else:
                            source = iter(batches)
                            push = PushInput(
                                spec.partition_by,
                                new_run,
                                lambda source=source: next(source, None),
                                metrics=metrics,
                                adaptive=mode == "adaptive",
                                states=options.states,
                                label_state=options.label_state,
                                u=1,
                                runs=LocalRuns(router) if workers == 1 else router,
                            )
                            push.start()
                            try:
                                out = sum(b.num_rows for b in push.batches())
                            finally:
                                push.close()
                            held = metrics.max_mem
                        wall = time.perf_counter() - wall
                        if wall < best[workers][0]:
                            best[workers] = (wall, out, held)
                w1, w2 = best[1][0], best[2][0]
                same = "" if best[1][1] == best[2][1] else "  (row counts differ!)"
                print(
                    f"{name:<9}{mode:<10}{best[2][1]:>10,}{w1:>8.3f}{w2:>8.3f}{w1 / w2:>7.2f}"
                    f"{best[2][2]:>12,}{same}"
                )
    finally:
        pool.kill()


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q / 100))] if values else 0.0


def timeline(rows: int, partitions: int, repeat: int) -> None:
    """Where the time of one query on 2 workers goes, process by process."""
    print(
        f"\n7. timeline of one-time queries on 2 workers (sorted mode), {rows:,} rows, "
        f"{partitions} partitions; medians of {repeat} runs taken in turns (rotated) with "
        "workers = 1 (threads = 1). ms from the statement's start: 'input' = the router "
        "has its first ordered rows (planning, export, order check and grouping done), "
        "'sent' = its first message to a worker, 'routed' = its last, 'merged' = the last "
        "matches in; per worker: its first and last message served, ms busy serving "
        "between them, and its process's CPU. 'hold' = the partition still open at a "
        "message's end waits for its end (the default), 'cut' = it goes in pieces (runs of "
        "their own on the worker). CPU in ms; 'w1/w2' = one process's CPU over the "
        "router's and workers' together."
    )
    header = (
        f"{'query':<9}{'run':<6}{'wall':>6}{'input':>7}{'sent':>6}{'routed':>7}"
        f"{'merged':>7}{'r CPU':>7}{'w0 first':>9}{'last':>6}{'busy':>6}{'CPU':>5}"
        f"{'w1 first':>9}{'last':>6}{'busy':>6}{'CPU':>5}{'w1/w2':>7}"
    )
    print(header)
    print("-" * len(header))
    con = _trades(rows, partitions)
    session = con._executor.workers
    session.mode = "sorted"
    try:
        for name, sql in PARTITIONED.items():
            con.sql("SET workers = 2")
            con.sql(sql).arrow()  # starts the pool, warms the workers' compiled code
            runs: dict[str, list[list[float]]] = {"w1": [], "hold": [], "cut": []}
            for turn in range(repeat):
                # In turns, each run after each other as often (the first run after a
                # change of settings pays for it: DuckDB's threads, say).
                order = list(runs)[turn % 3 :] + list(runs)[: turn % 3]
                for run, got in ((run, runs[run]) for run in order):
                    con.sql(f"SET workers = {1 if run == 'w1' else 2}")
                    con.sql(f"SET threads = {1 if run == 'w1' else 2}")
                    router_module.HOLD_OPEN = run != "cut"
                    cpu, start = time.process_time(), time.perf_counter()
                    con.sql(sql).arrow()
                    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
                    if run == "w1":
                        got.append([wall * 1e3, cpu * 1e3])
                        continue
                    last = session.last
                    marks = [
                        (last.marks[m][0] - start) * 1e3 if m in last.marks else 0.0
                        for m in ("input", "sent", "routed", "merged")
                    ]
                    row = [wall * 1e3, *marks, cpu * 1e3]
                    for spans, busy in zip(last.worker_spans, last.worker_process_cpu_s):
                        data = [(a, b) for kind, a, b in spans if kind in ("data", "take")] or [
                            (start,) * 2
                        ]
                        row += [
                            (data[0][0] - start) * 1e3,
                            (data[-1][1] - start) * 1e3,
                            sum(b - a for a, b in data) * 1e3,
                            busy * 1e3,
                        ]
                    got.append(row)
            router_module.HOLD_OPEN = True
            single = np.median([r[1] for r in runs["w1"]])
            print(
                f"{name:<9}{'w1':<6}{np.median([r[0] for r in runs['w1']]):>6.0f}"
                f"{'':>34}{single:>7.0f}"
            )
            for run in ("hold", "cut"):
                m = np.median(np.array(runs[run]), axis=0)
                cpu_all = m[5] + m[9] + m[13]
                print(
                    f"{name:<9}{run:<6}{m[0]:>6.0f}{m[1]:>7.0f}{m[2]:>6.0f}{m[3]:>7.0f}"
                    f"{m[4]:>7.0f}{m[5]:>7.0f}{m[6]:>9.0f}{m[7]:>6.0f}{m[8]:>6.0f}{m[9]:>5.0f}"
                    f"{m[10]:>9.0f}{m[11]:>6.0f}{m[12]:>6.0f}{m[13]:>5.0f}"
                    f"{single / cpu_all:>6.2f}x"
                )
    finally:
        router_module.HOLD_OPEN = True
        con.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stream-rows", type=int, default=300_000)
    parser.add_argument("--migration-rows", default="1000,10000,100000,1000000")
    parser.add_argument("--only", default="1234567", help="the sections to run, e.g. 45")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    print(
        f"{os.cpu_count()} CPU core(s), load average {load[0]:.1f} {load[1]:.1f} "
        f"{load[2]:.1f} (a shared machine: wall times are noisy)"
    )
    sizes = [int(s) for s in args.migration_rows.split(",") if s]
    if "1" in args.only:
        model = one_time(args.rows, args.partitions, args.repeat)
        if "2" in args.only:
            scaling(model)
    if "3" in args.only:
        migration(sizes)
    if "4" in args.only:
        continuous(args.stream_rows, args.partitions, args.repeat)
    if "5" in args.only:
        stream_migration(sizes)
    if "6" in args.only:
        input_modes(args.stream_rows, args.partitions, args.repeat)
    if "7" in args.only:
        timeline(args.rows, args.partitions, args.repeat)


if __name__ == "__main__":
    main()
