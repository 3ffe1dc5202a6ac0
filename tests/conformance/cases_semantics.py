"""Row pattern recognition semantics added late: ``count()``, ``$`` before a variable,
CLASSIFIER and MATCH_NUMBER inside aggregates, uncorrelated subqueries.

Most measure cases reuse the "dip" table of :mod:`cases_expressions`
(``id 1..6``, ``x 10 8 6 9 12 7``; ``PATTERN (A B+ C+)`` labels rows 1-5
``A B B C C``). Subquery cases add a second table ``o(y)`` that the
subqueries read; DuckDB evaluates each subquery once, before matching, and
the pattern sees its value as a constant (Trino allows only uncorrelated
subqueries in row pattern recognition, and so does matchsql).

Every expectation below is derived by hand from the rules in the ``why``.
"""

from __future__ import annotations

from decimal import Decimal

import matchsql

from .case import Case, all_query, letters, one, one_query, partitioned_letters, rows, table
from .cases_expressions import DIP, define_all, define_case, dip_all, dip_one, numbers

# -- count() with no argument ------------------------------------------------------------------

COUNT_NO_ARGUMENT = [
    dip_one(
        "count_no_argument", "count() AS n", (5,), "count() is count(*): the match has five rows"
    ),
    dip_one(
        "count_no_argument_minus_variable",
        "count() - count(B.*) AS n",
        (3,),
        "five rows in the match, two of them B: 5 - 2",
    ),
    dip_all(
        "count_no_argument_running",
        "count()",
        [1, 2, 3, 4, 5],
        "in ALL ROWS PER MATCH count() is running: rows so far, current included",
    ),
    dip_all(
        "count_no_argument_final",
        "FINAL count()",
        [5, 5, 5, 5, 5],
        "FINAL count() sees the whole five-row match on every row",
    ),
    define_case(
        "count_no_argument_define",
        [1, 2, 3, 4, 5, 6, 7],
        "A+",
        "A AS count() <= 3",
        [(1, 1, 3), (2, 4, 6), (3, 7, 7)],
        "in DEFINE count() counts the match so far with the current row: a fourth "
        "row would make it 4, so each match stops after three rows; row 7 is alone",
    ),
    define_all(
        "count_no_argument_define_variable",
        [5, 5, 5, 5],
        "A+ B",
        "A AS count() < 3, B AS count() = 3",
        "1A 2A 3B",
        "A is true while the match has fewer than three rows; the third row must "
        "be B (count() = 3); row 4 starts a match that no B can end (no fifth row), "
        "and unmatched rows are not output",
    ),
]

# -- $ written directly before a variable ---------------------------------------------------------


def _partitioned_end(pattern: str) -> str:
    return (
        "SELECT p, mn, fid, lid FROM s MATCH_RECOGNIZE (\n"
        "  PARTITION BY p ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, FIRST(id) AS fid, LAST(id) AS lid\n"
        "  ONE ROW PER MATCH\n"
        f"  PATTERN ({pattern})\n"
        "  DEFINE B AS v = 'b'\n"
        ") ORDER BY p, mn"
    )


