"""Navigation in MEASURES and DEFINE: which row FIRST/LAST/PREV/NEXT read.

The rules (Trino's documentation and its ``LogicalIndexNavigation``):

* ``LAST(V.x, k)`` counts k rows of V back from the current row under
  RUNNING (the default in ALL ROWS PER MATCH and in DEFINE) or from the
  match's last row under FINAL;
* ``FIRST(V.x, k)`` counts k rows of V forward from the match's first row
  over the whole match, RUNNING or FINAL alike; in DEFINE the match so far
  ends at the current row, so rows after it do not exist yet (NULL);
* ``PREV/NEXT(.., k)`` move k rows physically from the row FIRST/LAST (or
  the implicit ``LAST``) found; they may leave the match but not the
  partition;
* ``CLASSIFIER()`` read through navigation is the label of the row reached
  when that row belongs to the match (rows past the current one included),
  NULL outside the match.

Most measure cases share the "nav" table ``t(id, k, v)``::

    id:  1   2   3   4   5   6
    k:   x   a   b   b   c   x
    v:  10  20  30  40  50  60

with ``PATTERN (A B+ C)`` and ``A AS k = 'a', B AS k = 'b', C AS k = 'c'``:
the only match is rows 2-5 labelled A B B C, with a row on either side of it
in the partition.
"""

from __future__ import annotations

from .case import Case, table
from .cases_expressions import define_case

NAV = table(
    "t",
    "id INTEGER, k VARCHAR, v INTEGER",
    [(1, "x", 10), (2, "a", 20), (3, "b", 30), (4, "b", 40), (5, "c", 50), (6, "x", 60)],
)
NAV_DEFINE = "A AS k = 'a', B AS k = 'b', C AS k = 'c'"


def nav_all(name: str, measure: str, values: list, why: str, subset: str = "") -> Case:
    """ALL ROWS PER MATCH over the nav table: ``(id, m)`` for the match rows 2-5."""
    subset_clause = f"  SUBSET {subset}\n" if subset else ""
    query = (
        "SELECT id, m FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        f"  MEASURES {measure} AS m\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A B+ C)\n"
        f"{subset_clause}"
        f"  DEFINE {NAV_DEFINE}\n"
        ") ORDER BY id"
    )
    return Case(
        name,
        NAV,
        query,
        [(i, v) for i, v in zip(range(2, 6), values, strict=True)],
        why,
        tags=("measures", "navigation", "running"),
    )


def nav_one(name: str, measures: str, expected: tuple, why: str) -> Case:
    """ONE ROW PER MATCH over the nav table: the single match's measures."""
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        f"  MEASURES {measures}\n"
        "  ONE ROW PER MATCH\n"
        "  PATTERN (A B+ C)\n"
        f"  DEFINE {NAV_DEFINE}\n"
        ")"
    )
    return Case(name, NAV, query, [expected], why, tags=("measures", "navigation"))


ISSUE_EXAMPLE = Case(
    "nav_issue_example",
    (),
    "SELECT m.id, m.m, m.nl, m.p\n"
    "FROM (VALUES (1, 5), (2, 7), (3, 9), (4, 11)) t(id, value) MATCH_RECOGNIZE (\n"
    "  ORDER BY id\n"
    "  MEASURES FIRST(value, 2) AS m, NEXT(CLASSIFIER()) AS nl,\n"
    "           PREV(RUNNING LAST(value)) AS p\n"
    "  ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS true) AS m ORDER BY m.id",
    [(1, 9, "A", None), (2, 9, "A", 5), (3, 9, "A", 7), (4, 9, None, 9)],
    "one match of rows 1-4: FIRST(value, 2) is the third match row (9) on every row, even "
    "before it; NEXT(CLASSIFIER()) is the next row's label, NULL at the last row (row 5 "
    "does not exist); PREV(RUNNING LAST(value)) is the row before the current one, none "
    "before row 1",
    tags=("measures", "navigation", "running"),
)

