"""Row pattern recognition expressions in MEASURES and DEFINE.

Navigation (PREV/NEXT physical, FIRST/LAST logical, nested), pattern
variable references (``A.x`` is the last row mapped to A *so far*),
CLASSIFIER, MATCH_NUMBER, running aggregates, SUBSET, RUNNING vs FINAL,
NULLs, and values of several types.

Most measure cases share one input, the "dip" table ``t(id, x)``::

    id:  1   2   3   4   5   6
    x:  10   8   6   9  12   7

with ``PATTERN (A B+ C+)`` and ``B AS x < PREV(x)``, ``C AS x > PREV(x)``:
the only match is rows 1-5 labelled A B B C C (row 6 falls, so C stops at
row 5; the search from row 6 finds no B). Values below are read off that
table by hand.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import matchsql

from .case import Case, rows, table

DIP = table("t", "id INTEGER, x INTEGER", [(1, 10), (2, 8), (3, 6), (4, 9), (5, 12), (6, 7)])
DIP_DEFINE = "B AS x < PREV(x), C AS x > PREV(x)"


def numbers(xs: list[int | None], name: str = "t") -> tuple[str, ...]:
    """Table ``name(id INTEGER, x INTEGER)`` with ids from 1."""
    return table(name, "id INTEGER, x INTEGER", [(i, x) for i, x in enumerate(xs, 1)])


def dip_one(name: str, measures: str, expected: tuple, why: str) -> Case:
    """ONE ROW PER MATCH over the dip table: the single match's measures."""
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        f"  MEASURES {measures}\n"
        "  ONE ROW PER MATCH\n"
        "  PATTERN (A B+ C+)\n"
        f"  DEFINE {DIP_DEFINE}\n"
        ")"
    )
    return Case(name, DIP, query, [expected], why, tags=("measures",))


def dip_all(name: str, measure: str, values: list, why: str) -> Case:
    """ALL ROWS PER MATCH over the dip table: ``(id, m)`` for rows 1-5."""
    query = (
        "SELECT id, m FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        f"  MEASURES {measure} AS m\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A B+ C+)\n"
        f"  DEFINE {DIP_DEFINE}\n"
        ") ORDER BY id"
    )
    return Case(
        name,
        DIP,
        query,
        [(i, v) for i, v in enumerate(values, 1)],
        why,
        tags=("measures", "running"),
    )


def define_case(
    name: str,
    xs: list[int | None],
    pattern: str,
    define: str,
    spec: list[tuple],
    why: str,
    *,
    skip: str = "PAST LAST ROW",
    subset: str = "",
) -> Case:
    """ONE ROW PER MATCH over ``numbers(xs)``: ``(mn, first id, last id)`` per match."""
    subset_clause = f"  SUBSET {subset}\n" if subset else ""
    query = (
        "SELECT mn, fid, lid FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, FIRST(id) AS fid, LAST(id) AS lid\n"
        "  ONE ROW PER MATCH\n"
        f"  AFTER MATCH SKIP {skip}\n"
        f"  PATTERN ({pattern})\n"
        f"{subset_clause}"
        f"  DEFINE {define}\n"
        ") ORDER BY mn"
    )
    return Case(name, numbers(xs), query, spec, why, tags=("define",))


def define_all(
    name: str,
    xs: list[int | None],
    pattern: str,
    define: str,
    labels: str,
    why: str,
    *,
    subset: str = "",
) -> Case:
    """ALL ROWS PER MATCH over ``numbers(xs)``: ``(id, mn, classifier)``; ``labels`` like
    ``"1A 2B | 4A"``."""
    query = (
        "SELECT id, mn, cls FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls\n"
        "  ALL ROWS PER MATCH\n"
        f"  PATTERN ({pattern})\n"
        + (f"  SUBSET {subset}\n" if subset else "")
        + f"  DEFINE {define}\n"
        ") ORDER BY mn, id"
    )
    return Case(name, numbers(xs), query, rows(labels), why, tags=("define",))


