"""Running aggregates in DEFINE: the registers path against the reference, side by side.

    python -m bench.define_aggregates [--rows 20000] [--repeat 3]

Until the register bytecode carried per-thread accumulators, a DEFINE with
``SUM``/``AVG``/``MIN``/``MAX``/``COUNT(A.*)`` ran on the reference matcher. Each
query runs through SQL with ``SET execution_path = 'reference'`` and
``'registers'`` (``SET threads = 1``), interleaved, best of ``--repeat``; rows
per second of CPU time (the machine may be shared) and the ratio; the rows
must be equal.
"""

from __future__ import annotations

import argparse
import os
import time

import matchsql
from matchsql.storage.demo import synthetic_trades

QUERIES = {
    # a rise whose running average stays under a cap, then a drop below the rise's start
    "avg rise": "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES FIRST(ts) AS s, LAST(ts) AS e, SUM(B.volume) AS v "
    "ONE ROW PER MATCH PATTERN (A B+ C) DEFINE B AS price > PREV(price) AND "
    "AVG(B.price) < A.price * 1.05, C AS price < A.price)",
    # bursts: at most 5 rows and a volume budget, then a larger trade
    "volume budget": "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES FIRST(ts) AS s, COUNT(*) AS n ONE ROW PER MATCH "
    "PATTERN (A+ B) DEFINE A AS COUNT(A.*) <= 5 AND SUM(A.volume) < 20000, "
    "B AS volume > MAX(A.volume))",
    # a range: the spread between the running extremes stays small
    "spread": "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES FIRST(ts) AS s, COUNT(*) AS n ONE ROW PER MATCH "
    "AFTER MATCH SKIP TO NEXT ROW PATTERN (A{3,8} B) "
    "DEFINE A AS MAX(A.price) - MIN(A.price) <= 0.5, B AS price > MAX(A.price))",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    cons = {}
    for path in ("reference", "registers"):
        con = cons[path] = matchsql.connect(demo=False, threads=1, execution_path=path)
        con.duckdb.register("trade_src", synthetic_trades(args.rows, 10))
        con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    print(
        f"{args.rows:,} rows, 10 symbols; CPU rows/s, best of {args.repeat}; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(f"{'query':<15}{'matches':>9}{'reference':>12}{'registers':>12}{'ratio':>8}")
    for name, sql in QUERIES.items():
        best = {path: float("inf") for path in cons}
        results = {}
        for path, con in cons.items():  # warm-up: numba cache loads
            assert "path: " + path in [r[0] for r in con.sql("EXPLAIN " + sql).fetchall()]
            con.sql(sql.replace("FROM trade", "FROM (SELECT * FROM trade LIMIT 100)", 1)).fetchall()
        for _ in range(args.repeat):
            for path, con in cons.items():
                began = time.process_time()
                results[path] = sorted(con.sql(sql).fetchall())
                best[path] = min(best[path], time.process_time() - began)
        same = results["reference"] == results["registers"]
        rates = [args.rows / best[p] for p in cons]
        print(
            f"{name:<15}{len(results['registers']):>9}{rates[0]:>12,.0f}{rates[1]:>12,.0f}"
            f"{rates[1] / rates[0]:>7.1f}x" + ("" if same else "  ROWS DIFFER"),
            flush=True,
        )


if __name__ == "__main__":
    main()
