"""Random queries give the same rows through push and adaptive input as matched directly.

PushInput is driven without a live store (``next_batch`` hands out random
slices of the rows), so hypothesis can try many queries, batch splits, U
values and partition rules; the push thread's slicing and the Go4Risk
suspensions must never change what a matcher sees: the same rows in the same
order per partition. The direct run uses the same execution path as the pushed
one: the paths' agreement with the reference is the paths' tests' to check
(tests/paths), and a path's own disagreement is not an input mode's.
"""

from __future__ import annotations

import time

import pyarrow as pa
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.config import Config
from matchsql.engine.planner import new_partition_matcher
from matchsql.engine.states import label_states
from matchsql.execution.adaptive.metrics import InputMetrics
from matchsql.execution.adaptive.modes import RULES
from matchsql.execution.adaptive.push import PushInput
from tests.property.strategies import SCHEMA, partitions, queries, spec_of

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _rows(batches: list[pa.RecordBatch]) -> list[tuple]:
    return [tuple(col[i].as_py() for col in b.columns) for b in batches for i in range(b.num_rows)]


def _outcome(fn) -> tuple[str, object]:
    try:
        return "rows", fn()
    except matchsql.Error as exc:
        return "error", type(exc).__name__


def _pushed(
    spec, rows: list[dict], splits: list[int], mode: str, u: int | str, rule: str, config: Config
) -> list[tuple]:
    batch = pa.RecordBatch.from_pylist(rows, schema=SCHEMA)
    cuts = [0, *sorted(splits), len(rows)]
    pieces = iter(
        [
            (batch.slice(a, b - a), time.monotonic_ns() * (b - a))
            for a, b in zip(cuts, cuts[1:])
            if b > a
        ]
    )
    states, ids = label_states(spec.pattern)
    push = PushInput(
        [],
        lambda key: new_partition_matcher(spec, key, config),
        lambda: next(pieces, None),
        metrics=InputMetrics(),
        adaptive=mode == "adaptive",
        states=states,
        label_state=ids,
        u=u,
        rule=rule,
    )
    push.start()
    try:
        return _rows(list(push.batches()))
    finally:
        push.close()


@SETTINGS
@given(sql=queries(), rows=partitions.filter(bool), data=st.data())
def test_push_and_adaptive_equal_direct_matching(
    sql: str, rows: list[dict], data: st.DataObject
) -> None:
    try:
        spec = spec_of(sql)
    except matchsql.Error:
        assume(False)
    mode = data.draw(st.sampled_from(["push", "adaptive"]))
    u = data.draw(st.sampled_from([0, 1, 2, 10, "auto"]))
    rule = data.draw(st.sampled_from(RULES))
    path = data.draw(st.sampled_from(["auto", "reference"]))
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=3))
    config = Config(execution_path=path)

    def direct() -> list[tuple]:
        matcher = new_partition_matcher(spec, (), config)  # the same path, fed directly
        out = matcher.feed(pa.RecordBatch.from_pylist(rows, schema=SCHEMA)) + matcher.finish()
        return _rows(out)

    expected = _outcome(direct)
    assume(expected != ("error", "LimitExceededError"))
    got = _outcome(lambda: _pushed(spec, rows, splits, mode, u, rule, config))
    assert got == expected, (sql, rows, splits, mode, u, rule, path)
