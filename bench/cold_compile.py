"""Cold compile per query shape, and the kernel variants' warm speed against the full kernel.

    python -m bench.cold_compile [--rows 1000000] [--repeat 3]

1. For each query shape (DejaVu Q1-Q4 verbatim, their ONE ROW PER MATCH forms, the
   V-shape query, the row-local ``A B+ C+``): a fresh process with an empty temporary
   ``NUMBA_CACHE_DIR`` runs the query on 2,000 rows, then a second fresh process with that
   cache filled does the same. The compile is the difference of their first runs' CPU
   time (``time.process_time``: the machine is shared, CPU time is what load disturbs
   least), next to the same difference in wall time; the functions numba compiled on the
   cold run are counted and named (the query's signatures: one kernel variant, the
   prefilter, helpers). Target: <= 3 s per shape.
2. Warm speed, one process, interleaved: each register query's matcher with its kernel
   variant (compiled without the features the query does not use,
   :func:`matchsql.engine.compiled.kernel.attempts_kernel`) and with the full kernel, CPU
   rows/s of the engine alone over sorted Arrow batches (best of ``--repeat``); the
   output rows must agree.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

import matchsql
from bench.paths import FRESH_SETUP, QUERIES, engine_only, in_fresh_cache, spec_for
from matchsql.config import Config
from matchsql.engine.buffer_limit import RowWidth
from matchsql.engine.compiled import kernel as K
from matchsql.engine.compiled.compiled_matcher import NO_WITHIN, CompiledPlan, kernel_params
from matchsql.storage.demo import synthetic_trades

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {
    **{k: v for k, v in QUERIES.items() if k.startswith("Q")},
    **{
        f"{k} one row": v.replace("ALL MATCHES", "ONE ROW PER MATCH")
        for k, v in QUERIES.items()
        if k.startswith("Q")
    },
    **{k: v for k, v in QUERIES.items() if not k.startswith("Q")},
}

COLD_SCRIPT = (
    FRESH_SETUP
    + """
from numba.core import event

class Compiles(event.Listener):
    def __init__(self):
        self.depth = 0
        self.names = []
    def on_start(self, ev):
        if self.depth == 0:
            self.names.append(ev.data["dispatcher"].py_func.__name__)
        self.depth += 1
    def on_end(self, ev):
        self.depth -= 1

compiles = Compiles()
event.register("numba:compile", compiles)
wall, cpu = time.perf_counter(), time.process_time()
con.sql(sql).fetchall()
print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu, compiles.names]))
"""
)


def cold(sql: str) -> tuple[float, float, list[str]]:
    """(compile CPU s, compile wall s, functions compiled) of ``sql``'s first run."""
    runs = in_fresh_cache(COLD_SCRIPT, sql)
    (wall0, cpu0, names), (wall1, cpu1, _) = runs
    return cpu0 - cpu1, wall0 - wall1, names


def warm(rows: int, repeat: int) -> None:
    con = matchsql.connect(demo=False, threads=1)
    con.duckdb.register("trade_src", synthetic_trades(rows, 1))
    con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    print(f"\n2. warm CPU rows/s, {rows:,} rows, 1 partition, engine alone (best of {repeat})")
    print(f"{'query':<12}{'variant':>10}{'full':>10}{'ratio':>8}  variant")
    chosen = K.attempts_kernel
    for name, sql in SHAPES.items():
        if not name.startswith("Q"):
            continue
        spec = spec_for(con.duckdb, sql, "trade")
        batches = (
            con.duckdb.sql("SELECT * FROM trade ORDER BY ts").to_arrow_table().to_batches(65_536)
        )
        best = {}
        sizes = set()
        used = []
        for _ in range(repeat):
            for mode in ("variant", "full"):
                K.attempts_kernel = chosen if mode == "variant" else (lambda *args: K.run_attempts)
                if mode == "variant":
                    used.append(chosen(*_probe(spec)).py_func.__name__)
                try:
                    engine_only(spec, batches[:1])  # loads (or compiles) the kernel
                    cpu = time.process_time()
                    sizes.add(engine_only(spec, batches))
                    spent = time.process_time() - cpu
                finally:
                    K.attempts_kernel = chosen
                best[mode] = min(best.get(mode, float("inf")), spent)
        same = "" if len(sizes) == 1 else f"  rows differ: {sorted(sizes)}"
        print(
            f"{name:<12}{rows / best['variant'] / 1e6:>9.2f}M{rows / best['full'] / 1e6:>9.2f}M"
            f"{best['full'] / best['variant']:>8.2f}  {used[0]}{same}"
        )


def _probe(spec) -> tuple:
    """The arguments attempts_kernel sees for ``spec``'s matcher (no statistics, WITHIN)."""
    plan = CompiledPlan.build(spec)
    code, _, _, _, obs_last, obs_first = plan.registers.arrays()
    return (
        plan.program,
        plan.registers.conjunct_table()[0],
        code,
        kernel_params(spec, Config(), RowWidth(spec.columns)),
        np.zeros(0, np.int64),
        NO_WITHIN,
        obs_last | obs_first,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-warm", action="store_true", help="skip the warm comparison")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold compiles")
    args = parser.parse_args(argv)
    if not args.no_cold:
        cold_table()
    if not args.no_warm:
        warm(args.rows, args.repeat)


def cold_table() -> None:
    print(
        f"1. cold compile per query shape (fresh process, empty NUMBA_CACHE_DIR; load "
        f"average {os.getloadavg()[0]:.1f}); target <= 3 s"
    )
    print(f"{'query':<14}{'CPU s':>7}{'wall s':>8}{'compiled':>9}  functions")
    for name, sql in SHAPES.items():
        cpu, wall, names = cold(sql)
        print(f"{name:<14}{cpu:>7.2f}{wall:>8.2f}{len(names):>9}  {', '.join(names)}", flush=True)


if __name__ == "__main__":
    main()