ONE_ROW_MEASURES = [
    dip_one("measure_variable_column", "A.x AS ax", (10,), "A is row 1"),
    dip_one("measure_last_b", "B.x AS bx", (6,), "B.x is the last B row, row 3"),
    dip_one("measure_first_b", "FIRST(B.x) AS fb", (8,), "first B row is row 2"),
    dip_one("measure_last_b_explicit", "LAST(B.x) AS lb", (6,), "same as B.x"),
    dip_one(
        "measure_universal_column",
        "x AS lx",
        (12,),
        "an unqualified column is the last row of the match (final semantics)",
    ),
    dip_one("measure_first_universal", "FIRST(x) AS fx", (10,), "first row of the match"),
    dip_one(
        "measure_last_universal_offset",
        "LAST(x, 1) AS lx1",
        (9,),
        "one row before the last row of the match",
    ),
    dip_one(
        "measure_first_universal_offset", "FIRST(x, 1) AS fx1", (8,), "the second row of the match"
    ),
    dip_one(
        "measure_first_offset_out_of_range",
        "FIRST(x, 5) AS fx5",
        (None,),
        "the match has five rows, offsets 0-4",
    ),
    dip_one(
        "measure_last_offset_variable", "LAST(B.x, 1) AS lb1", (8,), "second-to-last B row is row 2"
    ),
    dip_one(
        "measure_last_offset_variable_out_of_range",
        "LAST(B.x, 2) AS lb2",
        (None,),
        "only two B rows",
    ),
    dip_one("measure_first_c", "FIRST(C.x) AS fc", (9,), "C rows are 4 and 5"),
    dip_one("measure_count_star", "COUNT(*) AS n", (5,), "five rows in the match"),
    dip_one("measure_count_variable_star", "COUNT(B.*) AS nb", (2,), "two B rows"),
    dip_one("measure_count_variable_column", "COUNT(C.x) AS nc", (2,), "two non-null C values"),
    dip_one("measure_sum", "SUM(x) AS s", (45,), "10+8+6+9+12"),
    dip_one("measure_sum_variable", "SUM(B.x) AS s", (14,), "8+6"),
    dip_one("measure_avg_variable", "AVG(C.x) AS a", (10.5,), "(9+12)/2"),
    dip_one("measure_min", "MIN(x) AS lo", (6,), "the bottom of the dip"),
    dip_one("measure_max_variable", "MAX(B.x) AS hi", (8,), "largest B value"),
    dip_one("measure_classifier", "CLASSIFIER() AS c", ("C",), "the last row is a C"),
    dip_one(
        "measure_classifier_variable",
        "CLASSIFIER(B) AS c",
        ("B",),
        "the last B row is classified B",
    ),
    dip_one("measure_match_number", "MATCH_NUMBER() AS mn", (1,), "the only match"),
    dip_one("measure_prev", "PREV(x) AS p", (9,), "the row before the last row (row 4)"),
    dip_one(
        "measure_next", "NEXT(x) AS nx", (7,), "physical navigation may leave the match: row 6"
    ),
    dip_one("measure_next_past_partition", "NEXT(x, 2) AS nx2", (None,), "row 7 does not exist"),
    dip_one(
        "measure_prev_before_partition", "PREV(A.x) AS pa", (None,), "A is row 1; there is no row 0"
    ),
    dip_one(
        "measure_prev_offset_variable",
        "PREV(B.x, 2) AS pb",
        (10,),
        "last B is row 3; two rows back is row 1",
    ),
    dip_one("measure_prev_zero", "PREV(x, 0) AS p0", (12,), "offset 0 is the row itself"),
    dip_one(
        "measure_nested_prev_last",
        "PREV(LAST(B.x, 1), 1) AS v",
        (10,),
        "LAST(B.x, 1) is row 2; one row before is row 1",
    ),
    dip_one(
        "measure_nested_next_first",
        "NEXT(FIRST(C.x), 1) AS v",
        (12,),
        "first C is row 4; next is row 5",
    ),
    dip_one(
        "measure_nested_prev_first_outside",
        "PREV(FIRST(x), 1) AS v",
        (None,),
        "first row of the match is row 1; nothing before it",
    ),
    dip_one(
        "measure_nested_next_last_outside",
        "NEXT(LAST(x), 1) AS v",
        (7,),
        "the row after the match, row 6",
    ),
    dip_one(
        "measure_nested_out_of_range_logical",
        "PREV(FIRST(B.x, 5), 1) AS v",
        (None,),
        "the logical step fails, so the whole navigation is NULL",
    ),
    dip_one(
        "measure_final_equals_running_one_row",
        "FINAL LAST(x) AS f, RUNNING LAST(x) AS r",
        (12, 12),
        "in ONE ROW PER MATCH running and final are both evaluated at the last row",
    ),
    dip_one("measure_expression", "LAST(C.x) - FIRST(B.x) AS rise", (4,), "12 - 8"),
    dip_one(
        "measure_arithmetic_inside_navigation",
        "FIRST(B.x * 2 + 1) AS v",
        (17,),
        "navigation applies to the whole expression: 8*2+1",
    ),
    dip_one(
        "measure_several",
        "A.x AS start_x, MIN(x) AS bottom, LAST(C.x) AS top",
        (10, 6, 12),
        "several measures in declaration order",
    ),
    dip_one(
        "measure_case_expression",
        "CASE WHEN LAST(C.x) > A.x THEN 'up' ELSE 'down' END AS trend",
        ("up",),
        "12 > 10",
    ),
    dip_one("measure_count_universal_column", "COUNT(x) AS n", (5,), "no NULLs"),
    dip_one(
        "measure_classifier_in_navigation",
        "FIRST(CLASSIFIER()) AS c",
        ("A",),
        "the first row's classifier",
    ),
    dip_one(
        "measure_classifier_last_offset",
        "LAST(CLASSIFIER(), 2) AS c",
        ("B",),
        "two rows before the last: row 3, a B",
    ),
]

