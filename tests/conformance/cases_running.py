"""Running aggregates in DEFINE: RUNNING over the rows matched so far, the tested row included.

The rule the expectations are derived from (SQL:2016 as Trino documents it): an
aggregate in DEFINE sees the rows of the match so far, the row being tested
included when it is mapped to one of the aggregate's variables; NULL arguments
are ignored (``SUM``/``AVG``/``MIN``/``MAX`` of no value are NULL, ``COUNT`` is 0),
``AVG`` is the sum over the count, and numbers order as in DuckDB (NaN above
every other number and equal to itself). The compiled and GPU paths carry these
as per-thread accumulators, so some cases are built to tell apart threads whose
histories differ only in what they summed.
"""

from __future__ import annotations

import matchsql

from .case import Case, table
from .cases_expressions import define_all, define_case

G = table("g", "id INTEGER, x DOUBLE", "(1, 1.0), (2, 'nan'::DOUBLE), (3, 2.0), (4, 0.5)")


def doubles(name: str, define: str, expected: list[tuple], why: str) -> Case:
    """``A+`` over table ``g`` (a NaN in row 2): ``(mn, first id, last id)`` per match."""
    query = (
        "SELECT mn, fid, lid FROM g MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, FIRST(id) AS fid, LAST(id) AS lid\n"
        "  ONE ROW PER MATCH\n"
        "  PATTERN (A+)\n"
        f"  DEFINE A AS {define}\n"
        ") ORDER BY mn"
    )
    return Case(name, G, query, expected, why, tags=("define", "running", "types"))


CASES: list[Case] = [
    define_case(
        "running_sum_skips_nulls",
        [2, None, 3, 4, None, 1],
        "A+",
        "A AS SUM(x) <= 5",
        [(1, 1, 3), (2, 4, 6)],
        "from row 1 the sums are 2, 2 (NULL ignored), 5, then 9 fails; from row 4: 4, 4, 5",
    ),
    define_case(
        "running_sum_of_nulls_is_null",
        [None, None, 3, None],
        "A+",
        "A AS SUM(x) IS NULL",
        [(1, 1, 2), (2, 4, 4)],
        "SUM over only NULLs is NULL (rows 1-2); row 3 makes it 3; from row 3 it is "
        "3 at once (no match); row 4 alone is NULL again",
    ),
    define_case(
        "running_count_column_ignores_nulls",
        [1, None, None, 2, 3],
        "A+",
        "A AS COUNT(A.x) <= 2",
        [(1, 1, 4), (2, 5, 5)],
        "COUNT(A.x) counts non-NULL values: 1, 1, 1, 2, then 3 fails at row 5",
    ),
    define_case(
        "running_avg_is_fractional",
        [4, 1, 2, 9, 1],
        "A+",
        "A AS AVG(x) >= 2.5",
        [(1, 1, 2), (2, 4, 5)],
        "averages 4, 2.5, then 7/3 fails; row 3 alone is 2; from row 4: 9, 5",
    ),
    define_case(
        "running_count_of_other_variable",
        [1, 1, 0, 1, 0, 0, 1, 1, 1, 0],
        "A+ B",
        "A AS x > 0, B AS x = 0 AND COUNT(A.*) = 2",
        [(1, 1, 3), (2, 8, 10)],
        "B needs exactly two A rows before it: rows 1-2 then 3; from 4 one A; from 7 "
        "three A rows (backing off leaves a 1 as B); from 8 rows 8-9 then 10",
    ),
    define_case(
        "running_sum_includes_current_row",
        [2, 2, 2],
        "A+ B",
        "A AS x > 0, B AS x * 3 = SUM(x)",
        [(1, 1, 3)],
        "A+ backs off to rows 1-2; at B on row 3 SUM(x) is 2+2+2 = 6 = 3*2 (without "
        "the tested row it would be 4, and no match)",
    ),
    define_case(
        "running_min_max_over_subset",
        [5, 3, 1, 2, 6],
        "A B+ C",
        "B AS x < A.x, C AS MAX(U.x) - MIN(U.x) = 4",
        [(1, 1, 5)],
        "U = (A, B) is rows 1-4 when C tests row 5: max 5 - min 1 = 4 (C's own 6 is not in U)",
        subset="U = (A, B)",
    ),
    define_case(
        "running_sum_filter",
        [5, 1, 2, 4, 3, 1],
        "A+",
        "A AS SUM(x) FILTER (WHERE x > 2) < 8",
        [(1, 1, 3), (2, 4, 6)],
        "only rows with x > 2 are summed: 5, 5, 5, then 9 fails; from row 4: 4, 7, 7",
    ),
    define_all(
        "running_sum_tells_threads_apart",
        [3, 2, 4, 0],
        "(A | B)+ C",
        "A AS x > 0, C AS SUM(A.x) = 5",
        "1A 2A 3B 4C",
        "paths in preference order: A A A then C needs 9 = 5, no; A A B then C: 3+2 = 5. "
        "The two paths reach row 4 in the same state with different sums",
    ),
    doubles(
        "running_max_nan_is_greatest",
        "MAX(x) < 10",
        [(1, 1, 1), (2, 3, 4)],
        "MAX(1, NaN) is NaN, which is not < 10; row 2 alone too; from row 3: 2, 2",
    ),
    doubles(
        "running_min_ignores_nan",
        "MIN(x) >= 1",
        [(1, 1, 3)],
        "MIN(1, NaN) = 1 (NaN is the greatest), MIN(1, NaN, 2) = 1, then 0.5 fails; "
        "row 4 alone is 0.5",
    ),
    doubles(
        "running_sum_nan_equals_itself",
        "SUM(x) = SUM(x)",
        [(1, 1, 4)],
        "the sum is NaN from row 2 on, and NaN = NaN holds in DuckDB's order",
    ),
]

__all__ = ["CASES", "matchsql"]