RUNNING_LOGICAL = [
    nav_all(
        "nav_running_first_offset",
        "FIRST(v, 2)",
        [40, 40, 40, 40],
        "the third row of the whole match (row 4), also on rows 2-3 before it",
    ),
    nav_all(
        "nav_running_first_offset_past_match",
        "FIRST(v, 4)",
        [None] * 4,
        "the match has four rows, so a fifth does not exist; FIRST never reaches row 6",
    ),
    nav_all(
        "nav_running_first_variable_offset",
        "FIRST(B.v, 1)",
        [40, 40, 40, 40],
        "the second B row of the match is row 4, known on row 2 (an A) already",
    ),
    nav_all(
        "nav_explicit_running_first_of_later_variable",
        "RUNNING FIRST(C.v)",
        [50, 50, 50, 50],
        "explicit RUNNING changes nothing for FIRST: the C row is row 5",
    ),
    nav_all(
        "nav_first_running_equals_final",
        "FIRST(v, 1) - FINAL FIRST(v, 1)",
        [0] * 4,
        "RUNNING and FINAL FIRST(v, 1) are both row 3 (30)",
    ),
    nav_all(
        "nav_running_last_offset_in_match",
        "LAST(v, 1)",
        [None, 20, 30, 40],
        "one row back within the match: none before row 2 (row 1 is outside the match)",
    ),
    nav_all(
        "nav_running_last_variable_offset",
        "LAST(B.v, 1)",
        [None, None, 30, 30],
        "the B rows so far: none, then row 3 only, then rows 3-4 (second last is 3)",
    ),
    nav_all(
        "nav_final_last_variable_offset",
        "FINAL LAST(B.v, 1)",
        [30, 30, 30, 30],
        "FINAL: the B rows of the whole match are 3 and 4; one back from 4 is 3",
    ),
    nav_all(
        "nav_running_first_classifier",
        "FIRST(CLASSIFIER(), 3)",
        ["C"] * 4,
        "the fourth match row (row 5) is the C, seen from every row",
    ),
    nav_all(
        "nav_running_last_classifier_offset",
        "LAST(CLASSIFIER(), 1)",
        [None, "A", "B", "B"],
        "the label of the previous match row; none before row 2",
    ),
]

CLASSIFIER_NAVIGATION = [
    nav_all(
        "nav_next_classifier",
        "NEXT(CLASSIFIER())",
        ["B", "B", "C", None],
        "the next row's label; after row 5 comes row 6, which is not in the match",
    ),
    nav_all(
        "nav_prev_classifier",
        "PREV(CLASSIFIER())",
        [None, "A", "B", "B"],
        "row 1 exists but is outside the match, so its label is NULL",
    ),
    nav_all(
        "nav_next_classifier_offset",
        "NEXT(CLASSIFIER(), 2)",
        ["B", "C", None, None],
        "two rows on: rows 4 and 5 are in the match, rows 6 and 7 are not",
    ),
    nav_all(
        "nav_next_first_classifier",
        "NEXT(FIRST(CLASSIFIER()), 3)",
        ["C"] * 4,
        "three rows after the match's first row (2) is row 5, labelled C",
    ),
    nav_all(
        "nav_prev_first_classifier",
        "PREV(FIRST(CLASSIFIER()))",
        [None] * 4,
        "the row before the match exists (row 1) but has no label in this match",
    ),
]

NESTED_PHYSICAL = [
    nav_all(
        "nav_prev_running_last_leaves_match",
        "PREV(RUNNING LAST(v))",
        [10, 20, 30, 40],
        "one row before the current row: from row 2 that is row 1, outside the match "
        "but inside the partition, so its value is read",
    ),
    nav_all(
        "nav_prev_final_last",
        "PREV(FINAL LAST(v), 1)",
        [40, 40, 40, 40],
        "FINAL LAST is row 5 on every row; one back is row 4",
    ),
    nav_all(
        "nav_next_final_last",
        "NEXT(FINAL LAST(v), 1)",
        [60, 60, 60, 60],
        "one after the match's last row is row 6, past the match, in the partition",
    ),
    nav_all(
        "nav_next_final_last_past_partition",
        "NEXT(FINAL LAST(v), 2)",
        [None] * 4,
        "two after row 5 is row 7, past the partition's end",
    ),
    nav_all(
        "nav_next_first",
        "NEXT(FIRST(v), 1)",
        [30, 30, 30, 30],
        "one after the match's first row (2) is row 3 on every row",
    ),
    nav_all(
        "nav_prev_first_before_match",
        "PREV(FIRST(v), 1)",
        [10, 10, 10, 10],
        "the row before the match (row 1) is read: PREV may leave the match",
    ),
    nav_all(
        "nav_prev_first_before_partition",
        "PREV(FIRST(v), 2)",
        [None] * 4,
        "two before row 2 would be row 0: outside the partition",
    ),
    nav_all(
        "nav_prev_last_variable_offset",
        "PREV(LAST(B.v, 1), 1)",
        [None, None, 20, 20],
        "LAST(B.v, 1) is none, none, row 3, row 3; one before row 3 is row 2",
    ),
    nav_all(
        "nav_next_first_variable_offset",
        "NEXT(FIRST(B.v, 1), 2)",
        [60] * 4,
        "the second B is row 4; two rows on is row 6, after the match",
    ),
    nav_all(
        "nav_prev_last_variable_deep",
        "PREV(LAST(B.v, 1), 2)",
        [None, None, 10, 10],
        "from row 3 (the second-last B once two are seen) two rows back is row 1",
    ),
    nav_all(
        "nav_subset_first_offset",
        "FIRST(U.v, 1)",
        [50] * 4,
        "U = (A, C): its rows are 2 and 5; the second is row 5, seen from every row",
        subset="U = (A, C)",
    ),
    nav_all(
        "nav_subset_prev_last",
        "PREV(LAST(U.v), 1)",
        [10, 10, 10, 40],
        "the last U row so far is row 2 until row 5 is reached; one row before it",
        subset="U = (A, C)",
    ),
]

