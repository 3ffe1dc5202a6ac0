"""The prefilter's second-row check, column-wise (engine/compiled/prefilter._refine), against
the kernel's own load and comparison (kernel.load_row, kernel.compare) applied start by
start: same second-row symbols on random data with NULLs, NaN, several partitions and a
buffer that does not begin at partition row 0."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchsql.engine.compiled import kernel as K
from matchsql.engine.compiled import prefilter
from matchsql.engine.compiled.compiled_matcher import label_input, register_columns
from tests.paths.test_register_conjuncts import _plan_of

CONDITIONS = [
    "x <= PREV(x) AND x < A.x",
    "x > A.x",
    "B.x >= PREV(A.x)",
    "A.x - 1 < x",
    "x <> A.y AND y = 2",
    "NEXT(A.x) > x",
    "FIRST(B.y) < y",
    "PREV(A.x, 2) <= x",
    "LAST(x, 1) > x",
    "FIRST(x, 1) <> 3",
    "A.x IS NULL OR x < A.x",
    "x < FIRST(A.y) AND 2 <= x",
    "NEXT(A.x, 3) > x",
    "PREV(A.y, 3) < y",
    "NEXT(A.y, 2) >= PREV(A.x)",
    "LAST(x, 2) < x",
    "x <> A.x",
    "FIRST(x, 2) > 0",
]


def _expected(plan, sym, bounds, cols, valid, base):
    """Start by start, what the kernel's conjunct loop gives on the second row."""
    dfa, second = prefilter._relaxed(plan)
    conj, cconst, spans = plan.registers.conjunct_table(fused=True)
    out = sym[1:].astype(np.int64)
    for p in range(len(bounds) - 1):
        a, b = int(bounds[p]), int(bounds[p + 1])
        for s in range(b - a - 1):
            todo = int(second.need[sym[a + s]]) & int(sym[a + s + 1])
            for v in range(len(plan.variables)):
                bit = int(dfa.bits[v])
                if bit < 0 or not (todo >> bit) & 1:
                    continue
                ok = True
                for k in range(spans[v, 0], spans[v, 1]):
                    if conj[k, 0] != K.CJ_COMPARE:
                        continue
                    x = []
                    for side in range(2):
                        j = 2 + 5 * side
                        if conj[k, j] == 0:
                            x.append(cconst[k, side])
                            continue
                        arg = int(conj[k, j + 3])
                        reg = s if arg == second.first else -1
                        rr = K.load_row(
                            int(conj[k, j + 2]),
                            arg,
                            int(conj[k, j + 4]),
                            v,
                            reg,
                            reg,
                            s + 1,
                            s,
                            b - a,
                            base,
                        )
                        c = int(conj[k, j + 1])
                        if rr < 0 or not valid[c, a + rr]:
                            ok = False
                            break
                        x.append(cols[c, a + rr])
                    if not ok or not K.compare(int(conj[k, 1]), x[0], x[1]):
                        ok = False
                        break
                if not ok:
                    out[a + s] &= ~(1 << bit)
    return out


@settings(
    max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    b=st.sampled_from(CONDITIONS),
    c=st.sampled_from(CONDITIONS),
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=4),
    base=st.sampled_from([0, 1, 2, 7]),
    seed=st.integers(0, 2**16),
)
def test_column_wise_equals_the_kernel_start_by_start(b, c, sizes, base, seed) -> None:
    plan = _plan_of(f"B AS {b}, C AS {c}")
    dfa, second = prefilter._relaxed(plan)
    if second is None:
        return  # nothing to refine for this pair
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    x = rng.integers(0, 4, n).astype(np.float64)
    x[rng.random(n) < 0.1] = np.nan
    xs = pa.array(x, mask=rng.random(n) < 0.15)
    ys = pa.array(rng.integers(0, 4, n).astype(np.float64), mask=rng.random(n) < 0.15)
    columns = {
        "x": xs,
        "y": ys,
        "p": pa.array(np.repeat(np.arange(len(sizes)), sizes)),
        "id": pa.array(np.arange(n)),
    }
    rl = label_input(plan, None, columns, n)
    cols, valid = register_columns(plan, columns, n)
    sym = prefilter.D.symbols(dfa, rl)
    conj, cconst, spans = plan.registers.conjunct_table(fused=True)
    one = len(sizes) == 1
    got = prefilter._refine(
        dfa.bits,
        sym,
        second.need,
        conj,
        cconst,
        spans,
        cols,
        valid,
        second.first,
        bounds,
        base if one else 0,
    )
    want = _expected(plan, sym, bounds, cols, valid, base if one else 0)
    # a partition's last row has no second row: its symbol is never read
    last = bounds[1:-1] - 1
    keep = np.ones(n - 1, bool)
    keep[last] = False
    assert got[keep].tolist() == want[keep].tolist()