DOLLAR_ANCHOR = [
    Case(
        "dollar_before_variable_never_matches",
        letters("abab"),
        all_query("A $B"),
        [],
        "$ is the end of the partition; no row can follow it, so A $B never matches "
        "(the tokenizer must read $B as the anchor and B, not a dollar-quoted string)",
    ),
    Case(
        "caret_or_dollar_c_dollar",
        letters("bcbc"),
        one_query("^B | $C$"),
        one("1:1-1"),
        "^B matches row 1 at the partition start; $C$ would need a C row after the "
        "partition end, so no other row starts a match",
    ),
    Case(
        "dollar_c_dollar_alone",
        letters("cc"),
        one_query("$C$"),
        [],
        "$C$ places the end anchor before C: never satisfiable",
    ),
    Case(
        "dollar_after_variable",
        letters("aba"),
        one_query("A $"),
        one("1:3-3"),
        "only row 3 is an A that is also the last row of the partition",
    ),
    Case(
        "greedy_run_to_the_end",
        letters("aabaa"),
        one_query("A+ $"),
        one("1:4-5"),
        "the A runs at rows 1-2 stop before the end (row 3 is b); the run 4-5 reaches it",
    ),
    Case(
        "caret_and_dollar_whole_partition",
        letters("aaa"),
        one_query("^A+$"),
        one("1:1-3"),
        "^A+$ needs the whole partition to be A rows: rows 1-3",
    ),
    Case(
        "caret_and_dollar_no_whole_partition",
        letters("aab"),
        one_query("^A+$"),
        [],
        "row 3 is b, so no A run covers the partition from start to end",
    ),
    Case(
        "dollar_in_group_before_variable",
        letters("ab"),
        all_query("(A | $) B"),
        rows("1A 2B"),
        "the group prefers A; at row 1 A matches and B matches row 2; the $ branch could "
        "only hold at the end, where no B can follow",
    ),
    Case(
        "dollar_anchor_per_partition",
        partitioned_letters({"x": "ab", "y": "ba"}),
        _partitioned_end("B $"),
        [("x", 1, 2, 2)],
        "$ is the end of each partition: in x the b is the last row (id 2); in y the b "
        "(id 3) is followed by an a",
    ),
    Case(
        "dollar_string_in_define_with_dollar_anchor",
        letters("ba"),
        one_query("A $", defines="A AS v = $$a$$"),
        one("1:2-2"),
        "outside PATTERN $$a$$ is still DuckDB's dollar-quoted string 'a'; inside it $ "
        "is the anchor: the last row, an a, is the only match",
    ),
    Case(
        "two_dollars_in_a_row",
        letters("ac"),
        all_query("C $ $ A? B?"),
        rows("2C"),
        "an anchor consumes no row, so after the last row both $ hold one after the "
        "other; C at row 2 (the last) matches, A? and B? take nothing",
    ),
    Case(
        "quantified_dollar",
        letters("cc"),
        all_query("C ${2}? A? B?"),
        rows("2C"),
        "${2}? is {2} made reluctant, still exactly two $: they hold only after the "
        "partition's last row, so C at row 1 fails (row 2 follows) and C at row 2 matches",
    ),
    Case(
        "dollar_or_variable_then_dollar",
        letters("c"),
        all_query("C ($|A) $ A? B?"),
        rows("1C"),
        "at the end of the one-row partition ($|A) takes its first branch, $, and the "
        "second $ holds too; nothing is left for A? B?",
    ),
]

# -- CLASSIFIER() and MATCH_NUMBER() inside aggregates ---------------------------------------------

TWO_PAIRS = numbers([1, 2, 3, 4])


def _pairs_all(measure: str, expected: list, why: str, name: str) -> Case:
    """ALL ROWS PER MATCH over ``t(id, x)`` with ids 1-4, ``PATTERN (A B)``: two matches."""
    query = (
        "SELECT id, m FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        f"  MEASURES {measure} AS m\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A B)\n"
        "  DEFINE A AS true\n"
        ") ORDER BY id"
    )
    return Case(
        name,
        TWO_PAIRS,
        query,
        [(i, v) for i, v in enumerate(expected, 1)],
        why,
        tags=("measures", "aggregates"),
    )


def _pairs_one(measures: str, expected: list[tuple], why: str, name: str) -> Case:
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        f"  MEASURES MATCH_NUMBER() AS mn, {measures}\n"
        "  ONE ROW PER MATCH\n"
        "  PATTERN (A B)\n"
        "  DEFINE A AS true\n"
        ") ORDER BY mn"
    )
    return Case(name, TWO_PAIRS, query, expected, why, tags=("measures", "aggregates"))


