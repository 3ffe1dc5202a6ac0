"""DuckDB is the oracle for a DEFINE that combines different rows of a match.

A function of two rows the value library has no rule for (``levenshtein(A.s,
B.s)``) and an aggregate the engine does not keep itself (``median(A.x)``)
cannot be pushed into the input scan: the matcher asks DuckDB while it
matches. Each case here puts DuckDB's own value of the same expression, over
the same rows, into a column ``w`` (by LAG or a window frame), and the DEFINE
compares the pattern's value with it. Every row agrees exactly when the
matches come out as worked out by hand: all pairs, or one match per partition.
"""

from __future__ import annotations

import duckdb
import pytest

import matchsql

ROWS = """
CREATE TABLE ev AS SELECT * FROM (VALUES
 (1, 1, 'alpha', 'Zoë',    1.5::DOUBLE,  3, DATE '2024-01-31'),
 (1, 2, 'Beta',  '日本',   -2.25,         7, DATE '2024-02-29'),
 (1, 3, NULL,    'ñandú',   0.0,       NULL, NULL),
 (1, 4, 'gamma', '😀 ok',  10.0,         -4, DATE '2023-12-25'),
 (1, 5, 'alpha', 'Zoë',     2.0,          3, DATE '2024-01-31'),
 (1, 6, 'alphas', 'zoe',    2.0,          5, DATE '2024-03-01'),
 (2, 1, 'delta', 'Ωmega',  NULL,          0, DATE '2020-02-29'),
 (2, 2, 'x,y,z', 'école',   3.75,        12, DATE '2000-01-01'),
 (2, 3, 'delta', 'école',   3.75,        12, DATE '2000-01-01'),
 (2, 4, 'dealt', 'ecole',  -1.0,          2, DATE '2001-06-15'),
 (3, 1, '  pad ', 'ß',     99.5,          1, DATE '1999-12-31'),
 (3, 2, 'pad',   'ss',     98.5,          1, DATE '1999-12-30')
) v(p, ts, s, n, x, i, d)
"""

#: Functions of two rows: ``{a}`` is the first row's column, ``{b}`` the second's.
PAIRS = [
    "levenshtein({a}s, {b}s)",
    "damerau_levenshtein({a}n, {b}n)",
    "jaccard({a}s, {b}s)",
    "jaro_winkler_similarity({a}n, {b}n)",
    "concat_ws('-', {a}s, {b}n)",
    "date_diff('day', {a}d, {b}d)",
    "date_diff('month', {a}d, {b}d)",
    "list_sum(list_value({a}i, {b}i))",
    "md5(concat({a}s, {b}s))",
    "contains({a}n, {b}s)",
    "instr({b}n, {a}n)",
    "format('{{}}:{{}}', {a}s, {b}i)",
    "hash({a}s, {b}x)",
    "len(string_split(concat_ws(',', {a}s, {b}s), ','))",
    "strftime({b}d, '%Y') > strftime({a}d, '%Y')",
    "regexp_matches({b}s, {a}s)",
    "repeat({a}s, {b}i % 3)",
    "typeof(greatest({a}x, {b}i))",
]


@pytest.fixture(scope="module")
def engines():
    con = matchsql.connect(demo=False)
    ref = duckdb.connect()
    ref.execute(ROWS)
    yield con, ref
    con.close()
    ref.close()


def _load(con, ref, w: str) -> None:
    """The events with DuckDB's value ``w`` per row, into the matchsql connection."""
    table = ref.sql(f"SELECT *, {w} AS w FROM ev").to_arrow_table()
    con.duckdb.register("ev_w_arrow", table)
    con.sql("CREATE OR REPLACE TABLE ev_w AS SELECT * FROM ev_w_arrow")


