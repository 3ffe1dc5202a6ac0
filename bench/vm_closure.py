"""The thread VM with its closure table against the same kernel walking the program.

    python -m bench.vm_closure [--rows 1000000] [--repeat 5]

For DejaVu Q1-Q4 verbatim and their ONE ROW PER MATCH forms on one partition
of synthetic trades, the matcher alone (input already sorted Arrow, one thread)
runs each query's plan twice per round, interleaved in one process: with the
program table as lowered (closure table, :func:`matchsql.engine.compiled.lowering.closure_table`)
and with its first six columns only (the kernel then walks SPLIT/JUMP/BEGIN/END as
before the table). Figures are process CPU times (best of ``--repeat``), and the
ratio walked / table; the output rows must agree.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

import matchsql
from bench.paths import spec_for
from bench.queries import DEJAVU
from matchsql.config import Config
from matchsql.engine.compiled.compiled_matcher import CompiledMatcher, CompiledPlan
from matchsql.storage.demo import synthetic_trades


def _cpu(plan: CompiledPlan, batch) -> tuple[float, int]:
    matcher = CompiledMatcher(plan, (), Config(threads=1))
    start = time.process_time()
    out = matcher.feed(batch) + matcher.finish()
    return time.process_time() - start, sum(b.num_rows for b in out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    con = matchsql.connect(demo=False)
    con.duckdb.register("trade_src", synthetic_trades(args.rows, 1))
    con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    batch = (
        con.duckdb.sql("SELECT * FROM trade ORDER BY ts")
        .to_arrow_table()
        .combine_chunks()
        .to_batches()[0]
    )
    print(
        f"{args.rows:,} rows, one partition, matcher alone, 1 thread, CPU ms (best of "
        f"{args.repeat})"
    )
    print(f"{'query':<12}{'walked':>9}{'table':>9}{'ratio':>7}")
    queries = {
        **DEJAVU,
        **{
            f"{k} one row": v.replace("ALL MATCHES", "ONE ROW PER MATCH") for k, v in DEJAVU.items()
        },
    }
    for name, sql in queries.items():
        table = CompiledPlan.build(spec_for(con.duckdb, sql, "trade"))
        walked = dataclasses.replace(table, program=np.ascontiguousarray(table.program[:, :6]))
        best = {"walked": float("inf"), "table": float("inf")}
        rows = {}
        for _ in range(args.repeat + 1):  # the first round compiles / warms up
            for mode, plan in (("walked", walked), ("table", table)):
                cpu, rows[mode] = _cpu(plan, batch)
                best[mode] = min(best[mode], cpu)
        assert rows["walked"] == rows["table"], (name, rows)
        print(
            f"{name:<12}{best['walked'] * 1e3:>9.0f}{best['table'] * 1e3:>9.0f}"
            f"{best['walked'] / best['table']:>7.2f}"
        )


if __name__ == "__main__":
    main()
