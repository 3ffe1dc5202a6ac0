"""Aggregate measures: column-wise segment reductions against the reference evaluator.

    python -m bench.aggregates [--rows 1000000] [--length 10]

One partition of ``--rows`` rows in matches of ``--length`` rows (``PATTERN
(A B*)`` with ``B`` continuing while the group column stays the same), ALL
ROWS PER MATCH with the measures ``RUNNING sum(A.x * 2)`` and
``array_agg(x)``. The same compiled plan (same kernel, same matches) is run
twice on the matcher alone, the input already materialised as Arrow batches:
once with the column-wise measures (:mod:`matchsql.engine.compiled.segment_aggregates`),
once with the output built by the reference evaluator row by row; the outputs
must be equal, and the ratio is between the two figures of this run.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import duckdb
import numpy as np
import pyarrow as pa

from matchsql.config import Config
from matchsql.engine.compiled.compiled_matcher import CompiledMatcher, CompiledPlan
from matchsql.engine.reference import CompiledQuery
from matchsql.grammar.analyze import analyze
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse

QUERY = """SELECT * FROM t MATCH_RECOGNIZE (
  ORDER BY id
  MEASURES RUNNING sum(A.x * 2) AS s, array_agg(x) AS xs
  ALL ROWS PER MATCH
  PATTERN (A B*)
  DEFINE B AS g = PREV(g)
)"""


def table(rows: int, length: int) -> pa.Table:
    rng = np.random.default_rng(0)
    ids = np.arange(rows, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "g": (ids // length).astype(np.int64),
            "x": rng.integers(-1000, 1000, rows).astype(np.int32),
        }
    )


def run(plan, batches: list[pa.RecordBatch]) -> tuple[float, pa.Table]:
    matcher = CompiledMatcher(plan, (), Config())
    start = time.perf_counter()
    out = []
    for batch in batches:
        out += matcher.feed(batch)
    out += matcher.finish()
    seconds = time.perf_counter() - start
    return seconds, pa.Table.from_batches(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--length", type=int, default=10, help="rows per match")
    args = parser.parse_args(argv)
    data = table(args.rows, args.length)
    con = duckdb.connect()
    node = next(parse(QUERY)[-1].find_all(MatchRecognizeTable))
    spec = analyze(node, data.schema, sql=QUERY, con=con)
    plan = CompiledPlan.build(spec, CompiledQuery(spec))
    if plan.measures is None:
        raise SystemExit(f"measures are not column-wise: {plan.notes}")
    batches = data.to_batches(max_chunksize=65536)
    run(plan, batches[:1])  # warm the kernels and the numba cache
    columnar, got = run(plan, batches)
    reference, expected = run(dataclasses.replace(plan, measures=None), batches)
    assert got.equals(expected), "column-wise and reference outputs differ"
    print(
        f"aggregates: {args.rows} rows, matches of {args.length} rows, ALL ROWS PER MATCH, "
        f"RUNNING sum(A.x * 2) and array_agg(x)"
    )
    print(f"  column-wise measures  {columnar:8.3f} s")
    print(f"  reference evaluator   {reference:8.3f} s")
    print(f"  ratio (reference / column-wise)  {reference / columnar:6.1f}x")


if __name__ == "__main__":
    main()
