"""The registers path skips attempts that the row-local conditions rule out
(engine/compiled/prefilter.py): which starts it skips, and that skipping them
never changes a result."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.engine.compiled import prefilter
from matchsql.engine.planner import _plan
from tests.paths.test_batched import spec_of

PATTERNS = ["A B+ C* D+", "A B+", "A? B C", "(A | B) C+", "A B* C", "^A B+"]
CONDITIONS = [
    "x < PREV(x)",
    "x >= PREV(x) AND x <= A.x",
    "x > A.x",
    "y = 1",
    "NEXT(x) > x",
    "x > PREV(x) AND y > FIRST(y)",
]


def query(pattern: str, b: str, c: str, d: str, rows: str) -> str:
    """B reads a register (``B.x < A.x``), so the query runs on the registers path."""
    defines = {"B": f"{b} AND B.x < A.x", "C": c, "D": d}
    define = ", ".join(f"{v} AS {e}" for v, e in defines.items() if v in pattern)
    return (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id "
        f"MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS n, FIRST(x) AS fx {rows} "
        f"AFTER MATCH SKIP TO NEXT ROW PATTERN ({pattern}) DEFINE {define})"
    )


def test_starts_whose_second_row_fails_are_not_viable() -> None:
    spec = spec_of(
        query("A B+ C* D+", "x <= PREV(x)", "x > PREV(x)", "x > PREV(x)", "ONE ROW PER MATCH")
    )
    plan = _plan(spec)[1]
    assert plan.path == "registers"
    # Row-local truth per variable (A, B, C, D): B holds on rows 1, 2, 4.
    rl = np.array(
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0], [1, 0, 1, 1], [1, 1, 0, 0], [1, 0, 1, 1]],
        np.uint8,
    )
    assert prefilter.viable_starts(plan, rl, base=10).tolist() == [1, 1, 0, 1, 0, 1]
    assert prefilter.viable_starts(plan, rl, base=0)[0] == 1  # partition row 0 always runs


def test_nothing_is_ruled_out_when_a_single_row_can_match() -> None:
    spec = spec_of(query("A B* C?", "x < PREV(x)", "x > A.x", "TRUE", "ONE ROW PER MATCH"))
    assert prefilter.relaxed_dfa(_plan(spec)[1]) is None


@settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    pattern=st.sampled_from(PATTERNS),
    b=st.sampled_from(CONDITIONS),
    c=st.sampled_from(CONDITIONS),
    d=st.sampled_from(CONDITIONS),
    rows=st.sampled_from(
        ["ONE ROW PER MATCH", "ALL ROWS PER MATCH", "ALL ROWS PER MATCH WITH UNMATCHED ROWS"]
    ),
    seed=st.integers(0, 2**16),
)
def test_skipping_never_changes_the_rows(pattern, b, c, d, rows, seed) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    table = pa.table(
        {
            "p": np.repeat(np.arange(4, dtype=np.int32), n // 4),
            "id": np.arange(n, dtype=np.int32),
            "x": rng.integers(0, 5, n).astype(np.int32),
            "y": rng.integers(0, 3, n).astype(np.int32),
        }
    )
    sql = query(pattern, b, c, d, rows)
    results = {}
    for path in ("reference", "registers"):
        con = matchsql.connect(demo=False, execution_path=path, batch_size=150)
        con.duckdb.register("src", table)
        con.sql("CREATE TABLE t AS SELECT * FROM src")
        results[path] = con.sql(sql + " ORDER BY ALL").fetchall()
    assert results["registers"] == results["reference"]


@pytest.mark.parametrize("kind", ["batched", "per partition"])
def test_v_shape_rules_out_most_starts(kind: str) -> None:
    spec = spec_of(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id "
        "MEASURES LAST(B.x) AS bottom PATTERN (A B+ C+ D+) "
        "DEFINE B AS x < PREV(x), C AS x > PREV(x) AND x <= A.x, D AS x > PREV(x))"
    )
    plan = _plan(spec)[1]
    x = np.array([5, 6, 7, 4, 3, 4, 5, 6, 6, 6], np.float64)
    rl = np.ones((len(x), len(plan.variables)), np.uint8)
    down = np.r_[False, x[1:] < x[:-1]]
    up = np.r_[False, x[1:] > x[:-1]]
    for name, truth in (("B", down), ("C", up), ("D", up)):
        rl[:, plan.variables.index(name)] = truth
    viable = prefilter.viable_starts(plan, rl, base=0 if kind == "batched" else 3)
    # Only a start followed by a falling row can begin A B+; row 0 and the last row stay.
    expected = (
        [1, 0, 1, 1, 0, 0, 0, 0, 0, 1] if kind == "batched" else [0, 0, 1, 1, 0, 0, 0, 0, 0, 1]
    )
    assert viable.tolist() == expected


def test_explain_names_the_prefilter() -> None:
    from matchsql.config import Config
    from matchsql.engine.planner import explain

    spec = spec_of(query("A B+", "x < PREV(x)", "TRUE", "TRUE", "ONE ROW PER MATCH"))
    assert "prefilter: starts ruled out by the row-local conditions" in explain(spec, Config())
