"""Interrupt latency: ``Connection.interrupt()`` -> the statement has ended, per path.

    python -m bench.interrupt [--rows 2000000] [--delays 0.05,0.4,1.5] [--repeat 2]

Each case runs a query that would take far longer than the benchmark (a
pattern that never completes under AFTER MATCH SKIP TO NEXT ROW, so every
start row scans to the end of its partition: quadratic work), interrupts it
from another thread after each delay, and measures

* latency: from the ``interrupt()`` call to ``fetchall()`` raising
  "statement interrupted" in the caller;
* CPU after: the process's CPU seconds in the 0.5 s after the statement
  ended, which is 0 when every worker thread and kernel stopped too.

A delay of 0.05 s lands in DuckDB's sort and export of the input; the later
ones inside the matchers. The paths are the reference VM, the registers
kernel and the row-local DFA, each with 1 and 2 threads, 1 and 50
partitions, ONE ROW and ALL ROWS PER MATCH; then each path WITH UNMATCHED ROWS
(the per-row output builder) and on 2 worker processes; then a statement whose
DEFINE holds a subquery DuckDB computes for seconds while the statement is
analysed (the subquery is folded into its value before any row is matched);
the last case is a continuous query over a live stream that no producer writes
to (the reader waits on an empty queue). The table's last line is the worst
latency over all cases.
"""

from __future__ import annotations

import argparse
import threading
import time
from dataclasses import dataclass

import matchsql
from bench.stream_common import scratch_stream

QUERY = """SELECT * FROM t MATCH_RECOGNIZE (
  {partition} ORDER BY ts
  MEASURES MATCH_NUMBER() AS m {rows}
  AFTER MATCH SKIP TO NEXT ROW
  PATTERN ((A | B)+ C)
  DEFINE A AS price > PREV(price), B AS price <= PREV(price), {c}
)"""
ROW_LOCAL_C = "C AS price > 1000000"
# On the row-local DFA an attempt that would fail is decided at the first dead end an
# earlier attempt met: there C holds on the table's last 1,000 rows, so that every
# attempt reads to them.
DFA_C = "C AS price > 1000000 OR ts >= {last}"
REGISTERS_C = "C AS price > FIRST(A.price) + 1000000"

STREAM_QUERY = (
    "SELECT * FROM idle MATCH_RECOGNIZE (MEASURES A.x AS x ONE ROW PER MATCH "
    "PATTERN (A) DEFINE A AS A.x > 0)"
)


#: A scalar subquery DuckDB takes seconds over (a cross join of 40,000 x 40,000 rows).
SLOW_SUBQUERY = "(SELECT max(a.x + b.x) FROM range(40000) a(x), range(40000) b(x))"
SUBQUERY_QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n "
    f"PATTERN (A B) DEFINE B AS price < {SLOW_SUBQUERY})"
)
ROWS = {False: "", True: "ALL ROWS PER MATCH", None: "ALL ROWS PER MATCH WITH UNMATCHED ROWS"}


@dataclass(frozen=True)
class Case:
    path: str
    threads: int
    partitions: int
    all_rows: bool | None  # None: ALL ROWS PER MATCH WITH UNMATCHED ROWS
    workers: int = 1

    @property
    def label(self) -> str:
        rows = {False: "ONE ROW", True: "ALL ROWS", None: "UNMATCHED"}[self.all_rows]
        on = f"{self.workers}W" if self.workers > 1 else f"{self.threads}T"
        return f"{self.path}, {on}, {self.partitions} part., {rows}"

    def query(self, rows: int) -> str:
        c = {"registers": REGISTERS_C, "row_local": DFA_C.format(last=rows - 1000)}.get(
            self.path, ROW_LOCAL_C
        )
        return QUERY.format(
            partition="PARTITION BY p" if self.partitions > 1 else "", rows=ROWS[self.all_rows], c=c
        )


