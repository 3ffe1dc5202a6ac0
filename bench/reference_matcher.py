"""Reference matcher throughput: DejaVu Q1-Q4 over synthetic trades.

    python -m bench.reference_matcher [--rows 1000000]

Prints rows/s per query, with DuckDB's plain scan of the same rows (a
``count(*)`` with the LAG predicates of Q1's DEFINE) as the floor of "just
reading the data", measured in the same run.
"""

from __future__ import annotations

import argparse
import time

import matchsql
from bench.queries import DEJAVU
from matchsql.storage.demo import synthetic_trades

LAG_SCAN = """SELECT count(*) FILTER (WHERE p < lp) FROM (
  SELECT price AS p, lag(price) OVER (ORDER BY ts) AS lp FROM trade)"""


def timed(con: matchsql.Connection, sql: str) -> tuple[float, int]:
    start = time.perf_counter()
    rows = con.sql(sql).fetchall()
    return time.perf_counter() - start, len(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--symbols", type=int, default=50)
    parser.add_argument("--queries", default="Q1,Q2,Q3,Q4")
    args = parser.parse_args(argv)

    con = matchsql.connect(demo=False, execution_path="reference")
    con.duckdb.register("trade_src", synthetic_trades(args.rows, args.symbols))
    con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")

    lag_s, _ = timed(con, LAG_SCAN)
    print(f"{args.rows:,} rows, {args.symbols} symbols")
    print(f"{'query':<8}{'matches':>12}{'seconds':>10}{'rows/s':>14}{'vs LAG scan':>14}")
    print(f"{'LAG':<8}{'-':>12}{lag_s:>10.2f}{args.rows / lag_s:>14,.0f}{1.0:>14.2f}")
    for name in args.queries.split(","):
        seconds, matches = timed(con, DEJAVU[name])
        ratio = lag_s / seconds
        print(f"{name:<8}{matches:>12,}{seconds:>10.2f}{args.rows / seconds:>14,.0f}{ratio:>14.3f}")


if __name__ == "__main__":
    main()