CLASSIFIER_MATCH_NUMBER_AGGREGATES = [
    _pairs_all(
        "RUNNING sum(MATCH_NUMBER() * 10)",
        [Decimal(10), Decimal(20), Decimal(20), Decimal(40)],
        "rows 1-2 are match 1 (10, then 10+10), rows 3-4 match 2 (20, then 20+20); "
        "SUM of a BIGINT is a HUGEINT, which reads back as a whole Decimal",
        "match_number_running_sum",
    ),
    _pairs_all(
        "FINAL sum(MATCH_NUMBER())",
        [Decimal(2), Decimal(2), Decimal(4), Decimal(4)],
        "FINAL: both rows of match 1 (1+1), both rows of match 2 (2+2)",
        "match_number_final_sum",
    ),
    _pairs_one(
        "max(MATCH_NUMBER()) AS hi, count(MATCH_NUMBER()) AS n",
        [(1, 1, 2), (2, 2, 2)],
        "MATCH_NUMBER is the same on every row of a match: its max is the number, "
        "and it is counted once per row",
        "match_number_max_count",
    ),
    _pairs_one(
        "avg(MATCH_NUMBER() + x) AS a",
        [(1, 2.5), (2, 5.5)],
        "match 1: (1+1 + 1+2)/2 = 2.5; match 2: (2+3 + 2+4)/2 = 5.5",
        "match_number_avg_with_column",
    ),
    define_case(
        "match_number_define_sum",
        [0, 0, 0, 0],
        "A+",
        "A AS sum(MATCH_NUMBER()) <= 2",
        [(1, 1, 2), (2, 3, 3)],
        "match 1: the running sum of 1 per row allows two rows (1, 2); match 2 "
        "allows one row (2); at row 4 a third match would start with 3 > 2",
    ),
    dip_all(
        "classifier_running_count",
        "count(CLASSIFIER())",
        [1, 2, 3, 4, 5],
        "CLASSIFIER() of every aggregated row is non-NULL: counts the rows so far",
    ),
    dip_all(
        "classifier_running_max",
        "max(CLASSIFIER())",
        ["A", "B", "B", "C", "C"],
        "labels so far A, AB, ABB, ABBC, ABBCC: their greatest",
    ),
    dip_all(
        "classifier_final_min",
        "FINAL min(CLASSIFIER())",
        ["A"] * 5,
        "the smallest label of the whole match A B B C C",
    ),
    dip_all(
        "classifier_count_distinct",
        "count(DISTINCT CLASSIFIER())",
        [1, 2, 2, 3, 3],
        "distinct labels so far: {A}, {A,B}, {A,B}, {A,B,C}, {A,B,C}",
    ),
    dip_all(
        "classifier_string_agg",
        "string_agg(CLASSIFIER(), '')",
        ["A", "AB", "ABB", "ABBC", "ABBCC"],
        "CLASSIFIER() inside an aggregate is evaluated per aggregated row, in match order",
    ),
    dip_all(
        "classifier_array_agg",
        "array_agg(CLASSIFIER())",
        [["A"], ["A", "B"], ["A", "B", "B"], ["A", "B", "B", "C"], ["A", "B", "B", "C", "C"]],
        "the running list of labels",
    ),
    dip_all(
        "classifier_case_inside_sum",
        "sum(CASE WHEN CLASSIFIER() = 'B' THEN x ELSE 0 END)",
        [0, 8, 14, 14, 14],
        "only the B rows (x 8 and 6) add to the running sum",
    ),
    dip_one(
        "classifier_and_match_number_in_one_aggregate",
        "array_agg(CLASSIFIER() || CAST(MATCH_NUMBER() AS VARCHAR)) AS l",
        (["A1", "B1", "B1", "C1", "C1"],),
        "both functions inside one aggregate argument, per row of the only match",
    ),
    dip_one(
        "classifier_aggregate_on_variable",
        "count(B.x) + count(CLASSIFIER()) AS n",
        (7,),
        "two B rows plus five rows of the match",
    ),
    Case(
        "classifier_array_agg_in_define",
        letters("abxbax"),
        all_query(
            "(A | B)+ X",
            defines="A AS v = 'a', B AS v = 'b', "
            "X AS array_agg(CLASSIFIER()) = ARRAY['B', 'A', 'X']",
        ),
        rows("4B 5A 6X"),
        "X holds only when the labels so far, its own row included, are B A X: from row "
        "1 they start A, from row 2 they are B X at best; from row 4 they are B A X",
    ),
    Case(
        "classifier_count_in_define",
        letters("bbbb"),
        all_query("B+", defines="B AS count(CLASSIFIER()) <= 2"),
        rows("1B 2B | 3B 4B"),
        "count(CLASSIFIER()) counts the rows of the match so far: at most two per match",
    ),
    Case(
        "classifier_max_in_define",
        letters("aab"),
        all_query("A+ C", defines="A AS v = 'a', C AS max(CLASSIFIER()) = 'C'"),
        rows("1A 2A 3C"),
        "C has no column condition; max over the labels A, A, C is 'C' once the row is "
        "mapped to C, so A+ C takes rows 1-3 (greedy A+ cannot take the b)",
    ),
]

