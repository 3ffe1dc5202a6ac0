"""The WITHIN rule (:mod:`matchsql.engine.compiled.within`): one rule, every path.

A row is past the bound when its ORDER BY value lies more than the bound away
from the match's first row along the ordering, ``|here - first| > bound``, so
``ORDER BY .. DESC`` bounds a match as ``ASC`` does. The kernels' per-start
end rows are checked against the scalar rule row by row, and the reference
matcher, the compiled thread VM and the oracle against each other on random
partitions ordered either way.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchsql.config import Config
from matchsql.engine.compiled.within import NO_BOUND, _ends, outside, within_ends
from matchsql.engine.planner import new_partition_matcher
from matchsql.testing.oracle import Oracle
from tests.property.strategies import SCHEMA, spec_of

SETTINGS = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


def test_span_either_way() -> None:
    assert not outside(10, 13, 3) and outside(10, 14, 3)  # ASC: here - first
    assert not outside(10, 7, 3) and outside(10, 6, 3)  # DESC: first - here
    assert not outside(None, 100, 3) and not outside(5, None, 3)  # NULL is never outside
    assert not outside(5, 5, 0)
    nan = float("nan")
    assert not outside(nan, nan, 0)  # equal to itself
    assert outside(1.0, nan, 1e300)  # NaN lies above every bound
    t = dt.datetime(2024, 1, 1, 10)
    minutes = dt.timedelta(minutes=10)
    assert not outside(t, t - minutes, minutes)
    assert outside(t, t - minutes - dt.timedelta(seconds=1), minutes)


def test_nan_bound_cuts_nothing() -> None:
    """A NaN bound lies above every span (DuckDB's order of numbers), a NaN span's too."""
    nan = float("nan")
    assert not outside(1.0, 1e300, nan) and not outside(1.0, nan, nan)
    assert not outside(1, 2**62, nan)


def test_temporal_keys_measured_exactly() -> None:
    """Dates, times and nanosecond timestamps are measured in whole nanoseconds, either way."""
    day = dt.timedelta(days=1)
    jan = [dt.date(2024, 1, d) for d in (1, 2, 3)]
    assert not outside(jan[0], jan[1], day) and outside(jan[0], jan[2], day)
    assert not outside(jan[2], jan[1], day) and outside(jan[2], jan[0], day)  # DESC
    assert outside(jan[0], jan[1], dt.timedelta(hours=12))
    ten = dt.timedelta(minutes=10)
    assert not outside(dt.time(10), dt.time(10, 10), ten)
    assert outside(dt.time(10), dt.time(10, 10, 1), ten)
    first, inside, past_it = pa.array([0, 1000, 1001], pa.timestamp("ns")).to_pylist()
    micro = dt.timedelta(microseconds=1)
    assert not outside(first, inside, micro) and outside(first, past_it, micro)


sorted_columns = st.tuples(
    st.lists(st.one_of(st.integers(-5, 5).map(float), st.just(float("nan"))), max_size=12),
    st.integers(0, 3),
    st.booleans(),
    st.one_of(st.integers(0, 3), st.just(float("nan"))),
)


@SETTINGS
@given(sorted_columns)
def test_kernel_ends_follow_the_rule(drawn: tuple) -> None:
    """``_ends[s]``: the first row after ``s`` that :func:`outside` puts past the bound
    (NaN sorted as DuckDB: greatest; NULLs at the end)."""
    values, nulls, descending, bound = drawn
    keyed = sorted(values, key=lambda v: (v != v, v if v == v else 0.0), reverse=descending)
    column = keyed + [None] * nulls
    vals = np.array([0.0 if v is None else v for v in column], np.float64)
    valid = np.array([v is not None for v in column], np.uint8)
    got = _ends(vals, valid, float(bound), False)
    for s, first in enumerate(column):
        past = [r for r in range(s + 1, len(column)) if outside(first, column[r], bound)]
        assert got[s] == (past[0] if past else NO_BOUND), (column, s)


int64s = st.integers(-(2**63), 2**63 - 1)
integer_columns = st.tuples(
    st.lists(st.one_of(int64s, st.integers(2**60, 2**60 + 6), st.integers(-3, 3)), max_size=10),
    st.integers(0, 2),
    st.booleans(),
    st.one_of(st.integers(0, 4), st.integers(0, 2**63 - 1)),
)


@SETTINGS
@given(integer_columns)
def test_kernel_ends_over_integers_follow_the_exact_rule(drawn: tuple) -> None:
    """Integer keys are measured exactly (Python's ints in :func:`outside`): keys above
    2**53, and spans past int64's range, which float64 would round or int64 wrap."""
    values, nulls, descending, bound = drawn
    column = sorted(values, reverse=descending) + [None] * nulls
    keys = pa.array(column, pa.int64())
    got = within_ends(spec_of(SQL.format(order="", skip="PAST LAST ROW", bound=1)), bound, keys)
    for s, first in enumerate(column):
        past = [r for r in range(s + 1, len(column)) if outside(first, column[r], bound)]
        assert got[s] == (past[0] if past else NO_BOUND), (column, s, bound)


def test_keys_above_two_to_the_53_are_apart() -> None:
    """2**60 and 2**60 + 1 are one float64; WITHIN 1 from 2**60 keeps + 1 and cuts + 2."""
    keys = pa.array([2**60 + k for k in range(4)], pa.int64())
    spec = spec_of(SQL.format(order="", skip="PAST LAST ROW", bound=1))
    assert within_ends(spec, 1.0, keys).tolist() == [2, 3, NO_BOUND, NO_BOUND]
    assert within_ends(spec, 1.0, keys.cast(pa.uint64())).tolist() == [2, 3, NO_BOUND, NO_BOUND]


SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x {order} MEASURES FIRST(id) AS f, "
    "LAST(id) AS l, COUNT(*) AS c ONE ROW PER MATCH AFTER MATCH SKIP {skip} "
    "PATTERN (A B* C?) WITHIN {bound} DEFINE B AS y > 0, C AS y = 0)"
)
rows = st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 8)), st.integers(0, 2)), max_size=10)


