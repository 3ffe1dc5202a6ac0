"""Random queries with DuckDB functions over strings and dates: every path agrees.

The queries of the property suite, with DEFINE conditions and MEASURES that call
DuckDB's functions over string, date and integer columns (one row, navigated
rows, across rows, in aggregates). Each is analysed by the real grammar, its
derived input columns and its result projection computed by DuckDB
(:mod:`matchsql.expr.batch_select`), and run by the reference matcher and by
every compiled path that applies, whole and cut into random batches.
"""

from __future__ import annotations

import datetime

import pyarrow as pa
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.config import Config
from matchsql.engine.planner import new_partition_matcher
from matchsql.errors import ExecutionError
from matchsql.expr.batch_select import derive_input, project_result
from matchsql.plan.pattern import Alternation, Concatenation, Label
from tests.property.strategies import patterns, spec_of

SCHEMA = pa.schema([("id", pa.int32()), ("x", pa.int32()), ("s", pa.string()), ("d", pa.date32())])
SETTINGS = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
PATHS = ("row_local", "registers")

CONDITIONS = [
    "lower(s) = 'a'",
    "length(B.s) > length(A.s)",
    "year(d) = 2024",
    "s = PREV(s)",
    "B.s = A.s",
    "starts_with(s, 'é')",
    "d - PREV(d) > 1",
    "coalesce(PREV(s), '') <> s",
    "upper(s) IN ('A', 'É')",
    "s < PREV(s)",
    "concat(s, s) = 'aa'",
    "strftime(d, '%m') = '02'",
    "x > PREV(x)",
    "d > FIRST(d)",
    "levenshtein(s, 'ab') = 1",
    "hash(s) % 2 = 0",
    "ascii(s) > 100 AND x IS NOT NULL",
    "COUNT(*) <= 2",
]
MEASURES = (
    "MATCH_NUMBER() AS mn, concat_ws('-', FIRST(s), LAST(s)) AS ends, "
    "upper(CLASSIFIER()) AS cls, strftime(LAST(d), '%Y-%m') AS month, "
    "string_agg(s, ',' ORDER BY id) AS ss, median(x) AS med, "
    "date_diff('day', FIRST(d), LAST(d)) AS span, lower(PREV(s)) AS ps"
)
ROWS = ["ONE ROW PER MATCH", "ALL ROWS PER MATCH", "ALL ROWS PER MATCH WITH UNMATCHED ROWS"]
SKIPS = ["PAST LAST ROW", "TO NEXT ROW", "TO LAST B"]

strings = st.sampled_from([None, "a", "A", "b", "é", "éa", "", "ab"])
dates = st.sampled_from(
    [
        None,
        datetime.date(2024, 2, 1),
        datetime.date(2024, 2, 3),
        datetime.date(2023, 12, 31),
        datetime.date(2024, 3, 1),
    ]
)
xs = st.one_of(st.none(), st.integers(0, 3))
partitions = st.lists(st.tuples(xs, strings, dates), max_size=8).map(
    lambda rows: [{"id": i, "x": x, "s": s, "d": d} for i, (x, s, d) in enumerate(rows)]
)


#: The rows of several partitions: ``p`` is the partition's number.
PARTITIONED = pa.schema([("p", pa.int32()), *SCHEMA])


def partitioned(sql: str) -> str:
    """A query of :func:`queries` (one partition) partitioned by ``p``."""
    return sql.replace(
        "MATCH_RECOGNIZE (ORDER BY id", "MATCH_RECOGNIZE (PARTITION BY p ORDER BY id", 1
    )


def table_of(groups: list[list[dict]]) -> pa.Table:
    """The rows of each group (drawn by :data:`partitions`) as partition ``p``, the
    group's number."""
    return pa.Table.from_pylist(
        [{"p": p, **row} for p, group in enumerate(groups) for row in group], schema=PARTITIONED
    )


@st.composite
def queries(draw: st.DrawFn, conditions: list[str] = CONDITIONS) -> str:
    pattern = draw(patterns)
    if not {"A", "B"} <= set(pattern.variables()):  # both are defined and read
        pattern = Alternation((pattern, Concatenation((Label("A"), Label("B")))))
    a, b = draw(st.sampled_from(conditions)), draw(st.sampled_from(conditions))
    return (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id "
        f"MEASURES {MEASURES} {draw(st.sampled_from(ROWS))} "
        f"AFTER MATCH SKIP {draw(st.sampled_from(SKIPS))} "
        f"PATTERN ({pattern.to_sql()}) SUBSET U = (A, B) DEFINE A AS {a}, B AS {b})"
    )


def run_path(spec, rows: list[dict], splits: list[int], path: str, gpu: str = "off"):
    """``spec`` over ``rows`` fed in batches cut at ``splits`` on ``path`` (and the GPU
    path where ``gpu`` is ``'on'``): ``("rows", rows)``, ``("error", kind)`` or
    ``("n/a", None)`` where the path does not apply."""
    config = Config()
    config.execution_path = path
    config.gpu = gpu
    derive, project = derive_input(spec), project_result(spec)
    try:
        matcher = new_partition_matcher(spec, (), config)
        out: list[pa.RecordBatch] = []
        begin = 0
        for end in [*sorted(splits), len(rows)]:
            batch = pa.RecordBatch.from_pylist(rows[begin:end], schema=SCHEMA)
            out += matcher.feed(derive(batch) if derive else batch)
            begin = end
        out += matcher.finish()
    except ExecutionError as exc:
        if "does not apply to this query" in exc.message:
            return "n/a", None
        return "error", type(exc).__name__
    except matchsql.Error as exc:
        return "error", type(exc).__name__
    if project is not None:
        out = [project(b) for b in out]
    return "rows", [tuple(r.values()) for b in out for r in b.to_pylist()]


@SETTINGS
@given(sql=queries(), rows=partitions, data=st.data())
def test_paths_agree_with_functions(sql: str, rows: list[dict], data: st.DataObject) -> None:
    try:
        spec = spec_of(sql, SCHEMA)
    except matchsql.Error:
        assume(False)
        return
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=3))
    reference = run_path(spec, rows, [], "reference")  # rows, or an error all paths must raise
    for path in PATHS:
        got = run_path(spec, rows, splits, path)
        if got[0] != "n/a":
            assert got == reference, (path, sql, rows, splits)
