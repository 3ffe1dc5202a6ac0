"""Random queries: the GPU path (simulated) equals the CPU paths.

Queries come from the property suite's strategies with the DEFINEs replaced
by conditions the GPU path evaluates: row-local ones (elementwise on the
device) and register ones (``A.x``, FIRST/LAST, ``COUNT(*)``, running aggregates, in-thread), alone
or ANDed with a row-local term; rows come in random batches (the GPU matcher
holds them until the partition ends).
"""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.config import Config
from matchsql.engine.gpu.gpu_live import LiveGpuMatcher
from matchsql.engine.gpu.gpu_matcher import GpuMatcher
from matchsql.engine.planner import new_partition_matcher
from matchsql.errors import ExecutionError
from tests.property.strategies import fed_in_splits, partitions, queries, spec_of

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
ROW_LOCAL = [
    "x > PREV(x)",
    "x = 1",
    "x IS NULL",
    "y >= 2",
    "NEXT(x) IS NOT NULL AND NEXT(x) > x",
    "x <> PREV(x, 2)",
    "x BETWEEN 1 AND 2",
    "NOT (x > y)",
    "-x < y - 2",
    "x * 2 > y OR y IS NULL",
    "x / 2 <= 1",
    "x IN (1, 3)",
    "y NOT IN (0, NULL)",
    "x IN (y, PREV(y))",
]
REGISTERS = [
    "x > A.x",
    "x >= FIRST(x)",
    "LAST(B.x) < x",
    "FIRST(A.x) IS NULL OR x <> A.x",
    "COUNT(*) <= 3",
    "x + FIRST(y) > LAST(U.x)",
    "ABS(x - A.x) BETWEEN 1 AND 2",
    "x = LAST(x, 1)",
    "FIRST(x, 1) < y",
    "NOT (y > PREV(A.x))",
    "SUM(x) < 5",
    "SUM(A.x) <= y + 2",
    "AVG(U.y) >= 1",
    "MIN(x) = x",
    "MAX(B.y) < 3",
    "COUNT(A.*) < 2",
    "COUNT(U.x) <= 2",
    "SUM(x * y) FILTER (WHERE y > 0) < 4",
    "MIN(A.x) IS NULL OR MAX(A.x) - MIN(A.x) <= 1",
]
WITHIN = ["", "", " WITHIN 0", " WITHIN 1", " WITHIN 3"]


def _gpu_query(sql: str, a: str, b: str, within: str = "", each: bool = False) -> str:
    """``sql`` with DEFINEs ``a``/``b`` and in a shape the GPU path takes: A and B
    declared (SUBSET U names both) by an alternative; ``within`` (e.g. ``WITHIN 2``)
    follows the pattern. Without ``each``, no ALL MATCHES and no unmatched rows."""
    head, _, _ = sql.rpartition("DEFINE")
    if not each:
        head = head.replace("ALL MATCHES", "").replace(" WITH UNMATCHED ROWS", "")
    begin = head.index("PATTERN (") + len("PATTERN (")
    end = head.index("\n", begin) - 1
    head = f"{head[:begin]}({head[begin:end]}) | A B){within}{head[end + 1 :]}"
    return f"{head}DEFINE A AS {a}, B AS {b}\n)"


def _maybe_descending(sql: str, rows: list[dict], data: st.DataObject) -> tuple[str, list[dict]]:
    """``sql`` and ``rows`` as drawn, or under ``ORDER BY id DESC`` with the rows latest
    first (the matchers take their input sorted): WITHIN is measured along either order."""
    if not data.draw(st.booleans()):
        return sql, rows
    return sql.replace("ORDER BY id", "ORDER BY id DESC", 1), rows[::-1]


def _run(
    spec, rows: list[dict], splits: list[int], gpu: str, live: bool = False, path: str = "auto"
):
    config = Config()
    config.gpu = gpu
    config.execution_path = path
    try:
        matcher = new_partition_matcher(spec, (), config, live=live)
        out = fed_in_splits(matcher, rows, splits)
    except ExecutionError as exc:
        if "does not apply to this query" in exc.message:
            return "n/a", None
        return "error", type(exc).__name__
    except matchsql.Error as exc:
        return "error", type(exc).__name__
    if gpu == "on" and rows:
        assert isinstance(matcher, LiveGpuMatcher if live else GpuMatcher)
        assert matcher.ran_on == "gpu"
    return "rows", [tuple(r.values()) for b in out for r in b.to_pylist()]


