"""The query after an interrupted ``workers = 2`` query: its time against its usual time.

    python -m bench.after_interrupt [--repeat 3] [--pauses 0,2]

An interrupt kills the worker pool (a worker may be inside a kernel); the pool's
successor starts at once on a helper thread (matchsql/execution/workers/session.py), so the
next query should take about its usual time; the successor matches the
interrupted query's first rows before it is handed over, so that its workers
have loaded that query's kernels. The query (a few seconds: every start
row of a V-shape attempt, ALL ROWS PER MATCH, SKIP TO NEXT ROW) runs over the demo
table on 2 worker processes.
For each pause (the seconds a user takes to type the next query): start the query,
interrupt it after 0.5 s, wait the pause, and time the same query again; printed
next to the best of ``--repeat`` uninterrupted runs, with their ratio (target: at
most 1.2).
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import matchsql

QUERY = (
    "SELECT count(*) FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES COUNT(*) AS n ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW "
    "PATTERN (A B+ C) DEFINE B AS B.price < A.price, "
    "C AS C.price > A.price AND C.price < A.price * 1.0001)"
)


def timed(con: matchsql.Connection) -> float:
    start = time.perf_counter()
    con.sql(QUERY).fetchall()
    return time.perf_counter() - start


def interrupt_one(con: matchsql.Connection, after: float = 0.5) -> None:
    failed: list[BaseException] = []

    def run() -> None:
        try:
            con.sql(QUERY).fetchall()
        except matchsql.Error as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(after)
    con.interrupt()
    thread.join()
    if not failed:
        raise SystemExit("the query ended before the interrupt: nothing measured")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pauses", default="0,2")
    args = parser.parse_args(argv)
    con = matchsql.connect(workers=2)
    timed(con)  # the pool starts, the workers load their kernels
    usual = min(timed(con) for _ in range(args.repeat))
    print(
        f"{os.cpu_count()} CPU core(s), load average {os.getloadavg()[0]:.1f}; the demo "
        f"table, workers = 2; usual time (best of {args.repeat}): {usual:.2f} s"
    )
    print(f"{'pause s':>8}{'next s':>9}{'next/usual':>12}")
    for pause in (float(p) for p in args.pauses.split(",")):
        for _ in range(args.repeat):
            interrupt_one(con)
            time.sleep(pause)
            after = timed(con)
            print(f"{pause:>8.1f}{after:>9.2f}{after / usual:>12.2f}", flush=True)
    con.close()


if __name__ == "__main__":
    main()
