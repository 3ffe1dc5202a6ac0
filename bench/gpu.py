"""GPU column path benchmark: the CPU paths and the GPU path in one run.

    python -m bench.gpu [--rows 1000000] [--windows 1000,10000,100000,250000]
                        [--lengths 10,25,50,100]
    NUMBA_ENABLE_CUDASIM=1 python -m bench.gpu --simulator   # small sizes, no GPU

Workloads (one partition, ``ts`` ordered, ``v`` a hash of the row in [0, 1e6)):

* Cugola-Margara's shape: a sequence of three variables with content
  constraints inside a window, ``PATTERN (A Z*? B Z*? C)``: ``A`` holds on 1% of
  the rows, ``B`` and ``C`` each on one row in ``window``, so an attempt from an
  ``A`` walks about ``2 * window`` rows; the selection policy is *each*
  (``AFTER MATCH SKIP TO NEXT ROW``: every start) or *last*
  (``SKIP PAST LAST ROW``); the window is swept from 1k to 250k rows; and, at
  the two smallest windows, *each* as the DejaVu queries map it: ``ALL
  MATCHES``, every end of every attempt, under ``WITHIN 2 * window``;
* the same with a register condition (``C`` also reads ``A.v``: evaluated in
  the kernel's threads), with a running aggregate (``C`` also needs
  ``MAX(v) >= A.v``: an accumulator every thread folds each row into) and
  with ``WITHIN 2 * window`` rows, at the two smallest windows;
* the thesis' sequence-length sweep: ``V1 Z*? V2 Z*? ... Vk`` for k = 10 .. 100
  variables, each ``Vi`` holding on one row in ten.

For every case it runs the query with ``gpu = 'off'`` (the planner's best CPU
path) and ``gpu = 'on'`` and checks that the rows are equal; it reports rows/s
of both and the speed-up. Where the GPU is numba's simulator, the timings of
the GPU side mean nothing: the run checks correctness at small sizes, prints
the CPU side only, and says that no GPU figure was taken. The GPU time is
split (:mod:`matchsql.engine.gpu.timing`): host-to-device copies (the DEFINE columns,
the program and bytecode), kernels (the elementwise DEFINE terms and the walks,
each launch synchronised) and device-to-host copies (ends, statuses, labels),
in their own columns; the rest of the GPU time is the host's (SKIP scan,
measures, SQL). Under the simulator those columns are printed too, marked as
the simulator's figures (numpy copies and kernels interpreted in Python).
"""

from __future__ import annotations

import argparse
import time

import matchsql
from matchsql.engine.gpu import timing
from matchsql.engine.gpu.device import detect

SEED = 17


def cugola_margara(
    window: int,
    skip: str,
    registers: bool = False,
    within: bool = False,
    aggregate: bool = False,
    every_end: bool = False,
) -> str:
    """``registers``: C also compares with the A row (``v > A.v``, always true here, so the
    matches stay the same) and runs in-thread; ``aggregate``: C also needs the running
    ``MAX(v) >= A.v`` (always true: A's row is among them); ``within``: ``WITHIN 2 *
    window`` rows; ``every_end``: ALL MATCHES, every end of every attempt (the DejaVu
    queries' mapping of the "each" policy; bounded by the WITHIN, as an attempt's ends
    otherwise run to the partition's end)."""
    c = (
        f"v >= {1_000_000 - 1_000_000 // window}"
        + (" AND v > A.v" if registers else "")
        + (" AND MAX(v) >= A.v" if aggregate else "")
    )
    bound = f" WITHIN {2 * window}" if within else ""
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts "
        f"MEASURES FIRST(ts) AS s, LAST(ts) AS e ONE ROW PER MATCH AFTER MATCH SKIP {skip} "
        f"{'ALL MATCHES ' if every_end else ''}"
        f"PATTERN (A Z*? B Z*? C){bound} DEFINE A AS v BETWEEN 400000 AND 409999, "
        f"B AS v < {1_000_000 // window}, C AS {c})"
    )


def sequence(k: int) -> str:
    pattern = " Z*? ".join(f"V{i}" for i in range(1, k + 1))
    defines = ", ".join(
        f"V{i} AS v >= {i % 10 * 100000} AND v < {(i % 10 + 1) * 100000}" for i in range(1, k + 1)
    )
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(ts) AS s, "
        f"LAST(ts) AS e ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
        f"PATTERN ({pattern}) DEFINE {defines})"
    )


