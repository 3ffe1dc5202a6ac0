"""Cross-row conditions over a string column: the registers path against the reference.

    python -m bench.strings [--rows 300000] [--partitions 4000] [--repeat 3] [--threads 1]
                            [--clock wall|cpu]

Synthetic flights: ``--rows`` rows in ``--partitions`` partitions (aircraft) of
uneven, lognormal sizes, each row a departure with its ``origin`` (one of 300
airport codes, the same as the previous row's with probability 0.6, as an
aircraft's legs cluster) and a ``delay``. Each query runs end to end through SQL
(``Result.arrow()``), best of ``--repeat`` runs taken in turn (auto, reference,
auto, ...: load on a shared machine weighs on both alike), with
``SET execution_path = 'auto'`` (which picks the registers path: the string
column reaches the kernel as per-call dictionary codes,
matchsql/engine/compiled/ordinals.py) and ``'reference'``. Printed per query: the
path EXPLAIN names, rows/s of each and their ratio, and the rate of the same
query over an integer column holding the same airports (``origin_id``): what
the codes cost against a column that needs none.

Queries:

* ``eq``: ``PATTERN (A B+) DEFINE B AS B.origin = A.origin AND B.delay > PREV(B.delay)``
  (cross-row string equality: codes in any order);
* ``order``: ``B.origin >= A.origin AND B.delay > PREV(B.delay)`` (an ordering
  comparison: codes in the strings' order);
* ``literal``: ``(B.origin = A.origin OR A.origin = 'A042') AND ...`` (a literal
  read with the codes: its code fixed between the values').

Ratios are between figures of this run only; ``--clock cpu`` times the process's
CPU time instead of wall time (steadier on a loaded machine; with one thread both
agree on an idle one).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pyarrow as pa

import matchsql

CLOCK = time.perf_counter

QUERY = """SELECT * FROM flights MATCH_RECOGNIZE (
  PARTITION BY tail ORDER BY seq
  MEASURES FIRST(A.seq) AS first_seq, COUNT(*) AS legs, LAST(B.delay) AS last_delay
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+)
  DEFINE B AS {define})"""
DEFINES = {
    "eq": "B.origin = A.origin AND B.delay > PREV(B.delay)",
    "order": "B.origin >= A.origin AND B.delay > PREV(B.delay)",
    "literal": "(B.origin = A.origin OR A.origin = 'A042') AND B.delay > PREV(B.delay)",
}


def flights(rows: int, partitions: int, seed: int = 1) -> pa.Table:
    """``rows`` departures in ``partitions`` tails of lognormal sizes (at least one row)."""
    rng = np.random.default_rng(seed)
    weights = rng.lognormal(0.0, 1.0, partitions)
    sizes = np.maximum(1, np.floor(weights / weights.sum() * rows)).astype(np.int64)
    sizes[np.argmax(sizes)] += rows - sizes.sum()
    tail = np.repeat(np.arange(partitions), sizes)
    seq = np.arange(rows) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    fresh = rng.integers(0, 300, rows)
    keep = rng.random(rows) < 0.6
    keep[np.cumsum(sizes) - sizes] = False  # a tail's first row draws its own
    index = np.where(keep, 0, np.arange(rows))
    np.maximum.accumulate(index, out=index)
    origin_id = fresh[index]
    codes = np.array([f"A{i:03d}" for i in range(300)], dtype=object)
    return pa.table(
        {
            "tail": pa.array([f"N{t:05d}" for t in tail]),
            "seq": seq,
            "origin": pa.array(codes[origin_id].tolist(), pa.string()),
            "origin_id": origin_id,
            "delay": rng.normal(10.0, 20.0, rows).round(1),
        }
    )


def best(con: matchsql.Connection, runs: list[tuple[str, str]], repeat: int) -> list[float]:
    """Best wall time of each ``(execution_path, sql)``, the runs taken in turn."""
    times = [float("inf")] * len(runs)
    for _ in range(repeat):
        for i, (path, sql) in enumerate(runs):
            con.sql(f"SET execution_path = '{path}'")
            start = CLOCK()
            con.sql(sql).arrow()
            times[i] = min(times[i], CLOCK() - start)
    con.sql("SET execution_path = 'auto'")
    return times


def path_of(con: matchsql.Connection, sql: str) -> str:
    lines = [r[0] for r in con.sql("EXPLAIN " + sql).fetchall()]
    return next((line[len("path: ") :] for line in lines if line.startswith("path: ")), "?")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    rows = args.rows
    con = matchsql.connect(demo=False, threads=args.threads)
    con.duckdb.register("flights_src", flights(rows, args.partitions))
    con.sql("CREATE TABLE flights AS SELECT * FROM flights_src")
    con.duckdb.unregister("flights_src")
    print(
        f"{os.cpu_count()} CPU core(s); {rows:,} rows, {args.partitions} partitions "
        f"(lognormal sizes), threads = {args.threads}, best of {args.repeat}, "
        f"{args.clock} clock"
    )
    header = (
        f"{'query':<9}{'path (auto)':<13}{'matches':>9}{'auto rows/s':>14}"
        f"{'reference rows/s':>18}{'auto/ref':>10}{'int column rows/s':>19}"
        f"{'string/int':>12}"
    )
    print(header)
    print("-" * len(header))
    for name, define in DEFINES.items():
        sql = QUERY.format(define=define)
        numeric = QUERY.format(define=define.replace("origin", "origin_id").replace("'A042'", "42"))
        matches = con.sql(sql).arrow().num_rows  # warm: kernels loaded, plans cached
        con.sql(numeric).arrow()
        auto, reference, integer = best(
            con, [("auto", sql), ("reference", sql), ("auto", numeric)], args.repeat
        )
        print(
            f"{name:<9}{path_of(con, sql):<13}{matches:>9,}{rows / auto:>14,.0f}"
            f"{rows / reference:>18,.0f}{reference / auto:>10.1f}{rows / integer:>19,.0f}"
            f"{integer / auto:>12.2f}"
        )


if __name__ == "__main__":
    main()
