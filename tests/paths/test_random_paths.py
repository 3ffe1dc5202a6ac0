"""Random queries and partitions: every applicable compiled path equals the reference.

Queries come from the property suite's strategies (random patterns, DEFINEs,
measures, output and skip modes, ALL MATCHES); each is run by the reference
matcher and by every compiled path that applies, in one batch and split into
random batches (the compiled matchers resume between batches). Errors must
agree in class.
"""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.config import Config
from matchsql.engine.planner import new_partition_matcher
from matchsql.errors import ExecutionError
from tests.property.strategies import fed_in_splits, partitions, queries, spec_of

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
PATHS = ("row_local", "registers")

# Conditions the compiled paths evaluate, so that random queries exercise them
# more often than the property suite's mix would.
COMPILED_CONDITIONS = [
    "x > PREV(x)",
    "x = 1",
    "x IS NULL",
    "y >= 2",
    "A.x <= x",
    "x > FIRST(x)",
    "LAST(x, 1) IS NULL OR x <> LAST(x, 1)",
    "COUNT(*) <= 3",
    "NEXT(x) IS NOT NULL AND NEXT(x) > x",
    "PREV(LAST(U.y), 1) = y",
    "x <> PREV(x, 2)",
    "FIRST(B.x) IS NULL",
    "MATCH_NUMBER() <= 2",
    "B.y < A.x + 1",
    "U.x BETWEEN 1 AND 2",
    "x IN (0, 2)",
    "NOT (x > y)",
    "-x < y - 2",
    # running aggregates, accumulators carried by the threads
    "SUM(x) < 5",
    "SUM(A.x) <= y + 2",
    "AVG(U.y) >= 1",
    "MIN(x) = x",
    "MAX(B.y) < 3",
    "COUNT(A.*) < 2",
    "COUNT(U.x) <= 2",
    "SUM(x * y) FILTER (WHERE y > 0) < 4",
    "MIN(A.x) IS NULL OR MAX(A.x) - MIN(A.x) <= 1",
    "AVG(x + y) < 2 AND COUNT(B.y) > 0",
]


def _run(spec, rows: list[dict], splits: list[int], path: str):
    config = Config()
    config.execution_path = path
    try:
        out = fed_in_splits(new_partition_matcher(spec, (), config), rows, splits)
    except ExecutionError as exc:
        if "does not apply to this query" in exc.message:
            return "n/a", None
        return "error", type(exc).__name__
    except matchsql.Error as exc:
        return "error", type(exc).__name__
    return "rows", [tuple(r.values()) for b in out for r in b.to_pylist()]


def _check(sql: str, rows: list[dict], splits: list[int]) -> None:
    try:
        spec = spec_of(sql)
    except matchsql.Error:
        assume(False)
        return
    reference = _run(spec, rows, [], "reference")
    for path in PATHS:
        got = _run(spec, rows, splits, path)
        if got[0] != "n/a":
            assert got == reference, (path, sql, rows, splits)


@SETTINGS
@given(sql=queries(), rows=partitions, data=st.data())
def test_property_queries(sql: str, rows: list[dict], data: st.DataObject) -> None:
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=3))
    _check(sql, rows, splits)


@st.composite
def compiled_cases(draw: st.DrawFn) -> tuple[str, list[dict], list[int]]:
    """A random query whose DEFINE conditions the compiled paths take, its rows and the
    batch edges they are fed with."""
    sql, rows = draw(queries()), draw(partitions)
    a = draw(st.sampled_from(COMPILED_CONDITIONS))
    b = draw(st.sampled_from(COMPILED_CONDITIONS))
    head, _, _ = sql.rpartition("DEFINE")
    splits = draw(st.lists(st.integers(0, len(rows)), max_size=3))
    return f"{head}DEFINE A AS {a}, B AS {b}\n)", rows, splits


@SETTINGS
@given(compiled_cases())
def test_compiled_conditions(case: tuple[str, list[dict], list[int]]) -> None:
    _check(*case)
