"""Matching semantics of the reference matcher over letter tables.

Rows are ``(id, v)`` with one row per character; ``A`` is defined as
``v = 'a'`` and so on (LETTER_DEFINES), so a row pattern reads like a regular
expression over the string. ONE ROW results are ``(match_number, first id,
last id)``; ALL ROWS results are ``(id, match_number, classifier, v)``.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from matchsql.errors import ExecutionError
from matchsql.plan.spec import RowsPerMatch, SkipMode

from .specs import LETTER_DEFINES, MATCH_BOUNDS, ROW_MEASURES, letters, make_spec, run

ALL_SHOW = RowsPerMatch.ALL_SHOW_EMPTY
ALL_OMIT = RowsPerMatch.ALL_OMIT_EMPTY
ALL_UNMATCHED = RowsPerMatch.ALL_WITH_UNMATCHED


def one(text: str, pat: str, define: dict | None = None, **kw) -> list[tuple]:
    rows = letters(text)
    defs = LETTER_DEFINES if define is None else define
    spec = make_spec(rows, pat, define=defs, measures=MATCH_BOUNDS, **kw)
    return run(spec, rows)


def all_rows(
    text: str, pat: str, mode: RowsPerMatch = ALL_SHOW, define: dict | None = None, **kw
) -> list[tuple]:
    rows = letters(text)
    defs = LETTER_DEFINES if define is None else define
    spec = make_spec(rows, pat, define=defs, measures=ROW_MEASURES, rows_per_match=mode, **kw)
    return run(spec, rows)


# -- preference -----------------------------------------------------------------------------


def test_greedy_takes_as_many_as_possible() -> None:
    assert one("aaab", "A+") == [(1, 1, 3)]


def test_reluctant_takes_as_few_as_possible() -> None:
    # A+? stops after one row; each following row starts a new match.
    assert one("aaab", "A+?") == [(1, 1, 1), (2, 2, 2), (3, 3, 3)]


def test_reluctant_still_reaches_the_rest_of_the_pattern() -> None:
    # A+? B must extend until a B follows: the only match is rows 1-3.
    assert one("aab", "A+? B") == [(1, 1, 3)]


def test_alternation_prefers_left_not_longest() -> None:
    # (A | A B) on "ab": the left branch matches, so the match is row 1 only,
    # even though the right branch would be longer; row 2 'b' then fails.
    assert one("ab", "A | A B") == [(1, 1, 1)]
    assert one("ab", "A B | A") == [(1, 1, 2)]


def test_bounded_greedy_and_reluctant() -> None:
    # A{2,3} on "aaaa": rows 1-3, then row 4 alone is too short.
    assert one("aaaa", "A{2,3}") == [(1, 1, 3)]
    # A{2,3}? prefers two rows: 1-2 and 3-4.
    assert one("aaaa", "A{2,3}?") == [(1, 1, 2), (2, 3, 4)]


def test_permute_prefers_lexicographic_order() -> None:
    # "cab" is only matched by the permutation C A B.
    assert all_rows("cab", "PERMUTE(A, B, C)") == [
        (1, 1, "C", "c"),
        (2, 1, "A", "a"),
        (3, 1, "B", "b"),
    ]
    # With X and Y both true, the first permutation X Y is preferred.
    assert all_rows("zz", "PERMUTE(X, Y)", define={}) == [(1, 1, "X", "z"), (2, 1, "Y", "z")]


def test_alternation_in_loop_labels_by_preference() -> None:
    # X and Y are both true: (X|Y)+ labels every row X (left branch first).
    assert all_rows("zzz", "(X | Y)+", define={}) == [
        (1, 1, "X", "z"),
        (2, 1, "X", "z"),
        (3, 1, "X", "z"),
    ]


def test_greedy_backtracks_to_complete() -> None:
    # X+ with X always true swallows everything, but must leave row 4 for Y.
    assert one("xxxy", "X+ Y", define={"Y": "v = 'y'"}) == [(1, 1, 4)]
    assert all_rows("xyxy", "X+ Y", define={"Y": "v = 'y'"}) == [
        (1, 1, "X", "x"),
        (2, 1, "X", "y"),
        (3, 1, "X", "x"),
        (4, 1, "Y", "y"),
    ]


def test_empty_iterations_do_not_loop() -> None:
    # (A?)* on "b": an iteration that matched nothing is not repeated, so the
    # attempt at row 1 ends with an empty match instead of spinning forever.
    assert one("ba", "(A?)*") == [(1, None, None), (2, 2, 2)]
    assert one("aa", "(A*)*") == [(1, 1, 2)]
    assert one("aa", "()*") == [(1, None, None), (2, None, None)]


# -- anchors ---------------------------------------------------------------------------------


def test_start_anchor_only_at_partition_start() -> None:
    assert one("aaa", "^A", skip=SkipMode.TO_NEXT_ROW) == [(1, 1, 1)]


def test_end_anchor_only_at_partition_end() -> None:
    assert one("aaa", "A$", skip=SkipMode.TO_NEXT_ROW) == [(1, 3, 3)]
    # The greedy A+ ends at row 3 only because row 4 is not an A; $ then fails.
    assert one("aab", "A+$") == []
    assert one("baa", "A+$") == [(1, 2, 3)]


def test_anchors_on_both_sides() -> None:
    assert one("aa", "^A+$") == [(1, 1, 2)]
    assert one("aab", "^A+$") == []


# -- exclusion and empty matches ------------------------------------------------------------


def test_exclusion_hides_rows_in_all_rows_mode() -> None:
    # B rows are matched (the match is 1-4) but not output.
    assert all_rows("abbc", "A {- B+ -} C") == [(1, 1, "A", "a"), (4, 1, "C", "c")]
    assert one("abbc", "A {- B+ -} C") == [(1, 1, 4)]


def test_empty_matches_one_row() -> None:
    # A* at 'b' rows matches empty; MATCH_NUMBER counts empty matches.
    assert one("bab", "A*") == [(1, None, None), (2, 2, 2), (3, None, None)]


def test_empty_matches_show_omit_unmatched() -> None:
    # Row 1 'b': empty match (number 1); row 2 'a': match 2.
    assert all_rows("ba", "A*", ALL_SHOW) == [(1, 1, None, "b"), (2, 2, "A", "a")]
    assert all_rows("ba", "A*", ALL_OMIT) == [(2, 2, "A", "a")]
    # WITH UNMATCHED ROWS shows empty matches too; row 1 is not "unmatched".
    assert all_rows("ba", "A*", ALL_UNMATCHED) == [(1, 1, None, "b"), (2, 2, "A", "a")]


def test_unmatched_rows() -> None:
    assert all_rows("bab", "A", ALL_UNMATCHED) == [
        (1, None, None, "b"),
        (2, 1, "A", "a"),
        (3, None, None, "b"),
    ]


def test_unmatched_rows_with_overlapping_matches() -> None:
    # B+ A with SKIP TO NEXT ROW on "bbab": matches 1-3 and 2-3; row 3 fails
    # as a start but lies inside a match so it is not unmatched; row 4 is.
    assert all_rows("bbab", "B+ A", ALL_UNMATCHED, skip=SkipMode.TO_NEXT_ROW) == [
        (1, 1, "B", "b"),
        (2, 1, "B", "b"),
        (3, 1, "A", "a"),
        (2, 2, "B", "b"),
        (3, 2, "A", "a"),
        (4, None, None, "b"),
    ]


# -- AFTER MATCH SKIP ------------------------------------------------------------------------

# A is true; B and C are letters. On "xbbcbc" the match at row 1 is 1-4
# (A=x, B=2..3, C=4).
SKIP_DEFINES = {"B": "v = 'b'", "C": "v = 'c'"}


def skip_run(
    mode: SkipMode, var: str | None = None, text: str = "xbbcbc", pat: str = "A B+ C", **kw
) -> list[tuple]:
    return one(text, pat, define=SKIP_DEFINES, skip=mode, skip_variable=var, **kw)


def test_skip_past_last_row() -> None:
    # After 1-4: row 5 'b' as A needs a B at 6 ('c'): no; row 6 too short.
    assert skip_run(SkipMode.PAST_LAST_ROW) == [(1, 1, 4)]


def test_skip_to_next_row() -> None:
    # Row 2: A=b, B=3, C=4; row 3: B needs row 4 'c' -> no; row 4: A=c, B=5, C=6.
    assert skip_run(SkipMode.TO_NEXT_ROW) == [(1, 1, 4), (2, 2, 4), (3, 4, 6)]


def test_skip_to_first_variable() -> None:
    # Skip to the first B (row 2): 2-4; then to its first B (3): fails; 4-6.
    assert skip_run(SkipMode.TO_FIRST, "B") == [(1, 1, 4), (2, 2, 4), (3, 4, 6)]


def test_skip_to_last_variable() -> None:
    # Skip to the last B (row 3): fails there; row 4 starts 4-6; last B 5: fails.
    assert skip_run(SkipMode.TO_LAST, "B") == [(1, 1, 4), (2, 4, 6)]


def test_skip_to_subset() -> None:
    # U = (B, C): the last row of U is the C row 4, so the next attempt is 4-6.
    assert skip_run(SkipMode.TO_LAST, "U", subsets={"U": ("B", "C")}) == [(1, 1, 4), (2, 4, 6)]


def test_skip_to_first_row_of_match_is_an_error() -> None:
    with pytest.raises(ExecutionError, match="first row of the match"):
        skip_run(SkipMode.TO_FIRST, "A")


def test_skip_to_absent_variable_is_an_error() -> None:
    # A B* C on "xc": the match has no B row to skip to.
    with pytest.raises(ExecutionError, match="not present"):
        skip_run(SkipMode.TO_LAST, "B", text="xc", pat="A B* C")


def test_empty_match_advances_one_row_in_every_mode() -> None:
    for mode, var in [
        (SkipMode.PAST_LAST_ROW, None),
        (SkipMode.TO_NEXT_ROW, None),
        (SkipMode.TO_LAST, "A"),
        (SkipMode.TO_FIRST, "A"),
    ]:
        assert one("bb", "A*", skip=mode, skip_variable=var) == [(1, None, None), (2, None, None)]


# -- ALL MATCHES / INCREMENTAL MATCH ----------------------------------------------------------


def test_all_matches_one_per_end_row() -> None:
    # From row 1, A B+ ends at rows 2, 3 and 4; the preferred match is 1-4 so
    # PAST LAST ROW continues after row 4.
    assert one("abbb", "A B+", all_matches=True) == [(1, 1, 2), (2, 1, 3), (3, 1, 4)]


def test_all_matches_include_empty_and_skip_from_preferred() -> None:
    # A* from row 1 ends at 0 (empty), 1, 2; preferred is 1-2, so no more attempts.
    assert one("aa", "A*", all_matches=True) == [(1, None, None), (2, 1, 1), (3, 1, 2)]
    # TO NEXT ROW: row 2 starts again: empty, then 2-2.
    assert one("aa", "A*", all_matches=True, skip=SkipMode.TO_NEXT_ROW) == [
        (1, None, None),
        (2, 1, 1),
        (3, 1, 2),
        (4, None, None),
        (5, 2, 2),
    ]


def test_all_matches_keep_preferred_labelling_per_end() -> None:
    # (X | Y Y) Z? with X, Y, Z all true on 3 rows. Ends: row 1 (X), row 2
    # (X Z preferred over Y Y), row 3 (Y Y Z). The standard match is X Z (1-2),
    # so PAST LAST ROW resumes at row 3, where X alone matches (number 4).
    rows = all_rows("zzz", "(X | Y Y) Z?", define={}, all_matches=True)
    assert rows == [
        (1, 1, "X", "z"),
        (1, 2, "X", "z"),
        (2, 2, "Z", "z"),
        (1, 3, "Y", "z"),
        (2, 3, "Y", "z"),
        (3, 3, "Z", "z"),
        (3, 4, "X", "z"),
    ]


# -- partitions, window -----------------------------------------------------------------------


def test_within_window_limits_span() -> None:
    # A B+ within 2 ids: from row 1 the B run may reach id 3 only.
    rows = letters("abbbb")
    spec = make_spec(rows, "A B+", define=LETTER_DEFINES, measures=MATCH_BOUNDS, within=2)
    assert run(spec, rows) == [(1, 1, 3)]


def test_partition_columns_lead_the_output() -> None:
    rows = [{"p": "k", "id": i, "v": c} for i, c in enumerate("ab", 1)]
    spec = make_spec(
        rows,
        "A B",
        define=LETTER_DEFINES,
        partition_by=["p"],
        measures=[("n", "COUNT(*)", pa.int64())],
    )
    assert run(spec, rows) == [("k", 2)]
    spec = make_spec(
        rows,
        "A B",
        define=LETTER_DEFINES,
        partition_by=["p"],
        measures=[("n", "COUNT(*)", pa.int64())],
        rows_per_match=ALL_SHOW,
    )
    assert run(spec, rows) == [("k", 1, 1, "a"), ("k", 2, 2, "b")]


# -- measures end to end ---------------------------------------------------------------------


def test_seek_behaves_like_initial_in_match_recognize() -> None:
    # In the FROM clause every row is tried as a start in turn, so SEEK finds
    # exactly what INITIAL finds.
    rows = letters("babab")
    spec = make_spec(rows, "A B", define=LETTER_DEFINES, measures=MATCH_BOUNDS)
    spec.initial = False
    assert run(spec, rows) == [(1, 2, 3), (2, 4, 5)]


def test_one_row_measures_are_final_even_when_running() -> None:
    rows = letters("aab")
    spec = make_spec(
        rows,
        "A+ B",
        define=LETTER_DEFINES,
        measures=[
            ("r", "RUNNING(COUNT(A.*))", pa.int64()),
            ("f", "FINAL(COUNT(A.*))", pa.int64()),
            ("c", "CLASSIFIER()", pa.string()),
        ],
    )
    # Evaluated at the last row (B): running and final agree on the whole match.
    assert run(spec, rows) == [(2, 2, "B")]


def test_measures_over_subsets_and_exclusions() -> None:
    rows = letters("abbc")
    spec = make_spec(
        rows,
        "A {- B+ -} C",
        define=LETTER_DEFINES,
        subsets={"U": ("A", "B")},
        measures=[
            ("nb", "COUNT(B.*)", pa.int64()),
            ("u", "LAST(U.id)", pa.int64()),
            ("ids", "array_agg(id)", pa.list_(pa.int64())),
        ],
        rows_per_match=ALL_SHOW,
    )
    # Row 1: nothing after A yet. Row 4 (C): running sees both excluded B rows.
    assert run(spec, rows) == [(1, 0, 1, [1], "a"), (4, 2, 3, [1, 2, 3, 4], "c")]


def test_empty_match_measures_in_all_rows() -> None:
    rows = letters("b")
    spec = make_spec(
        rows,
        "A*",
        define=LETTER_DEFINES,
        measures=[
            ("n", "COUNT(*)", pa.int64()),
            ("s", "SUM(id)", pa.int64()),
            ("c", "CLASSIFIER()", pa.string()),
            ("m", "MATCH_NUMBER()", pa.int64()),
        ],
        rows_per_match=ALL_SHOW,
    )
    assert run(spec, rows) == [(1, 0, None, None, 1, "b")]


def test_measure_values_are_cast_to_the_measure_type() -> None:
    rows = letters("ab")
    spec = make_spec(
        rows,
        "A B",
        define=LETTER_DEFINES,
        measures=[
            ("avg", "AVG(id)", pa.float64()),
            ("as_int", "AVG(id)", pa.int64()),
            ("text", "id", pa.string()),
        ],
    )
    # AVG(1, 2) = 1.5; as an integer column it rounds half away from zero.
    assert run(spec, rows) == [(1.5, 2, "2")]


def test_multiple_partitions_number_matches_independently() -> None:
    from matchsql.engine.reference import ReferenceMatcher

    rows = letters("ab")
    spec = make_spec(rows, "A B", define=LETTER_DEFINES, measures=MATCH_BOUNDS)
    batch = pa.RecordBatch.from_pylist(rows, schema=spec.columns)
    for _ in range(2):
        m = ReferenceMatcher(spec, ())
        out = m.feed(batch) + m.finish()
        assert [tuple(r.values()) for b in out for r in b.to_pylist()] == [(1, 1, 2)]