def _matcher_rows(sql: str, ordered: list[dict], path: str) -> list[tuple]:
    config = Config()
    config.gpu = "off"
    config.execution_path = path
    matcher = new_partition_matcher(spec_of(sql), (), config)
    out = matcher.feed(pa.RecordBatch.from_pylist(ordered, schema=SCHEMA)) + matcher.finish()
    return [tuple(r.values()) for b in out for r in b.to_pylist()]


@SETTINGS
@given(rows, st.booleans(), st.integers(0, 4), st.sampled_from(["PAST LAST ROW", "TO NEXT ROW"]))
def test_paths_and_oracle_agree(drawn: list, descending: bool, bound: int, skip: str) -> None:
    sql = SQL.format(order="DESC" if descending else "ASC", skip=skip, bound=bound)
    present = sorted((x, i) for i, (x, _) in enumerate(drawn) if x is not None)
    if descending:
        present.reverse()
    order = [i for _, i in present] + [i for i, (x, _) in enumerate(drawn) if x is None]
    ordered = [{"id": i, "x": drawn[i][0], "y": drawn[i][1]} for i in order]
    want = Oracle(spec_of(sql)).run(ordered, ())
    for path in ("reference", "registers"):
        assert _matcher_rows(sql, ordered, path) == want, (path, sql, ordered)


DATES = pa.schema([("id", pa.int32()), ("d", pa.date32())])
ON_DATES = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY d {order} MEASURES FIRST(id) AS f, "
    "COUNT(*) AS c ONE ROW PER MATCH PATTERN (A B*) WITHIN INTERVAL '1' DAY "
    "DEFINE B AS id > 0)"
)


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_date_keys_on_every_path(descending: bool) -> None:
    """Ids 1-3 on 1, 2 and 4 January, WITHIN one day. ASC: from the 1st, the 2nd is one
    day on (inside), the 4th three (past): ids 1-2, then id 3 alone. DESC: from the 4th,
    the 2nd is two days back (past): id 3 alone; from the 2nd, the 1st is one day back
    (inside): ids 2-1."""
    sql = ON_DATES.format(order="DESC" if descending else "ASC")
    rows = [{"id": i, "d": dt.date(2024, 1, day)} for i, day in ((1, 1), (2, 2), (3, 4))]
    if descending:
        rows.reverse()
    want = [(3, 1), (2, 2)] if descending else [(1, 2), (3, 1)]
    spec = spec_of(sql, DATES)
    assert [tuple(r) for r in Oracle(spec).run(rows, ())] == want
    for path in ("reference", "registers"):
        config = Config()
        config.gpu = "off"
        config.execution_path = path
        matcher = new_partition_matcher(spec, (), config)
        out = matcher.feed(pa.RecordBatch.from_pylist(rows, schema=DATES)) + matcher.finish()
        assert [tuple(r.values()) for b in out for r in b.to_pylist()] == want, path
