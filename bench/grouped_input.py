"""Grouped input in one process: batches taken through the permutation, or columns moved
into grouped order once by the counting sort and then sliced.

    python -m bench.grouped_input [--rows 1000000,10000000] [--partitions 500] [--repeat 5]

Input in ORDER BY order (synthetic trades in time order, partitions mixed) is grouped
in the process (matchsql/execution/router/presorted.py). ``workers = 1, threads = 1``: CPU of the
whole statement, median of ``--repeat`` runs taken in turns, with ``PLACE`` off
("take": each batch is a take through the permutation) and on ("place": the fixed-width
columns are moved once by the counting sort, each batch is a slice).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.workers import PARTITIONED, _trades
from matchsql.session import ordered_input


def run(rows: int, partitions: int, repeat: int) -> None:
    con = _trades(rows, partitions)
    con.sql("SET workers = 1")
    con.sql("SET threads = 1")
    print(f"\n{rows:,} rows, {partitions} partitions: statement CPU, median of {repeat}")
    print(f"{'query':<9}{'take ms':>10}{'place ms':>10}{'take/place':>12}")
    try:
        for name in ("Q2", "Q4"):
            sql = PARTITIONED[name]
            con.sql(sql).arrow()  # compiled code loaded
            cpu: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(repeat):
                for place in cpu:
                    ordered_input.PLACE = place
                    started = time.process_time()
                    con.sql(sql).arrow()
                    cpu[place].append(time.process_time() - started)
            take, place = (statistics.median(cpu[k]) * 1e3 for k in (False, True))
            print(f"{name:<9}{take:>10.0f}{place:>10.0f}{take / place:>11.2f}x")
    finally:
        ordered_input.PLACE = True
        con.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,10000000")
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPU core(s), load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    for rows in (int(r) for r in args.rows.split(",")):
        run(rows, args.partitions, args.repeat)


if __name__ == "__main__":
    main()