RUNNING_FINAL = [
    dip_all(
        "all_rows_running_count", "RUNNING COUNT(*)", [1, 2, 3, 4, 5], "running count at each row"
    ),
    dip_all(
        "all_rows_final_count",
        "FINAL COUNT(*)",
        [5, 5, 5, 5, 5],
        "final count is the whole match at every row",
    ),
    dip_all("all_rows_default_running", "COUNT(*)", [1, 2, 3, 4, 5], "MEASURES default to RUNNING"),
    dip_all(
        "all_rows_classifier", "CLASSIFIER()", ["A", "B", "B", "C", "C"], "the label of each row"
    ),
    dip_all("all_rows_a_column", "A.x", [10, 10, 10, 10, 10], "A is row 1 for all rows"),
    dip_all(
        "all_rows_b_column_running",
        "B.x",
        [None, 8, 6, 6, 6],
        "no B yet at row 1; then the last B so far",
    ),
    dip_all("all_rows_c_column_running", "C.x", [None, None, None, 9, 12], "C appears from row 4"),
    dip_all(
        "all_rows_final_last_c",
        "FINAL LAST(C.x)",
        [12, 12, 12, 12, 12],
        "final: the last C of the match",
    ),
    dip_all(
        "all_rows_final_first_c",
        "FINAL FIRST(C.x)",
        [9, 9, 9, 9, 9],
        "final: the first C of the match, even on rows before it",
    ),
    dip_all(
        "all_rows_running_first_c",
        "FIRST(C.x)",
        [9, 9, 9, 9, 9],
        "FIRST counts from the match start over the whole match even under RUNNING "
        "(Trino resolves it so); the first C is row 4 also on rows 1-3",
    ),
    dip_all("all_rows_running_sum", "SUM(x)", [10, 18, 24, 33, 45], "running total"),
    dip_all("all_rows_final_sum", "FINAL SUM(x)", [45, 45, 45, 45, 45], "whole-match total"),
    dip_all(
        "all_rows_running_avg_b",
        "AVG(B.x)",
        [None, 8.0, 7.0, 7.0, 7.0],
        "average of the B rows so far; NULL over no rows",
    ),
    dip_all("all_rows_running_min", "MIN(x)", [10, 8, 6, 6, 6], "running minimum"),
    dip_all("all_rows_running_max", "MAX(x)", [10, 10, 10, 10, 12], "running maximum"),
    dip_all("all_rows_prev", "PREV(x)", [None, 10, 8, 6, 9], "the physically previous row"),
    dip_all(
        "all_rows_next", "NEXT(x)", [8, 6, 9, 12, 7], "row 5's next row is row 6, outside the match"
    ),
    dip_all("all_rows_match_number", "MATCH_NUMBER()", [1, 1, 1, 1, 1], "one match"),
    dip_all(
        "all_rows_final_last_offset",
        "FINAL LAST(x, 1)",
        [9, 9, 9, 9, 9],
        "the second-to-last row of the whole match",
    ),
    dip_all(
        "all_rows_running_last_offset",
        "LAST(x, 1)",
        [None, 10, 8, 6, 9],
        "the row before the current one within the match",
    ),
    dip_all(
        "all_rows_running_count_b",
        "COUNT(B.*)",
        [0, 1, 2, 2, 2],
        "count of B rows so far (0, not NULL, before any)",
    ),
    dip_all("all_rows_final_count_b", "FINAL COUNT(B.*)", [2, 2, 2, 2, 2], "two B rows"),
    dip_all(
        "all_rows_classifier_of_variable",
        "CLASSIFIER(B)",
        [None, "B", "B", "B", "B"],
        "NULL until a B has been matched",
    ),
    dip_all("all_rows_unqualified_column", "x", [10, 8, 6, 9, 12], "running: the current row"),
    dip_all(
        "all_rows_running_explicit_last",
        "RUNNING LAST(x)",
        [10, 8, 6, 9, 12],
        "running LAST is the current row",
    ),
    dip_all(
        "all_rows_final_last_universal",
        "FINAL LAST(x)",
        [12, 12, 12, 12, 12],
        "the match's last row",
    ),
    dip_all(
        "all_rows_mixed_running_final",
        "FINAL MAX(x) - RUNNING MAX(x)",
        [2, 2, 2, 2, 0],
        "distance from the running max to the final max",
    ),
    dip_all(
        "all_rows_running_first",
        "FIRST(x)",
        [10, 10, 10, 10, 10],
        "first row of the match, known from the start",
    ),
]

