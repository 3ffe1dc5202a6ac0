"""Resumability, early emission, memory bounds, thread merging and limits."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchsql.config import Config
from matchsql.engine.reference import ReferenceMatcher
from matchsql.errors import LimitExceededError
from matchsql.plan.spec import RowsPerMatch, SkipMode

from .specs import LETTER_DEFINES, MATCH_BOUNDS, ROW_MEASURES, letters, make_spec, run


def batch_of(spec, rows) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=spec.columns)


def ids(batches: list[pa.RecordBatch]) -> list[tuple]:
    return [tuple(r.values()) for b in batches for r in b.to_pylist()]


# -- early emission ---------------------------------------------------------------------------


def test_greedy_match_is_final_only_when_it_cannot_grow() -> None:
    rows = letters("abbab")
    spec = make_spec(rows, "A B+", define=LETTER_DEFINES, measures=MATCH_BOUNDS)
    m = ReferenceMatcher(spec)
    assert ids(m.feed(batch_of(spec, rows[:3]))) == []  # B+ may still grow
    assert ids(m.feed(batch_of(spec, rows[3:4]))) == [(1, 1, 3)]  # 'a' ends it
    assert ids(m.feed(batch_of(spec, rows[4:]))) == []
    assert ids(m.finish()) == [(2, 4, 5)]  # partition end ends the second


def test_end_anchor_waits_for_finish() -> None:
    rows = letters("aa")
    spec = make_spec(rows, "A+ $", define=LETTER_DEFINES, measures=MATCH_BOUNDS)
    m = ReferenceMatcher(spec)
    assert ids(m.feed(batch_of(spec, rows))) == []
    assert ids(m.finish()) == [(1, 1, 2)]


def test_next_in_measures_waits_for_rows_ahead() -> None:
    rows = letters("abxx")
    spec = make_spec(
        rows, "A B", define=LETTER_DEFINES, measures=[("ahead", "NEXT(id, 2)", pa.int64())]
    )
    m = ReferenceMatcher(spec)
    assert ids(m.feed(batch_of(spec, rows[:3]))) == []  # needs row 4 (= id of B + 2)
    assert ids(m.feed(batch_of(spec, rows[3:]))) == [(4,)]


def test_next_in_define_waits_for_rows_ahead() -> None:
    # A is a row whose successor is a 'b'.
    rows = letters("ab")
    spec = make_spec(rows, "A", define={"A": "NEXT(v) = 'b'"}, measures=MATCH_BOUNDS)
    m = ReferenceMatcher(spec)
    assert ids(m.feed(batch_of(spec, rows[:1]))) == []
    assert ids(m.feed(batch_of(spec, rows[1:]))) == [(1, 1, 1)]
    assert ids(m.finish()) == []


# -- memory ----------------------------------------------------------------------------------


def test_buffered_rows_follow_the_live_window() -> None:
    # "ab" repeated: every match is two rows; with PREV(v, 3) in DEFINE the
    # holder needs the open attempt plus 3 rows of history, never the partition.
    text = "ab" * 5000
    rows = letters(text)
    spec = make_spec(
        rows,
        "A B",
        define={"A": "v = 'a' AND PREV(v, 3) IS DISTINCT FROM 'x'", "B": "v = 'b'"},
        measures=MATCH_BOUNDS,
    )
    m = ReferenceMatcher(spec)
    peak = 0
    out = 0
    for k in range(0, len(rows), 100):
        out += len(ids(m.feed(batch_of(spec, rows[k : k + 100]))))
        peak = max(peak, m.buffered_rows)
    out += len(ids(m.finish()))
    assert out == 5000
    assert peak <= 100 + 4


def test_buffered_row_limit() -> None:
    rows = letters("a" * 50)
    spec = make_spec(rows, "A+ B", define=LETTER_DEFINES, measures=MATCH_BOUNDS)
    with pytest.raises(LimitExceededError, match="max_buffered_rows=20"):
        run(spec, rows, splits=range(0, 50, 5), config=Config(max_buffered_rows=20))


def test_thread_limit() -> None:
    # SUM over A makes every split of rows between A and B observable, so
    # threads cannot be merged and their number doubles with each row.
    rows = letters("z" * 30)
    spec = make_spec(rows, "(A | B)+ C", define={"C": "SUM(A.id) < 0"}, measures=MATCH_BOUNDS)
    with pytest.raises(LimitExceededError, match="max_threads=64"):
        run(spec, rows, config=Config(max_threads=64))


# -- merging ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "define,n",
    [
        ({"C": "v = 'c'"}, 10_000),  # no history observed: program state alone
        ({"C": "v = 'c'", "A": "A.x >= 0", "B": "LAST(B.x) >= 0"}, 10_000),  # current row only
        # C observes the last A row: threads differ by that row, so a step holds
        # O(rows) threads (quadratic overall, not exponential).
        ({"C": "v = 'c' AND A.x >= 0"}, 300),
    ],
)
def test_ambiguous_pattern_is_not_exponential(define: dict, n: int) -> None:
    # (A|B)*(A|B)*C with A and B true: exponentially many paths, but threads
    # with equal observable state are merged.
    rows = [{"id": i + 1, "v": "z", "x": i} for i in range(n - 1)]
    rows.append({"id": n, "v": "c", "x": n})
    spec = make_spec(rows, "(A|B)*(A|B)*C", define=define, measures=MATCH_BOUNDS)
    began = time.perf_counter()
    assert run(spec, rows) == [(1, 1, n)]
    assert time.perf_counter() - began < 10


def test_merging_keeps_the_preferred_labelling() -> None:
    # All A (left branch, first loop) is the preferred labelling.
    rows = letters("zzc")
    spec = make_spec(
        rows,
        "(A|B)*(A|B)*C",
        define={"C": "v = 'c'"},
        measures=ROW_MEASURES,
        rows_per_match=RowsPerMatch.ALL_SHOW_EMPTY,
    )
    assert run(spec, rows) == [(1, 1, "A", "z"), (2, 1, "A", "z"), (3, 1, "C", "c")]


# -- running DEFINE semantics end to end ------------------------------------------------------


def test_v_shape_with_prev() -> None:
    # prices 10 8 6 7 9 5: A=10, B+ falls to 6, C+ rises 7, 9; then 5 falls.
    prices = [10, 8, 6, 7, 9, 5]
    rows = [{"id": i + 1, "price": p} for i, p in enumerate(prices)]
    spec = make_spec(
        rows,
        "A B+ C+",
        define={"B": "price < PREV(price)", "C": "price > PREV(price)"},
        measures=[
            ("bottom", "LAST(B.price)", pa.int64()),
            ("top", "LAST(C.price)", pa.int64()),
            ("n", "COUNT(*)", pa.int64()),
        ],
    )
    assert run(spec, rows) == [(6, 9, 5)]


def test_running_aggregate_in_define() -> None:
    # x = 3 4 5 1: A+ while the running SUM(A.x) <= 10: 3, 7 then 12 fails;
    # next match starts at row 3: 5, 6.
    rows = [{"id": i + 1, "x": x} for i, x in enumerate([3, 4, 5, 1])]
    spec = make_spec(rows, "A+", define={"A": "SUM(A.x) <= 10"}, measures=MATCH_BOUNDS)
    assert run(spec, rows) == [(1, 1, 2), (2, 3, 4)]


def test_define_reading_another_variable() -> None:
    # B must exceed the first A's x; A+ takes 1 2 (greedy, A true), B = 5.
    rows = [{"id": i + 1, "x": x} for i, x in enumerate([1, 2, 5, 0])]
    spec = make_spec(
        rows, "A+ B", define={"A": "x < 3", "B": "x > FIRST(A.x) + 3"}, measures=MATCH_BOUNDS
    )
    assert run(spec, rows) == [(1, 1, 3)]


def test_classifier_in_define() -> None:
    # B only right after an A: PREV(CLASSIFIER()) = 'A'. X is true.
    rows = letters("zzzz")
    spec = make_spec(
        rows,
        "(A | B)+",
        define={"A": "CLASSIFIER() = 'A'", "B": "PREV(CLASSIFIER()) = 'A'"},
        measures=ROW_MEASURES,
        rows_per_match=RowsPerMatch.ALL_SHOW_EMPTY,
    )
    # A is always true (CLASSIFIER() is the variable being tested), and it is
    # preferred, so every row is A.
    assert [r[2] for r in run(spec, rows)] == ["A", "A", "A", "A"]


def test_null_condition_is_false() -> None:
    rows = [{"id": 1, "x": None}, {"id": 2, "x": 5}]
    spec = make_spec(
        rows, "A", define={"A": "x > 1"}, measures=MATCH_BOUNDS, types={"x": pa.int64()}
    )
    assert run(spec, rows) == [(1, 2, 2)]


def test_all_rows_running_and_final_measures() -> None:
    rows = letters("aaa")
    spec = make_spec(
        rows,
        "A+",
        define=LETTER_DEFINES,
        measures=[
            ("running", "COUNT(*)", pa.int64()),
            ("final", "FINAL(COUNT(*))", pa.int64()),
            ("last", "FINAL(LAST(id))", pa.int64()),
            ("prev", "PREV(id)", pa.int64()),
        ],
        rows_per_match=RowsPerMatch.ALL_SHOW_EMPTY,
    )
    assert run(spec, rows) == [(1, 1, 3, 3, None, "a"), (2, 2, 3, 3, 1, "a"), (3, 3, 3, 3, 2, "a")]


# -- batch splits ----------------------------------------------------------------------------

PATTERNS = [
    "A B+",
    "A+? B",
    "(A | B)* C",
    "A* B?",
    "^A* $",
    "A {- B* -} C",
    "PERMUTE(A, B) C?",
    "(A B | A)+",
    "B{1,2} A",
    "(A?)* C",
]
MODES = list(RowsPerMatch)
SKIPS = [(SkipMode.PAST_LAST_ROW, None), (SkipMode.TO_NEXT_ROW, None), (SkipMode.TO_LAST, "C")]


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(alphabet="abc", max_size=24),
    pat=st.sampled_from(PATTERNS),
    mode=st.sampled_from(MODES),
    skip=st.sampled_from(SKIPS),
    all_matches=st.booleans(),
    cuts=st.lists(st.integers(min_value=1, max_value=23), max_size=6),
)
def test_any_batch_split_gives_the_same_output(text, pat, mode, skip, all_matches, cuts) -> None:
    rows = letters(text)
    if not rows:
        rows_schema = {"id": pa.int64(), "v": pa.string()}
    else:
        rows_schema = None
    measures = [
        ("mn", "MATCH_NUMBER()", pa.int64()),
        ("cls", "CLASSIFIER()", pa.string()),
        ("n", "COUNT(*)", pa.int64()),
        ("nxt", "NEXT(v)", pa.string()),
        ("prv", "PREV(FIRST(v), 2)", pa.string()),
        ("fin", "FINAL(LAST(id))", pa.int64()),
    ]
    spec = make_spec(
        rows,
        pat,
        define={"A": "v = 'a'", "B": "v = 'b' OR PREV(v) = 'a'", "C": "v = 'c'"},
        measures=measures,
        rows_per_match=mode,
        skip=skip[0],
        skip_variable=skip[1],
        all_matches=all_matches,
        types=rows_schema,
    )
    try:
        whole = run(spec, rows)
    except Exception as exc:  # the same error must happen in pieces
        with pytest.raises(type(exc)):
            run(spec, rows, splits=cuts)
        return
    assert run(spec, rows, splits=cuts) == whole
    assert run(spec, rows, splits=range(1, len(rows))) == whole
