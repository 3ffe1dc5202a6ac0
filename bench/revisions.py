"""Two revisions of the engine side by side: is this change slower than that one?

    python -m bench.revisions --base REV [--rows 1000000] [--partitions 1,500] [--rounds 3]
                              [--queries Q1,Q3]

``REV`` is checked out into a temporary git worktree; this checkout is the
other side. Each side runs in a child process of its own that builds the same
synthetic trades (:func:`matchsql.storage.demo.synthetic_trades`) once, runs each
query once untimed (its numba cache is warmed or loaded there), then times a query
whenever the parent asks. A round times each query base, head, head, base, so the
two sides of a ratio run seconds apart and a drift of the machine's speed slows
both alike.

Noise only adds time, and on a 2-core VM it adds a lot: 30 runs of one query in
one process take from 88 to 140 ms, on either revision. Between two checkouts of one
revision the rounds' ratios ranged over 0.76-1.42. So ``best`` compares the
two sides' best runs (of 2 x rounds each), which is what a change moves; beside
it, the median of the rounds' own ratios with their range. A side's rows/s is
its best run. Timed for every query of :mod:`bench.paths` plus queries that
exercise the reference evaluator and the column-wise measures (``--queries``
picks some):

* the matcher alone over materialised Arrow batches (``bench.paths.engine_only``),
* the whole statement through SQL on one thread, result fetched as Arrow.

Both sides import their own ``bench.paths`` and their own engine; only the
child's driver code (below) is shared.
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
from typing import Any

from bench.paths import QUERIES

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
wanted = set(json.loads(sys.argv[4]))
con = matchsql.connect(demo=False, threads=1)
con.duckdb.register("trade_src", synthetic_trades(rows, partitions))
con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
con.sql("CREATE VIEW orders AS SELECT symbol AS custkey, ts AS orderdate, "
        "price AS totalprice FROM trade")
duck = con.duckdb
prepared = {}
for name, sql in {**QUERIES, **extra}.items():
    if wanted and name not in wanted:
        continue
    source = "orders" if name == "V-shape" else "trade"
    spec = spec_for(duck, sql, source)
    keys = ", ".join(spec.partition_by + spec.order_by)
    # The columns a query's one-row expressions were pushed down to, as its scan adds
    # them (a revision before the push-down has none).
    derived = "".join(f', ({expr}) AS "{name}"'
                      for name, expr in getattr(spec, "derived", {}).items())
    ordered = f"SELECT *{derived} FROM {source}" + (f" ORDER BY {keys}" if keys else "")
    batches = duck.sql(ordered).to_arrow_table().to_batches(65536)
    engine_only(spec, batches); con.sql(sql).arrow()  # untimed: compile or load kernels
    prepared[name] = (spec, batches, sql)
print(json.dumps(list(prepared)), flush=True)
for line in sys.stdin:  # one query name per line: time it once on each side
    spec, batches, sql = prepared[line.strip()]
    start = time.perf_counter(); engine_only(spec, batches)
    engine = time.perf_counter() - start
    start = time.perf_counter(); con.sql(sql).arrow()
    print(json.dumps([engine, time.perf_counter() - start]), flush=True)
"""


class _Child:
    """One side's engine in its own process, with its data loaded, timing a query on request.

    Both sides stay loaded for the whole comparison, so the parent can time the same
    query on one side and then the other within a second: a machine whose speed drifts
    over minutes slows both alike.
    """

    def __init__(self, tree: Path, rows: int, partitions: int, queries: list[str]) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(tree),
            "NUMBA_CACHE_DIR": str(tree / ".numba_cache"),
        }
        args = [str(rows), str(partitions), json.dumps(EXTRA), json.dumps(queries)]
        self.tree = tree
        # A file, not a pipe: a child that warns a lot must not block on a full pipe.
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD, *args],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )
        self.queries: list[str] = self._reply()

    def time(self, query: str) -> tuple[float, float]:
        """Seconds for ``query``: the matcher alone, and the whole statement."""
        assert self.process.stdin is not None
        self.process.stdin.write(query + "\n")
        self.process.stdin.flush()
        engine, whole = self._reply()
        return engine, whole

    def _reply(self) -> Any:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            self.stderr.seek(0)
            raise SystemExit(f"the child in {self.tree} failed:\n{self.stderr.read()[-3000:]}")
        return json.loads(line)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self.stderr.close()


def compare(base: Path, rows: int, partitions: int, rounds: int, queries: list[str]) -> None:
    sides = {"base": base, "head": ROOT}
    children: dict[str, _Child] = {}
    try:
        for side, tree in sides.items():
            children[side] = _Child(tree, rows, partitions, queries)
        _compare(children, rows, partitions, rounds)
    finally:
        for child in children.values():
            child.close()


def _compare(children: dict[str, _Child], rows: int, partitions: int, rounds: int) -> None:
    best: dict[str, dict[str, list[float]]] = {side: {} for side in children}
    ratios: dict[str, list[list[float]]] = {}  # per query: [engine ratios, SQL ratios]
    names = [name for name in children["head"].queries if name in children["base"].queries]
    for _ in range(rounds):
        for name in names:
            # Base, head, head, base: a drift that is linear over the four runs slows
            # both sides alike.
            runs = {side: [children[side].time(name)] for side in ("base", "head")}
            runs["head"].append(children["head"].time(name))
            runs["base"].append(children["base"].time(name))
            for side, pair in runs.items():
                kept = best[side].setdefault(name, [float("inf"), float("inf")])
                for engine, whole in pair:
                    kept[0], kept[1] = min(kept[0], engine), min(kept[1], whole)
            got = ratios.setdefault(name, [[], []])
            for i in (0, 1):
                got[i].append(sum(r[i] for r in runs["base"]) / sum(r[i] for r in runs["head"]))
    print(
        f"\n{rows:,} rows, {partitions} partition(s), {rounds} rounds of base-head-head-base "
        "(rows/s: the best run; best: head's best over base's; rounds: median of the "
        "rounds' ratios [their range]; > 1: head is faster)"
    )
    header = (
        f"{'query':<11}{'engine base':>13}{'engine head':>13}{'best':>6}{'rounds':>19}"
        f"{'SQL base':>12}{'SQL head':>12}{'best':>6}{'rounds':>19}"
    )
    print(header)
    print("-" * len(header))
    for name, (engine_ratios, sql_ratios) in ratios.items():
        (eb, sb), (eh, sh) = best["base"][name], best["head"][name]
        print(
            f"{name:<11}{rows / eb:>13,.0f}{rows / eh:>13,.0f}{eb / eh:>6.2f}"
            f"{_ratio(engine_ratios):>19}"
            f"{rows / sb:>12,.0f}{rows / sh:>12,.0f}{sb / sh:>6.2f}{_ratio(sql_ratios):>19}"
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
    parser.add_argument(
        "--queries", default="", help="comma-separated query names to time (default: all)"
    )
    args = parser.parse_args(argv)
    queries = [q for q in args.queries.split(",") if q]
    unknown = set(queries) - set(EXTRA) - set(QUERIES)
    if unknown:
        parser.error(f"unknown queries: {', '.join(sorted(unknown))}")
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
                compare(base, args.rows, partitions, args.rounds, queries)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True
            )


if __name__ == "__main__":
    main()
