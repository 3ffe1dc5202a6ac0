"""DuckDB is the oracle for every aggregate inside MEASURES.

Each aggregate (with DISTINCT, ORDER BY and FILTER where DuckDB takes them)
runs over the rows of a match: in ONE ROW PER MATCH over a whole partition,
against DuckDB's GROUP BY, and RUNNING in ALL ROWS PER MATCH, against
DuckDB's window frame from the partition's first row to the current one.
Floating-point results are compared to 12 digits: DuckDB itself sums a
window frame in another order than a group.
"""

from __future__ import annotations

import math

import duckdb
import pytest

import matchsql

ROWS = """
CREATE TABLE ev AS SELECT * FROM (VALUES
 (1, 1, 'alpha', 'Zoë',   1.5::DOUBLE,  3, DATE '2024-01-31'),
 (1, 2, 'Beta',  '日本',  -2.25,         7, DATE '2024-02-29'),
 (1, 3, NULL,    'ñandú',  0.0,       NULL, NULL),
 (1, 4, 'gamma', '😀 ok', 10.0,         -4, DATE '2023-12-25'),
 (1, 5, 'alpha', 'Zoë',    2.0,          3, DATE '2024-01-31'),
 (2, 1, 'delta', 'Ωmega', NULL,          0, DATE '2020-02-29'),
 (2, 2, 'x,y,z', 'école',  3.75,        12, DATE '2000-01-01'),
 (2, 3, 'delta', 'école',  3.75,        12, DATE '2000-01-01'),
 (3, 1, '  pad ', 'ß',    99.5,          1, DATE '1999-12-31')
) v(p, ts, s, n, x, i, d)
"""

#: Aggregate calls over the unqualified (universal) row; ORDER BY ts where the result
#: depends on the rows' order, as a match's rows come in ORDER BY order.
AGGREGATES = [
    "count(x)",
    "count(DISTINCT s)",
    "count(*) FILTER (WHERE i > 0)",
    "sum(i)",
    "sum(DISTINCT i)",
    "sum(x) FILTER (WHERE x > 0)",
    "avg(x)",
    "avg(DISTINCT x)",
    "min(s)",
    "max(d)",
    "median(x)",
    "quantile_cont(x, 0.25)",
    "quantile_disc(i, 0.5)",
    "mode(s)",
    "stddev_samp(x)",
    "stddev_pop(x)",
    "var_samp(x)",
    "var_pop(x)",
    "string_agg(s, ',' ORDER BY ts DESC)",
    "string_agg(DISTINCT n, '|' ORDER BY n)",
    "list(i ORDER BY ts)",
    "list(s ORDER BY x DESC)",
    "array_agg(n ORDER BY ts) FILTER (WHERE i IS NOT NULL)",
    "bool_and(x > -3)",
    "bool_or(x > 5)",
    "count_if(x > 0)",
    "arg_max(s, x)",
    "arg_min(n, i)",
    "max_by(s, ts)",
    "min_by(n, ts)",
    "product(i)",
    "entropy(s)",
    "kurtosis(x)",
    "skewness(x)",
    "corr(x, i)",
    "covar_pop(x, i)",
    "covar_samp(x, i)",
    "regr_slope(x, i)",
    "regr_intercept(x, i)",
    "bit_and(i)",
    "bit_or(i)",
    "bit_xor(i)",
    "approx_count_distinct(s)",
    "histogram(s)",
    "fsum(x)",
    "favg(x)",
    "mad(x)",
    "list(DISTINCT s ORDER BY s)",
    "max(length(n))",
    "sum(x * i)",
    "min(s) FILTER (WHERE i > 3)",
]


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


def _rows(table) -> list[list]:
    return [list(row.values()) for row in table.to_pylist()]


def _same(got, want) -> bool:
    return len(got) == len(want) and all(
        _close(g, w) for r, s in zip(got, want) for g, w in zip(r, s)
    )


@pytest.fixture(scope="module")
def engines():
    con = matchsql.connect(demo=False)
    con.sql(ROWS)
    ref = duckdb.connect()
    ref.execute(ROWS)
    yield con, ref
    con.close()
    ref.close()


def test_at_least_thirty_aggregates_of_duckdb():
    names = {call.split("(")[0] for call in AGGREGATES}
    known = {
        name
        for (name,) in duckdb.sql(
            "SELECT DISTINCT function_name FROM duckdb_functions() "
            "WHERE function_type = 'aggregate'"
        ).fetchall()
    }
    assert names <= known, names - known
    assert len(names) >= 30


@pytest.mark.parametrize("call", AGGREGATES)
def test_one_row_per_match(engines, call):
    con, ref = engines
    got = con.sql(
        f"SELECT p, v FROM ev MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        f"MEASURES {call} AS v ONE ROW PER MATCH PATTERN (A+) DEFINE A AS true) "
        "ORDER BY p"
    ).arrow()
    want = ref.sql(f"SELECT p, {call} FROM ev GROUP BY p ORDER BY p").to_arrow_table()
    assert _same(_rows(got), _rows(want)), (_rows(got), _rows(want))


#: ``mode`` breaks ties as it meets the values; a window frame meets them in another order.
RUNNING = [call for call in AGGREGATES if not call.startswith("mode(")]


@pytest.mark.parametrize("call", RUNNING)
def test_running_in_all_rows_per_match(engines, call):
    con, ref = engines
    got = con.sql(
        f"SELECT p, ts, v FROM ev MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        f"MEASURES RUNNING {call} AS v ALL ROWS PER MATCH PATTERN (A+) "
        "DEFINE A AS true) ORDER BY p, ts"
    ).arrow()
    want = ref.sql(
        f"SELECT p, ts, {call} OVER (PARTITION BY p ORDER BY ts ROWS BETWEEN "
        "UNBOUNDED PRECEDING AND CURRENT ROW) FROM ev ORDER BY p, ts"
    ).to_arrow_table()
    assert _same(_rows(got), _rows(want)), (_rows(got), _rows(want))


@pytest.mark.parametrize(
    "call",
    [
        "median(B.x)",
        "string_agg(B.s, '-' ORDER BY B.ts)",
        "list(DISTINCT B.i ORDER BY B.i)",
        "stddev_pop(B.x) FILTER (WHERE B.i > 0)",
        # the FILTER reads the row the aggregate visits: unqualified,
        # or qualified by another variable, it is B's row here
        "stddev_pop(B.x) FILTER (WHERE i > 0)",
        "count_if(CLASSIFIER(B) = 'B') FILTER (WHERE A.i > 0)",
    ],
)
def test_over_one_variable(engines, call):
    """An aggregate over the rows of one variable: B, every row after the first."""
    con, ref = engines
    got = con.sql(
        f"SELECT p, v FROM ev MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        f"MEASURES {call} AS v ONE ROW PER MATCH PATTERN (A B*) DEFINE B AS true) "
        "ORDER BY p"
    ).arrow()
    plain = call.replace("B.", "").replace("A.", "").replace("CLASSIFIER(B)", "'B'")
    want = ref.sql(
        f"SELECT d.p, (SELECT {plain} FROM ev WHERE ev.p = d.p AND ev.ts > "
        "(SELECT min(ts) FROM ev e WHERE e.p = d.p)) FROM (SELECT DISTINCT p FROM ev) d "
        "ORDER BY d.p"
    ).to_arrow_table()
    assert _same(_rows(got), _rows(want)), (_rows(got), _rows(want))
