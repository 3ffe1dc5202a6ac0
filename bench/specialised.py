"""The thread VM with conditions compiled per query shape, against the generic kernel.

    python -m bench.specialised [--rows 1000000] [--partitions 1,500] [--repeat 5]

The register queries (DejaVu Q1-Q4) run :func:`matchsql.engine.compiled.kernel.run_attempts`,
which walks the conjunct table (``conj``) for every condition it evaluates. This measures
what compiling those conditions for the query's shape would gain, before anything is built
for it: a kernel variant with ``F_SHAPE`` on calls one function made for the shape, composed
of numba closures whose free variables are the table's integers and constants (numba
freezes them as compile-time constants; ``inline="always"`` puts the whole composition into
the kernel at numba's IR level). No source is generated: the closures are fixed functions
chosen and nested from the table's rows.

Each query runs once through SQL (``SET threads = 1``) while the kernel calls are recorded
(arguments copied); the calls are then replayed through the generic variant the engine
chose and through the specialised one, interleaved, best of ``--repeat`` in CPU time
(``time.process_time``: the machine is shared). Both must give the same records and labels.
Printed per query: kernel steps (rows read by attempts), each kernel's time and ns per step,
their ratio (the target for building it was >= 1.3x), and the specialised variant's compile
time (no cache: a new shape compiles a whole kernel).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
import types
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import PassManager
from numba.core.dispatcher import Dispatcher
from numba.core.untyped_passes import InlineInlinables

import matchsql
from bench.queries import DEJAVU
from matchsql.engine.compiled import kernel as K
from matchsql.storage.demo import synthetic_trades

_INLINE = {"nogil": True, "inline": "always"}


class ShapeCompiler(CompilerBase):
    """The kernels' pipeline (:class:`.kernel.KernelCompiler`) with numba's inlining of
    ``inline="always"`` functions put back."""

    def define_pipelines(self) -> list[PassManager]:
        full = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pm = PassManager("shape")
        for pass_cls, description in full.passes:
            if pass_cls not in K._SKIPPED or pass_cls is InlineInlinables:
                pm.add_pass(pass_cls, description)
        pm.finalize()
        return [pm]


def _operand(is_load: int, col: int, kind: int, arg: int, offset: int, value: float) -> Dispatcher:
    """``(not NULL, value)`` of one CJ_COMPARE operand, as the kernel reads it."""
    if not is_load:

        @njit(**_INLINE)
        def constant(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg):
            return True, value

        return constant

    @njit(**_INLINE)
    def load(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg):
        last = -1
        first = -1
        if kind == K.R_LAST or kind == K.R_FIRST:
            last = lp[side, reg, arg]
            first = fp[side, reg, arg]
        rr = K.load_row(kind, arg, offset, var, last, first, row, start, n_rows, base)
        if rr < 0 or valid[col, rr] == 0:
            return False, 0.0
        return True, cols[col, rr]

    return load


def _comparison(op: int, left: Dispatcher, right: Dispatcher) -> Dispatcher:
    @njit(**_INLINE)
    def comparison(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg):
        ok, a = left(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg)
        if not ok:
            return False
        ok, b = right(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg)
        return ok and K.compare(op, a, b)

    return comparison


@njit(**_INLINE)
def _true(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg):
    return True


def _both(one: Dispatcher, rest: Dispatcher) -> Dispatcher:
    @njit(**_INLINE)
    def both(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg):
        if not one(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg):
            return False
        return rest(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg)

    return both


def _dispatch(v: int, here: Dispatcher, rest: Dispatcher) -> Dispatcher:
    @njit(**_INLINE)
    def dispatch(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg):
        if var == v:
            return here(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg)
        return rest(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg)

    return dispatch


def shape_condition(conj: np.ndarray, cconst: np.ndarray, spans: np.ndarray) -> Dispatcher:
    """The conditions of ``conj`` (CJ_COMPARE rows only) as one composed function."""
    fn = _true
    for v in range(len(spans) - 1, -1, -1):
        lo, hi = int(spans[v, 0]), int(spans[v, 1])
        here = _true
        for k in range(hi - 1, lo - 1, -1):
            row = [int(x) for x in conj[k]]
            if row[0] != K.CJ_COMPARE:
                raise ValueError("stack code in a condition: no specialised form")
            c = _comparison(
                row[1],
                _operand(*row[2:7], float(cconst[k, 0])),
                _operand(*row[7:12], float(cconst[k, 1])),
            )
            here = c if here is _true else _both(c, here)
        if hi > lo:
            fn = _dispatch(v, here, fn)
    return fn


def shape_kernel(
    generic: Dispatcher, conj: np.ndarray, cconst: np.ndarray, spans: np.ndarray
) -> Dispatcher:
    """``generic``'s variant with F_SHAPE on and the shape's conditions (no disk cache)."""
    namespace = dict(generic.py_func.__globals__)
    namespace["F_SHAPE"] = True
    namespace["shape_condition"] = shape_condition(conj, cconst, spans)
    key = hashlib.sha256(conj.tobytes() + cconst.tobytes() + spans.tobytes()).hexdigest()[:12]
    name = f"{generic.py_func.__name__}_shape_{key}"
    fn = types.FunctionType(K._run_attempts.__code__, namespace, name, K._run_attempts.__defaults__)
    fn.__qualname__ = name
    return njit(**{**K._JIT, "cache": False, "pipeline_class": ShapeCompiler})(fn)


def recorded_calls(rows: int, partitions: int, sql: str) -> tuple[Dispatcher, list[list]]:
    """The engine's kernel variant for ``sql`` and copies of the arguments of its calls."""
    con = matchsql.connect(demo=False, threads=1)
    con.duckdb.register("trade_src", synthetic_trades(rows, partitions))
    con.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    calls: list[list] = []
    chosen: list[Dispatcher] = []
    original = K.attempts_kernel

    def recording(*args: Any) -> Callable[..., Any]:
        kernel = original(*args)
        chosen.append(kernel)

        def call(*a: Any) -> Any:
            calls.append([x.copy() if isinstance(x, np.ndarray) else x for x in a])
            return kernel(*a)

        return call

    K.attempts_kernel = recording
    try:
        con.sql(sql).arrow()
    finally:
        K.attempts_kernel = original
    if len({id(k) for k in chosen}) != 1:
        raise RuntimeError(f"expected one kernel variant, got {len(chosen)}")
    return chosen[0], calls