# -- uncorrelated subqueries -----------------------------------------------------------------------

OTHER = table("o", "y INTEGER", "(8), (10)")
OTHER_NULL = table("o", "y INTEGER", "(8), (NULL)")


def _sub_define(
    name: str,
    xs: list[int | None],
    define: str,
    spec: list[tuple],
    why: str,
    other: tuple[str, ...] = OTHER,
    pattern: str = "A+",
) -> Case:
    case = define_case(name, xs, pattern, define, spec, why)
    return Case(
        case.name, case.setup + other, case.query, case.expected, why, tags=("define", "subquery")
    )


def _sub_one(
    name: str, measures: str, expected: tuple, why: str, other: tuple[str, ...] = OTHER
) -> Case:
    case = dip_one(name, measures, expected, why)
    return Case(name, DIP + other, case.query, case.expected, why, tags=("subquery",))


SUBQUERIES = [
    _sub_define(
        "subquery_scalar_in_define",
        [5, 12, 7, 15],
        "A AS x < (SELECT max(y) FROM o)",
        [(1, 1, 1), (2, 3, 3)],
        "max(y) = 10: rows 1 (5) and 3 (7) are below it, each its own match",
    ),
    _sub_define(
        "subquery_scalar_with_arithmetic",
        [5, 12, 7, 15],
        "A AS x + (SELECT min(y) FROM o) > 14",
        [(1, 2, 4)],
        "min(y) = 8: x + 8 > 14 holds for 12, 7 and 15 (rows 2-4), one greedy run",
    ),
    _sub_define(
        "subquery_in_define",
        [7, 8, 9, 10, 11],
        "A AS x IN (SELECT y FROM o)",
        [(1, 2, 2), (2, 4, 4)],
        "x IN (8, 10): rows 2 and 4, separated by row 3",
    ),
    _sub_define(
        "subquery_not_in_define",
        [7, 8, 9, 10, 11],
        "A AS x NOT IN (SELECT y FROM o)",
        [(1, 1, 1), (2, 3, 3), (3, 5, 5)],
        "x NOT IN (8, 10): rows 1, 3 and 5, each alone",
    ),
    _sub_define(
        "subquery_not_in_with_null",
        [5, 8],
        "A AS x NOT IN (SELECT y FROM o)",
        [],
        "o holds 8 and NULL: 5 NOT IN (8, NULL) is UNKNOWN and 8 NOT IN (...) is "
        "FALSE, so no row is an A",
        other=OTHER_NULL,
    ),
    _sub_define(
        "subquery_in_empty_is_false_even_for_null",
        [1, None, 3],
        "A AS NOT (x IN (SELECT y FROM o WHERE y > 100))",
        [(1, 1, 3)],
        "IN over an empty subquery is FALSE for every x, NULL included, so NOT (...) "
        "is TRUE on all three rows",
    ),
    _sub_define(
        "subquery_exists_in_define",
        [5, 7, 9],
        "A AS EXISTS (SELECT 1 FROM o WHERE y > 9) AND x > 6",
        [(1, 2, 3)],
        "o has 10 > 9, so EXISTS is TRUE; x > 6 holds on rows 2-3",
    ),
    _sub_define(
        "subquery_not_exists_in_define",
        [5, 7, 9],
        "A AS NOT EXISTS (SELECT 1 FROM o WHERE y > 10)",
        [(1, 1, 3)],
        "no y exceeds 10: NOT EXISTS is TRUE for every row",
    ),
    _sub_define(
        "subquery_null_scalar",
        [5, 7],
        "A AS x > (SELECT max(y) FROM o WHERE y > 100)",
        [],
        "max over no rows is NULL; x > NULL is UNKNOWN, never TRUE",
    ),
    _sub_define(
        "subquery_coalesce_null_scalar",
        [5, 7],
        "A AS x > coalesce((SELECT max(y) FROM o WHERE y > 100), 6)",
        [(1, 2, 2)],
        "the subquery is NULL, coalesce gives 6: only row 2 (7) is above it",
    ),
    _sub_define(
        "subquery_reads_the_input_table",
        [1, 5, 9, 3],
        "A AS x > (SELECT avg(x) FROM t)",
        [(1, 2, 3)],
        "uncorrelated: x inside the subquery is t's own column; avg = 4.5, rows 2-3 "
        "(5 and 9) exceed it",
    ),
    _sub_define(
        "subquery_table_alias_named_like_a_variable",
        [5, 12, 7],
        "A AS x < (SELECT max(a.y) FROM o AS a)",
        [(1, 1, 1), (2, 3, 3)],
        "a.y names the subquery's own table alias, not pattern variable A: max = 10",
    ),
    _sub_one(
        "subquery_scalar_in_measures",
        "(SELECT max(y) FROM o) - LAST(x) AS d",
        (-2,),
        "max(y) = 10, the last row of the match (row 5) has x = 12",
    ),
    _sub_one(
        "subquery_count_in_measures",
        "count(*) * (SELECT count(*) FROM o) AS n",
        (10,),
        "five rows times the two rows of o",
    ),
    _sub_one(
        "subquery_exists_in_measures",
        "EXISTS (SELECT 1 FROM o WHERE y = 8) AS e, x IN (SELECT y + 4 FROM o) AS i",
        (True, True),
        "o holds 8; the last row's x = 12 is one of 8+4 and 10+4",
    ),
    Case(
        "subquery_running_measure",
        DIP + OTHER,
        "SELECT id, m FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES RUNNING count(*) + (SELECT min(y) FROM o) AS m\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A B+ C+)\n"
        "  DEFINE B AS x < PREV(x), C AS x > PREV(x)\n"
        ") ORDER BY id",
        [(1, 9), (2, 10), (3, 11), (4, 12), (5, 13)],
        "the running row count 1..5 plus min(y) = 8",
        tags=("subquery",),
    ),
    Case(
        "subquery_reads_a_cte",
        DIP,
        "WITH lim AS (SELECT 10 AS v)\n"
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES count(*) AS n, (SELECT v FROM lim) AS l\n"
        "  ONE ROW PER MATCH\n"
        "  PATTERN (A+)\n"
        "  DEFINE A AS x < (SELECT v FROM lim)\n"
        ") ORDER BY n DESC",
        [(3, 10), (1, 10)],
        "the statement's CTE is visible to the subquery: x < 10 holds for rows 2-4 "
        "(8, 6, 9) and row 6 (7); rows 1 and 5 (10, 12) break the runs",
        tags=("subquery",),
    ),
    Case(
        "constant_measures_all_rows",
        DIP + OTHER,
        "SELECT id, tag, big, lim, s FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES 'dip' AS tag, 3000000000 AS big, (SELECT max(y) FROM o) AS lim,\n"
        "           sum(x) AS s\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A B+ C+)\n"
        "  DEFINE B AS x < PREV(x), C AS x > PREV(x)\n"
        ") ORDER BY id",
        [
            (1, "dip", 3000000000, 10, 10),
            (2, "dip", 3000000000, 10, 18),
            (3, "dip", 3000000000, 10, 24),
            (4, "dip", 3000000000, 10, 33),
            (5, "dip", 3000000000, 10, 45),
        ],
        "constants repeat on every row of the match (rows 1-5); the running sum of x is "
        "10, 18, 24, 33, 45",
        tags=("subquery",),
    ),
    Case(
        "subquery_correlated_variable_rejected",
        DIP + OTHER,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES "
        "(SELECT max(y) FROM o WHERE y > A.x) AS m PATTERN (A B+) DEFINE B AS x < PREV(x))",
        matchsql.SemanticError,
        "A.x inside the subquery is a pattern variable reference: correlated, forbidden",
    ),
    Case(
        "subquery_correlated_column_rejected",
        DIP + OTHER,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES "
        "(SELECT max(y) FROM o WHERE y > x) AS m PATTERN (A B+) DEFINE B AS x < PREV(x))",
        matchsql.SemanticError,
        "x is not a column of o: the subquery would read the input row",
    ),
    Case(
        "subquery_classifier_rejected",
        DIP + OTHER,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES "
        "(SELECT CLASSIFIER()) AS m PATTERN (A B+) DEFINE B AS x < PREV(x))",
        matchsql.SemanticError,
        "CLASSIFIER() inside a subquery reads the match",
    ),
    Case(
        "subquery_scalar_many_rows_fails",
        DIP + OTHER,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES "
        "(SELECT y FROM o) AS m PATTERN (A B+) DEFINE B AS x < PREV(x))",
        matchsql.ExecutionError,
        "a scalar subquery with two rows is an error, as in DuckDB",
    ),
]

