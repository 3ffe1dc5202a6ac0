"""What surrounds the matcher, end to end through SQL: the input's sort and the statement
around a MATCH_RECOGNIZE, before and after, side by side in one run.

    python -m bench.around [--rows 1000000] [--partitions 1,500] [--lag-partitions 1,50]

For each partition count it builds synthetic trades (in time order, as a
table loaded in arrival order is) and measures, best of ``--repeat`` runs
taken in turn (old, new, old, new, ...: load on a shared machine weighs on
both alike):

* **input**: each query (DejaVu Q1-Q4 verbatim and the row-local ``A B+ C+``)
  bare, its input sorted by DuckDB ("sorted", the old route) and taken in the
  order it is in when that is ORDER BY order ("presorted",
  matchsql/session/ordered_input.py), and their ratio;
* **around**: the same queries inside ``SELECT count(*) FROM (...)``, joined
  with a table of the symbols, under a GROUP BY and in a CTE, each as a rate
  and as a ratio to the bare statement's rate (target >= 0.90), with the
  matches streamed into the running statement (old) and held first
  (matchsql/session/held.py);
* **shuffled**: ``A B+ C+`` over the same rows stored out of order, where the
  unsorted attempt fails on its first batch and DuckDB sorts after all (what
  trying costs);
* **vs LAG**: ``A B+ C+`` against DuckDB computing its two DEFINE conditions
  with LAG over the same data (target >= 1.5x), old and new routes.

Q1 and Q3 have neither PARTITION BY nor ORDER BY: no sort to skip there.
The machine may be shared: only ratios between figures of one run mean much;
``--clock cpu`` times the process's CPU time instead of wall time (steadier
under load; the runs use one thread, so both agree on an idle machine).
"""

from __future__ import annotations

import argparse
import os
import time

import matchsql
from bench.paths import LAG, QUERIES
from matchsql.session import held, ordered_input
from matchsql.storage.demo import synthetic_trades

CLOCK = time.perf_counter  # --clock cpu: time.process_time, the CPU time of all threads

NAMES = ["Q1", "Q2", "Q3", "Q4", "A B+ C+"]

AROUND = {
    "count": "SELECT count(*) FROM ({q})",
    "join": "SELECT s.n, count(*) FROM ({q}) m JOIN symbols s ON s.symbol = m.symbol GROUP BY s.n",
    "group": "SELECT symbol, count(*) FROM ({q}) GROUP BY symbol",
    "cte": "WITH m AS ({q}) SELECT count(*) FROM m",
}


def interleaved(con, runs: list[tuple[bool, str]], repeat: int) -> list[float]:
    """Best wall time in seconds of each ``(old route?, sql)`` fetched as Arrow, the runs
    taken in turn ``repeat`` times (a shared machine's load then weighs on all alike)."""
    times = [float("inf")] * len(runs)
    for _ in range(repeat):
        for i, (old, sql) in enumerate(runs):
            routes(old)
            start = CLOCK()
            con.sql(sql).arrow()
            times[i] = min(times[i], CLOCK() - start)
    routes(False)
    return times


def routes(old: bool) -> None:
    ordered_input.ENABLED = not old
    held.ENABLED = not old


def run(rows: int, partitions: int, repeat: int, lag: bool, names: list[str]) -> None:
    con = matchsql.connect(demo=False, threads=1)
    con.duckdb.register("trade_src", synthetic_trades(rows, partitions))
    con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    con.duckdb.unregister("trade_src")
    con.sql(
        "CREATE TABLE symbols AS SELECT symbol, row_number() OVER () AS n "
        "FROM (SELECT DISTINCT symbol FROM trade)"
    )
    con.sql("CREATE TABLE shuffled AS SELECT * FROM trade ORDER BY hash(ts)")
    print(f"\n{rows:,} rows, {partitions} partition(s), 1 thread")
    header = (
        f"{'query':<9}{'statement':<11}{'old rows/s':>13}{'new rows/s':>13}{'new/old':>9}"
        f"{'old vs bare':>13}{'new vs bare':>13}"
    )
    print(header)
    print("-" * len(header))
    for name in names:
        q = QUERIES[name]
        con.sql(q).arrow()  # warm: kernels loaded, plans cached
        for kind, text in AROUND.items():
            if kind in ("join", "group") and "PARTITION BY" not in q:
                continue  # Q1 and Q3 output no symbol column
            sql = text.format(q=q)
            bare_old, bare_new, old, new = interleaved(
                con, [(True, q), (False, q), (True, sql), (False, sql)], repeat
            )
            if kind == "count":
                print(
                    f"{name:<9}{'bare':<11}{rows / bare_old:>13,.0f}{rows / bare_new:>13,.0f}"
                    f"{bare_old / bare_new:>9.2f}"
                )
            print(
                f"{'':<9}{kind:<11}{rows / old:>13,.0f}{rows / new:>13,.0f}"
                f"{old / new:>9.2f}{bare_old / old:>13.2f}{bare_new / new:>13.2f}"
            )
    if "A B+ C+" in names:  # the price of trying: input out of order, sorted after all
        sql = QUERIES["A B+ C+"].replace("FROM trade ", "FROM shuffled ")
        old, new = interleaved(con, [(True, sql), (False, sql)], repeat)
        print(
            f"{'A B+ C+':<9}{'shuffled':<11}{rows / old:>13,.0f}{rows / new:>13,.0f}"
            f"{old / new:>9.2f}  (input out of order: DuckDB sorts it either way)"
        )
    if lag:
        window = "ORDER BY ts" if partitions == 1 else "PARTITION BY symbol ORDER BY ts"
        q = QUERIES["A B+ C+"]
        lag_s, old, new = interleaved(
            con, [(False, LAG.format(window=window)), (True, q), (False, q)], repeat
        )
        print(
            f"A B+ C+ vs DuckDB's LAG scan ({rows / lag_s:,.0f} rows/s): "
            f"old {lag_s / old:.2f}x, new {lag_s / new:.2f}x (target >= 1.5x)"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", default="1,500")
    parser.add_argument("--lag-partitions", default="1,50")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--queries", default=",".join(NAMES))
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: process CPU time (all threads), steadier on a loaded machine "
        "for these single-threaded runs",
    )
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    print(
        f"{os.cpu_count()} CPU core(s); old = DuckDB sorts the input and the matches stream "
        "into the running statement; new = input taken in its order when it is in order, "
        "matches held before the statement around them runs"
    )
    names = args.queries.split(",")
    counts = [int(p) for p in args.partitions.split(",")]
    lag = [int(p) for p in args.lag_partitions.split(",")]
    for partitions in counts:
        run(args.rows, partitions, args.repeat, partitions in lag, names)
    for partitions in lag:
        if partitions not in counts:
            run(args.rows, partitions, args.repeat, True, ["A B+ C+"])


if __name__ == "__main__":
    main()
