"""The Go4Risk statistic model against the thesis' worked examples (chapter 4)."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from matchsql.engine.states import StateKind, StateSpec, states_from_pattern
from matchsql.execution.adaptive.statistics import Sliding, StateStatistics
from matchsql.grammar.pattern_parser import parse_pattern

from .thesis_fsm import ThesisRun, replay_next_row

STAR, ONE = StateKind.STAR, StateKind.SINGLETON
# Figure 4.10: pattern (A*, B, B*, C).
THESIS_STATES = (
    StateSpec("A", STAR),
    StateSpec("B", ONE),
    StateSpec("B", STAR),
    StateSpec("C", ONE),
)
STREAM = ["A1", "A2", "B1", "C1"]

# Table 4.2, columns sel_A*, sel_B, sel_B*, sel_C after each step, as (out, in)
# pairs; the thesis prints "0" for a state no tuple has entered yet (in = 0).
# Steps 1-4 are the first window (A1..C1, a match); steps 5-7 the window from
# A2, 8-9 the window from B1 (matches), step 10 the window from C1, which C1
# leaves A* (4/7) and then fails at B (3/4): a non-match.
TABLE_4_2 = [
    # step, window start, tuple, expected (out, in) per state
    (1, 0, "A1", [(0, 1), (0, 0), (0, 0), (0, 0)]),
    (2, 0, "A2", [(0, 2), (0, 0), (0, 0), (0, 0)]),
    (3, 0, "B1", [(1, 3), (1, 1), (0, 0), (0, 0)]),
    (4, 0, "C1", [(1, 3), (1, 1), (1, 1), (1, 1)]),
    (5, 1, "A2", [(1, 4), (1, 1), (1, 1), (1, 1)]),
    (6, 1, "B1", [(2, 5), (2, 2), (1, 1), (1, 1)]),
    (7, 1, "C1", [(2, 5), (2, 2), (2, 2), (2, 2)]),
    (8, 2, "B1", [(3, 6), (3, 3), (2, 2), (2, 2)]),
    (9, 2, "C1", [(3, 6), (3, 3), (3, 3), (3, 3)]),
    (10, 3, "C1", [(4, 7), (3, 4), (3, 3), (3, 3)]),
]


def table_4_2_statistics() -> StateStatistics:
    stats = StateStatistics(THESIS_STATES)
    replay_next_row(stats, STREAM)
    return stats


def test_table_4_2_step_by_step() -> None:
    stats = StateStatistics(THESIS_STATES)
    run = None
    start = None
    for step, window_start, tup, expected in TABLE_4_2:
        if window_start != start:
            run, start = ThesisRun(stats), window_start
        assert run is not None
        run.feed(tup)
        got = [(stats.counts(i)[1], stats.counts(i)[0]) for i in range(4)]
        assert got == expected, f"step {step}"
        for i, (out, n) in enumerate(expected):
            assert stats.selectivity(i) == (F(out, n) if n else 0), f"step {step}, state {i}"


def test_replay_gives_the_thesis_windows() -> None:
    stats = StateStatistics(THESIS_STATES)
    windows = replay_next_row(stats, STREAM)
    assert windows == [("A1", "A2", "B1", "C1"), ("A2", "B1", "C1"), ("B1", "C1"), ("C1",)]
    assert (stats.windows, stats.matches) == (4, 3)


def test_tumbling_example_after_step_4() -> None:
    # Text under Figure 4.10: after the first window with a tumbling window the
    # next window starts at A*: Sel_remain = 1 x sel_B x 1 x sel_C = 1, K = 0.25.
    stats = StateStatistics(THESIS_STATES)
    run = ThesisRun(stats)
    for tup in STREAM:
        run.feed(tup)
    assert stats.sel_remain(0) == 1
    assert stats.expectation(0) == F(1, 4)


def test_sel_remain_and_k_after_table_4_2() -> None:
    # After step 10: Sel_remain = 1 x 3/4 x 1 x 3/3 = 3/4 and K = 1 x 0.5 x 1 x 0.5 = 0.25,
    # so the remaining selectivity is high (Definition 4).
    stats = table_4_2_statistics()
    assert stats.sel_remain(0) == F(3, 4)
    assert stats.expectation(0) == F(1, 4)
    assert stats.remain_is_high(0)
    # From B (state 1) only B and C remain: 3/4 x 1 against K = 0.25.
    assert stats.sel_remain(1) == F(3, 4)
    assert stats.expectation(1) == F(1, 4)
    # From C: sel_C = 3/3 against K = 0.5.
    assert (stats.sel_remain(3), stats.expectation(3)) == (1, F(1, 2))


def test_r_bound_worked_example_is_3() -> None:
    # Section 4.4.1: R_Bound = l_seq = (ceil(3/4) + 0) + (1 + 0) + (0 + 0) + (1 + 0) = 3.
    # A* was evaluated 7 times and left 4 times: 3 tuples stayed inside it over
    # 4 exits, ceil(3/4) = 1; B and C are singletons (1 each); B* is not the
    # first star (0). U = 0 (default) and TO NEXT ROW, so R_Bound = l_seq.
    stats = table_4_2_statistics()
    assert stats.tuples_inside(0) == F(3, 4)
    assert stats.l_seq(0) == 3
    assert stats.r_bound(0) == 3
    assert stats.r_bound(0, u=0, sliding=Sliding.NEXT_ROW) == 3


def test_r_bound_with_u_per_table_4_3() -> None:
    # Match_overall = 3 matches / 4 windows = 0.75 > 0.5 and Sel_remain is high,
    # so Table 4.3's first row applies: l_seq + U * l_pattern (TO NEXT ROW) and
    # l_seq + 1 + U * l_pattern (PAST LAST ROW); here l_pattern = l_seq = 3.
    stats = table_4_2_statistics()
    assert stats.match_overall() == F(3, 4)
    assert stats.l_pattern() == 3
    assert [stats.r_bound(0, u) for u in (0, 1, 2, 10)] == [3, 6, 9, 33]
    assert [stats.r_bound(0, u, Sliding.PAST_LAST_ROW) for u in (0, 1, 2)] == [4, 7, 10]
    # From C only C remains: l_seq = 1, l_pattern still 3.
    assert stats.r_bound(3, 2) == 1 + 2 * 3


def test_r_bound_second_row_of_table_4_3() -> None:
    # A low match rate (Match_overall <= 0.5) ignores U: R_Bound = l_seq (+1 tumbling).
    stats = StateStatistics([StateSpec("A", ONE), StateSpec("B", ONE)])
    stats.window_opened()
    stats.evaluated(0, left=True)
    stats.evaluated(1, left=True)
    stats.match_found()
    stats.window_opened()
    stats.evaluated(0, left=False)
    assert stats.match_overall() == F(1, 2)  # not > 0.5
    assert stats.r_bound(0, u=10) == 2
    assert stats.r_bound(0, u=10, sliding=Sliding.PAST_LAST_ROW) == 3
    # Sel_remain is high while sel_A * sel_B >= K = 1/4 (here 1/2 x 1); three
    # more failed windows give sel_A = 1/5, which makes it low.
    for _ in range(3):
        stats.window_opened()
        stats.evaluated(0, left=False)
    assert stats.sel_remain(0) == F(1, 5) < stats.expectation(0)
    assert not stats.remain_is_high(0)


def test_no_match_yet_bounds_by_state_count() -> None:
    # Listing 4.2: without match statistics R_Bound is the number of states.
    stats = StateStatistics(THESIS_STATES)
    assert stats.r_bound(0, u=5) == 4
    ThesisRun(stats).feed("A1")
    assert stats.r_bound(0, u=5) == 4


def test_section_4_3_1_pattern_a_b_example() -> None:
    # Pattern (A, B), stream A1 A2 B1 B2, tumbling: sel_A = 2/3, sel_B = 1/2 and
    # sel_A * sel_B = 1/3 = Match_overall (one match in three windows).
    stats = StateStatistics([StateSpec("A", ONE), StateSpec("B", ONE)])
    run = ThesisRun(stats)
    for tup in ["A1", "A2", "B1", "B2"]:
        if run.feed(tup) == "non-match" and tup == "A2":
            run.feed(tup)  # a non-match at B restarts the window with A2
    assert (stats.selectivity(0), stats.selectivity(1)) == (F(2, 3), F(1, 2))
    assert stats.match_overall() == F(1, 3) == stats.selectivity(0) * stats.selectivity(1)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("A* B B* C", [("A", STAR), ("B", ONE), ("B", STAR), ("C", ONE)]),
        ("A+ B", [("A", ONE), ("A", STAR), ("B", ONE)]),
        ("A{2,3} B?", [("A", ONE), ("A", ONE), ("A", STAR), ("B", STAR)]),
        ("A{2}", [("A", ONE), ("A", ONE)]),
        ("^ (A | B) C $", [("A|B", ONE), ("C", ONE)]),
        ("(A B)+", [("A", ONE), ("B", ONE), ("A", STAR), ("B", STAR)]),
        ("A {- B -} C", [("A", ONE), ("B", ONE), ("C", ONE)]),
    ],
)
def test_states_from_pattern(pattern: str, expected: list[tuple[str, StateKind]]) -> None:
    assert [(s.name, s.kind) for s in states_from_pattern(parse_pattern(pattern))] == expected


def test_star_never_left_counts_tuples_seen() -> None:
    stats = StateStatistics([StateSpec("A", STAR), StateSpec("B", ONE)])
    stats.matches = 1  # force the statistic branch
    for _ in range(5):
        stats.evaluated(0, left=False)
    assert stats.tuples_inside(0) is None
    assert stats.l_seq(0) == 5 + 1