@SETTINGS
@given(sql=queries(), rows=partitions, data=st.data())
def test_random_row_local(sql: str, rows: list[dict], data: st.DataObject) -> None:
    a = data.draw(st.sampled_from(ROW_LOCAL))
    b = data.draw(st.sampled_from(ROW_LOCAL))
    try:
        spec = spec_of(_gpu_query(sql, a, b))
    except matchsql.Error:
        assume(False)
        return
    got = _run(spec, rows, data.draw(st.lists(st.integers(0, len(rows)), max_size=3)), "on")
    assume(got[0] != "n/a")
    assert got == _run(spec, rows, [], "off"), _gpu_query(sql, a, b)


@SETTINGS
@given(sql=queries(), rows=partitions, data=st.data())
def test_random_registers(sql: str, rows: list[dict], data: st.DataObject) -> None:
    a = data.draw(st.sampled_from(REGISTERS))
    b = data.draw(st.sampled_from(REGISTERS + ROW_LOCAL))
    if data.draw(st.booleans()):
        a = f"{a} AND {data.draw(st.sampled_from(ROW_LOCAL))}"
    within = data.draw(st.sampled_from(WITHIN))
    sql, rows = _maybe_descending(sql, rows, data)
    try:
        spec = spec_of(_gpu_query(sql, a, b, within))
    except matchsql.Error:
        assume(False)
        return
    got = _run(spec, rows, data.draw(st.lists(st.integers(0, len(rows)), max_size=3)), "on")
    assume(got[0] != "n/a")
    assert got == _run(spec, rows, [], "off"), _gpu_query(sql, a, b, within)
    if within:  # WITHIN on the compiled CPU paths is checked against the reference too
        assert got == _run(spec, rows, [], "off", path="reference"), _gpu_query(sql, a, b, within)


@SETTINGS
@given(sql=queries(), rows=partitions, data=st.data())
def test_random_live_stream(sql: str, rows: list[dict], data: st.DataObject) -> None:
    """A live partition (a launch per batch, starts waiting for rows) gives the rows of
    the whole partition on a CPU path."""
    a = data.draw(st.sampled_from(REGISTERS + ROW_LOCAL))
    b = data.draw(st.sampled_from(REGISTERS + ROW_LOCAL))
    within = data.draw(st.sampled_from(WITHIN))
    try:
        spec = spec_of(_gpu_query(sql, a, b, within))
    except matchsql.Error:
        assume(False)
        return
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=4))
    got = _run(spec, rows, splits, "on", live=True)
    assume(got[0] != "n/a")
    assert got == _run(spec, rows, [], "off"), _gpu_query(sql, a, b, within)


@SETTINGS
@given(sql=queries(), rows=partitions, data=st.data())
def test_random_each(sql: str, rows: list[dict], data: st.DataObject) -> None:
    """ALL MATCHES / INCREMENTAL MATCH (every end of an attempt) and WITH UNMATCHED
    ROWS on the GPU path give the compiled CPU path's rows and the reference's."""
    a = data.draw(st.sampled_from(REGISTERS + ROW_LOCAL))
    b = data.draw(st.sampled_from(REGISTERS + ROW_LOCAL))
    within = data.draw(st.sampled_from(WITHIN))
    mode = data.draw(st.sampled_from(["ALL MATCHES", "INCREMENTAL MATCH", ""]))
    sql, rows = _maybe_descending(sql, rows, data)
    if "ALL MATCHES" not in sql:
        sql = sql.replace("  PATTERN (", f"  {mode}\n  PATTERN (", 1)
    query = _gpu_query(sql, a, b, within, each=True)
    try:
        spec = spec_of(query)
    except matchsql.Error:
        assume(False)
        return
    assume(spec.all_ends or spec.with_unmatched)
    got = _run(spec, rows, data.draw(st.lists(st.integers(0, len(rows)), max_size=3)), "on")
    assume(got[0] != "n/a")
    assert got == _run(spec, rows, [], "off"), query
    assert got == _run(spec, rows, [], "off", path="reference"), query
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=4))
    assert _run(spec, rows, splits, "on", live=True) == got, query  # a launch per batch
