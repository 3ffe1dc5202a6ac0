"""Pattern queries on data shaped like real event data: thousands of short partitions.

    python -m bench.events [--rows 334000] [--partitions 4000] [--repeat 5]

Real event data (flights per aircraft, trades per account, readings per sensor) has
many short partitions of uneven sizes, timestamps that tie, and NULLs; the cost per
partition, not the matching, then decides the speed. The generator: ``--rows``
departures of ``--partitions`` aircraft with lognormal sizes around
rows/partitions (NYC flights 2013 has 334,264 flights of 4,044 aircraft, about 83
each), minute timestamps (so an aircraft's departures tie now and then; ``id``
breaks the ties), departure delays with 3 % NULLs (cancelled flights), and the
origin airport (one of 100 codes); the table is stored in time order across
aircraft, as an event log is.

Every query runs end to end through SQL (``SELECT count(*) FROM (...)``), best of
``--repeat`` runs taken in turn with its baseline, at ``threads = 1`` and ``2``:

* row-local queries (conditions on the current and the previous row) next to
  DuckDB's own scan of the same predicates with LAG over the same window
  (``PARTITION BY tail ORDER BY ts, id``), DuckDB at its default threads;
* register queries (conditions across variables, a cross-row string equality among
  them) as rows/s.

Printed per query: the path EXPLAIN names, the matches, rows/s at 1 and 2 threads,
2T/1T, and, for the row-local ones, the LAG scan's rows/s and matchsql/LAG (the
faster of the two thread counts).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pyarrow as pa

import matchsql

WINDOW = "PARTITION BY tail ORDER BY ts, id"
_MR = (
    "SELECT * FROM flights MATCH_RECOGNIZE ("
    + WINDOW
    + " MEASURES COUNT(*) AS n ONE ROW PER MATCH PATTERN ({pattern}) DEFINE {define})"
)
#: name -> (PATTERN, DEFINE, the LAG scan of the same predicates or None).
QUERIES: dict[str, tuple[str, str, str | None]] = {
    "V-shape": (
        "A B+ C+",
        "B AS delay < PREV(delay), C AS delay > PREV(delay)",
        "SELECT count(*) FILTER (WHERE d < ld), count(*) FILTER (WHERE d > ld) FROM "
        f"(SELECT delay AS d, lag(delay) OVER ({WINDOW}) AS ld FROM flights)",
    ),
    "cascade": (
        "A B{2,}",
        "A AS delay > 15, B AS delay > PREV(delay)",
        "SELECT count(*) FILTER (WHERE d > 15), count(*) FILTER (WHERE d > ld) FROM "
        f"(SELECT delay AS d, lag(delay) OVER ({WINDOW}) AS ld FROM flights)",
    ),
    "same origin": ("A B+", "B AS B.origin = A.origin AND B.delay > A.delay", None),
    "recovery": ("A B+ C", "B AS B.delay > A.delay + 10, C AS C.delay <= A.delay", None),
}


def statement(name: str) -> str:
    """The MATCH_RECOGNIZE statement of query ``name`` (its rows, not counted)."""
    pattern, define, _ = QUERIES[name]
    return _MR.format(pattern=pattern, define=define)


def flights(rows: int, partitions: int, seed: int = 7) -> pa.Table:
    """``rows`` departures of ``partitions`` aircraft (see the module's docstring)."""
    rng = np.random.default_rng(seed)
    weights = rng.lognormal(0.0, 0.8, partitions)
    sizes = np.maximum(1, np.floor(weights / weights.sum() * rows)).astype(np.int64)
    sizes[np.argmax(sizes)] += rows - sizes.sum()
    tail = np.repeat(np.arange(partitions), sizes)
    # Each aircraft's departures: gaps of 0 to 12 hours in whole minutes, 0 now and then.
    gaps = rng.choice([0, 1], size=rows, p=[0.02, 0.98]) * rng.integers(30, 720, rows)
    firsts = np.cumsum(sizes) - sizes
    gaps[firsts] = rng.integers(0, 1440, partitions)
    minutes = np.cumsum(gaps) - np.repeat(np.cumsum(gaps)[firsts] - gaps[firsts], sizes)
    ts = (np.datetime64("2013-01-01T00:00", "m") + minutes).astype("datetime64[us]")
    delay = rng.gamma(1.2, 14.0, rows).round(0) - 5.0
    cancelled = rng.random(rows) < 0.03
    origins = np.array(
        [f"{chr(65 + i // 26 % 26)}{chr(65 + i % 26)}X" for i in range(100)], dtype=object
    )
    # Stored in time order across aircraft, as an event log is (ties: by id).
    order = np.lexsort((np.arange(rows), ts))
    table = pa.table(
        {
            "tail": pa.array([f"N{t:04d}" for t in tail]),
            "ts": pa.array(ts),
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "delay": pa.array(delay, mask=cancelled),
            "origin": pa.array(origins[rng.integers(0, 100, rows)].tolist(), pa.string()),
        }
    )
    return table.take(pa.array(order))


def best(con: matchsql.Connection, runs: list[tuple[str, str]], repeat: int) -> list[float]:
    """Best wall time of each ``(setting, sql)`` (``setting``: a SET run first or ''),
    the runs taken in turn so that load on the machine weighs on all alike."""
    times = [float("inf")] * len(runs)
    for _ in range(repeat):
        for i, (setting, sql) in enumerate(runs):
            if setting:
                con.sql(setting)
            start = time.perf_counter()
            con.sql(sql).fetchall()
            times[i] = min(times[i], time.perf_counter() - start)
    return times


def path_of(con: matchsql.Connection, sql: str) -> str:
    lines = [str(r[0]) for r in con.sql("EXPLAIN " + sql).fetchall()]
    text = "\n".join(lines)
    for line in text.splitlines():
        if line.strip().startswith("path: "):
            return line.strip()[len("path: ") :].split()[0]
    return "?"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=334_000)
    parser.add_argument("--partitions", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rows = args.rows
    con = matchsql.connect(demo=False)
    con.duckdb.register("flights_src", flights(rows, args.partitions))
    con.sql("CREATE TABLE flights AS SELECT * FROM flights_src")
    con.duckdb.unregister("flights_src")
    sizes = [r[0] for r in con.sql("SELECT count(*) FROM flights GROUP BY tail").fetchall()]
    print(
        f"{os.cpu_count()} CPU core(s), load average {os.getloadavg()[0]:.1f}; {rows:,} rows, "
        f"{args.partitions:,} partitions (sizes {min(sizes)}-{max(sizes)}, median "
        f"{int(np.median(sizes))}), best of {args.repeat}, wall clock"
    )
    header = (
        f"{'query':<12}{'path':<12}{'matches':>9}{'1T rows/s':>13}{'2T rows/s':>13}"
        f"{'2T/1T':>7}{'LAG rows/s':>13}{'vs LAG':>8}"
    )
    print(header)
    print("-" * len(header))
    one, two = "SET threads = 1", "SET threads = 2"
    for name, (_, _, lag) in QUERIES.items():
        sql = f"SELECT count(*) FROM ({statement(name)})"
        ((matches,),) = con.sql(sql).fetchall()  # warm: kernels loaded, plans cached
        runs = [(one, sql), (two, sql)] + ([("", lag)] if lag else [])
        times = best(con, runs, args.repeat)
        con.sql("RESET threads")
        line = (
            f"{name:<12}{path_of(con, sql):<12}{matches:>9,}{rows / times[0]:>13,.0f}"
            f"{rows / times[1]:>13,.0f}{times[0] / times[1]:>7.2f}"
        )
        if lag:
            line += f"{rows / times[2]:>13,.0f}{times[2] / min(times[:2]):>8.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
