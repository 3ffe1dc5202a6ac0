"""``matchsql warm-up``: compile every generic kernel into the compile cache, once.

The compiled paths run a handful of machine-code kernels that take the query as data (an
automaton table, a bytecode of the DEFINE conditions), so a query shape never seen
before needs no compile of its own; what does need one is each kernel's *first* use
in a fresh cache: 2-3 s per kernel variant on a laptop, 5-6 s for a user's first
query. The install step (``make``) runs this command so that the compile happens
there, not in front of the user.

The statements below touch every kernel and variant the CPU paths launch: the
automaton kernel's variants (with or without ALL MATCHES, the stack interpreter with
running aggregates, the dead-end memo; the full kernel for SKIP TO FIRST/LAST,
WITHIN, unmatched rows, ``$``), each variant's partition loop, the row-local DFA, the
grouping passes for string, integer and NULL-holding partition keys (one thread and
two), the string codes of cross-row string conditions, and the segment reductions.
``tests/test_warm_up.py`` checks that list against the package's kernels, so a new
kernel without a statement here fails the suite.
"""

from __future__ import annotations

import argparse
import sys
import time

from matchsql.api.connection import connect
from matchsql.errors import Error
from matchsql.runtime.compile_cache import mark_warmed_up, warmed_up

#: The table the kernel statements read: 4,000 demo trades with an integer key, a
#: string column with NULLs and a date, in 40 partitions of about 100 rows.
SETUP = """CREATE TEMP TABLE warm AS
SELECT symbol, price, volume, ts, (row_number() OVER ()) % 40 AS k,
       CASE WHEN volume % 7 = 0 THEN NULL ELSE 'v' || (volume % 5) END AS s,
       CAST(ts AS DATE) AS d
FROM trade LIMIT 4000"""

#: Counted, so that no statement ships its rows to Python.
_MR = "SELECT count(*) FROM (SELECT * FROM warm MATCH_RECOGNIZE ({body}))"

#: (what it compiles, the MATCH_RECOGNIZE body) in the order they run.
BODIES: tuple[tuple[str, str], ...] = (
    (
        "row-local DFA (the README's first query)",
        "PARTITION BY symbol ORDER BY ts MEASURES A.price AS p, LAST(B.price) AS b, "
        "LAST(C.price) AS c ONE ROW PER MATCH PATTERN (A B+ C+) "
        "DEFINE B AS price < PREV(price), C AS price > PREV(price)",
    ),
    (
        "kernel without features",
        "PARTITION BY symbol ORDER BY ts MEASURES FIRST(A.price) AS p, LAST(D.price) AS q "
        "ONE ROW PER MATCH PATTERN (A B+ C* D+) DEFINE B AS B.price < A.price AND "
        "B.price <= PREV(B.price), C AS C.price > B.price AND C.price <= A.price, "
        "D AS D.price > PREV(D.price) AND D.price > A.price",
    ),
    (
        "kernel with ALL MATCHES",
        "PARTITION BY symbol ORDER BY ts MEASURES MATCH_NUMBER() AS m ALL MATCHES "
        "AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+ C* D+) DEFINE B AS B.price < A.price "
        "AND B.price <= PREV(B.price), C AS C.price > B.price AND C.price <= A.price, "
        "D AS D.price > PREV(D.price) AND D.price > A.price",
    ),
    (
        "kernel with the dead-end memo",
        "PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n ONE ROW PER MATCH "
        "AFTER MATCH SKIP TO NEXT ROW PATTERN ((A | B)+ C) "
        "DEFINE A AS price > PREV(price), B AS price < PREV(price), "
        "C AS C.price > LAST(A.price)",
    ),
    (
        "kernel with the dead-end memo and ALL MATCHES",
        "PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n ALL MATCHES "
        "AFTER MATCH SKIP TO NEXT ROW PATTERN ((A | B)+ C) "
        "DEFINE A AS price > PREV(price), B AS price < PREV(price), "
        "C AS C.price > LAST(A.price)",
    ),
    (
        "kernel with running aggregates",
        "PARTITION BY symbol ORDER BY ts MEASURES SUM(B.volume) AS v, AVG(B.price) AS a "
        "ONE ROW PER MATCH PATTERN (A B+) "
        "DEFINE B AS SUM(B.volume) < 5000 AND B.price < A.price",
    ),
    (
        "kernel with running aggregates and ALL MATCHES",
        "PARTITION BY symbol ORDER BY ts MEASURES SUM(B.volume) AS v ALL MATCHES "
        "AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+) "
        "DEFINE B AS SUM(B.volume) < 5000 AND B.price < A.price",
    ),
    (
        "kernel with running aggregates and the dead-end memo",
        "PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n ONE ROW PER MATCH "
        "AFTER MATCH SKIP TO NEXT ROW PATTERN ((A | B)+ C) "
        "DEFINE A AS price > PREV(price) AND COUNT(A.*) < 50, B AS price < PREV(price), "
        "C AS price = PREV(price)",
    ),
    (
        "kernel with running aggregates, the dead-end memo and ALL MATCHES",
        "PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n ALL MATCHES "
        "AFTER MATCH SKIP TO NEXT ROW PATTERN ((A | B)+ C) "
        "DEFINE A AS price > PREV(price) AND COUNT(A.*) < 50, B AS price < PREV(price), "
        "C AS price >= PREV(price)",
    ),
    (
        "full kernel (SKIP TO LAST, WITHIN)",
        "PARTITION BY s ORDER BY ts MEASURES FIRST(A.ts) AS t, LAST(B.ts) AS u "
        "ONE ROW PER MATCH AFTER MATCH SKIP TO LAST B PATTERN (A B+) "
        "WITHIN INTERVAL '1' HOUR DEFINE B AS B.price > A.price",
    ),
    (
        "WITHIN over a float column (the float form of the bound's end rows)",
        "PARTITION BY k ORDER BY price MEASURES COUNT(*) AS n ONE ROW PER MATCH "
        "PATTERN (A B+) WITHIN 0.5 DEFINE B AS B.price > A.price",
    ),
    (
        "full kernel through the partition loop (SKIP TO FIRST)",
        "PARTITION BY k ORDER BY ts MEASURES LAST(B.price) AS b ONE ROW PER MATCH "
        "AFTER MATCH SKIP TO FIRST B PATTERN (A B{1,3} C) "
        "DEFINE B AS B.price < A.price, C AS C.price > A.price",
    ),
    (
        "cross-row string codes",
        "ORDER BY ts MEASURES FIRST(X.symbol) AS sym, COUNT(*) AS n ONE ROW PER MATCH "
        "PATTERN (X Y+) DEFINE Y AS Y.symbol = X.symbol AND Y.s >= X.s",
    ),
    (
        "segment reductions (ALL ROWS PER MATCH)",
        "PARTITION BY d ORDER BY ts MEASURES RUNNING SUM(price) AS r, FIRST(B.price) AS f, "
        "LAST(B.price, 1) AS b1 ALL ROWS PER MATCH PATTERN (A B+ C+) "
        "DEFINE B AS price < PREV(price), C AS price > PREV(price)",
    ),
)

