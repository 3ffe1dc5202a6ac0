"""Numeric comparisons of DEFINE evaluated with numpy (engine/compiled/rowlocal.py's
NumericComparison) give the truth of the Arrow form, row by row.

The Arrow form implements DuckDB's order of numbers (NaN above every number,
equal to itself; NULL false) and is differential-tested against the
reference; here random columns with NULLs, NaNs, -0.0 and mixed integer and
float types, shifted by PREV/NEXT and stopped at partition edges, must give
the same truth array through both forms.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchsql.engine.compiled.rowlocal import (
    EDGES,
    NumericComparison,
    PartitionEdges,
    RowLocalCompiler,
    evaluate,
)
from matchsql.plan.binder import bind
from tests.property.strategies import spec_of

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("f", pa.float64()),
        ("g", pa.float32()),
        ("i", pa.int32()),
        ("j", pa.int64()),
        ("s", pa.string()),
    ]
)
CONDITIONS = [
    "f < PREV(f)",
    "f > PREV(f)",
    "f = PREV(f, 2)",
    "f <> NEXT(f)",
    "f >= 0.5",
    "f <= -0.0",
    "g < f",
    "i > PREV(j)",
    "i = 3",
    "j < PREV(i, 3)",
    "1.5 < i",
    "PREV(f) >= NEXT(g)",
    "i <> NEXT(i, 2)",
    "j >= 9223372036854775807",
]
FLOATS = st.one_of(
    st.none(), st.sampled_from([0.0, -0.0, 1.0, 0.5, -2.0, float("nan"), float("inf"), 3.0])
)
INTS = st.one_of(st.none(), st.integers(-3, 3))


def term_of(condition: str):
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
        f"PATTERN (A) DEFINE A AS {condition})"
    )
    spec = spec_of(sql, SCHEMA)
    compiler = RowLocalCompiler(spec, "A")
    return compiler, bind(spec.defines["A"], spec)


def truth(values) -> np.ndarray:
    if isinstance(values, np.ndarray):
        return values
    return pa.array(values).fill_null(False).to_numpy(zero_copy_only=False)


@pytest.mark.parametrize("condition", CONDITIONS)
def test_plain_comparisons_take_numpy(condition: str) -> None:
    compiler, term = term_of(condition)
    assert isinstance(compiler.compile(term), NumericComparison)


@pytest.mark.parametrize(
    "condition",
    ["s < PREV(s)", "f + 1 < PREV(f)", "NOT f < 1", "f < PREV(f) AND f > 0", "f IS NULL"],
)
def test_other_terms_stay_arrow(condition: str) -> None:
    compiler, term = term_of(condition)
    assert not isinstance(compiler.compile(term), NumericComparison)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(data=st.data(), condition=st.sampled_from(CONDITIONS))
def test_numpy_truth_equals_arrow(data, condition: str) -> None:
    n = data.draw(st.integers(0, 12))
    f = data.draw(st.lists(FLOATS, min_size=n, max_size=n))
    g = data.draw(st.lists(FLOATS, min_size=n, max_size=n))
    i = data.draw(st.lists(INTS, min_size=n, max_size=n))
    j = data.draw(st.lists(INTS, min_size=n, max_size=n))
    offset = data.draw(st.integers(0, 2))  # a slice of a longer buffer, as the matcher's
    pad = [None] * offset
    columns = {
        "id": pa.array(range(n), pa.int64()),
        "f": pa.array(pad + f, pa.float64()).slice(offset),
        "g": pa.array(pad + g, pa.float32()).slice(offset),
        "i": pa.array(pad + i, pa.int32()).slice(offset),
        "j": pa.array(pad + j, pa.int64()).slice(offset),
        "s": pa.array([None] * n, pa.string()),
    }
    if n and data.draw(st.booleans()):
        cuts = sorted(set(data.draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=3))))
        columns[EDGES] = PartitionEdges(np.array([0, *[c for c in cuts if c < n], n]))
    compiler, term = term_of(condition)
    fast = compiler.compile(term)
    assert isinstance(fast, NumericComparison)
    expected = truth(fast.slow(columns, n))
    if len(expected) != n:  # a scalar result: the same for every row
        expected = np.full(n, bool(pa.array([expected.as_py()]).fill_null(False)[0].as_py()))
    got = fast(columns, n)
    assert truth(got).tolist() == expected.tolist()
    assert evaluate([fast], columns, n).tolist() == evaluate([fast.slow], columns, n).tolist()
