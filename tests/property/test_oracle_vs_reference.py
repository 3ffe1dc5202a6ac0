"""The reference matcher agrees with the brute-force oracle on random inputs.

Both sides get the same analysed MatchSpec; a :class:`matchsql.Error` on one
side must be matched by an error on the other (statements that the analyser
rejects are skipped: there is nothing to compare). Profiles keep the suite
well under a minute and derandomised, so CI runs are reproducible.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.engine.reference import ReferenceMatcher
from matchsql.testing.oracle import Oracle
from tests.fsm.specs import expr

from .strategies import ROWS, SCHEMA, SKIPS, partitions, patterns, queries, spec_of, values

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _spec(sql: str):
    try:
        return spec_of(sql)
    except matchsql.Error:
        assume(False)


def _batch(rows: list[dict]) -> pa.RecordBatch:
    return (
        pa.RecordBatch.from_pylist(rows, schema=SCHEMA)
        if rows
        else pa.RecordBatch.from_pylist([], schema=SCHEMA)
    )


def _reference(spec, rows: list[dict], splits: list[int]) -> list[tuple]:
    matcher = ReferenceMatcher(spec, ())
    out: list[pa.RecordBatch] = []
    begin = 0
    for end in [*sorted(splits), len(rows)]:
        out += matcher.feed(_batch(rows[begin:end]))
        begin = end
    out += matcher.finish()
    result: list[tuple] = []
    for batch in out:
        result.extend(zip(*(col.to_pylist() for col in batch.columns)))
    return result


def _outcome(fn) -> tuple[str, object]:
    try:
        return "rows", fn()
    except matchsql.Error as exc:
        return "error", type(exc).__name__


@SETTINGS
@given(sql=queries(), rows=partitions)
def test_reference_matches_oracle(sql: str, rows: list[dict]) -> None:
    spec = _spec(sql)
    oracle = _outcome(lambda: Oracle(spec).run(rows, ()))
    assume(not (oracle[0] == "error" and oracle[1] == "LimitExceededError"))
    reference = _outcome(lambda: _reference(spec, rows, []))
    if oracle[0] == "error" or reference[0] == "error":
        assert oracle[0] == reference[0], (sql, rows, oracle, reference)
    else:
        assert reference[1] == oracle[1], (sql, rows)


@settings(SETTINGS, max_examples=35)
@given(sql=queries(), rows=partitions, data=st.data())
def test_batch_splits_do_not_matter(sql: str, rows: list[dict], data: st.DataObject) -> None:
    spec = _spec(sql)
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=4))
    whole = _outcome(lambda: _reference(spec, rows, []))
    split = _outcome(lambda: _reference(spec, rows, splits))
    assert whole == split, (sql, rows, splits)


# Running aggregates in DEFINE: the reference carries them from row to row along
# each thread's history (HistoryLabels.fold); the oracle recomputes them over the
# whole match at every row. FILTER is not accepted by the analyser in DEFINE, so
# the conditions are set on the analysed spec directly (both sides get that spec).
AGGREGATE_CONDITIONS = [
    "SUM(x) < 5",
    "SUM(B.x) <= 4",
    "AVG(U.y) >= 1",
    "MIN(x) = x",
    "MAX(A.y) < 3",
    "COUNT(B.*) < 3",
    "COUNT(U.x) <= 2",
    "COUNT(*) > 1 AND SUM(y) > 2",
    "bool_and(x > 0)",
    "bool_or(U.y = 0) IS NOT TRUE",
    "count_if(y = 1) < 2",
    "any_value(A.x) = 1",
    "SUM(x + y) > 2 OR AVG(A.x) IS NULL",
    "SUM(x) FILTER (WHERE y > 1) < 4",
    "COUNT(*) FILTER (WHERE x IS NULL) < 2",
    "AVG(B.x) FILTER (WHERE B.y >= 1) > 1",
    "MIN(U.y) FILTER (WHERE U.x = 1) IS NULL",
    "SUM(PREV(x)) < 4",
    "COUNT(DISTINCT x) < 3",
]
long_partitions = st.lists(st.tuples(values, values), max_size=14).map(
    lambda rows: [{"id": i, "x": x, "y": y} for i, (x, y) in enumerate(rows)]
)


@settings(SETTINGS, max_examples=120)
@given(
    pattern=patterns,
    a=st.sampled_from(AGGREGATE_CONDITIONS),
    b=st.sampled_from(AGGREGATE_CONDITIONS),
    rows_per_match=st.sampled_from(ROWS[:2]),
    skip=st.sampled_from(SKIPS[:2]),
    all_matches=st.booleans(),
    rows=long_partitions,
    data=st.data(),
)
def test_running_aggregates_in_define_match_oracle(
    pattern, a, b, rows_per_match, skip, all_matches, rows, data
) -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS mn, "
        "CLASSIFIER() AS cls, COUNT(*) AS n, SUM(A.x) AS sa "
        f"{rows_per_match} AFTER MATCH SKIP {skip} {'ALL MATCHES' if all_matches else ''} "
        f"PATTERN ({pattern.to_sql()}) SUBSET U = (A, B) DEFINE A AS TRUE, B AS TRUE)"
    )
    spec = _spec(sql)
    spec.defines = {**spec.defines, "A": expr(a), "B": expr(b)}
    oracle = _outcome(lambda: Oracle(spec).run(rows, ()))
    assume(not (oracle[0] == "error" and oracle[1] == "LimitExceededError"))
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=3))
    reference = _outcome(lambda: _reference(spec, rows, splits))
    assert reference == oracle, (sql, a, b, rows, splits)
