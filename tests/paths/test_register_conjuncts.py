"""Register conditions as conjuncts (lowering.RegisterCode.conjunct_table): comparisons
of loads and constants run inline in the kernel, other terms through the stack code, and
the prefilter evaluates them on an attempt's second row. Every form gives the
reference's rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.config import Config
from matchsql.engine.compiled import kernel as K
from matchsql.engine.compiled import lowering, prefilter
from matchsql.engine.compiled.compiled_matcher import register_columns
from matchsql.engine.planner import _plan, explain
from tests.paths.test_batched import spec_of


def _plan_of(define: str, pattern: str = "A B+ C*"):
    spec = spec_of(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id "
        f"MEASURES COUNT(*) AS n PATTERN ({pattern}) DEFINE {define})"
    )
    plan = _plan(spec)[1]
    assert plan.path == "registers"
    return plan


def test_comparisons_become_fused_rows_and_the_rest_stack_code() -> None:
    plan = _plan_of(
        "B AS x <= PREV(x) AND B.x < A.x AND 2 > FIRST(B.y) AND B.x + 1 > A.x, C AS U.x < x",
        "A B+ C*) SUBSET U = (A, B",
    )
    conj, cconst, spans = plan.registers.conjunct_table(fused=True)
    b, c = plan.variables.index("B"), plan.variables.index("C")
    rows = conj[spans[b, 0] : spans[b, 1]]
    # B.x < A.x and 2 > FIRST(B.y) are fused (the row-local x <= PREV(x) is not here);
    # B.x + 1 > A.x computes, so it stays stack code
    assert rows[:, 0].tolist() == [K.CJ_COMPARE, K.CJ_COMPARE, K.CJ_STACK]
    assert rows[0, 1] == K.C_LT and rows[0, 2:7].tolist()[2] == K.R_CUR
    assert rows[0, 7:12].tolist()[2:4] == [K.R_LAST, plan.variables.index("A")]
    assert rows[1, 2] == 0 and cconst[spans[b, 0] + 1, 0] == 2.0  # the constant operand
    # U.x is the last row of A or B: a union's register scan stays in the stack code
    assert conj[spans[c, 0] : spans[c, 1], 0].tolist() == [K.CJ_STACK]
    generic = plan.registers.conjunct_table(fused=False)
    assert generic[0][generic[2][b, 0] : generic[2][b, 1], 0].tolist() == [K.CJ_STACK]


def test_second_row_registers_rule_out_equal_prices() -> None:
    plan = _plan_of("B AS x <= PREV(x) AND B.x < A.x, C AS x > PREV(x)")
    x = np.array([5, 5, 5, 4, 4, 6, 6, 3, 3], np.float64)
    n = len(x)
    rl = np.ones((n, len(plan.variables)), np.uint8)
    rl[:, plan.variables.index("B")] = np.r_[False, x[1:] <= x[:-1]]
    rl[:, plan.variables.index("C")] = np.r_[False, x[1:] > x[:-1]]
    columns = {"x": pa.array(x), "y": pa.array(np.zeros(n))}
    cols, valid = register_columns(plan, columns, n)
    local_only = prefilter.viable_starts(plan, rl, base=5)
    both = prefilter.viable_starts(plan, rl, base=5, cols=cols, valid=valid)
    # row-local only: every start before a row that does not rise; with B.x < A.x
    # (A is the start row) the second row must fall strictly
    assert local_only.tolist() == [1, 1, 1, 1, 0, 1, 1, 1, 1]
    assert both.tolist() == [0, 0, 1, 0, 0, 0, 1, 0, 1]


def test_second_row_keeps_a_physical_offset_inside_the_partition() -> None:
    # Partitions [0, 3) and [3, 6) of one batch. PREV(A.x) at the first row of the second
    # partition (batch row 3) is NULL; batch row 2 (x = 9) would let 5 < 9 through.
    plan = _plan_of("B AS B.x < PREV(A.x)")
    x = np.array([9, 1, 9, 0, 5, 5], np.float64)
    rl = np.ones((len(x), len(plan.variables)), np.uint8)
    cols, valid = register_columns(plan, {"x": pa.array(x), "y": pa.array(x)}, len(x))
    viable = prefilter.viable_starts(plan, rl, 0, cols, valid, np.array([0, 3, 6]))
    # row 0 runs (^ may match); row 1: 9 < PREV(A.x) = 9 fails; row 2 is its partition's
    # last; rows 3 and 4 fail (NULL, then 5 < 0)
    assert viable.tolist() == [1, 0, 1, 0, 0, 1]


CONDITIONS = [
    "x <= PREV(x) AND x < A.x",
    "x > A.x",
    "x >= LAST(B.x) AND x <= A.x",
    "FIRST(B.y) < y",
    "x <> 2 AND y = A.y",
    "PREV(A.x) > x",
    "x < U.x",
    "A.x - x > 1",
    "COUNT(*) < 4 AND x <= A.x",
    "NEXT(A.x) IS NULL OR x < NEXT(A.x)",
]


@pytest.fixture(params=[True, False], ids=["fused", "stack"])
def fused(request, monkeypatch):
    monkeypatch.setattr(lowering, "FUSED_CONJUNCTS", request.param)
    monkeypatch.setattr(prefilter, "SECOND_ROW", request.param)
    return request.param


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    b=st.sampled_from(CONDITIONS),
    c=st.sampled_from(CONDITIONS),
    d=st.sampled_from(CONDITIONS),
    skip=st.sampled_from(["PAST LAST ROW", "TO NEXT ROW"]),
    rows=st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH"]),
    nulls=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_registers_equal_the_reference(fused, b, c, d, skip, rows, nulls, seed) -> None:
    rng = np.random.default_rng(seed)
    n = 300
    x = rng.integers(0, 4, n).astype(np.float64)
    table = pa.table(
        {
            "p": np.repeat(np.arange(3, dtype=np.int32), n // 3),
            "id": np.arange(n, dtype=np.int32),
            "x": pa.array(x, mask=rng.random(n) < 0.1 if nulls else None),
            "y": rng.integers(0, 3, n).astype(np.int32),
        }
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id "
        f"MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS n {rows} AFTER MATCH SKIP {skip} "
        f"PATTERN (A B+ C* D+) SUBSET U = (A, C) DEFINE B AS {b}, C AS {c}, D AS {d})"
    )
    results = {}
    for path in ("reference", "registers"):
        con = matchsql.connect(demo=False, execution_path=path, batch_size=70)
        con.duckdb.register("src", table)
        con.sql("CREATE TABLE t AS SELECT * FROM src")
        results[path] = con.sql(sql + " ORDER BY ALL").fetchall()
    assert results["registers"] == results["reference"]


def test_explain_names_the_second_row() -> None:
    plan = _plan_of("B AS x <= PREV(x) AND B.x < A.x")
    assert "by the register conditions on the second row" in explain(plan.spec, Config())
    # (A | B) C: the first row may be A or B, so no register is known on the second row
    plan = _plan_of("C AS x < A.x", "(A | B) C")
    assert "second row" not in explain(plan.spec, Config())


def test_first_and_last_registers_are_kept_apart() -> None:
    # B is read by FIRST only, A by LAST only (the kernel copies each kind of register
    # for the variables read that way). x = 5, 3, 4, 1, 2.5: A = row 0; B+ takes rows
    # 1-4 (each below A.x = 5); C AS x > FIRST(B.x) = 3 holds at row 2 (4) but not at
    # row 4 (2.5, though above LAST(B.x) = 1 there), so the greedy B+ reaches no C and the
    # one match is A B C over rows 0-2; the search goes on past it at row 3, where B's
    # x < A.x fails (2.5 < 1).
    table = pa.table(
        {
            "p": np.zeros(5, np.int32),
            "id": np.arange(5, dtype=np.int32),
            "x": [5.0, 3.0, 4.0, 1.0, 2.5],
        }
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id "
        "MEASURES FIRST(id) AS s, COUNT(*) AS n PATTERN (A B+ C) "
        "DEFINE B AS x < A.x, C AS x > FIRST(B.x))"
    )
    for path in ("reference", "registers"):
        con = matchsql.connect(demo=False, execution_path=path)
        con.duckdb.register("src", table)
        con.sql("CREATE TABLE t AS SELECT * FROM src")
        assert con.sql(sql).fetchall() == [(0, 0, 3)], path