def _run(con: matchsql.Connection, sql: str) -> tuple[float, list]:
    began = time.perf_counter()
    rows = con.sql(sql).fetchall()
    return time.perf_counter() - began, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--windows", default="1000,10000,100000,250000")
    ap.add_argument("--lengths", default="10,25,50,100")
    ap.add_argument(
        "--simulator", action="store_true", help="small sizes for numba's CUDA simulator"
    )
    args = ap.parse_args()
    device = detect()
    rows, windows, lengths = (
        args.rows,
        [int(w) for w in args.windows.split(",")],
        [int(k) for k in args.lengths.split(",")],
    )
    if args.simulator or device.simulated:
        rows, windows, lengths = min(rows, 600), [20, 50, 100], [10, 20]
    cons = {}
    for gpu in ("off", "on"):
        con = matchsql.connect(demo=False, gpu=gpu, max_buffered_rows=max(rows, 1))
        # The same pseudo-random values in both connections (DuckDB's hash of the row).
        con.sql(
            f"CREATE TABLE t AS SELECT i AS ts, (hash(i + {SEED}) % 1000000)::BIGINT AS v "
            f"FROM range({rows}) r(i)"
        )
        cons[gpu] = con
    print(f"device: {device.name}; rows: {rows}")
    cases = [
        (f"CM window={w} {name}", cugola_margara(w, skip))
        for w in windows
        for name, skip in (("each", "TO NEXT ROW"), ("last", "PAST LAST ROW"))
    ]
    cases += [
        (f"CM window={w} each+registers", cugola_margara(w, "TO NEXT ROW", True))
        for w in windows[:2]
    ]
    cases += [
        (f"CM window={w} each+aggregate", cugola_margara(w, "TO NEXT ROW", aggregate=True))
        for w in windows[:2]
    ]
    cases += [
        (f"CM window={w} each WITHIN {2 * w}", cugola_margara(w, "TO NEXT ROW", within=True))
        for w in windows[:2]
    ]
    cases += [
        (
            f"CM window={w} ALL MATCHES WITHIN {2 * w}",
            cugola_margara(w, "TO NEXT ROW", within=True, every_end=True),
        )
        for w in windows[:2]
    ]
    cases += [(f"sequence k={k}", sequence(k)) for k in lengths]
    real = device.present and not device.simulated
    mark = "*" if device.simulated else ""
    print(
        f"{'case':<34} {'matches':>8} {'cpu s':>8} {'cpu rows/s':>12} "
        f"{'gpu s':>8} {'speed-up':>8} {'h2d s' + mark:>9} {'kernel s' + mark:>9} "
        f"{'d2h s' + mark:>9} {'h2d MB':>8}  same rows"
    )
    differences = 0
    for name, sql in cases:
        cpu_s, cpu_rows = _run(cons["off"], sql)
        timing.reset()
        gpu_s, gpu_rows = _run(cons["on"], sql) if device.present else (float("nan"), cpu_rows)
        spent = timing.reset()
        same = sorted(cpu_rows) == sorted(gpu_rows)
        differences += not same
        checked = "yes" if same else "NO"
        gpu_text = f"{gpu_s:8.3f} {cpu_s / gpu_s:7.1f}x" if real else f"{'-':>8} {'-':>8}"
        split = (
            f"{spent.h2d_s:9.4f} {spent.kernel_s:9.4f} {spent.d2h_s:9.4f} "
            f"{spent.h2d_bytes / 1e6:8.2f}"
            if device.present
            else f"{'-':>9} {'-':>9} {'-':>9} {'-':>8}"
        )
        print(
            f"{name:<34} {len(cpu_rows):>8} {cpu_s:8.3f} {rows / cpu_s:12,.0f} {gpu_text} "
            f"{split}  {checked if device.present else '-'}"
        )
    if device.present:
        print(
            f"correctness: {len(cases) - differences}/{len(cases)} cases give the CPU paths' "
            f"rows on the GPU path ({device.name})"
        )
    else:
        print("correctness: not checked (no device and no simulator; set NUMBA_ENABLE_CUDASIM=1)")
    if device.simulated:
        print(
            "* simulator figures: copies are numpy copies and kernels run in Python; they "
            "say nothing about a GPU"
        )
    if not real:
        print(
            "no GPU figure was taken: no CUDA device in this run"
            + (
                " (the GPU side ran in numba's simulator, correctness only)"
                if device.simulated
                else ""
            )
        )


if __name__ == "__main__":
    main()
