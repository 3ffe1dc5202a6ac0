"""Execution paths benchmark: compiled paths against their baselines, one table per run.

    python -m bench.paths [--rows 1000000,10000000] [--partitions 1,500]

For each data size and partition count it builds synthetic trades
(random-walk prices, :func:`matchsql.storage.demo.synthetic_trades`) and
measures, in the same run:

* every query end to end through SQL (``auto`` path) with ``threads = 1``
  and ``threads = 2`` (partitions on a thread pool, execution/router/parallel.py, and
  a long partition's rows in chunks on the threads, engine/compiled/chunks.py;
  the kernels release the GIL) and the 2T/1T scaling, next to the 2T/1T
  with no partition split into chunks (``unsplit``: ``split_rows = 0``,
  what 2 threads gave before chunks): DejaVu Q1-Q4 verbatim, the
  V-shape query of Trino's MATCH_RECOGNIZE documentation, and the row-local
  ``PATTERN (A B+ C+)``;
* the process CPU time of the 2-thread run over the 1-thread run (``cpu2/1``): the
  extra CPU that splitting and the thread pools cost, a figure that stays
  meaningful on a loaded machine where the wall-clock 2T/1T does not (the
  header also gives the machine's own 2T/1T on a numba loop, measured first);
* the same queries on the matcher alone, one thread (the input already
  materialised as Arrow batches, so DuckDB's scan and sort are not counted);
* the warm planning overhead: the query over an empty table of the same
  schema after warm-up (parse, analyse, plan, DuckDB round trips);
* baselines: DuckDB computing the same predicates with LAG window functions,
  the reference matcher (on the first ``--reference-rows`` rows: it is slow),
  and the pip package ``pandas-match-recognize`` on ``--pandas-rows`` rows
  where it is importable (``pip install --no-deps --target .cache/pmr
  pandas-match-recognize antlr4-python3-runtime psutil``; it pins
  numpy<2.2, so it is not a project dependency).

Before the tables, once per query shape, the numba cold compile time: a
subprocess with an empty temporary ``NUMBA_CACHE_DIR`` runs the query on a
small table, then a second subprocess with that cache filled does the same;
the difference of their first runs is the compile time (both import the
modules the first query needs; ``--no-cold`` skips it).

A query's result is fetched as an Arrow table (``Result.arrow()``), the
columnar form a caller of a fast engine reads; ``fetchall()`` would add the
cost of one Python tuple per match (seconds for the 2M matches of Q1 over 10M
rows). The pandas line compares the same 20k rows, and the 20k-row rate of
pandas-match-recognize with matchsql's rate on the whole table.

Ratios are always between figures of this run. Peak RSS is the process's
resident set sampled every 5 ms while the measurement runs (the larger of the
1T and 2T runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
from numba import njit

import matchsql
from bench.queries import DEJAVU
from matchsql.config import Config
from matchsql.engine.planner import choose_path, new_partition_matcher, whole_partitions
from matchsql.execution.router.partitions import SortedPartitionRouter
from matchsql.grammar.analyze import analyze
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.storage.demo import synthetic_trades

V_SHAPE = """SELECT * FROM orders MATCH_RECOGNIZE(
     PARTITION BY custkey
     ORDER BY orderdate
     MEASURES
              A.totalprice AS starting_price,
              LAST(B.totalprice) AS bottom_price,
              LAST(U.totalprice) AS top_price
     ONE ROW PER MATCH
     AFTER MATCH SKIP PAST LAST ROW
     PATTERN (A B+ C+ D+)
     SUBSET U = (C, D)
     DEFINE
              B AS totalprice < PREV(totalprice),
              C AS totalprice > PREV(totalprice) AND totalprice <= A.totalprice,
              D AS totalprice > PREV(totalprice)
     )"""

ROW_LOCAL = """SELECT * FROM trade MATCH_RECOGNIZE(
  PARTITION BY symbol
  ORDER BY ts
  MEASURES MATCH_NUMBER() AS mn, FIRST(price) AS first_price, LAST(price) AS last_price
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C+)
  DEFINE B AS price < PREV(price), C AS price > PREV(price)
)"""

QUERIES = {
    **{k: v.rstrip().rstrip(";") for k, v in DEJAVU.items()},
    "V-shape": V_SHAPE,
    "A B+ C+": ROW_LOCAL,
}

LAG = """SELECT count(*) FILTER (WHERE p < lp), count(*) FILTER (WHERE p > lp)
FROM (SELECT price AS p, lag(price) OVER ({window}) AS lp FROM trade)"""

PANDAS_ROW_LOCAL = """SELECT * FROM data MATCH_RECOGNIZE (
  ORDER BY ts
  MEASURES MATCH_NUMBER() AS mn
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C+)
  DEFINE B AS price < PREV(price), C AS price > PREV(price)
)"""


class PeakRSS:
    """Samples this process's resident set size while a block runs."""

    def __enter__(self) -> PeakRSS:
        self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(fn: Callable[[], int]) -> tuple[float, int, int]:
    """(seconds, result size, peak RSS bytes) of one call."""
    seconds, size, peak, _ = measure_cpu(fn)
    return seconds, size, peak