# -- aggregates with FILTER (WHERE ...) ---------------------------------------------------------

# The dip match is rows 1-5, x = 10 8 6 9 12, labelled A B B C C.
FILTERED_AGGREGATES = [
    dip_one(
        "filter_count_star_one_row",
        "count(*) FILTER (WHERE x > 7) AS m",
        (4,),
        "x > 7 holds at rows 1, 2, 4 and 5 (10, 8, 9, 12), not at row 3 (6)",
    ),
    dip_all(
        "filter_running_count_variable",
        "RUNNING count(B.x) FILTER (WHERE B.x > 6)",
        [0, 1, 1, 1, 1],
        "the B rows are 2 (8) and 3 (6); only 8 > 6, counted from row 2 on; row 1 has no B row yet",
    ),
    dip_all(
        "filter_final_sum",
        "FINAL sum(x) FILTER (WHERE x < 10)",
        [23] * 5,
        "FINAL sees the whole match on every row: 8 + 6 + 9 = 23 (10 and 12 are filtered out)",
    ),
    define_case(
        "filter_running_count_in_define",
        [10, 8, 6, 9, 12, 7],
        "A B+",
        "B AS count(*) FILTER (WHERE x < 9) <= 2",
        [(1, 1, 5)],
        "in DEFINE the count is running, current row included: rows with x < 9 "
        "are 2 (8), 3 (6) and 6 (7), so B holds at rows 2-5 (count 1, 2, 2, 2) and "
        "fails at row 6 (count 3); from row 6 no B row follows",
    ),
]