DEFINE_CASES = [
    define_case(
        "define_variable_is_last_so_far",
        [5, 7, 6],
        "A+ B",
        "A AS x > 0, B AS x < A.x",
        [(1, 1, 3)],
        "at row 3, A.x is the last A (row 2, 7), and 6 < 7; the first A (5) would fail",
    ),
    define_case(
        "define_first_of_variable",
        [5, 7, 4],
        "A+ B",
        "A AS x > 0, B AS x < FIRST(A.x)",
        [(1, 1, 3)],
        "A+ first takes row 3 too and fails at the end, then gives it to B: 4 < 5",
    ),
    define_case(
        "define_own_variable_is_current_row",
        [1, 2, 3, 2, 5],
        "A+",
        "A AS A.x > PREV(A.x)",
        [(1, 2, 3), (2, 5, 5)],
        "inside A's own condition A.x is the current row",
    ),
    define_case(
        "define_count_star",
        [1, 1, 1, 1],
        "A+",
        "A AS COUNT(*) <= 2",
        [(1, 1, 2), (2, 3, 4)],
        "COUNT(*) counts the match's rows including the current one",
    ),
    define_all(
        "define_count_variable",
        [1, 1, 1, 1, 1],
        "(A | B)+",
        "A AS COUNT(A.*) <= 2",
        "1A 2A 3B 4B 5B",
        "a third A would make COUNT(A.*) 3, so later rows fall to the undefined B",
    ),
    define_case(
        "define_running_sum",
        [3, 4, 5, 2, 9],
        "A+",
        "A AS SUM(x) <= 10",
        [(1, 1, 2), (2, 3, 4), (3, 5, 5)],
        "3+4 = 7 then 12 breaks; 5+2 then 16 breaks; 9",
    ),
    define_case(
        "define_running_avg",
        [10, 20, 30, 9, 5],
        "A+ B",
        "A AS x >= 10, B AS x < AVG(A.x) / 2",
        [(1, 1, 4)],
        "the A rows average 20, and 9 < 10",
    ),
    define_case(
        "define_max_over_subset",
        [1, 5, 4, 6],
        "A B C",
        "C AS x > MAX(U.x)",
        [(1, 2, 4)],
        "from row 1: 4 > max(1, 5) fails; from row 2: 6 > max(5, 4)",
        subset="U = (A, B)",
    ),
    define_case(
        "define_min_over_variable",
        [9, 5, 7, 3, 8],
        "A+ B",
        "B AS x > MIN(A.x) + 3",
        [(1, 1, 5)],
        "A+ takes rows 1-4 (min 3), then 8 > 6",
    ),
    define_all(
        "define_prev_classifier",
        [7, 1, 1, 8, 1],
        "(A | B)+",
        "A AS x > 5, B AS PREV(CLASSIFIER()) = 'A'",
        "1A 2B | 4A 5B",
        "B only right after an A; from row 3 the previous row is outside the match, "
        "so its classifier is NULL",
    ),
    define_all(
        "define_classifier_is_tentative_label",
        [1, 2],
        "(A | B)+",
        "A AS CLASSIFIER() = 'B'",
        "1B 2B",
        "while A's condition is evaluated the current row is labelled A, so it is false",
    ),
    define_case(
        "define_next",
        [1, 2, 3, 2],
        "A+",
        "A AS NEXT(x) > x",
        [(1, 1, 2)],
        "rows 1 and 2 rise to their successor; row 4 has no next row (NULL)",
    ),
    define_case(
        "define_prev_offset",
        [5, 1, 6, 7, 2],
        "A",
        "A AS x > PREV(x, 2)",
        [(1, 3, 3), (2, 4, 4)],
        "6 > 5 and 7 > 1; rows 1-2 have no row two back",
    ),
    define_case(
        "define_prev_zero",
        [4, 4],
        "A",
        "A AS PREV(x, 0) = x",
        [(1, 1, 1), (2, 2, 2)],
        "PREV(x, 0) is the current row",
    ),
    define_case(
        "define_first_universal",
        [5, 6, 7, 4, 8],
        "X A+",
        "A AS x > FIRST(x)",
        [(1, 1, 3), (2, 4, 5)],
        "FIRST(x) is the match's first row: 5, then 4",
    ),
    define_case(
        "define_last_offset_universal",
        [1, 2, 3, 1],
        "X A+",
        "A AS x > LAST(x, 1)",
        [(1, 1, 3)],
        "LAST(x, 1) is the row before the current one within the match",
    ),
    define_case(
        "define_last_offset_stays_in_match",
        [3, 1, 2],
        "A+",
        "A AS LAST(x, 1) IS NULL OR x > LAST(x, 1)",
        [(1, 1, 1), (2, 2, 3)],
        "at a match's first row LAST(x, 1) is NULL even though a previous row exists",
    ),
    define_case(
        "define_prev_leaves_match",
        [3, 1, 2],
        "A+",
        "A AS PREV(x) IS NULL OR x > PREV(x)",
        [(1, 1, 1), (2, 3, 3)],
        "PREV sees row 1 from row 2 although row 1 is in no current match",
    ),
    define_case(
        "define_first_variable_offset",
        [1, 5, 4, 6],
        "A+",
        "A AS FIRST(A.x, 1) IS NULL OR x <= FIRST(A.x, 1)",
        [(1, 1, 3), (2, 4, 4)],
        "the second A (5) caps later rows; 6 ends the run and starts a new match",
    ),
    define_case(
        "define_nested_navigation",
        [7, 1, 2, 7],
        "A{3} B",
        "B AS x = PREV(LAST(A.x, 1), 1)",
        [(1, 1, 4)],
        "LAST(A.x, 1) is row 2, one row before it is row 1 (7) = row 4 (7)",
    ),
    define_case(
        "define_nested_navigation_fails",
        [7, 1, 2, 1],
        "A{3} B",
        "B AS x = PREV(LAST(A.x, 1), 1)",
        [],
        "row 4 is 1, not 7; from row 2 there is no fifth row",
    ),
    define_case(
        "define_undefined_variable_true",
        [1, 2, 3],
        "A B C",
        "B AS x = 2",
        [(1, 1, 3)],
        "A and C are undefined, so true",
    ),
    define_case(
        "define_null_condition_false",
        [6, None, 7],
        "A+",
        "A AS x > 5",
        [(1, 1, 1), (2, 3, 3)],
        "NULL > 5 is NULL, which is not true",
    ),
    define_case(
        "define_is_null", [6, None, 7], "A+", "A AS x IS NULL", [(1, 2, 2)], "only row 2 is NULL"
    ),
    define_case(
        "define_prev_null",
        [1, None, 3, 4],
        "A",
        "A AS x > PREV(x)",
        [(1, 4, 4)],
        "comparisons with the NULL row are NULL",
    ),
    define_case(
        "define_coalesce_null",
        [None, 2],
        "A+",
        "A AS COALESCE(x, 0) < 5",
        [(1, 1, 2)],
        "COALESCE turns the NULL into 0",
    ),
    define_case(
        "define_count_column_skips_null",
        [None, None, 1, 2],
        "A+",
        "A AS COUNT(A.x) < 2",
        [(1, 1, 3), (2, 4, 4)],
        "COUNT(A.x) ignores NULLs: rows 1-3 have counts 0, 0, 1; row 4 makes 2 and "
        "starts the next match",
    ),
    define_case(
        "define_boolean_logic",
        [1, 5, 9, 3],
        "A+",
        "A AS x > 2 AND x < 8 OR x = 1",
        [(1, 1, 2), (2, 4, 4)],
        "AND binds tighter than OR: 1 (x = 1), 5 (between), 9 fails, 3 again",
    ),
    define_case(
        "define_not",
        [1, 2, 3],
        "A+",
        "A AS NOT x = 2",
        [(1, 1, 1), (2, 3, 3)],
        "row 2 breaks the run",
    ),
    define_case(
        "define_between_in",
        [1, 4, 6, 9],
        "A B",
        "A AS x BETWEEN 2 AND 5, B AS x IN (6, 7)",
        [(1, 2, 3)],
        "4 is between 2 and 5, 6 is in the list",
    ),
    define_case(
        "define_match_number_reference",
        [1, 1, 1, 1],
        "A+",
        "A AS MATCH_NUMBER() <= 2 AND COUNT(*) <= 1",
        [(1, 1, 1), (2, 2, 2)],
        "only the first two matches may form; rows 3-4 find no match",
    ),
    define_case(
        "define_subset_last",
        [2, 9, 3],
        "A B C",
        "C AS x < U.x",
        [(1, 1, 3)],
        "U.x is the last row in A or B: row 2 (9) > 3",
        subset="U = (A, B)",
    ),
    define_all(
        "define_count_subset",
        [1, 1, 1, 1, 1],
        "(A | B)+",
        "A AS COUNT(U.*) < 3",
        "1A 2A 3B 4B 5B",
        "COUNT(U.*) includes the current row (tentatively A): a third U row fails A",
        subset="U = (A, B)",
    ),
    define_case(
        "define_prev_of_variable_outside",
        [4, 5, 1, 6],
        "A B+",
        "B AS PREV(A.x) < x",
        [(1, 3, 4)],
        "PREV(A.x) is the row before A: none from row 1; 4 < 1 fails from row 2; "
        "5 < 6 holds from row 3",
    ),
    define_case(
        "define_next_of_variable",
        [3, 1, 5],
        "A B",
        "A AS NEXT(A.x) < x",
        [(1, 1, 2)],
        "NEXT looks ahead: row 2 (1) < row 1 (3)",
    ),
]

