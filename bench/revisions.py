"""Two revisions of the engine side by side: is this change slower than that one?

    python -m bench.revisions --base REV [--rows 1000000] [--partitions 1,500] [--rounds 3]

``REV`` is checked out into a temporary git worktree; this checkout is the
other side. Each round runs one child process per side, alternating, so that
a busy machine slows both sides alike; a child times each query three times.
A side's rows/s is its best over all rounds; the ratio is the median of the
rounds' own ratios (each round's two children ran back to back), printed with
their range: on a machine whose speed drifts between minutes, a change is
slower only where the whole range lies below 1. A
child builds the same synthetic trades (:func:`matchsql.storage.demo.synthetic_trades`)
and times, for every query of :mod:`bench.paths` plus queries that exercise
the reference evaluator and the column-wise measures:

* the matcher alone over materialised Arrow batches (``bench.paths.engine_only``),
* the whole statement through SQL on one thread, result fetched as Arrow.

Both sides import their own ``bench.paths`` and their own engine; only the
child's driver code (below) is shared. The numba cache of each side is warmed
by a first, untimed round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Queries besides bench.paths.QUERIES: measures the reference evaluator computes
#: row by row (navigation over labels, CASE) and ALL ROWS PER MATCH running measures.
EXTRA = {
    "ref-nav": """SELECT * FROM trade MATCH_RECOGNIZE(
  PARTITION BY symbol ORDER BY ts
  MEASURES NEXT(CLASSIFIER()) AS nl, PREV(RUNNING LAST(price)) AS p,
           CASE WHEN price > FIRST(price) THEN 1 ELSE 0 END AS up
  ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C+) DEFINE B AS price < PREV(price), C AS price > PREV(price))""",
    "all-rows": """SELECT * FROM trade MATCH_RECOGNIZE(
  PARTITION BY symbol ORDER BY ts
  MEASURES RUNNING count(*) AS n, RUNNING sum(price) AS s, FIRST(price) AS f,
           LAST(B.price) AS lb, FINAL max(price) AS hi
  ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C+) DEFINE B AS price < PREV(price), C AS price > PREV(price))""",
    "ref-define": """SELECT * FROM trade MATCH_RECOGNIZE(
  PARTITION BY symbol ORDER BY ts
  MEASURES MATCH_NUMBER() AS mn
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C+) DEFINE B AS price < PREV(price) AND symbol LIKE '%',
                           C AS price > PREV(price))""",
}

CHILD = r"""
import json, sys, time
import matchsql
from bench.paths import QUERIES, engine_only, spec_for
from matchsql.storage.demo import synthetic_trades

rows, partitions, extra = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
con = matchsql.connect(demo=False, threads=1)
con.duckdb.register("trade_src", synthetic_trades(rows, partitions))
con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
con.sql("CREATE VIEW orders AS SELECT symbol AS custkey, ts AS orderdate, "
        "price AS totalprice FROM trade")
duck = con.duckdb
out = {}
for name, sql in {**QUERIES, **extra}.items():
    source = "orders" if name == "V-shape" else "trade"
    spec = spec_for(duck, sql, source)
    keys = ", ".join(spec.partition_by + spec.order_by)
    # The columns a query's one-row expressions were pushed down to, as its scan adds
    # them (a revision before the push-down has none).
    derived = "".join(f', ({expr}) AS "{name}"'
                      for name, expr in getattr(spec, "derived", {}).items())
    ordered = f"SELECT *{derived} FROM {source}" + (f" ORDER BY {keys}" if keys else "")
    batches = duck.sql(ordered).to_arrow_table().to_batches(65536)
    engine = whole = float("inf")
    for _ in range(3):  # short runs are noisy: best of three within the child too
        start = time.perf_counter(); engine_only(spec, batches)
        engine = min(engine, time.perf_counter() - start)
        start = time.perf_counter(); con.sql(sql).arrow()
        whole = min(whole, time.perf_counter() - start)
    out[name] = (engine, whole)
print(json.dumps(out))
"""


def _child(tree: Path, rows: int, partitions: int) -> dict[str, tuple[float, float]]:
    env = {**os.environ, "PYTHONPATH": str(tree), "NUMBA_CACHE_DIR": str(tree / ".numba_cache")}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(rows), str(partitions), json.dumps(EXTRA)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"the child in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(base: Path, rows: int, partitions: int, rounds: int) -> None:
    sides = {"base": base, "head": ROOT}
    for tree in sides.values():  # warm each side's numba cache
        _child(tree, min(rows, 50_000), partitions)
    best: dict[str, dict[str, list[float]]] = {s: {} for s in sides}
    ratios: dict[str, list[list[float]]] = {}  # per query: [engine ratios, SQL ratios]
    for _ in range(rounds):
        times = {side: _child(tree, rows, partitions) for side, tree in sides.items()}
        for side in sides:
            for name, (engine, whole) in times[side].items():
                kept = best[side].setdefault(name, [float("inf"), float("inf")])
                best[side][name] = [min(kept[0], engine), min(kept[1], whole)]
        for name, (engine, whole) in times["head"].items():
            if name in times["base"]:
                base_engine, base_whole = times["base"][name]
                got = ratios.setdefault(name, [[], []])
                got[0].append(base_engine / engine)
                got[1].append(base_whole / whole)
    print(
        f"\n{rows:,} rows, {partitions} partition(s), {rounds} rounds (rows/s: best round; "
        "head/base: median of the rounds' ratios [their range]; > 1: head is faster)"
    )
    header = (
        f"{'query':<11}{'engine base':>13}{'engine head':>13}{'head/base':>20}"
        f"{'SQL base':>12}{'SQL head':>12}{'head/base':>20}"
    )
    print(header)
    print("-" * len(header))
    for name, (engine_ratios, sql_ratios) in ratios.items():
        (eb, sb), (eh, sh) = best["base"][name], best["head"][name]
        print(
            f"{name:<11}{rows / eb:>13,.0f}{rows / eh:>13,.0f}{_ratio(engine_ratios):>20}"
            f"{rows / sb:>12,.0f}{rows / sh:>12,.0f}{_ratio(sql_ratios):>20}"
        )


def _ratio(values: list[float]) -> str:
    """The median of ``values`` and their range, as ``0.97 [0.91-1.04]``."""
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the git revision to compare against")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", default="1,500")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="matchsql-base-") as tmp:
        base = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), args.base],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            print(f"base {args.base} vs head (this checkout)")
            for partitions in (int(p) for p in args.partitions.split(",")):
                compare(base, args.rows, partitions, args.rounds)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True
            )


if __name__ == "__main__":
    main()
