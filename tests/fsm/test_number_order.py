"""DuckDB's order of numbers (matchsql.expr.number_order) against DuckDB's own
comparisons of the same values, in each backend's primitives: Python scalars, Arrow
arrays (with NULLs) and numpy arrays (the GPU path's simulator and the prefilter)."""

from __future__ import annotations

import itertools

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import matchsql
from matchsql.expr.number_order import (
    ARROW,
    COMPARISON_NAMES,
    SCALAR_TESTS,
    array_ops,
    compare_columns,
)

OPERATORS = {
    "less": "<",
    "less_equal": "<=",
    "greater": ">",
    "greater_equal": ">=",
    "equal": "=",
    "not_equal": "<>",
}
DOUBLES = [float("-inf"), -1.5, -0.0, 0.0, 1.0, 2.5, float("inf"), float("nan"), None]
BIGINTS = [-3, 0, 1, 2, None]
KINDS = {"DOUBLE": (DOUBLES, pa.float64()), "BIGINT": (BIGINTS, pa.int64())}


def _literal(v, sql_type: str) -> str:
    return "NULL" if v is None else f"CAST('{v}' AS {sql_type})"


def duckdb_truth(left: str, right: str) -> tuple[list, list, dict[str, list]]:
    """Every pair of ``left`` x ``right`` values and DuckDB's answer to each comparison."""
    pairs = list(itertools.product(KINDS[left][0], KINDS[right][0]))
    rows = ", ".join(
        f"({i}, {_literal(a, left)}, {_literal(b, right)})" for i, (a, b) in enumerate(pairs)
    )
    cols = ", ".join(f"a {op} b" for op in OPERATORS.values())
    got = (
        duckdb.connect()
        .execute(f"SELECT {cols} FROM (VALUES {rows}) t(i, a, b) ORDER BY i")
        .fetchall()
    )
    return (
        [a for a, _ in pairs],
        [b for _, b in pairs],
        {name: [row[k] for row in got] for k, name in enumerate(OPERATORS)},
    )


@pytest.mark.parametrize(
    ("left", "right"), [("DOUBLE", "DOUBLE"), ("BIGINT", "DOUBLE"), ("DOUBLE", "BIGINT")]
)
def test_every_backend_compares_as_duckdb(left, right):
    a, b, truth = duckdb_truth(left, right)
    known = [k for k in range(len(a)) if a[k] is not None and b[k] is not None]
    nan = [k for k in known if a[k] != a[k] or b[k] != b[k]]
    assert nan and all(
        truth["greater"][k] or truth["less"][k] or truth["equal"][k] for k in nan
    )  # DuckDB orders NaN against every number
    a_arrow, b_arrow = pa.array(a, KINDS[left][1]), pa.array(b, KINDS[right][1])
    a_np = np.array([a[k] for k in known], KINDS[left][1].to_pandas_dtype())
    b_np = np.array([b[k] for k in known], KINDS[right][1].to_pandas_dtype())
    for name, want in truth.items():
        assert [SCALAR_TESTS[name](a[k], b[k]) for k in known] == [want[k] for k in known], name
        assert compare_columns(ARROW, name, a_arrow, b_arrow).to_pylist() == want, name
        got = compare_columns(array_ops(np), name, a_np, b_np)
        assert got.tolist() == [want[k] for k in known], name
        # One side a constant, as a literal in a condition is.
        for k in known:
            assert compare_columns(ARROW, name, a_arrow[k], b_arrow).to_pylist()[k] == want[k]
            assert bool(compare_columns(array_ops(np), name, a[k], b_np)[known.index(k)]) == want[k]


def test_comparison_names_cover_the_sql_operators():
    assert set(COMPARISON_NAMES.values()) == set(OPERATORS) == set(SCALAR_TESTS)


@pytest.mark.parametrize("path", ["reference", "row_local"])
def test_a_null_integer_against_nan_is_unknown_on_every_path(path):
    """``i < x`` with i NULL and x NaN is NULL (the row is no A), not true: the NaN test
    must not outvote the NULL (Kleene's ``NULL OR true`` is true)."""
    con = matchsql.connect(demo=False, execution_path=path)
    con.sql(
        "CREATE TABLE t AS SELECT * FROM (VALUES (1, NULL, 'NaN'::DOUBLE), "
        "(2, 1, 'NaN'::DOUBLE), (3, NULL, 2.0), (4, 3, 'NaN'::DOUBLE)) v(id, i, x)"
    )
    rows = con.sql(
        "SELECT id FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS id "
        "ONE ROW PER MATCH PATTERN (A) DEFINE A AS i < x) ORDER BY id"
    ).fetchall()
    assert rows == [(2,), (4,)]
    assert any(
        f"path: {path}" in line[0]
        for line in con.sql(
            "EXPLAIN SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS id "
            "ONE ROW PER MATCH PATTERN (A) DEFINE A AS i < x)"
        ).fetchall()
    )
