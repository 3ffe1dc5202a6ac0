"""Row pattern recognition in the WINDOW clause (SQL:2016 R020), as Trino documents it.

The rules the expectations below are derived from (Trino, "Row pattern
recognition in window structures"):

* rows are taken in partition order; a row inside the skipped span of an
  earlier row's match (AFTER MATCH SKIP) is unmatched. Each row's match is
  sought from that row, so the span counts from the row, not from the match's
  first row (which with SEEK may lie later): SKIP TO NEXT ROW skips no row,
  PAST LAST ROW the rows up to the match's last, TO FIRST/LAST v the rows
  before that row, which must lie after the current row (else an error);
* otherwise the match is sought within the row's frame only (ROWS BETWEEN
  CURRENT ROW AND ..): INITIAL (the default) needs it to start at the row, SEEK
  takes the first match starting at or after it in the frame; navigation sees
  no row outside the frame either;
* measures are evaluated over the whole match (RUNNING and FINAL alike);
  every measure of an unmatched row is NULL; an aggregate called over the
  window is computed over the match's rows, over an empty frame (count 0,
  others NULL) for an unmatched row; an empty match gives measures over no
  rows (count 0, navigation and CLASSIFIER NULL, constants as they are).

Most cases use a letter table ``s(id, v)`` (``letters``) with ``A AS v = 'a'``
and so on, and measures ``FIRST(id) AS f, LAST(id) AS l``: (id, f, l) per row.
"""

from __future__ import annotations

import matchsql

from .case import Case, letters, partitioned_letters, table

N = None
FL = "FIRST(id) AS f, LAST(id) AS l"
UNBOUNDED = "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING"


def wq(
    pattern: str,
    *,
    measures: str = FL,
    frame: str = UNBOUNDED,
    extra: str = "",
    select: str = "id, f OVER w, l OVER w",
    defines: str = "",
    tail: str = "ORDER BY id",
    source: str = "s",
    keys: str = "ORDER BY id",
    subset: str = "",
) -> str:
    """A SELECT over ``source`` with one row pattern window ``w``."""
    used = [v for v in "ABCDE" if v in pattern]
    defs = defines or ", ".join(f"{v} AS v = '{v.lower()}'" for v in used)
    return (
        f"SELECT {select} FROM {source}\n"
        f"WINDOW w AS ({keys}\n  MEASURES {measures}\n  {frame}\n  {extra}\n"
        f"  PATTERN ({pattern}){f' SUBSET {subset}' if subset else ''}\n  DEFINE {defs})\n"
        f"{tail}"
    )