def interrupted_after(con: matchsql.Connection, sql: str, delay: float) -> tuple[float, float]:
    """(latency s, CPU s in the 0.5 s after) of ``sql`` interrupted ``delay`` s after it starts."""
    fired: list[float] = []

    def fire() -> None:
        time.sleep(delay)
        fired.append(time.perf_counter())
        con.interrupt()

    timer = threading.Thread(target=fire, daemon=True)
    timer.start()
    try:
        con.sql(sql).fetchall()
        raise SystemExit(f"the query ended before the interrupt: {sql}")
    except matchsql.Error as exc:
        if "interrupted" not in str(exc):
            raise
    ended = time.perf_counter()
    timer.join()
    cpu = time.process_time()
    time.sleep(0.5)
    return ended - fired[0], time.process_time() - cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--delays", default="0.05,0.4,1.5")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    delays = [float(d) for d in args.delays.split(",")]

    con = matchsql.connect(demo=False, max_buffered_rows=100_000_000)  # run until interrupted
    con.sql(
        f"CREATE TABLE t AS SELECT i % 50 AS p, i AS ts, (hash(i) % 1000)::DOUBLE AS price "
        f"FROM range({args.rows}) r(i)"
    )
    con.sql("CREATE TABLE warm AS SELECT * FROM t LIMIT 1000")
    paths = ("reference", "registers", "row_local")
    cases = [
        Case(path, threads, parts, all_rows)
        for path in paths
        for threads in (1, 2)
        for parts in (1, 50)
        for all_rows in (False, True)
    ]
    cases += [Case(path, 1, 1, None) for path in paths]
    cases += [Case(path, 1, 50, False, workers=2) for path in paths]
    print(
        f"Interrupt latency, {args.rows:,} rows, delays {args.delays} s, {args.repeat} runs each\n"
    )
    print(f"| {'case':<42} | {'worst latency ms':>16} | {'median ms':>9} | {'CPU after s':>11} |")
    print(f"|{'-' * 44}|{'-' * 18}|{'-' * 11}|{'-' * 13}|")
    worst = 0.0
    for case in cases:
        con.sql(f"SET execution_path = '{case.path}'")
        con.sql(f"SET threads = {case.threads}")
        con.sql(f"SET workers = {case.workers}")
        sql = case.query(args.rows)
        # Kernels compile (or load from numba's cache) on first use, which no interrupt
        # can cut short: not timed. The full table's first run loads the kernels of large
        # inputs too (the grouping's): one interrupted run, not timed either.
        con.sql(sql.replace("FROM t ", "FROM warm ")).fetchall()
        interrupted_after(con, sql, 0.3)
        latencies, cpus = [], []
        for delay in delays:
            for _ in range(args.repeat):
                latency, cpu = interrupted_after(con, sql, delay)
                latencies.append(latency)
                cpus.append(cpu)
        latencies.sort()
        worst = max(worst, latencies[-1])
        print(
            f"| {case.label:<42} | {latencies[-1] * 1e3:16.1f} | "
            f"{latencies[len(latencies) // 2] * 1e3:9.1f} | {max(cpus):11.2f} |"
        )
    con.sql("SET execution_path = 'auto'")
    con.sql("SET workers = 1")
    latencies, cpus = [], []
    for delay in delays:
        for _ in range(args.repeat):
            latency, cpu = interrupted_after(con, SUBQUERY_QUERY, delay)
            latencies.append(latency)
            cpus.append(cpu)
    latencies.sort()
    worst = max(worst, latencies[-1])
    label = "analysis: a DuckDB subquery's value"
    print(
        f"| {label:<42} | {latencies[-1] * 1e3:16.1f} | "
        f"{latencies[len(latencies) // 2] * 1e3:9.1f} | {max(cpus):11.2f} |"
    )
    with scratch_stream(con, "idle", "x BIGINT"):
        latencies = sorted(
            interrupted_after(con, STREAM_QUERY, delay)[0]
            for delay in delays
            for _ in range(args.repeat)
        )
    worst = max(worst, latencies[-1])
    label = "live stream, empty queue"
    print(
        f"| {label:<42} | {latencies[-1] * 1e3:16.1f} | "
        f"{latencies[len(latencies) // 2] * 1e3:9.1f} | {'':>11} |"
    )
    print(f"\nworst case over all cases: {worst * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
