"""Where a partitioned query's time goes outside the matching kernel, stage by stage.

    python -m bench.stages [--rows 1000000] [--partitions 500] [--queries Q2,Q4] [--repeat 5]

For each query (DejaVu Q1-Q4, matchsql/testing/dejavu_queries.py) at ``threads = 1`` and
``threads = 2`` it prints the wall and process CPU time per query and, per
stage, the CPU time of the threads that ran it (``time.thread_time``: a
thread waiting for the GIL or for a core is not counted, so the figures hold
on a loaded machine better than wall times do):

* input: DuckDB's export of the unsorted input (with the order check of its
  first batch), the order check and grouping of all rows, the fixed-width
  columns moved into grouped order, the taking of each grouped batch
  (session/ordered_input.py, execution/router/presorted.py);
* route: the partition edges of each batch (execution/router/partitions.py);
* whole: the matching of a batch's complete partitions
  (engine/compiled/batch.py), and in it the DEFINE labels, the prefilter, the
  output (measures) and the kernel calls;
* runs: partitions longer than a batch, matched batch by batch
  (engine/compiled/compiled_matcher.py), kernel included.

Stages nest (the export's line holds the order check of the first batch,
which the order check's line counts too; ``whole: all`` holds the four other
``whole`` lines), so the lines do not add up to the total; the rest of the
total is the statement's planning and the result's assembly. The functions
are wrapped for the run only: a wrapper costs about a microsecond a call.
"""

from __future__ import annotations

import argparse
import collections
import os
import threading
import time
from collections.abc import Callable, Iterator

import matchsql
from matchsql.engine.compiled import batch as B
from matchsql.engine.compiled import compiled_matcher as M
from matchsql.engine.compiled import kernel as K
from matchsql.execution.router import parallel as RPar
from matchsql.execution.router import partitions as RP
from matchsql.execution.router import presorted as PS
from matchsql.session import ordered_input as OI
from matchsql.storage.demo import synthetic_trades
from matchsql.testing.dejavu_queries import DEJAVU

SPENT: collections.Counter = collections.Counter()


def _timed(name: str, fn: Callable) -> Callable:
    def wrapper(*args, **kwargs):
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[name] += time.thread_time() - start

    return wrapper


def _timed_batches(name: str, fn: Callable) -> Callable:
    """``fn`` returns a generator: the time spent in each of its steps."""

    def wrapper(*args, **kwargs) -> Iterator:
        steps = fn(*args, **kwargs)
        while True:
            start = time.thread_time()
            try:
                item = next(steps)
            except StopIteration:
                SPENT[name] += time.thread_time() - start
                return
            SPENT[name] += time.thread_time() - start
            yield item

    return wrapper


KERNEL = "whole: kernel calls"


def instrument() -> None:
    """Wrap the stages' functions where their callers look them up."""
    OI._held_in_order = _timed("input: DuckDB export", OI._held_in_order)
    PS._ordered = _timed("input: order check + grouping", PS._ordered)
    PS.GroupedRows.place_all = _timed(
        "input: move columns to grouped order", PS.GroupedRows.place_all
    )
    PS.GroupedRows.batches = _timed_batches("input: take grouped batches", PS.GroupedRows.batches)
    RP.segments = RPar.segments = _timed("route: partition edges", RP.segments)
    B.label_input = _timed("whole: DEFINE labels", B.label_input)
    B.P.viable_starts = _timed("whole: prefilter", B.P.viable_starts)
    B.output_batch = _timed("whole: output (measures)", B.output_batch)
    B.WholePartitions.match_counted = _timed("whole: all", B.WholePartitions.match_counted)
    choose = K.attempts_kernel
    whole_match = B.WholePartitions.match_counted
    inside = threading.local()

    def match(self, *args, **kwargs):
        inside.whole = True
        try:
            return whole_match(self, *args, **kwargs)
        finally:
            inside.whole = False

    def attempts_kernel(*args, **kwargs):  # the kernel of whole batches, not of runs
        kernel = choose(*args, **kwargs)
        return _timed(KERNEL, kernel) if getattr(inside, "whole", False) else kernel

    B.WholePartitions.match_counted = match
    K.attempts_kernel = attempts_kernel
    M.CompiledMatcher.feed = _timed("runs: feed (kernel included)", M.CompiledMatcher.feed)
    M.CompiledMatcher.finish = _timed("runs: finish (kernel included)", M.CompiledMatcher.finish)


def run(rows: int, partitions: int, queries: list[str], repeat: int) -> None:
    con = matchsql.connect(demo=False, threads=1)
    con.duckdb.register("trade_src", synthetic_trades(rows, partitions))
    con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    con.duckdb.unregister("trade_src")
    for name in queries:
        for threads in (1, 2):
            con.sql(f"SET threads = {threads}")
            con.sql(DEJAVU[name]).arrow()  # warm
            SPENT.clear()
            wall = cpu = 0.0
            for _ in range(repeat):
                w, c = time.perf_counter(), time.process_time()
                con.sql(DEJAVU[name]).arrow()
                wall += time.perf_counter() - w
                cpu += time.process_time() - c
            print(
                f"\n{name}, {rows:,} rows, {partitions} partitions, threads = {threads}: "
                f"{wall / repeat * 1e3:.1f} ms wall, {cpu / repeat * 1e3:.1f} ms CPU "
                f"per query ({rows / (wall / repeat) / 1e6:.2f}M rows/s)"
            )
            for stage in sorted(SPENT):
                print(f"  {stage:<34}{SPENT[stage] / repeat * 1e3:9.1f} ms CPU")
            outside = SPENT["whole: all"] - SPENT[KERNEL]
            print(f"  {'whole: outside the kernel':<34}{outside / repeat * 1e3:9.1f} ms CPU")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--queries", default="Q2,Q4")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} CPU core(s); load average {os.getloadavg()[0]:.1f}")
    instrument()
    run(args.rows, args.partitions, args.queries.split(","), args.repeat)


if __name__ == "__main__":
    main()
