"""Per-tuple Go4Risk statistics counted by the compiled matcher itself.

The thesis' Table 4.2 is replayed through a real MATCH_RECOGNIZE query: the
compiled kernel must count the same tuples in and out per state as the
thesis' one-path FSM (tests/adaptive/thesis_fsm.py), whatever the batches.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from matchsql.engine.compiled import compiled_matcher
from matchsql.engine.matcher import CountingGate
from matchsql.engine.planner import new_partition_matcher
from matchsql.engine.program import Op, compile_pattern
from matchsql.engine.states import label_states, states_from_pattern
from matchsql.execution.adaptive.push import LocalRuns
from matchsql.execution.adaptive.statistics import Sliding, StateStatistics
from matchsql.execution.router.hashed import HashPartitionRouter
from tests.property.strategies import patterns, spec_of

from .test_statistics import THESIS_STATES

SCHEMA = pa.schema([("id", pa.int64()), ("kind", pa.string())])
QUERY = """SELECT * FROM t MATCH_RECOGNIZE (
  ORDER BY id
  MEASURES MATCH_NUMBER() AS mn
  ONE ROW PER MATCH
  AFTER MATCH SKIP TO NEXT ROW
  PATTERN ({pattern})
  DEFINE A AS kind = 'A', B AS kind = 'B', C AS kind = 'C'
)"""


def _matcher(pattern: str):
    sql = QUERY.format(pattern=pattern)
    spec = spec_of(sql, SCHEMA)
    matcher = new_partition_matcher(spec)
    states, ids = label_states(spec.pattern)
    assert matcher.observe(states, ids)
    return matcher, states


def _batch(kinds: list[str], first: int = 0) -> pa.RecordBatch:
    return pa.record_batch(
        [pa.array(range(first, first + len(kinds)), pa.int64()), pa.array(kinds)], schema=SCHEMA
    )


def _load(matcher, states) -> StateStatistics:
    stats = StateStatistics(states)
    stats.load(*matcher.state_counts())
    return stats


def test_table_4_2_counted_by_the_kernel() -> None:
    # Pattern (A*, B, B*, C) of Figure 4.10 is A* B+ C; stream A1 A2 B1 C1.
    matcher, states = _matcher("A* B+ C")
    assert states == THESIS_STATES
    matcher.feed(_batch(["A", "A", "B", "C"]))
    matcher.finish()
    stats = _load(matcher, states)
    assert [stats.counts(i) for i in range(4)] == [(7, 4), (4, 3), (3, 3), (3, 3)]
    assert (stats.windows, stats.matches) == (4, 3)
    assert stats.r_bound(0) == 3  # the worked example of section 4.4.1
    assert [stats.r_bound(0, u) for u in (0, 1, 2, 10)] == [3, 6, 9, 33]


def test_counts_do_not_depend_on_batches() -> None:
    kinds = list("AABCABBCCAB" * 5)
    whole, states = _matcher("A* B+ C")
    whole.feed(_batch(kinds))
    whole.finish()
    split, _ = _matcher("A* B+ C")
    for k in range(0, len(kinds), 3):  # open attempts are re-run: must count once
        split.feed(_batch(kinds[k : k + 3], k))
    split.finish()
    a, b = whole.state_counts(), split.state_counts()
    assert [list(x) for x in a[:2]] == [list(x) for x in b[:2]]
    assert a[2:4] == b[2:4]


def test_current_state_of_an_open_window() -> None:
    matcher, states = _matcher("A B+ C")
    matcher.feed(_batch(["A", "B", "B"]))  # the window from row 1 waits in B*
    stats = _load(matcher, states)
    assert states[stats.current].name == "B"
    assert stats.r_bound(stats.current, 0, Sliding.NEXT_ROW) >= 1


@settings(max_examples=200, deadline=None)
@given(patterns)
def test_label_states_follow_the_program(pattern) -> None:
    states, ids = label_states(pattern)
    assert states == states_from_pattern(pattern)
    labels = [ins for ins in compile_pattern(pattern).instructions if ins.op is Op.LABEL]
    assert len(ids) == len(labels)
    for state, ins in zip(ids, labels):
        assert ins.var in states[state].name.split("|")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from("ABC"), min_size=1, max_size=30))
def test_out_never_exceeds_in(kinds: list[str]) -> None:
    matcher, states = _matcher("A* (B | C)+ C?")
    matcher.feed(_batch(kinds))
    matcher.finish()
    ins, outs, windows, matched, _ = matcher.state_counts()
    assert all(o <= i for i, o in zip(ins, outs))
    assert windows == len(kinds) and 0 <= matched <= windows
    assert ins[0] >= 1


def test_statistics_are_a_sample_after_the_warm_up(monkeypatch) -> None:
    """Every window is counted until COUNT_WARM_WINDOWS; after that one call in
    COUNT_EVERY_S counts, and the calls between take the uncounted kernel, whose rows
    are the same."""
    monkeypatch.setattr(compiled_matcher, "COUNT_WARM_WINDOWS", 20)
    monkeypatch.setattr(compiled_matcher, "COUNT_EVERY_S", 3600.0)
    kinds = list("AABCABBC" * 2)  # 16 rows: 16 windows, all counted while warming up
    matcher, _ = _matcher("A* B+ C")
    plain = new_partition_matcher(matcher.spec)
    out, ref = [], []
    for k in range(0, 64, 16):
        out += matcher.feed(_batch(kinds, k))
        ref += plain.feed(_batch(kinds, k))
    warm = matcher.state_counts()[2]
    # Past the warm-up after the second batch; of the two calls after it at most the
    # first counts (a sample is due where none was taken yet), so 16 windows go uncounted.
    assert 16 <= warm <= 48
    monkeypatch.setattr(compiled_matcher, "COUNT_EVERY_S", 0.0)
    out += matcher.feed(_batch(kinds, 64))
    ref += plain.feed(_batch(kinds, 64))
    out += matcher.finish()
    ref += plain.finish()
    assert matcher.state_counts()[2] > warm  # a due sample counts again
    assert pa.Table.from_batches(out).equals(pa.Table.from_batches(ref))


def test_a_closed_gate_stops_the_counting_not_the_matching() -> None:
    """Calls made while the gate is off (the query thread reading as pull does) count
    nothing and give the rows of a matcher that never counts."""
    gate = CountingGate()
    spec = spec_of(QUERY.format(pattern="A* B+ C"), SCHEMA)
    states, ids = label_states(spec.pattern)
    matcher = new_partition_matcher(spec)
    assert matcher.observe(states, ids, gate)
    plain = new_partition_matcher(spec)
    kinds = list("AABCABBC")
    gate.on = False
    out = matcher.feed(_batch(kinds))
    ref = plain.feed(_batch(kinds))
    assert matcher.state_counts()[2] == 0
    gate.on = True
    out += matcher.feed(_batch(kinds, 8))
    ref += plain.feed(_batch(kinds, 8))
    out += matcher.finish()
    ref += plain.finish()
    assert matcher.state_counts()[2] >= len(kinds)
    assert pa.Table.from_batches(out).equals(pa.Table.from_batches(ref))


def test_local_runs_count_what_the_holders_feed_only() -> None:
    """LocalRuns: a batch routed as pull does leaves the statistics alone; a holder's
    rows fed to the same run are counted."""
    spec = spec_of(QUERY.format(pattern="A* B+ C"), SCHEMA)
    states, ids = label_states(spec.pattern)
    runs = LocalRuns(HashPartitionRouter([], lambda key: new_partition_matcher(spec)))
    runs.observe(states, ids)
    fed = runs.feed([((), _batch(list("AABCC")))])
    assert fed[0].counts is not None and fed[0].counts[2] > 0
    counted = runs.router.runs[()].state_counts()[2]
    list(runs.route(_batch(list("CABBCAABCC"), 5)))
    assert runs.router.runs[()].state_counts()[2] == counted
    fed = runs.feed([((), _batch(list("ABCC"), 15))])
    assert fed[0].counts is not None and fed[0].counts[2] > counted