NULLS_AND_AGGREGATES = [
    Case(
        "aggregates_with_nulls",
        numbers([1, None, 3]),
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES COUNT(x) AS cx, COUNT(*) AS n, SUM(x) AS s, AVG(x) AS a, MIN(x) AS lo\n"
        "  PATTERN (A+)\n"
        "  DEFINE A AS TRUE\n"
        ")",
        [(2, 3, 4, 2.0, 1)],
        "aggregates skip the NULL; COUNT(*) does not",
        tags=("measures",),
    ),
    Case(
        "empty_match_measures_one_row",
        numbers([1]),
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS c, COUNT(*) AS n, SUM(x) AS s,\n"
        "           FIRST(x) AS f, x AS lx, PREV(x) AS p\n"
        "  ONE ROW PER MATCH\n"
        "  PATTERN (A*)\n"
        "  DEFINE A AS x > 5\n"
        ")",
        [(1, None, 0, None, None, None, None)],
        "an empty match: navigation, columns and CLASSIFIER are NULL, COUNT is 0, "
        "SUM over no rows is NULL, MATCH_NUMBER is still 1",
        tags=("measures", "empty"),
    ),
    Case(
        "empty_match_all_rows_input_columns",
        numbers([1, 7]),
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS c, COUNT(*) AS n, x AS mx\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A*)\n"
        "  DEFINE A AS x > 5\n"
        ") ORDER BY mn",
        [(1, 1, None, 0, None, 1), (2, 2, "A", 1, 7, 7)],
        "the empty match at row 1 outputs row 1's input columns with empty-match measures "
        "(measure x AS mx is NULL, the input column x is 1)",
        tags=("measures", "empty"),
    ),
    Case(
        "unmatched_row_measures_null",
        numbers([7, 1]),
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS c, COUNT(*) AS n\n"
        "  ALL ROWS PER MATCH WITH UNMATCHED ROWS\n"
        "  PATTERN (A+)\n"
        "  DEFINE A AS x > 5\n"
        ") ORDER BY id",
        [(1, 1, "A", 1, 7), (2, None, None, None, 1)],
        "an unmatched row has every measure NULL, even MATCH_NUMBER and COUNT",
        tags=("measures", "unmatched"),
    ),
    Case(
        "exclusion_does_not_affect_measures",
        numbers([1, 2, 3, 4]),
        "SELECT id, rc, fc FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES RUNNING COUNT(*) AS rc, FINAL COUNT(*) AS fc\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A {- B+ -} C)\n"
        "  DEFINE B AS x IN (2, 3), C AS x = 4\n"
        ") ORDER BY id",
        [(1, 1, 4), (4, 4, 4)],
        "rows 2-3 are hidden but still counted",
        tags=("measures", "exclusion"),
    ),
    Case(
        "running_measure_on_skip_to_next",
        numbers([1, 2, 3]),
        "SELECT mn, id, s FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, SUM(x) AS s\n"
        "  ALL ROWS PER MATCH\n"
        "  AFTER MATCH SKIP TO NEXT ROW\n"
        "  PATTERN (A{2})\n"
        "  DEFINE A AS TRUE\n"
        ") ORDER BY mn, id",
        [(1, 1, 1), (1, 2, 3), (2, 2, 2), (2, 3, 5)],
        "each match computes its running sum from its own first row",
        tags=("measures",),
    ),
    Case(
        "match_number_counts_empty_matches",
        numbers([1, 9, 1]),
        "SELECT mn, n FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS n\n"
        "  ONE ROW PER MATCH\n"
        "  PATTERN (A*)\n"
        "  DEFINE A AS x > 5\n"
        ") ORDER BY mn",
        [(1, 0), (2, 1), (3, 0)],
        "empty, one-row, empty",
        tags=("measures", "empty"),
    ),
    Case(
        "sum_over_subset_and_count",
        numbers([1, 2, 3, 4]),
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES SUM(U.x) AS su, COUNT(U.*) AS cu, CLASSIFIER(U) AS cl, U.x AS ux,\n"
        "           FIRST(U.x) AS fu\n"
        "  PATTERN (A B C D)\n"
        "  SUBSET U = (B, C)\n"
        "  DEFINE A AS TRUE\n"
        ")",
        [(5, 2, "C", 3, 2)],
        "U is rows 2-3",
        tags=("measures", "subset"),
    ),
    Case(
        "subset_classifier_all_rows",
        numbers([1, 2, 3]),
        "SELECT id, cu FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES CLASSIFIER(U) AS cu\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A B C)\n"
        "  SUBSET U = (A, C)\n"
        "  DEFINE A AS TRUE\n"
        ") ORDER BY id",
        [(1, "A"), (2, "A"), (3, "C")],
        "the last row so far that is in U",
        tags=("measures", "subset"),
    ),
    Case(
        "two_subsets",
        numbers([1, 2, 3]),
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES SUM(U.x) AS su, SUM(W.x) AS sw\n"
        "  PATTERN (A B C)\n"
        "  SUBSET U = (A, B), W = (B, C)\n"
        "  DEFINE A AS TRUE\n"
        ")",
        [(3, 5)],
        "1+2 and 2+3",
        tags=("measures", "subset"),
    ),
    Case(
        "skip_to_last_subset",
        numbers([1, 2, 3, 4, 5]),
        "SELECT mn, fid, lid FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, FIRST(id) AS fid, LAST(id) AS lid\n"
        "  AFTER MATCH SKIP TO LAST U\n"
        "  PATTERN (A B? C)\n"
        "  SUBSET U = (B, C)\n"
        "  DEFINE A AS TRUE, B AS x = 0\n"
        ") ORDER BY mn",
        [(1, 1, 2), (2, 2, 3), (3, 3, 4), (4, 4, 5)],
        "B never matches, but the subset still has C; each match resumes at its C",
        tags=("skip", "subset"),
    ),
    Case(
        "skip_to_first_subset",
        numbers([1, 2, 3, 4, 5]),
        "SELECT mn, fid, lid FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, FIRST(id) AS fid, LAST(id) AS lid\n"
        "  AFTER MATCH SKIP TO FIRST U\n"
        "  PATTERN (A B C)\n"
        "  SUBSET U = (B, C)\n"
        "  DEFINE A AS TRUE\n"
        ") ORDER BY mn",
        [(1, 1, 3), (2, 2, 4), (3, 3, 5)],
        "the first U row is each match's second row",
        tags=("skip", "subset"),
    ),
]

