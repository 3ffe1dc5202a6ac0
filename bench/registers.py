"""Registers path benchmark: DejaVu Q1-Q4 before and after the register kernel work.

    python -m bench.registers [--rows 1000000] [--partitions 1,500] [--repeat 3] [--cold]

The DejaVu queries read ``A.price`` and ``B.price`` in DEFINE, so they run on
the registers path (the thread VM of engine/compiled/kernel.py). Two changes
are switched by module flags, and every combination is timed in the same
run, interleaved, so that the ratios compare figures taken under the same
load:

* ``generic``: the conditions through the stack interpreter, the prefilter
  on the row-local conjuncts only (``lowering.FUSED_CONJUNCTS`` and
  ``prefilter.SECOND_ROW`` off): the kernel as it was;
* ``2nd row``: the prefilter also evaluates the register conjuncts on an
  attempt's second row (``B.price < A.price`` is then ``price < PREV(price)``);
* ``fused``: comparisons of two operands evaluated inline in the kernel;
* ``both``: the two together (the default).

Each figure is the best of ``--repeat`` runs, as rows per second of wall time
and of CPU time (``time.process_time``: the machine is shared, wall time is
noisy), for the engine alone (matchers over input already sorted and in Arrow
batches, one thread) and end to end through SQL (``SET threads = 1``, the
result fetched as Arrow). The output rows of every combination must agree.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import matchsql
from bench.paths import cold_compile, engine_only, spec_for
from bench.queries import DEJAVU
from matchsql.engine.compiled import lowering, prefilter
from matchsql.storage.demo import synthetic_trades

MODES = {
    "generic": (False, False),
    "2nd row": (False, True),
    "fused": (True, False),
    "both": (True, True),
}


def timed(fn: Callable[[], int]) -> tuple[float, float, int]:
    """(wall s, CPU s, result) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def set_mode(mode: str) -> None:
    lowering.FUSED_CONJUNCTS, prefilter.SECOND_ROW = MODES[mode]


def run(rows: int, partitions: int, repeat: int) -> None:
    con = matchsql.connect(demo=False, threads=1)
    con.duckdb.register("trade_src", synthetic_trades(rows, partitions))
    con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    con.duckdb.unregister("trade_src")
    print(
        f"\n{rows:,} rows, {partitions} partition(s); load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    header = (
        f"{'query':<6}{'measure':<14}"
        + "".join(f"{m:>12}" for m in MODES)
        + f"{'both/generic':>14}"
    )
    print(header)
    print("-" * len(header))
    for name, text in DEJAVU.items():
        sql = text.rstrip().rstrip(";")
        spec = spec_for(con.duckdb, sql, "trade")
        keys = ", ".join(spec.partition_by + spec.order_by)
        batches = (
            con.duckdb.sql("SELECT * FROM trade" + (f" ORDER BY {keys}" if keys else ""))
            .to_arrow_table()
            .to_batches(65_536)
        )
        for mode in MODES:  # warm-up: numba cache loads, DuckDB's first query
            set_mode(mode)
            engine_only(spec, batches[:1])
            con.sql(sql.replace("FROM trade", "FROM (SELECT * FROM trade LIMIT 1000)", 1)).arrow()
        best: dict[tuple[str, str], tuple[float, float]] = {}
        sizes = set()
        for _ in range(repeat):
            for mode in MODES:
                set_mode(mode)
                for kind, fn in (
                    ("engine", lambda s=spec, b=batches: engine_only(s, b)),
                    ("SQL", lambda q=sql: con.sql(q).arrow().num_rows),
                ):
                    wall, cpu, size = timed(fn)
                    sizes.add((kind, size))
                    old = best.get((kind, mode), (float("inf"), float("inf")))
                    best[kind, mode] = (min(old[0], wall), min(old[1], cpu))
        set_mode("both")
        if (
            len({s for k, s in sizes if k == "engine"}) != 1
            or len({s for k, s in sizes if k == "SQL"}) != 1
        ):
            print(f"  note: {name}: the modes disagree on the number of rows: {sorted(sizes)}")
        for kind in ("engine", "SQL"):
            for clock, i in (("wall", 0), ("CPU", 1)):
                rates = [rows / best[kind, mode][i] for mode in MODES]
                print(
                    f"{name:<6}{kind + ' ' + clock:<14}"
                    + "".join(f"{r / 1e6:>11.2f}M" for r in rates)
                    + f"{rates[-1] / rates[0]:>13.2f}x"
                )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000")
    parser.add_argument("--partitions", default="1,500")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--cold",
        action="store_true",
        help="also measure the numba cold compile of Q1 (bench.paths)",
    )
    args = parser.parse_args(argv)
    print(
        f"{os.cpu_count()} CPU core(s); rows/s, best of {args.repeat}; engine: matchers "
        "over sorted Arrow batches; SQL: SET threads = 1, fetched as Arrow"
    )
    if args.cold:
        cold, warm, second = cold_compile(DEJAVU["Q1"].rstrip().rstrip(";"))
        print(
            f"Q1 cold compile: first run {cold:.2f} s, with the cache filled {warm:.2f} s: "
            f"compile ~{cold - warm:.2f} s (target <= 3 s); second run {second * 1e3:.0f} ms"
        )
    for rows in (int(r) for r in args.rows.split(",")):
        for partitions in (int(p) for p in args.partitions.split(",")):
            run(rows, partitions, args.repeat)


if __name__ == "__main__":
    main()