#: The compiled grouping passes run from 131,072 rows (execution/router/grouping.py): one
#: row-local statement per kind of partition key over a table of the demo trades
#: (500,000 rows), on one thread and on two.
GROUPING_SETUP = """CREATE TEMP TABLE warm_keys AS
SELECT *, hash(symbol) % 97 AS h, CASE WHEN volume % 11 = 0 THEN NULL ELSE symbol END AS ns,
       CASE WHEN volume % 13 = 0 THEN NULL ELSE price END AS np
FROM trade"""
GROUPING = tuple(
    (
        f"grouping by {kind}",
        "SELECT count(*) FROM (SELECT * FROM warm_keys "
        f"MATCH_RECOGNIZE (PARTITION BY {key} ORDER BY ts MEASURES COUNT(*) AS n "
        "ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS price < PREV(price)))",
    )
    for kind, key in (
        ("a string key", "symbol"),
        ("an integer key", "h"),
        ("a key with NULLs", "ns"),
        ("two keys", "symbol, h"),
    )
) + (
    (
        "grouping for the rows of ALL ROWS PER MATCH",
        "SELECT count(*) FROM (SELECT * FROM warm_keys MATCH_RECOGNIZE (PARTITION BY h "
        "ORDER BY ts MEASURES LAST(B.ns) AS x ALL ROWS PER MATCH PATTERN (A B+) "
        "DEFINE B AS price < PREV(price)))",
    ),
    (
        "grouping, a column with NULLs taken in grouped order",
        "SELECT count(*) FROM (SELECT * FROM warm_keys MATCH_RECOGNIZE (PARTITION BY symbol "
        "ORDER BY ts MEASURES COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B+) "
        "DEFINE B AS np < PREV(np)))",
    ),
)


def statements() -> list[tuple[str, str]]:
    """(description, SQL) of every statement the warm-up runs, in order."""
    return [
        ("setting up", SETUP),
        *((what, _MR.format(body=body)) for what, body in BODIES),
        ("setting up", GROUPING_SETUP),
        *GROUPING,
        ("setting", "SET threads = 2"),
        *GROUPING,
    ]


def warm_up(*, quiet: bool = False) -> int:
    """Run every statement on the demo database; the number that failed."""
    failed = 0
    start = time.perf_counter()
    with connect() as con:
        for what, sql in statements():
            began = time.perf_counter()
            try:
                result = con.execute(sql)
                if result is not None:  # SET gives none
                    result.fetchall()
            except Error as err:
                failed += 1
                print(f"warm-up: {what}: {err}", file=sys.stderr)
                continue
            if not quiet:
                print(f"  {time.perf_counter() - began:5.1f} s  {what}", flush=True)
    if not failed:
        mark_warmed_up()
    if not quiet:
        print(f"warm-up: {time.perf_counter() - start:.1f} s", flush=True)
    return failed


def main(argv: list[str]) -> int:
    """``matchsql warm-up [--quiet] [--if-needed]``: exit status 0 when every statement
    ran (or, with ``--if-needed``, when this source version's cache was warmed before)."""
    parser = argparse.ArgumentParser(
        prog="matchsql warm-up",
        description="Compile the matching kernels into the compile cache (NUMBA_CACHE_DIR), "
        "so that no later query waits for a compiler.",
    )
    parser.add_argument("--quiet", action="store_true", help="print only failures")
    parser.add_argument(
        "--if-needed",
        action="store_true",
        help="do nothing when this version's cache was warmed up before",
    )
    args = parser.parse_args(argv)
    if args.if_needed and warmed_up():
        return 0
    return 1 if warm_up(quiet=args.quiet) else 0
