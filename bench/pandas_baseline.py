"""matchsql against pandas-match-recognize, each on its largest size that finishes in a minute.

pandas-match-recognize (a pure Python/pandas implementation of the same
clause) is the baseline issue 18 names. Its cost depends on the query's
shape, so two shapes are measured, both ``ONE ROW PER MATCH`` with ``SKIP
PAST LAST ROW`` over one partition of the demo random walk:

* ``row-local``: ``A B+ C+`` where every DEFINE reads only the current and
  previous row. pandas-match-recognize evaluates such conditions column-wise,
  so its rate grows with the size and flattens out at a few million rows/s;
* ``registers``: the DejaVu Q1 shape ``A B+ C* D+`` whose DEFINEs read
  ``A.price`` and ``B.price``. These conditions depend on the match, so the
  baseline evaluates them per candidate row in Python and slows down as the
  size grows.

For each shape the size doubles from ``--start`` rows until the baseline
takes longer than ``--budget`` seconds (it runs in a child process that is
killed at the budget) or reaches ``--max-rows``. matchsql then runs the same
query, end to end through SQL with the result fetched as Arrow, on the
largest size the baseline finished (best of ``--repeat`` runs; the baseline
runs once), after a warm-up on a small table (the
baseline's child is warmed up the same way), and the two match counts are
checked to be equal. The ratio is between the two rates of this run.

The baseline is not a project dependency (it pins ``numpy<2.2``); install it
beside the project with ``pip install --no-deps --target .cache/pmr
pandas-match-recognize antlr4-python3-runtime psutil``.

Run: ``python -m bench.pandas_baseline``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import matchsql
from bench.paths import PANDAS_ROW_LOCAL
from matchsql.storage.demo import synthetic_trades

BASELINE_PATH = Path(__file__).resolve().parent.parent / ".cache" / "pmr"

SHAPES = {
    "row-local": PANDAS_ROW_LOCAL,
    "registers": """SELECT * FROM data MATCH_RECOGNIZE (
  ORDER BY ts
  MEASURES MATCH_NUMBER() AS mn
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C* D+)
  DEFINE B AS B.price < A.price AND B.price <= PREV(B.price),
    C AS C.price > B.price AND C.price >= PREV(C.price) AND C.price <= A.price,
    D AS D.price > PREV(D.price) AND D.price > A.price
)""",
}

WARM_UP_ROWS = 2_000

# The child that runs the baseline: it is given the shape and the size on
# its command line and prints one JSON line (seconds, matches).
_CHILD = """
import json, sys, time
sys.path.append(sys.argv[3])
from pandas_match_recognize import match_recognize
from bench.pandas_baseline import SHAPES, WARM_UP_ROWS
from matchsql.storage.demo import synthetic_trades
query, rows = SHAPES[sys.argv[1]], int(sys.argv[2])
match_recognize(query, synthetic_trades(WARM_UP_ROWS, 1).select(["price", "ts"]).to_pandas())
frame = synthetic_trades(rows, 1).select(["price", "ts"]).to_pandas()
start = time.perf_counter()
matches = len(match_recognize(query, frame))
print(json.dumps({"seconds": time.perf_counter() - start, "matches": matches}))
"""


def baseline_available() -> bool:
    """Whether pandas-match-recognize is installed beside the project."""
    return (BASELINE_PATH / "pandas_match_recognize").is_dir()


def run_baseline(shape: str, rows: int, budget: float) -> dict | None:
    """The baseline's seconds and matches on ``rows`` rows, or None past the budget."""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, shape, str(rows), str(BASELINE_PATH)],
            capture_output=True,
            text=True,
            timeout=budget + 30,
            env=env,
            cwd=root,
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise RuntimeError(f"pandas-match-recognize failed on {shape}: {done.stderr[-500:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result if result["seconds"] <= budget else None


def run_matchsql(shape: str, rows: int, repeat: int) -> tuple[float, int]:
    """matchsql's best seconds over ``repeat`` runs and its match count."""
    con = matchsql.connect(demo=False)
    con.duckdb.register("warm_src", synthetic_trades(WARM_UP_ROWS, 1).select(["price", "ts"]))
    con.sql("CREATE TABLE data AS SELECT * FROM warm_src")
    con.sql(SHAPES[shape]).arrow()
    con.sql("DROP TABLE data")
    con.duckdb.register("data_src", synthetic_trades(rows, 1).select(["price", "ts"]))
    con.sql("CREATE TABLE data AS SELECT * FROM data_src")
    best, matches = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        matches = con.sql(SHAPES[shape]).arrow().num_rows
        best = min(best, time.perf_counter() - start)
    con.close()
    return best, matches


def largest_within_budget(
    shape: str, start: int, max_rows: int, budget: float
) -> tuple[int, dict] | None:
    """The largest doubling of ``start`` the baseline finishes within the budget."""
    found = None
    rows = start
    while rows <= max_rows:
        result = run_baseline(shape, rows, budget)
        if result is None:
            print(f"  {shape}: {rows:,} rows took longer than {budget:.0f} s", flush=True)
            break
        print(f"  {shape}: {rows:,} rows in {result['seconds']:.2f} s", flush=True)
        found = rows, result
        rows *= 2
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", type=int, default=10_000)
    parser.add_argument("--max-rows", type=int, default=10_240_000)
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args()
    if not baseline_available():
        print("pandas-match-recognize is not installed: see this script's docstring")
        return
    print(
        f"{os.cpu_count()} CPU core(s); baseline budget {args.budget:.0f} s, "
        f"sizes doubling from {args.start:,} up to {args.max_rows:,} rows"
    )
    table = []
    for shape in args.shapes.split(","):
        found = largest_within_budget(shape, args.start, args.max_rows, args.budget)
        if found is None:
            table.append((shape, 0, 0.0, 0.0, 0, 0))
            continue
        rows, theirs = found
        our_s, ours = run_matchsql(shape, rows, args.repeat)
        table.append((shape, rows, theirs["seconds"], our_s, theirs["matches"], ours))
    print()
    print(
        f"{'shape':<10} {'rows':>11} {'matches':>9} {'pandas-mr s':>12} {'rows/s':>12} "
        f"{'matchsql s':>11} {'rows/s':>12} {'ratio':>8}"
    )
    print("-" * 94)
    for shape, rows, their_s, our_s, theirs, ours in table:
        if not rows:
            print(f"{shape:<10} the baseline did not finish {args.start:,} rows in the budget")
            continue
        same = "" if theirs == ours else f"  (matches differ: {theirs} vs {ours})"
        print(
            f"{shape:<10} {rows:>11,} {ours:>9,} {their_s:>12.2f} {rows / their_s:>12,.0f} "
            f"{our_s:>11.3f} {rows / our_s:>12,.0f} {their_s / our_s:>7.0f}x{same}"
        )


if __name__ == "__main__":
    main()