CASES: list[Case] = [
    Case(
        "window_initial_past_last_row",
        letters("abaabc"),
        wq("A+ B"),
        [(1, 1, 2), (2, N, N), (3, 3, 5), (4, N, N), (5, N, N), (6, N, N)],
        why="INITIAL, SKIP PAST LAST ROW: row 1 matches a(1) b(2); row 2 lies in that match's "
        "skipped span; row 3 matches a a b (3-5), skipping 4 and 5; row 6 (c) cannot "
        "start A+.",
    ),
    Case(
        "window_skip_to_next_row",
        letters("abaabc"),
        wq("A+ B", extra="AFTER MATCH SKIP TO NEXT ROW"),
        [(1, 1, 2), (2, N, N), (3, 3, 5), (4, 4, 5), (5, N, N), (6, N, N)],
        why="SKIP TO NEXT ROW skips nothing after a match starting at the row: row 2 (b) "
        "cannot start A+, row 4 gets its own match a(4) b(5).",
    ),
    Case(
        "window_seek_detached_match",
        letters("abaabc"),
        wq("A+ B", extra="AFTER MATCH SKIP TO NEXT ROW SEEK"),
        [(1, 1, 2), (2, 3, 5), (3, 3, 5), (4, 4, 5), (5, N, N), (6, N, N)],
        why="SEEK: row 2 (b) has no match starting at itself, the first one later in its "
        "frame is 3-5, detached from the row. SKIP TO NEXT ROW goes on with the row "
        "after row 2, so row 3 seeks its own match and finds the same 3-5; row 4 "
        "matches 4-5; rows 5 and 6 find no A+ B in their frames.",
    ),
    Case(
        "window_seek_within_frame",
        letters("ccab"),
        wq(
            "A B",
            frame="ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING",
            extra="AFTER MATCH SKIP TO NEXT ROW SEEK",
        ),
        [(1, N, N), (2, 3, 4), (3, 3, 4), (4, N, N)],
        why="Frame of row 1 is rows 1-3 (c c a): the b at row 4 is outside, no match. Row "
        "2's frame 2-4 holds a b at 3-4 (SEEK); SKIP TO NEXT ROW skips nothing, so row "
        "3 matches 3-4 from itself; row 4's frame is just b.",
    ),
    Case(
        "window_initial_within_frame",
        letters("ccab"),
        wq(
            "A B",
            frame="ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING",
            extra="AFTER MATCH SKIP TO NEXT ROW INITIAL",
        ),
        [(1, N, N), (2, N, N), (3, 3, 4), (4, N, N)],
        why="INITIAL (written out): a match must start at the row itself, so rows 1 and 2 "
        "(c) have none and only row 3 matches a(3) b(4).",
    ),
    Case(
        "window_frame_current_row",
        letters("abab"),
        wq("A B?", frame="ROWS BETWEEN CURRENT ROW AND CURRENT ROW"),
        [(1, 1, 1), (2, N, N), (3, 3, 3), (4, N, N)],
        why="The frame is the row alone: B? cannot take the next row, so each a matches "
        "only itself; the b rows cannot start A (and were not skipped: the matches "
        "end at their own row).",
    ),
    Case(
        "window_frame_n_following_cuts_greedy",
        letters("aaaaa"),
        wq("A+", frame="ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING"),
        [(1, 1, 2), (2, N, N), (3, 3, 4), (4, N, N), (5, 5, 5)],
        why="A+ is greedy but the frame of row r is r..r+1: row 1 matches 1-2, skipping 2; "
        "row 3 matches 3-4; row 5 has only itself.",
    ),
    Case(
        "window_prev_sees_no_row_before_frame",
        table("t", "id INTEGER, x INTEGER", [(1, 5), (2, 7), (3, 6), (4, 8)]),
        wq(
            "A",
            measures="x AS val",
            select="id, val OVER w",
            source="t",
            defines="A AS x > PREV(x)",
        ),
        [(1, N), (2, N), (3, N), (4, N)],
        why="With INITIAL the match starts at the frame's first row, and PREV(x) there "
        "would read the row before the frame, which a window never sees: PREV is NULL, "
        "the condition NULL, so no row matches (MATCH_RECOGNIZE would match 2 and 4).",
    ),
    Case(
        "window_seek_prev_inside_frame",
        table("t", "id INTEGER, x INTEGER", [(1, 5), (2, 7), (3, 6), (4, 8)]),
        wq(
            "A",
            measures="x AS val",
            select="id, val OVER w",
            source="t",
            defines="A AS x > PREV(x)",
            extra="SEEK",
        ),
        [(1, 7), (2, N), (3, 8), (4, N)],
        why="SEEK: row 1's frame 1-4 fails at 1 (no PREV) and matches row 2 (7 > 5), "
        "skipping row 2; row 3's frame 3-4 fails at 3 (PREV outside the frame) and "
        "matches row 4 (8 > 6), skipping row 4.",
    ),
    Case(
        "window_seek_past_last_row_skips_from_the_row",
        letters("cabab"),
        wq("A B", extra="SEEK"),
        [(1, 2, 3), (2, N, N), (3, N, N), (4, 4, 5), (5, N, N)],
        why="SEEK, SKIP PAST LAST ROW (the default): row 1 (c) takes the first match in its "
        "frame, a(2) b(3); every row up to that match's last (2, 3) is skipped; row 4 "
        "matches a(4) b(5), skipping row 5.",
    ),
    Case(
        "window_seek_skip_to_first_of_a_detached_match",
        table("t", "id INTEGER, x INTEGER", [(1, 5), (2, 7), (3, 6), (4, 8)]),
        wq(
            "A",
            measures="x AS val",
            select="id, val OVER w",
            source="t",
            defines="A AS x > PREV(x)",
            extra="AFTER MATCH SKIP TO FIRST A SEEK",
        ),
        [(1, 7), (2, 8), (3, N), (4, N)],
        why="Row 1's frame fails at 1 (no PREV) and matches row 2 (7 > 5): its first A is "
        "row 2, after row 1, so row 2 is sought next (MATCH_RECOGNIZE would call this a "
        "skip to the match's first row, an error). Row 2's frame 2-4 fails at 2 (PREV "
        "outside the frame) and at 3 (6 < 7), matches 4 (8 > 6) and skips to row 4, "
        "leaving row 3 unmatched; row 4 alone has no PREV.",
    ),
    Case(
        "window_seek_skip_to_the_row_itself",
        letters("cab"),
        wq("A B", extra="AFTER MATCH SKIP TO FIRST A SEEK"),
        matchsql.ExecutionError,
        why="Row 1's match 2-3 skips to its first A, row 2; row 2's own match 2-3 would skip "
        "to row 2 again, seeking the same row forever: an error.",
    ),
    Case(
        "window_empty_match",
        letters("ba"),
        wq(
            "A*",
            measures="'matched' AS k, count(*) AS n, FIRST(id) AS f, CLASSIFIER() AS c",
            select="id, k OVER w, n OVER w, f OVER w, c OVER w",
        ),
        [(1, "matched", 0, N, N), (2, "matched", 1, 2, "A")],
        why="Row 1 (b): A* matches empty, a successful match of no rows: the constant "
        "measure is there, count(*) is 0, FIRST and CLASSIFIER are NULL; the next row "
        "is tried next. Row 2 matches a(2).",
    ),
    Case(
        "window_unmatched_vs_constant",
        letters("abc"),
        wq("A B", measures="'matched' AS k, count(*) AS n", select="id, k OVER w, n OVER w"),
        [(1, "matched", 2), (2, N, N), (3, N, N)],
        why="Every measure of an unmatched row is NULL, the constant and count(*) too: row "
        "2 is skipped by row 1's match, row 3 (c) has no match.",
    ),
    Case(
        "window_partitions",
        partitioned_letters({"x": "aab", "y": "ba"}),
        wq(
            "A+ B",
            extra="AFTER MATCH SKIP TO NEXT ROW",
            keys="PARTITION BY p ORDER BY id",
            select="p, id, f OVER w, l OVER w",
            tail="ORDER BY p, id",
        ),
        [("x", 1, 1, 3), ("x", 2, 2, 3), ("x", 3, N, N), ("y", 4, N, N), ("y", 5, N, N)],
        why="Frames end at the partition's end: in x rows 1 and 2 match up to b(3); in y "
        "row 4 is b and row 5 (a) has no b after it within its partition.",
    ),
    Case(
        "window_running_final_alike",
        letters("aab"),
        wq(
            "A+ B",
            measures="RUNNING LAST(A.id) AS rl, FINAL LAST(A.id) AS fl, "
            "RUNNING count(*) AS rc, FINAL count(*) AS fc",
            select="id, rl OVER w, fl OVER w, rc OVER w, fc OVER w",
        ),
        [(1, 2, 2, 3, 3), (2, N, N, N, N), (3, N, N, N, N)],
        why="In a window every measure is computed from the match's final row, so RUNNING "
        "equals FINAL: the last A is row 2 and the match has 3 rows.",
    ),
    Case(
        "window_classifier",
        letters("abba"),
        wq(
            "A B+",
            measures="CLASSIFIER() AS c, CLASSIFIER(A) AS ca, LAST(A.id) AS la",
            select="id, c OVER w, ca OVER w, la OVER w",
            extra="AFTER MATCH SKIP TO NEXT ROW",
        ),
        [(1, "B", "A", 1), (2, N, N, N), (3, N, N, N), (4, N, N, N)],
        why="Row 1 matches a b b (1-3); CLASSIFIER() at the final row is B, the last A row "
        "is 1. Rows 2 and 3 (b) cannot start A, row 4 (a) has no b after it.",
    ),
    Case(
        "window_subset",
        letters("abcab"),
        wq(
            "A B C?",
            measures="LAST(U.id) AS lu, count(U.id) AS nu",
            subset="U = (A, C)",
            select="id, lu OVER w, nu OVER w",
        ),
        [(1, 3, 2), (2, N, N), (3, N, N), (4, 4, 1), (5, N, N)],
        why="U is A or C: row 1's match a b c (1-3) has U rows 1 and 3; rows 2-3 skipped; "
        "row 4's match a b (C? empty) has U row 4 only; row 5 skipped.",
    ),
    Case(
        "window_with_ordinary_window_functions",
        letters("abab"),
        wq(
            "A B",
            select="id, v, f OVER w, row_number() OVER (ORDER BY id DESC) AS rn, "
            "sum(id) OVER () AS total",
        ),
        [(1, "a", 1, 4, 10), (2, "b", N, 3, 10), (3, "a", 3, 2, 10), (4, "b", N, 1, 10)],
        why="Plain columns and ordinary window functions stay DuckDB's: row_number counts "
        "from the highest id, the total is 1+2+3+4. Rows 1 and 3 start a b; 2 and 4 "
        "are skipped.",
    ),
    Case(
        "window_aggregate_over_w",
        letters("aabc"),
        wq("A+ B", select="id, count(*) OVER w AS cnt, sum(id) OVER w AS sm"),
        [(1, 3, 6), (2, 0, N), (3, 0, N), (4, 0, N)],
        why="An aggregate called over w is computed over the match's rows: 1+2+3 for row "
        "1's match a a b. Rows 2-3 (skipped) and 4 (no match) are unmatched: an empty "
        "frame, where count is 0 and sum is NULL.",
    ),
    Case(
        "window_value_functions_over_w",
        letters("aabc"),
        wq(
            "A+ B",
            select="id, first_value(id) OVER w AS fv, last_value(id) OVER w AS lv, "
            "nth_value(id, 2) OVER w AS n2, nth_value(id, 4) OVER w AS n4",
        ),
        [(1, 1, 3, 2, N), (2, N, N, N, N), (3, N, N, N, N), (4, N, N, N, N)],
        why="first_value, last_value and nth_value over w read the match's rows 1-3 (a a "
        "b): 1, 3, the second row 2, and no fourth row (NULL). Unmatched rows see an "
        "empty frame: NULL.",
    ),
    Case(
        "window_sees_rows_after_where",
        letters("abxab"),
        wq("A B A", extra="AFTER MATCH SKIP TO NEXT ROW", source="s WHERE v <> 'x'"),
        [(1, 1, 4), (2, N, N), (4, N, N), (5, N, N)],
        why="WHERE runs before the window: the x row is gone, so a(1) b(2) a(4) are "
        "consecutive and row 1 matches 1-4; row 4 (a b, then the end) has no final A.",
    ),
    Case(
        "window_order_by_measure",
        letters("aabab"),
        wq(
            "A+ B",
            measures="count(*) AS n",
            extra="AFTER MATCH SKIP TO NEXT ROW",
            select="id, n OVER w",
            tail="ORDER BY n OVER w DESC NULLS LAST, id",
        ),
        [(1, 3), (2, 2), (4, 2), (3, N), (5, N)],
        why="The enclosing ORDER BY may call a measure: row 1 matches a a b (3 rows), rows "
        "2 and 4 match two rows each, rows 3 and 5 (b) have none.",
    ),
    Case(
        "window_select_star",
        letters("ab"),
        wq("A B", select="*, f OVER w AS f"),
        [(1, "a", 1), (2, "b", N)],
        why="SELECT * is the source's columns only; the measure call adds f. Row 2 is "
        "skipped by row 1's match.",
        columns=("id", "v", "f"),
    ),
    Case(
        "window_order_desc",
        letters("ba"),
        wq("A B", keys="ORDER BY id DESC"),
        [(1, N, N), (2, 2, 1)],
        why="The window orders by id descending: a(2) comes first and b(1) after it, so "
        "row 2 matches 2 then 1 and row 1 is skipped.",
    ),
    Case(
        "window_two_windows",
        letters("ab"),
        "SELECT id, f OVER w1 AS f1, f OVER w2 AS f2 FROM s\n"
        "WINDOW w1 AS (ORDER BY id MEASURES FIRST(id) AS f "
        + UNBOUNDED
        + " PATTERN (A B) DEFINE A AS v = 'a', B AS v = 'b'),\n"
        "  w2 AS (ORDER BY id MEASURES FIRST(id) AS f "
        + UNBOUNDED
        + " PATTERN (B) DEFINE B AS v = 'b')\nORDER BY id",
        [(1, 1, N), (2, N, 2)],
        why="Each window matches on its own: w1 matches a b from row 1 (skipping 2), w2 "
        "matches only the b row.",
    ),
    Case(
        "window_skip_to_first_variable",
        letters("aabbab"),
        wq("A+ B+", extra="AFTER MATCH SKIP TO FIRST B"),
        [(1, 1, 4), (2, N, N), (3, N, N), (4, N, N), (5, 5, 6), (6, N, N)],
        why="Row 1 matches a a b b (1-4) and resumes at its first B (row 3): only row 2 "
        "is skipped. Rows 3 and 4 (b) are tried and cannot start A+; row 5 matches a b "
        "and resumes at its first B, row 6, which is tried and (b) fails.",
    ),
    Case(
        "window_skip_to_last_variable",
        letters("abbab"),
        wq("A B+", extra="AFTER MATCH SKIP TO LAST B"),
        [(1, 1, 3), (2, N, N), (3, N, N), (4, 4, 5), (5, N, N)],
        why="Row 1 matches a b b (1-3) and resumes at its last B, row 3: row 2 is skipped, "
        "row 3 (b) is tried and fails. Row 4 matches a b (4-5) and resumes at row 5, "
        "which fails.",
    ),
    Case(
        "window_define_next_stops_at_frame_end",
        table("t", "id INTEGER, x INTEGER", [(1, 1), (2, 2), (3, 3)]),
        wq(
            "A",
            measures="x AS val",
            select="id, val OVER w",
            source="t",
            frame="ROWS BETWEEN CURRENT ROW AND CURRENT ROW",
            defines="A AS NEXT(x) > x",
        ),
        [(1, N), (2, N), (3, N)],
        why="The frame is the row alone, so NEXT(x) in DEFINE reads past the frame: NULL, "
        "and the condition is never true (MATCH_RECOGNIZE would match rows 1 and 2).",
    ),
    Case(
        "window_define_next_inside_frame",
        table("t", "id INTEGER, x INTEGER", [(1, 1), (2, 2), (3, 3)]),
        wq(
            "A",
            measures="x AS val",
            select="id, val OVER w",
            source="t",
            frame="ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING",
            defines="A AS NEXT(x) > x",
        ),
        [(1, 1), (2, 2), (3, N)],
        why="With one following row in the frame, NEXT(x) is 2 > 1 at row 1 and 3 > 2 at "
        "row 2 (each match is the row alone, so nothing is skipped); row 3 has no next "
        "row.",
    ),
    Case(
        "window_measure_next_stops_at_frame_end",
        table("t", "id INTEGER, x INTEGER", [(1, 10), (2, 20), (3, 30)]),
        wq(
            "A",
            measures="NEXT(x) AS nx, PREV(x) AS px",
            select="id, nx OVER w, px OVER w",
            source="t",
            frame="ROWS BETWEEN CURRENT ROW AND CURRENT ROW",
            defines="A AS true",
        ),
        [(1, N, N), (2, N, N), (3, N, N)],
        why="Every row matches itself; measures cannot read outside the frame either: "
        "NEXT and PREV of the match's only row are NULL.",
    ),
    Case(
        "window_partitions_seek_bounded_frame",
        partitioned_letters({"x": "cab", "y": "cca"}),
        wq(
            "A B?",
            frame="ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING",
            extra="AFTER MATCH SKIP TO NEXT ROW SEEK",
            keys="PARTITION BY p ORDER BY id",
            select="p, id, f OVER w, l OVER w",
            tail="ORDER BY p, id",
        ),
        [
            ("x", 1, 2, 2),
            ("x", 2, 2, 3),
            ("x", 3, N, N),
            ("y", 4, N, N),
            ("y", 5, 6, 6),
            ("y", 6, 6, 6),
        ],
        why="x: row 1's frame (c a) holds a at 2, but B? cannot take row 3 outside the "
        "frame: match 2-2. SKIP TO NEXT ROW skips nothing: row 2's frame (a b) gives "
        "2-3; row 3 (b) alone has no a. y: row 4's frame (c c) has no a; row 5's frame "
        "(c a) gives 6-6, and row 6 (a) alone gives 6-6 too.",
    ),
    Case(
        "window_source_subquery_with_cte",
        letters("abab"),
        "WITH q AS (SELECT id AS k, v FROM s)\n"
        "SELECT x.k, n OVER w FROM (SELECT * FROM q WHERE k > 1) AS x\n"
        "WINDOW w AS (ORDER BY x.k MEASURES count(*) AS n "
        + UNBOUNDED
        + " AFTER MATCH SKIP TO NEXT ROW PATTERN (B A) DEFINE A AS v = 'a', B AS v = 'b')\n"
        "ORDER BY x.k",
        [(2, 2), (3, N), (4, N)],
        why="The source may be a subquery over a CTE, qualified by its alias: rows 2-4 "
        "(b a b); row 2 matches b a, row 3 (a) cannot start B, row 4 has no a after it.",
    ),
    # -- errors -------------------------------------------------------------------------
    Case(
        "window_error_all_rows_per_match",
        letters("ab"),
        wq("A B", extra="ALL ROWS PER MATCH"),
        matchsql.SemanticError,
        why="A window gives one row per input row: ONE/ALL ROWS PER MATCH are refused.",
    ),
    Case(
        "window_error_measure_without_over",
        letters("ab"),
        wq("A B", select="id, f"),
        matchsql.SemanticError,
        why="A measure is a definition of the window, callable only as f OVER w.",
    ),
    Case(
        "window_error_range_frame",
        letters("ab"),
        wq("A B", frame="RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING"),
        matchsql.SemanticError,
        why="Row pattern recognition needs a ROWS frame.",
    ),
    Case(
        "window_error_frame_not_from_current_row",
        letters("ab"),
        wq("A B", frame="ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"),
        matchsql.SemanticError,
        why="The frame must start at the current row.",
    ),
    Case(
        "window_error_no_frame",
        letters("ab"),
        wq("A B", frame=""),
        matchsql.SemanticError,
        why="The frame ROWS BETWEEN CURRENT ROW AND ... is mandatory.",
    ),
    Case(
        "window_error_match_number",
        letters("ab"),
        wq("A B", measures="MATCH_NUMBER() AS f, LAST(id) AS l"),
        matchsql.SemanticError,
        why="MATCH_NUMBER is not allowed in a window's MEASURES (nor DEFINE).",
    ),
    Case(
        "window_error_anchor",
        letters("ab"),
        wq("^A B"),
        matchsql.SemanticError,
        why="The anchors ^ and $ are not allowed in a window pattern.",
    ),
    Case(
        "window_error_unknown_measure",
        letters("ab"),
        wq("A B", select="id, g OVER w"),
        matchsql.SemanticError,
        why="g is not one of w's measures.",
    ),
    Case(
        "window_error_ranking_function_over_w",
        letters("ab"),
        wq("A B", select="id, row_number() OVER w"),
        matchsql.SemanticError,
        why="Only measures, aggregates and first/last/nth_value are computed over a match.",
    ),
    Case(
        "window_error_skip_to_first_row",
        letters("aab"),
        wq("A+ B", extra="AFTER MATCH SKIP TO FIRST A"),
        matchsql.ExecutionError,
        why="As in MATCH_RECOGNIZE, skipping to the first row of the match (the first A "
        "of 1-3 is row 1) would find the same match again: an error.",
    ),
]
