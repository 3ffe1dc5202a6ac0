"""Execution paths benchmark: compiled paths against their baselines, one table per run.

    python -m bench.paths [--rows 1000000,10000000] [--partitions 1,500]

For each data size and partition count it builds synthetic trades
(random-walk prices, :func:`matchsql.storage.demo.synthetic_trades`) and
measures, in the same run:

* every query end to end through SQL (``auto`` path): DejaVu Q1-Q4 verbatim,
  the V-shape query of Trino's MATCH_RECOGNIZE documentation, and the
  row-local ``PATTERN (A B+ C+)``;
* the same queries on the matcher alone (the input already materialised as
  Arrow batches, so DuckDB's scan and sort are not counted), on 1 and on 2
  threads (partitions spread over the threads; the kernel releases the GIL);
* baselines: DuckDB computing the same predicates with LAG window functions,
  the reference matcher (on the first ``--reference-rows`` rows: it is slow),
  and the pip package ``pandas-match-recognize`` on ``--pandas-rows`` rows
  where it is importable (``pip install --no-deps --target .cache/pmr
  pandas-match-recognize antlr4-python3-runtime psutil``; it pins
  numpy<2.2, so it is not a project dependency).

Ratios are always between figures of this run. Peak RSS is the process's
resident set sampled every 5 ms while the measurement runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pyarrow as pa

import matchsql
from bench.queries import DEJAVU
from matchsql.config import Config
from matchsql.fsm.planner import choose_path, new_partition_matcher
from matchsql.grammar import analyze, parse
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.router.partitions import SortedPartitionRouter
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

QUERIES = {**{k: v.rstrip().rstrip(";") for k, v in DEJAVU.items()},
           "V-shape": V_SHAPE, "A B+ C+": ROW_LOCAL}

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
    with PeakRSS() as rss:
        start = time.perf_counter()
        size = fn()
        seconds = time.perf_counter() - start
    return seconds, size, rss.peak


def spec_for(con: duckdb.DuckDBPyConnection, sql: str, source: str):
    """The analysed MatchSpec of the one MATCH_RECOGNIZE in ``sql`` over relation ``source``."""
    node = next(parse(sql)[-1].find_all(MatchRecognizeTable))
    schema = con.sql(f"SELECT * FROM {source} LIMIT 0").to_arrow_table().schema
    return analyze(node, schema, sql=sql, con=con)


def engine_only(spec, batches: list[pa.RecordBatch], threads: int) -> int:
    """Run the matchers over materialised batches; partitions spread over ``threads``."""
    config = Config()
    if threads == 1:
        router = SortedPartitionRouter(
            spec.partition_by, lambda key: new_partition_matcher(spec, key, config))
        rows = 0
        for batch in batches:
            rows += sum(b.num_rows for b in router.route(batch))
        return rows + sum(b.num_rows for b in router.finish())
    # Partitions are contiguous in sorted input: cut the batches into partition
    # runs and give each thread every ``threads``-th run.
    runs: list[list[pa.RecordBatch]] = []
    router = SortedPartitionRouter(spec.partition_by, lambda key: _Collect(runs))
    for batch in batches:
        list(router.route(batch))
    list(router.finish())

    def work(part: list[list[pa.RecordBatch]]) -> int:
        total = 0
        for run in part:
            matcher = new_partition_matcher(spec, (), config)
            for b in run:
                total += sum(o.num_rows for o in matcher.feed(b))
            total += sum(o.num_rows for o in matcher.finish())
        return total
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(work, [runs[i::threads] for i in range(threads)]))


class _Collect:
    """A stand-in partition run that only records the batches routed to it."""

    def __init__(self, runs: list[list[pa.RecordBatch]]) -> None:
        self.batches: list[pa.RecordBatch] = []
        runs.append(self.batches)

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        self.batches.append(batch)
        return []

    def finish(self) -> list[pa.RecordBatch]:
        return []


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
    ours = len(con.sql(PANDAS_ROW_LOCAL).fetchall())
    our_s = time.perf_counter() - start
    if ours != theirs:
        print(f"  note: pandas-match-recognize found {theirs} matches, matchsql {ours}")
    return rows / their_s, rows / our_s


def run(rows: int, partitions: int, reference_rows: int, pandas_rows: int) -> None:
    trades = synthetic_trades(rows, partitions)
    con = matchsql.connect(demo=False)
    con.duckdb.register("trade_src", trades)
    con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    con.sql("CREATE VIEW orders AS SELECT symbol AS custkey, ts AS orderdate, "
            "price AS totalprice FROM trade")
    window = "ORDER BY ts" if partitions == 1 else "PARTITION BY symbol ORDER BY ts"
    lag_s, _, lag_rss = measure(lambda: len(con.sql(LAG.format(window=window)).fetchall()))
    lag_rate = rows / lag_s
    print(f"\n{rows:,} rows, {partitions} partition(s); DuckDB LAG scan: {lag_rate:,.0f} rows/s "
          f"({lag_s:.2f} s, peak RSS {lag_rss / 2**20:,.0f} MiB)")
    header = (f"{'query':<9}{'path':<10}{'matches':>11}{'SQL rows/s':>13}{'vs LAG':>8}"
              f"{'engine 1T':>13}{'engine 2T':>13}{'2T/1T':>7}{'reference':>12}{'vs ref':>8}"
              f"{'peak RSS':>10}")
    print(header)
    print("-" * len(header))
    duck = con.duckdb
    ref_con = matchsql.connect(demo=False, execution_path="reference")
    ref_con.duckdb.register("trade_src", trades.slice(0, reference_rows))
    ref_con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    ref_con.sql("CREATE VIEW orders AS SELECT symbol AS custkey, ts AS orderdate, "
                "price AS totalprice FROM trade")
    for name, sql in QUERIES.items():
        source = "orders" if name == "V-shape" else "trade"
        spec = spec_for(duck, sql, source)
        path = choose_path(spec).name
        seconds, matches, peak = measure(lambda sql=sql: len(con.sql(sql).fetchall()))
        keys = ", ".join(spec.partition_by + spec.order_by)
        ordered = f"SELECT * FROM {source}" + (f" ORDER BY {keys}" if keys else "")
        batches = duck.sql(ordered).to_arrow_table().to_batches(65_536)
        one, _, _ = measure(lambda s=spec, b=batches: engine_only(s, b, 1))
        two, _, _ = measure(lambda s=spec, b=batches: engine_only(s, b, 2))
        ref_s, _, _ = measure(lambda sql=sql: len(ref_con.sql(sql).fetchall()))
        ref_rate = min(reference_rows, rows) / ref_s
        rate = rows / seconds
        print(f"{name:<9}{path:<10}{matches:>11,}{rate:>13,.0f}{rate / lag_rate:>8.2f}"
              f"{rows / one:>13,.0f}{rows / two:>13,.0f}{one / two:>7.2f}{ref_rate:>12,.0f}"
              f"{rate / ref_rate:>8.0f}{peak / 2**20:>9,.0f}M")
    if pandas_rows:
        result = pandas_baseline(trades, min(pandas_rows, rows))
        if result is None:
            print("pandas-match-recognize: not importable (see the module docstring)")
        else:
            theirs, ours = result
            print(f"pandas-match-recognize, A B+ C+ on {min(pandas_rows, rows):,} rows: "
                  f"{theirs:,.0f} rows/s; matchsql (SQL, same rows): {ours:,.0f} rows/s "
                  f"= {ours / theirs:,.0f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,10000000")
    parser.add_argument("--partitions", default="1,500")
    parser.add_argument("--reference-rows", type=int, default=100_000)
    parser.add_argument("--pandas-rows", type=int, default=20_000)
    args = parser.parse_args(argv)
    warm = time.perf_counter()
    spec = spec_for(duckdb.connect(), ROW_LOCAL, "(SELECT 'a' AS symbol, 1.0::DOUBLE AS price, "
                    "TIMESTAMP '2006-01-03' AS ts)")
    engine_only(spec, [pa.table({"symbol": ["a"], "price": [1.0], "ts": pa.array(
        [0], pa.timestamp("us"))}).to_batches()[0]], 1)
    print(f"kernel load (numba cache; compiles on first use): "
          f"{time.perf_counter() - warm:.2f} s")
    pandas_done = False
    for rows in (int(r) for r in args.rows.split(",")):
        for partitions in (int(p) for p in args.partitions.split(",")):
            run(rows, partitions, args.reference_rows, 0 if pandas_done else args.pandas_rows)
            pandas_done = True


if __name__ == "__main__":
    main()