ONE_ROW = [
    nav_one(
        "nav_one_row_mixed",
        "FIRST(v, 2) AS a, NEXT(CLASSIFIER()) AS b, PREV(LAST(v)) AS c, "
        "NEXT(LAST(v)) AS d, PREV(CLASSIFIER()) AS e",
        (40, None, 40, 60, "B"),
        "measured at the last row (5): third row is 4; row 6 is past the match (no "
        "label) but has a value; the row before 5 is 4, labelled B",
    ),
    nav_one(
        "nav_one_row_variables",
        "PREV(FIRST(B.v), 1) AS a, NEXT(LAST(B.v, 1), 3) AS b",
        (20, 60),
        "first B is row 3, one back is row 2; second-last B is row 3, three on is row 6",
    ),
    nav_one(
        "nav_one_row_running_prev",
        "PREV(RUNNING LAST(v), 2) AS a",
        (30,),
        "RUNNING and FINAL agree at the last row: two before row 5 is row 3",
    ),
]


def _partitioned() -> Case:
    setup = table(
        "t",
        "p INTEGER, id INTEGER, v INTEGER",
        [(1, 1, 10), (1, 2, 20), (1, 3, 30), (2, 4, 40), (2, 5, 50), (2, 6, 60)],
    )
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  PARTITION BY p ORDER BY id\n"
        "  MEASURES PREV(FIRST(v)) AS before, NEXT(LAST(v)) AS after,\n"
        "           NEXT(LAST(v), 2) AS after2\n"
        "  ONE ROW PER MATCH\n"
        "  PATTERN (A B) DEFINE A AS true\n"
        ") ORDER BY p"
    )
    return Case(
        "nav_partition_edges",
        setup,
        query,
        [(1, None, 30, None), (2, None, 60, None)],
        "matches are rows 1-2 and 4-5; before row 1 nothing, before row 4 is row 3 "
        "of the other partition (NULL); after is the partition's third row; two "
        "after reaches the next partition or its end (NULL)",
        tags=("measures", "navigation", "partition"),
    )


def _across_matches() -> Case:
    setup = table(
        "t",
        "id INTEGER, k VARCHAR, v INTEGER",
        [(1, "a", 10), (2, "b", 20), (3, "a", 30), (4, "b", 40)],
    )
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, PREV(FIRST(v)) AS pv,\n"
        "           PREV(FIRST(CLASSIFIER())) AS pc\n"
        "  ONE ROW PER MATCH\n"
        "  PATTERN (A B) DEFINE A AS k = 'a', B AS k = 'b'\n"
        ") ORDER BY mn"
    )
    return Case(
        "nav_prev_into_previous_match",
        setup,
        query,
        [(1, None, None), (2, 20, None)],
        "the second match starts at row 3: the row before (2) belongs to match 1, "
        "so its value is read but it has no label in match 2",
        tags=("measures", "navigation"),
    )


def _empty_match() -> Case:
    setup = table("t", "id INTEGER, k VARCHAR, v INTEGER", [(1, "x", 10), (2, "a", 20)])
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, PREV(FIRST(v)) AS pv, NEXT(CLASSIFIER()) AS nc\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A*) DEFINE A AS k = 'a'\n"
        ") ORDER BY id"
    )
    return Case(
        "nav_empty_match",
        setup,
        query,
        [(1, 1, None, None, "x", 10), (2, 2, 10, None, "a", 20)],
        "row 1 starts an empty match: it has no rows, so every navigation is NULL; "
        "row 2 is a one-row match: PREV(FIRST(v)) reads row 1, and no row follows",
        tags=("measures", "navigation", "empty"),
    )