# -- RUNNING/FINAL on the aggregates DuckDB's dialect parses as plain function calls ----------

# Trino: RUNNING and FINAL apply to every aggregate; arbitrary and any_value are aggregates
# even though the dialect gives them no aggregate class. Same dip match as above.
SEMANTICS_ON_ANY_AGGREGATE = [
    dip_all(
        "final_any_value_all_rows",
        "FINAL any_value(C.x)",
        [9] * 5,
        "FINAL sees the whole match on every row: its C rows are 4 (9) and 5 (12), and "
        "any_value is the first non-NULL value, 9, even on rows 1-3 that precede them",
    ),
    dip_all(
        "running_arbitrary_all_rows",
        "RUNNING arbitrary(B.x)",
        [None, 8, 8, 8, 8],
        "RUNNING: at row 1 the match has no B row yet, so NULL; from row 2 on the first "
        "B row is row 2 (x = 8)",
    ),
    dip_one(
        "final_any_value_filter_one_row",
        "FINAL any_value(x) FILTER (WHERE x < 10) AS m",
        (8,),
        "the match's rows in order are 10, 8, 6, 9, 12; the first with x < 10 is 8",
    ),
]

CASES: list[Case] = (
    COUNT_NO_ARGUMENT
    + DOLLAR_ANCHOR
    + CLASSIFIER_MATCH_NUMBER_AGGREGATES
    + SUBQUERIES
    + FILTERED_AGGREGATES
    + SEMANTICS_ON_ANY_AGGREGATE
)