TYPES = [
    Case(
        "strings_compare",
        table(
            "w",
            "id INTEGER, word VARCHAR",
            [(1, "apple"), (2, "banana"), (3, "cherry"), (4, "apricot")],
        ),
        "SELECT * FROM w MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES FIRST(word) AS first_word, LAST(word) AS last_word, COUNT(*) AS n\n"
        "  PATTERN (A B+)\n"
        "  DEFINE B AS word > PREV(word)\n"
        ")",
        [("apple", "cherry", 3)],
        "alphabetical run apple < banana < cherry",
        tags=("types",),
    ),
    Case(
        "strings_like",
        table("w", "id INTEGER, word VARCHAR", [(1, "ab"), (2, "ac"), (3, "bd"), (4, "ae")]),
        "SELECT * FROM w MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, LAST(word) AS lw\n"
        "  PATTERN (A+)\n"
        "  DEFINE A AS word LIKE 'a%'\n"
        ") ORDER BY mn",
        [(1, "ac"), (2, "ae")],
        "words starting with a",
        tags=("types",),
    ),
    Case(
        "strings_concat_measure",
        table("w", "id INTEGER, word VARCHAR", [(1, "x"), (2, "y")]),
        "SELECT * FROM w MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES A.word || '-' || B.word AS pair\n"
        "  PATTERN (A B)\n"
        "  DEFINE A AS TRUE\n"
        ")",
        [("x-y",)],
        "string concatenation in a measure",
        tags=("types",),
    ),
    Case(
        "dates",
        table(
            "d",
            "id INTEGER, day DATE",
            "(1, DATE '2024-01-05'), (2, DATE '2024-01-03'), (3, DATE '2024-01-09'), "
            "(4, DATE '2024-01-10')",
        ),
        "SELECT * FROM d MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES FIRST(day) AS first_day, LAST(day) AS last_day\n"
        "  PATTERN (A B+)\n"
        "  DEFINE B AS day > PREV(day)\n"
        ")",
        [(dt.date(2024, 1, 3), dt.date(2024, 1, 10))],
        "row 2 falls back, so the rising run starts at row 2",
        tags=("types",),
    ),
    Case(
        "dates_order_by_date",
        table(
            "d",
            "day DATE, v INTEGER",
            "(DATE '2024-03-02', 2), (DATE '2024-03-01', 1), (DATE '2024-03-03', 3)",
        ),
        "SELECT * FROM d MATCH_RECOGNIZE (\n"
        "  ORDER BY day\n"
        "  MEASURES FIRST(v) AS fv, LAST(v) AS lv\n"
        "  PATTERN (A+)\n"
        "  DEFINE A AS PREV(v) IS NULL OR v = PREV(v) + 1\n"
        ")",
        [(1, 3)],
        "ordered by date the values are 1, 2, 3",
        tags=("types",),
    ),
    Case(
        "timestamps_with_interval",
        table(
            "e",
            "id INTEGER, ts TIMESTAMP",
            "(1, TIMESTAMP '2024-01-01 10:00:00'), (2, TIMESTAMP '2024-01-01 10:03:00'), "
            "(3, TIMESTAMP '2024-01-01 10:07:00'), (4, TIMESTAMP '2024-01-01 10:20:00'), "
            "(5, TIMESTAMP '2024-01-01 10:21:00')",
        ),
        "SELECT * FROM e MATCH_RECOGNIZE (\n"
        "  ORDER BY ts\n"
        "  MEASURES MATCH_NUMBER() AS mn, FIRST(ts) AS t0, LAST(ts) AS t1\n"
        "  PATTERN (A B+)\n"
        "  DEFINE B AS ts <= PREV(ts) + INTERVAL '5' MINUTE\n"
        ") ORDER BY mn",
        [
            (1, dt.datetime(2024, 1, 1, 10, 0), dt.datetime(2024, 1, 1, 10, 7)),
            (2, dt.datetime(2024, 1, 1, 10, 20), dt.datetime(2024, 1, 1, 10, 21)),
        ],
        "gaps of 3 and 4 minutes chain; 13 minutes breaks; then a 1-minute gap",
        tags=("types",),
    ),
    Case(
        "interval_column",
        table(
            "j",
            "id INTEGER, dur INTERVAL",
            "(1, INTERVAL '30' MINUTE), (2, INTERVAL '2' HOUR), "
            "(3, INTERVAL '3' HOUR), (4, INTERVAL '10' MINUTE)",
        ),
        "SELECT * FROM j MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES FIRST(dur) AS d0, LAST(dur) AS d1\n"
        "  PATTERN (A+)\n"
        "  DEFINE A AS dur > INTERVAL '1' HOUR\n"
        ")",
        [(dt.timedelta(hours=2), dt.timedelta(hours=3))],
        "rows 2-3 exceed an hour",
        tags=("types",),
    ),
    Case(
        "decimals_sum",
        table(
            "m", "id INTEGER, price DECIMAL(10, 2)", "(1, 10.25), (2, 11.50), (3, 12.00), (4, 9.99)"
        ),
        "SELECT * FROM m MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES SUM(price) AS total, LAST(price) AS top\n"
        "  PATTERN (A B+)\n"
        "  DEFINE B AS price > PREV(price)\n"
        ")",
        [(Decimal("33.75"), Decimal("12.00"))],
        "10.25 + 11.50 + 12.00, exactly",
        tags=("types",),
    ),
    Case(
        "decimals_compare_literal",
        table("m", "id INTEGER, price DECIMAL(10, 2)", "(1, 10.49), (2, 10.51), (3, 10.50)"),
        "SELECT * FROM m MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, A.price AS p\n"
        "  PATTERN (A)\n"
        "  DEFINE A AS price > 10.50\n"
        ") ORDER BY mn",
        [(1, Decimal("10.51"))],
        "only 10.51 exceeds 10.50",
        tags=("types",),
    ),
    Case(
        "doubles_avg",
        table("f", "id INTEGER, v DOUBLE", "(1, 1.5), (2, 2.5), (3, 0.5)"),
        "SELECT * FROM f MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES AVG(v) AS a, MAX(v) AS hi\n"
        "  PATTERN (A B)\n"
        "  DEFINE B AS v > PREV(v)\n"
        ")",
        [(2.0, 2.5)],
        "mean of 1.5 and 2.5",
        tags=("types",),
    ),
    Case(
        "booleans",
        table("b", "id INTEGER, flag BOOLEAN", "(1, true), (2, true), (3, false), (4, true)"),
        "SELECT * FROM b MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS n\n"
        "  PATTERN (A+)\n"
        "  DEFINE A AS flag\n"
        ") ORDER BY mn",
        [(1, 2), (2, 1)],
        "a boolean column as the condition",
        tags=("types",),
    ),
    Case(
        "bigint_values",
        table("g", "id INTEGER, v BIGINT", "(1, 5000000000), (2, 5000000001)"),
        "SELECT * FROM g MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES LAST(v) - FIRST(v) AS d, SUM(v) AS s\n"
        "  PATTERN (A B)\n"
        "  DEFINE B AS v > PREV(v)\n"
        ")",
        [(1, 10000000001)],
        "values beyond 32 bits",
        tags=("types",),
    ),
    Case(
        "string_classifier_compare",
        table("w", "id INTEGER, word VARCHAR", [(1, "A"), (2, "B"), (3, "A")]),
        "SELECT * FROM w MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS n\n"
        "  PATTERN ((P | Q)+)\n"
        "  DEFINE P AS word = 'A', Q AS word = 'B' AND PREV(CLASSIFIER()) = 'P'\n"
        ") ORDER BY mn",
        [(1, 3)],
        "Q right after a P; rows 1-3 are P Q P",
        tags=("types", "define"),
    ),
]