def replay(kernel: Dispatcher, calls: list[list]) -> tuple[float, int, list]:
    """(CPU s, steps, outputs) of ``kernel`` over the recorded calls."""
    outputs = []
    steps = 0
    cpu = time.process_time()
    for a in calls:
        before = int(a[16][K.K_STEPS])
        result = kernel(*a)
        steps += int(a[16][K.K_STEPS]) - before
        outputs.append(
            (
                tuple(int(x) for x in result),
                a[27][: result[5]].tobytes(),
                a[28][: result[6]].tobytes(),
            )
        )
    return time.process_time() - cpu, steps, outputs


def run(rows: int, partitions: int, repeat: int) -> None:
    print(
        f"\n{rows:,} rows, {partitions} partition(s); load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    header = (
        f"{'query':<6}{'steps':>11}{'generic ms':>12}{'ns/step':>9}{'shape ms':>10}"
        f"{'ns/step':>9}{'generic/shape':>15}{'compile s':>11}"
    )
    print(header)
    print("-" * len(header))
    for name, text in DEJAVU.items():
        sql = text.rstrip().rstrip(";")
        generic, calls = recorded_calls(rows, partitions, sql)
        a = calls[0]
        cpu = time.process_time()
        shaped = shape_kernel(generic, a[7], a[8], a[9])
        replay(shaped, calls[:1])
        compile_s = time.process_time() - cpu
        _, steps, reference = replay(generic, calls)
        if replay(shaped, calls)[2] != reference:
            raise AssertionError(f"{name}: the specialised kernel's output differs")
        best = {"generic": float("inf"), "shape": float("inf")}
        for _ in range(repeat):
            for label, kernel in (("generic", generic), ("shape", shaped)):
                best[label] = min(best[label], replay(kernel, calls)[0])
        g, s = best["generic"], best["shape"]
        print(
            f"{name:<6}{steps:>11,}{g * 1e3:>12.1f}{g / steps * 1e9:>9.1f}{s * 1e3:>10.1f}"
            f"{s / steps * 1e9:>9.1f}{g / s:>14.2f}x{compile_s:>11.2f}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", default="1,500")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(
        f"{os.cpu_count()} CPU core(s); kernel CPU time, best of {args.repeat}, calls "
        "replayed interleaved; generic: the variant the engine chose"
    )
    for partitions in (int(p) for p in args.partitions.split(",")):
        run(args.rows, partitions, args.repeat)


if __name__ == "__main__":
    main()
