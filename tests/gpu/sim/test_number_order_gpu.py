"""DuckDB's order of numbers on the GPU path's column terms (matchsql.expr.number_order):
NaN above every other number and equal to itself, a NULL operand unknown."""

from __future__ import annotations

import duckdb

import matchsql

ROWS = (
    "(1, NULL, 'NaN'::DOUBLE), (2, 1, 'NaN'::DOUBLE), (3, NULL, 2.0), "
    "(4, 3, 'NaN'::DOUBLE), (5, 4, 1.0), (6, 5, 'inf'::DOUBLE)"
)
QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS id ONE ROW PER MATCH "
    "PATTERN (A) DEFINE A AS {cond})"
)


def test_nan_comparisons_agree_with_duckdb() -> None:
    """Each row is a match of (A) where DuckDB's own WHERE holds for that row."""
    gpu = matchsql.connect(demo=False, gpu="on")
    gpu.sql(f"CREATE TABLE t AS SELECT *, 'NaN'::DOUBLE AS n FROM (VALUES {ROWS}) v(id, i, x)")
    conds = [
        f"{left} {op} {right}"
        for op in ("<", "<=", ">", ">=", "=", "<>")
        for left, right in (("i", "x"), ("x", "i"), ("x", "PREV(x)"), ("x", "n"))
    ]
    for cond in conds:
        sql = QUERY.format(cond=cond)
        plan = "\n".join(r[0] for r in gpu.sql("EXPLAIN " + sql).fetchall())
        assert "path: gpu" in plan, (cond, plan)
        where = cond.replace("PREV(x)", "px")
        want = duckdb.sql(
            f"SELECT id FROM (SELECT *, lag(x) OVER (ORDER BY id) AS px, "
            f"'NaN'::DOUBLE AS n FROM (VALUES {ROWS}) v(id, i, x)) "
            f"WHERE {where} ORDER BY id"
        ).fetchall()
        assert gpu.sql(sql).fetchall() == want, cond