def measure_cpu(fn: Callable[[], int]) -> tuple[float, int, int, float]:
    """(seconds, result size, peak RSS bytes, process CPU seconds) of one call."""
    with PeakRSS() as rss:
        cpu = time.process_time()
        start = time.perf_counter()
        size = fn()
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu
    return seconds, size, rss.peak, cpu


@njit(nogil=True, cache=True)
def _spin(n: int) -> float:
    total = 0.0
    for i in range(n):
        total += (i % 7) * 0.5
    return total


def machine_scaling(iterations: int = 40_000_000) -> float:
    """The wall-clock 2T/1T of a GIL-free numba loop on this machine now: about the
    number of cores when it is idle, less when other processes take them (the
    ceiling of the queries' 2T/1T in this run)."""
    _spin(10)
    walls = []
    for threads in (1, 2):
        start = time.perf_counter()
        workers = [threading.Thread(target=_spin, args=(iterations,)) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        walls.append(time.perf_counter() - start)
    return 2 * walls[0] / walls[1]


def spec_for(con: duckdb.DuckDBPyConnection, sql: str, source: str):
    """The analysed MatchSpec of the one MATCH_RECOGNIZE in ``sql`` over relation ``source``."""
    node = next(parse(sql)[-1].find_all(MatchRecognizeTable))
    schema = con.sql(f"SELECT * FROM {source} LIMIT 0").to_arrow_table().schema
    return analyze(node, schema, sql=sql, con=con)


def engine_only(spec, batches: list[pa.RecordBatch]) -> int:
    """Run the matchers over materialised batches on this thread; the number of output rows."""
    config = Config()
    whole, _ = whole_partitions(spec, config)
    router = SortedPartitionRouter(
        spec.partition_by,
        lambda key: new_partition_matcher(spec, key, config),
        whole.match_counted if whole is not None else None,
    )
    rows = 0
    for batch in batches:
        rows += sum(b.num_rows for b in router.route(batch))
    return rows + sum(b.num_rows for b in router.finish())


def planning_ms(con, sql: str, source: str, repeat: int = 7) -> float:
    """Warm planning overhead in ms: ``sql`` over an empty table of ``source``'s schema (best
    of ``repeat`` runs after one warm-up)."""
    empty = f"__bench_empty_{source}"
    con.duckdb.execute(f"CREATE OR REPLACE TABLE {empty} AS SELECT * FROM {source} LIMIT 0")
    query = sql.replace(f" FROM {source} ", f" FROM {empty} ", 1)
    assert query != sql, f"no FROM {source} in the query"
    con.sql(query).fetchall()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        con.sql(query).fetchall()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


# A fresh process's set-up for the cold-compile scripts: the benchmark tables of 2,000
# rows and the statement (``sql``) read from stdin.
FRESH_SETUP = """
import json, sys, time
import matchsql
from matchsql.storage.demo import synthetic_trades
con = matchsql.connect(demo=False, threads=1)
con.duckdb.register("trade_src", synthetic_trades(2000, 3))
con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
con.sql("CREATE VIEW orders AS SELECT symbol AS custkey, ts AS orderdate, "
        "price AS totalprice FROM trade")
sql = sys.stdin.read()
"""

COLD_SCRIPT = (
    FRESH_SETUP
    + """
times = []
for _ in range(2):
    start = time.perf_counter()
    con.sql(sql).fetchall()
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""
)


def in_fresh_cache(script: str, sql: str, runs: int = 2) -> list:
    """The JSON of the last line that ``script`` prints when run on ``sql`` (its stdin) in
    ``runs`` fresh processes one after another, all with one new, empty numba cache:
    the first compiles, the later ones load what it cached."""
    root = Path(__file__).resolve().parent.parent
    out = []
    with tempfile.TemporaryDirectory(prefix="matchsql-numba-") as cache:
        env = {
            **os.environ,
            "NUMBA_CACHE_DIR": cache,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
        }
        for _ in range(runs):
            done = subprocess.run(
                [sys.executable, "-c", script],
                input=sql,
                env=env,
                capture_output=True,
                text=True,
                check=True,
                cwd=root,
            )
            out.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return out


def cold_compile(sql: str) -> tuple[float, float, float]:
    """(first run s with an empty numba cache, first run s with that cache filled,
    second run s) of ``sql``, each in a fresh process.

    The difference of the two first runs is the compile: both pay the imports
    that the first query triggers (numba's among them) and the warm one also
    loads the compiled kernels from the cache.
    """
    (cold, _), (filled, second) = in_fresh_cache(COLD_SCRIPT, sql)
    return cold, filled, second


def pandas_baseline(trades: pa.Table, rows: int) -> tuple[float, float] | None:
    """(pandas-match-recognize rows/s, matchsql rows/s) on the same ``rows`` rows."""
    local = Path(__file__).resolve().parent.parent / ".cache" / "pmr"
    if local.is_dir() and str(local) not in sys.path:
        sys.path.append(str(local))
    try:
        from pandas_match_recognize import match_recognize
    except ImportError:
        return None
    df = trades.slice(0, rows).select(["price", "ts"]).to_pandas()
    start = time.perf_counter()
    theirs = len(match_recognize(PANDAS_ROW_LOCAL, df))
    their_s = time.perf_counter() - start
    con = matchsql.connect(demo=False)
    con.duckdb.register("data_src", trades.slice(0, rows).select(["price", "ts"]))
    con.sql("CREATE TABLE data AS SELECT * FROM data_src")
    start = time.perf_counter()
    ours = con.sql(PANDAS_ROW_LOCAL).arrow().num_rows
    our_s = time.perf_counter() - start
    if ours != theirs:
        print(f"  note: pandas-match-recognize found {theirs} matches, matchsql {ours}")
    return rows / their_s, rows / our_s


def run(rows: int, partitions: int, reference_rows: int, pandas_rows: int) -> None:
    build = time.perf_counter()
    repeat = 2 if rows <= 2_000_000 else 1
    trades = synthetic_trades(rows, partitions)
    con = matchsql.connect(demo=False)
    con.duckdb.register("trade_src", trades)
    con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    con.duckdb.unregister("trade_src")
    con.sql(
        "CREATE VIEW orders AS SELECT symbol AS custkey, ts AS orderdate, "
        "price AS totalprice FROM trade"
    )
    build = time.perf_counter() - build
    window = "ORDER BY ts" if partitions == 1 else "PARTITION BY symbol ORDER BY ts"
    lag_s, _, lag_rss = measure(lambda: len(con.sql(LAG.format(window=window)).fetchall()))
    lag_rate = rows / lag_s
    print(
        f"\n{rows:,} rows, {partitions} partition(s) (data built in {build:.1f} s); "
        f"DuckDB LAG scan: {lag_rate:,.0f} rows/s ({lag_s:.2f} s, peak RSS "
        f"{lag_rss / 2**20:,.0f} MiB)"
    )
    print(
        f"machine 2T/1T (a GIL-free loop on 2 threads, now): {machine_scaling():.2f}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    header = (
        f"{'query':<9}{'path':<10}{'matches':>11}{'SQL 1T':>12}{'SQL 2T':>12}{'2T/1T':>7}"
        f"{'unsplit':>8}{'cpu2/1':>7}"
        f"{'vs LAG':>8}{'engine 1T':>12}{'plan ms':>9}{'reference':>11}{'vs ref':>8}"
        f"{'peak RSS':>10}"
    )
    print(header)
    print("-" * len(header))
    duck = con.duckdb
    default_split = Config().split_rows
    ref_con = matchsql.connect(demo=False, execution_path="reference", threads=1)
    ref_con.duckdb.register("trade_src", trades.slice(0, reference_rows))
    ref_con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    ref_con.sql(
        "CREATE VIEW orders AS SELECT symbol AS custkey, ts AS orderdate, "
        "price AS totalprice FROM trade"
    )
    del trades  # the table lives in DuckDB now
    rates: dict[str, float] = {}
    for name, sql in QUERIES.items():
        source = "orders" if name == "V-shape" else "trade"
        spec = spec_for(duck, sql, source)
        path = choose_path(spec).name
        timed = {}
        # Best of ``repeat`` runs, interleaved: the figures are noisy on a busy box. "2U" is
        # two threads with no partition split into chunks (SET split_rows = 0): the 2T/1T
        # before chunk-parallel matching, side by side with the one after.
        for _ in range(repeat):
            for mode, threads, split in (
                (1, 1, default_split),
                (2, 2, default_split),
                ("2U", 2, 0),
            ):
                con.sql(f"SET threads = {threads}")
                con.sql(f"SET split_rows = {split}")
                run_ = measure_cpu(lambda sql=sql: con.sql(sql).arrow().num_rows)
                best = timed.get(mode, (float("inf"), run_[1], 0, float("inf")))
                timed[mode] = (
                    min(best[0], run_[0]),
                    run_[1],
                    max(best[2], run_[2]),
                    min(best[3], run_[3]),
                )
        con.sql(f"SET split_rows = {default_split}")
        (one, matches, peak_one, cpu_one), (two, matches_two, peak_two, cpu_two) = (
            timed[1],
            timed[2],
        )
        unsplit, matches_unsplit, _, _ = timed["2U"]
        if not matches_two == matches_unsplit == matches:
            print(
                f"  note: {name} gave {matches:,} matches on 1 thread, {matches_two:,} on 2, "
                f"{matches_unsplit:,} on 2 unsplit"
            )
        plan = planning_ms(con, sql, source)
        keys = ", ".join(spec.partition_by + spec.order_by)
        ordered = f"SELECT * FROM {source}" + (f" ORDER BY {keys}" if keys else "")
        batches = duck.sql(ordered).to_arrow_table().to_batches(65_536)
        engine, _, _ = measure(lambda s=spec, b=batches: engine_only(s, b))
        del batches
        ref_s, _, _ = measure(lambda sql=sql: ref_con.sql(sql).arrow().num_rows)
        ref_rate = min(reference_rows, rows) / ref_s
        rate = rows / min(one, two)
        rates[name] = rows / one
        print(
            f"{name:<9}{path:<10}{matches:>11,}{rows / one:>12,.0f}{rows / two:>12,.0f}"
            f"{one / two:>7.2f}{one / unsplit:>8.2f}{cpu_two / cpu_one:>7.2f}"
            f"{rate / lag_rate:>8.2f}{rows / engine:>12,.0f}{plan:>9.1f}"
            f"{ref_rate:>11,.0f}{rate / ref_rate:>8.0f}"
            f"{max(peak_one, peak_two) / 2**20:>9,.0f}M"
        )
    con.sql(f"SET threads = {os.cpu_count() or 1}")
    if pandas_rows:
        few = min(pandas_rows, rows)
        result = pandas_baseline(synthetic_trades(few, partitions), few)
        if result is None:
            print("pandas-match-recognize: not importable (see the module docstring)")
        else:
            theirs, ours = result
            print(
                f"pandas-match-recognize, A B+ C+ on {min(pandas_rows, rows):,} rows: "
                f"{theirs:,.0f} rows/s; matchsql (SQL, same rows): {ours:,.0f} rows/s "
                f"= {ours / theirs:,.0f}x; matchsql on the {rows:,} rows above (SQL 1T): "
                f"{rates['A B+ C+'] / theirs:,.0f}x"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,10000000")
    parser.add_argument("--partitions", default="1,500")
    parser.add_argument("--reference-rows", type=int, default=100_000)
    parser.add_argument("--pandas-rows", type=int, default=20_000)
    parser.add_argument(
        "--no-cold", action="store_true", help="skip the numba cold compile measurement"
    )
    args = parser.parse_args(argv)
    print(
        f"{os.cpu_count()} CPU core(s); SQL 1T/2T: SET threads = 1 / 2 (the partition pool, "
        "a long partition's chunks and DuckDB's own threads); unsplit: 2T/1T with "
        "split_rows = 0"
    )
    if not args.no_cold:
        print(
            "numba cold compile per query shape (fresh process, empty NUMBA_CACHE_DIR, "
            "2,000 rows; target <= 3 s):"
        )
        for name, sql in QUERIES.items():
            cold, warm, second = cold_compile(sql)
            print(
                f"  {name:<9} first run {cold:6.2f} s (cache filled: {warm:5.2f} s), "
                f"second {second * 1e3:7.1f} ms, compile ~{cold - warm:5.2f} s"
            )
    warm = time.perf_counter()
    spec = spec_for(
        duckdb.connect(),
        ROW_LOCAL,
        "(SELECT 'a' AS symbol, 1.0::DOUBLE AS price, TIMESTAMP '2006-01-03' AS ts)",
    )
    engine_only(
        spec,
        [
            pa.table(
                {"symbol": ["a"], "price": [1.0], "ts": pa.array([0], pa.timestamp("us"))}
            ).to_batches()[0]
        ],
    )
    print(f"kernel load (numba cache; compiles on first use): {time.perf_counter() - warm:.2f} s")
    pandas_done = False
    for rows in (int(r) for r in args.rows.split(",")):
        for partitions in (int(p) for p in args.partitions.split(",")):
            run(rows, partitions, args.reference_rows, 0 if pandas_done else args.pandas_rows)
            pandas_done = True


if __name__ == "__main__":
    main()