# NaN is a value, not NULL, and DuckDB orders it above every other number and equal to
# itself; every path must too. The table, ids 1-6:  x = 5, NaN, 4, NaN, NaN, 7.
NAN_TABLE = table(
    "f",
    "id INTEGER, x DOUBLE",
    "(1, 5.0), (2, 'nan'::DOUBLE), (3, 4.0), (4, 'nan'::DOUBLE), (5, 'nan'::DOUBLE), (6, 7.0)",
)


def nan_case(name: str, define: str, measures: str, expected: list[tuple], why: str) -> Case:
    """``A B+`` over the NaN table, every start tried (SKIP TO NEXT ROW)."""
    query = (
        "SELECT * FROM f MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        f"  MEASURES FIRST(id) AS s, {measures}\n"
        "  ONE ROW PER MATCH\n"
        "  AFTER MATCH SKIP TO NEXT ROW\n"
        "  PATTERN (A B+)\n"
        f"  DEFINE B AS {define}\n"
        ") ORDER BY s"
    )
    return Case(name, NAN_TABLE, query, expected, why, tags=("types", "define"))


NANS = [
    nan_case(
        "nan_le_prev",
        "x <= PREV(x)",
        "LAST(id) AS e",
        [(2, 3), (4, 6), (5, 6)],
        "x <= PREV(x) per row: 2 NaN<=5 no, 3 4<=NaN yes, 4 NaN<=4 no, 5 NaN<=NaN yes, "
        "6 7<=NaN yes; so A at 2 takes row 3, A at 4 rows 5-6, A at 5 row 6",
    ),
    nan_case(
        "nan_gt_prev",
        "x > PREV(x)",
        "LAST(id) AS e",
        [(1, 2), (3, 4)],
        "x > PREV(x): 2 NaN>5 yes, 3 no, 4 NaN>4 yes, 5 NaN>NaN no, 6 7>NaN no",
    ),
    nan_case(
        "nan_equals_itself",
        "x = PREV(x)",
        "LAST(id) AS e",
        [(4, 5)],
        "only row 5 equals its predecessor: NaN = NaN",
    ),
    nan_case(
        "nan_register_compare",
        "x < A.x",
        "LAST(id) AS e",
        [(2, 3), (5, 6)],
        "A.x is the start row's x: below NaN are 4 (A at 2) and 7 (A at 5); "
        "nothing is below 5, 4 or NaN at A = 1, 3, 4 on the next row",
    ),
    nan_case(
        "nan_max_min",
        "x > PREV(x) OR x = PREV(x)",
        "MAX(x) > 1000 AS big, MIN(x) < 4.5 AS low, isnan(MIN(x)) AS nan_min",
        [(1, True, False, False), (3, True, True, False), (4, True, False, True)],
        "matches 1-2 (5, NaN), 3-5 (4, NaN, NaN) and 4-5 (NaN, NaN): MAX is NaN, "
        "above 1000; MIN is the least value that is not NaN (5, 4), NaN when all are",
    ),
]

CASES: list[Case] = (
    ONE_ROW_MEASURES + RUNNING_FINAL + DEFINE_CASES + NULLS_AND_AGGREGATES + TYPES + NANS
)

__all__ = ["CASES", "matchsql"]
