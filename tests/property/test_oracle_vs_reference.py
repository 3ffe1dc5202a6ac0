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
from matchsql.fsm.oracle import Oracle
from matchsql.fsm.reference import ReferenceMatcher

from .strategies import SCHEMA, partitions, queries, spec_of

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _spec(sql: str):
    try:
        return spec_of(sql)
    except matchsql.Error:
        assume(False)


def _batch(rows: list[dict]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA) if rows else \
        pa.RecordBatch.from_pylist([], schema=SCHEMA)


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