def _excluded() -> Case:
    setup = table(
        "t", "id INTEGER, k VARCHAR, v INTEGER", [(1, "a", 10), (2, "b", 20), (3, "c", 30)]
    )
    query = (
        "SELECT id, nc, pv FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES NEXT(CLASSIFIER()) AS nc, PREV(v) AS pv\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A {- B -} C) DEFINE A AS k = 'a', B AS k = 'b', C AS k = 'c'\n"
        ") ORDER BY id"
    )
    return Case(
        "nav_excluded_row_still_navigable",
        setup,
        query,
        [(1, "B", None), (3, None, 20)],
        "row 2 is excluded from the output but belongs to the match, so row 1's "
        "NEXT(CLASSIFIER()) is B and row 3's PREV(v) reads it",
        tags=("measures", "navigation", "exclusion"),
    )


def _overlapping() -> Case:
    setup = table("t", "id INTEGER, v INTEGER", [(1, 10), (2, 20), (3, 30)])
    query = (
        "SELECT id, mn, nc, f FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, NEXT(CLASSIFIER()) AS nc, FIRST(v, 1) AS f\n"
        "  ALL ROWS PER MATCH\n"
        "  AFTER MATCH SKIP TO NEXT ROW\n"
        "  PATTERN (A B) DEFINE A AS true\n"
        ") ORDER BY mn, id"
    )
    return Case(
        "nav_overlapping_matches",
        setup,
        query,
        [(1, 1, "B", 20), (2, 1, None, 20), (2, 2, "B", 30), (3, 2, None, 30)],
        "matches 1-2 and 2-3 overlap; each navigates within its own match: row 2 "
        "ends match 1 (row 3 is not in it) and starts match 2",
        tags=("measures", "navigation", "skip"),
    )


def _nulls() -> Case:
    setup = table("t", "id INTEGER, v INTEGER", [(1, 1), (2, None), (3, 3)])
    query = (
        "SELECT id, f, p FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES COALESCE(FIRST(v, 1), -1) AS f, COALESCE(PREV(LAST(v)), -1) AS p\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A+) DEFINE A AS true\n"
        ") ORDER BY id"
    )
    return Case(
        "nav_null_values_not_skipped",
        setup,
        query,
        [(1, -1, -1), (2, -1, 1), (3, -1, -1)],
        "navigation counts rows, not values: FIRST(v, 1) is row 2, whose v is NULL; "
        "PREV reads row 2's NULL from row 3 and nothing from row 1",
        tags=("measures", "navigation", "null"),
    )


MISC = [_partitioned(), _across_matches(), _empty_match(), _excluded(), _overlapping(), _nulls()]

DEFINE = [
    define_case(
        "nav_define_first_offset_not_yet_matched",
        [5, 6, 7, 8],
        "A+",
        "A AS FIRST(x, 2) IS NULL OR x >= FIRST(x, 2)",
        [(1, 1, 4)],
        "in DEFINE the match ends at the current row: on rows 1-2 the third match row "
        "does not exist yet (NULL, so true); from row 3 it is 7. Looking ahead "
        "would make row 1 fail (5 < 7)",
    ),
    define_case(
        "nav_define_next_classifier_unmatched",
        [1, 2, 3],
        "A B",
        "A AS NEXT(CLASSIFIER()) IS NULL, B AS PREV(CLASSIFIER()) = 'A'",
        [(1, 1, 2)],
        "the row after the current one has no label yet; the previous row is the A",
    ),
    define_case(
        "nav_define_prev_first_before_match",
        [5, 1, 6, 7, 2],
        "A B+",
        "B AS x > PREV(FIRST(x))",
        [(1, 2, 4)],
        "from row 1 there is no row before the match (no B); from row 2 the row "
        "before the match is row 1 (5): 6 and 7 exceed it, 2 does not",
    ),
    define_case(
        "nav_define_next_first_looks_ahead",
        [3, 2, 4, 6],
        "A B",
        "A AS NEXT(FIRST(x), 1) > x",
        [(1, 2, 3)],
        "physical NEXT reaches past the current row even in DEFINE: at row 1 the "
        "next row is 2 (not > 3); at row 2 it is 4 (> 2); row 4 has no next row",
    ),
    define_case(
        "nav_define_first_classifier_offset",
        [1, 2],
        "A B",
        "A AS FIRST(CLASSIFIER(), 1) IS NULL, B AS FIRST(CLASSIFIER(), 1) = 'B'",
        [(1, 1, 2)],
        "at row 1 the match has one row, so a second does not exist; at row 2 the "
        "second row is the one being tested as B",
    ),
]

CASES: list[Case] = (
    [ISSUE_EXAMPLE]
    + RUNNING_LOGICAL
    + CLASSIFIER_NAVIGATION
    + NESTED_PHYSICAL
    + ONE_ROW
    + MISC
    + DEFINE
)