@pytest.mark.parametrize("pair", PAIRS)
def test_function_of_two_rows(engines, pair):
    """``PATTERN (A B)``: A is row 2k-1 of its partition and B row 2k, so every pair
    matches exactly when the DEFINE's value at B equals DuckDB's over LAG at B."""
    con, ref = engines
    window = "OVER (PARTITION BY p ORDER BY ts)"
    oracle = pair.format(a="__lag_", b="")
    for column in ("s", "n", "d", "i", "x"):
        oracle = oracle.replace(f"__lag_{column}", f"lag({column}) {window}")
    _load(con, ref, oracle)
    got = con.sql(
        f"SELECT p, first_ts, last_ts FROM ev_w MATCH_RECOGNIZE (PARTITION BY p "
        f"ORDER BY ts MEASURES FIRST(ts) AS first_ts, LAST(ts) AS last_ts "
        f"PATTERN (A B) DEFINE B AS ({pair.format(a='A.', b='B.')}) "
        "IS NOT DISTINCT FROM B.w) ORDER BY p, first_ts"
    ).fetchall()
    sizes = dict(ref.sql("SELECT p, count(*) FROM ev GROUP BY p").fetchall())
    want = [(p, k, k + 1) for p in sorted(sizes) for k in range(1, sizes[p], 2)]
    assert got == want


#: Aggregates the engine does not keep itself, over the rows of A so far.
AGGREGATES = [
    "median(A.x)",
    "quantile_cont(A.x, 0.25)",
    "mode(A.s)",
    "stddev_samp(A.x)",
    "string_agg(A.s, ',' ORDER BY A.ts DESC)",
    "list(A.i ORDER BY A.ts)",
    "count(DISTINCT A.s)",
    "avg(DISTINCT A.x)",
    "arg_max(A.n, A.x)",
    "histogram(A.s)",
    "kurtosis(A.x)",
    "sum(A.i) FILTER (WHERE A.i > 0)",
    "max(length(A.n))",
    "entropy(A.s)",
    "list(DISTINCT A.s ORDER BY A.s)",
    "product(A.i)",
]


@pytest.mark.parametrize("call", AGGREGATES)
def test_running_aggregate_in_define(engines, call):
    """``PATTERN (A+)``: each row is admitted when the running aggregate over A, this row
    included, equals DuckDB's window frame from the partition's first row to it (floats
    to 12 digits); every row agrees exactly when each partition is one match."""
    con, ref = engines
    plain = call.replace("A.", "")
    _load(
        con,
        ref,
        f"{plain} OVER (PARTITION BY p ORDER BY ts ROWS BETWEEN UNBOUNDED "
        "PRECEDING AND CURRENT ROW)",
    )
    numeric = ref.execute(f"SELECT typeof({plain}) FROM ev").fetchall()[0][0] == "DOUBLE"
    same = (
        f"(abs({call} - A.w) <= 1e-12 * greatest(1, abs(A.w)) OR "
        f"({call} IS NULL AND A.w IS NULL) OR (isnan({call}) AND isnan(A.w)))"
        if numeric
        else f"{call} IS NOT DISTINCT FROM A.w"
    )
    got = con.sql(
        f"SELECT p, n FROM ev_w MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        f"MEASURES COUNT(*) AS n PATTERN (A+) DEFINE A AS {same}) "
        "ORDER BY p"
    ).fetchall()
    assert got == ref.sql("SELECT p, count(*) FROM ev GROUP BY p ORDER BY p").fetchall()


def test_two_rows_explain_and_error(engines):
    """Such a DEFINE runs on the reference path, and DuckDB's runtime error names the
    expression as written."""
    con, ref = engines
    _load(con, ref, "0")
    plan = "\n".join(
        r[0]
        for r in con.sql(
            "EXPLAIN SELECT * FROM ev_w MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
            "MEASURES COUNT(*) AS c PATTERN (A B) DEFINE B AS levenshtein(A.s, B.s) < 3)"
        ).fetchall()
    )
    assert "path: reference" in plan
    with pytest.raises(matchsql.Error, match="(?i)hamming"):
        con.sql(
            "SELECT * FROM ev_w MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
            "MEASURES COUNT(*) AS c PATTERN (A B) DEFINE B AS hamming(A.s, B.s) < 3)"
        ).fetchall()
