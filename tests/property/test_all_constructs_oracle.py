"""Whole random queries, every construct at once: every path gives the oracle's rows.

One strategy draws a complete MATCH_RECOGNIZE statement: a random pattern
(greedy and reluctant quantifiers, alternation, grouping, PERMUTE, exclusion,
anchors, the empty pattern), DEFINE conditions that mix row-local
comparisons, PREV/NEXT, other variables' columns, FIRST/LAST with offsets,
running aggregates (with FILTER), CLASSIFIER() and MATCH_NUMBER(); MEASURES
with nested navigation, RUNNING/FINAL, every aggregate the engine knows,
two SUBSET variables, CLASSIFIER/MATCH_NUMBER; every output mode and AFTER
MATCH SKIP; PARTITION BY over several partitions or none; NULLs in every
column. Each partition runs on every execution path (a path that does not
apply says so and is skipped), fed in random batches, and must give the
brute-force oracle's rows (:mod:`matchsql.testing.oracle`), or an error of the
same class.

CI runs a few dozen derandomised examples. The long run the issue asks for::

    ALL_EXAMPLES=2000 PYTHONPATH=$PWD NUMBA_CACHE_DIR=$PWD/.numba_cache \\
        .venv/bin/python -m pytest -q -p no:cacheprovider \\
        tests/property/test_all_constructs_oracle.py
"""

from __future__ import annotations

import os

import pyarrow as pa
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.config import Config
from matchsql.engine.planner import new_partition_matcher
from matchsql.errors import ExecutionError
from matchsql.plan.pattern import Exclusion, PatternNode
from matchsql.plan.spec import MatchSpec
from matchsql.testing.oracle import Oracle

from .strategies import CONDITIONS, ROWS, as_result, spec_of, with_derived
from .test_navigation_oracle import full_patterns, label_targets, navigation, numeric_targets

EXAMPLES = int(os.environ.get("ALL_EXAMPLES", "40"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("ALL_EXAMPLES"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
PATHS = ("reference", "row_local", "registers", "auto")
NOT_APPLICABLE = "does not apply to this query"

SCHEMA = pa.schema([("p", pa.int32()), ("id", pa.int32()), ("x", pa.int32()), ("y", pa.int32())])
SUBSETS = "SUBSET U = (A, B), V = (B, C)"
SKIPS = (
    "PAST LAST ROW",
    "TO NEXT ROW",
    "TO FIRST A",
    "TO LAST B",
    "TO U",
    "TO LAST V",
    "TO FIRST C",
)
semantics = st.sampled_from(["", "", "RUNNING ", "FINAL "])

# Arguments of aggregates: they read the row being aggregated (one variable each).
aggregated_numbers = st.sampled_from(
    [
        "x",
        "y",
        "A.x",
        "B.y",
        "U.x",
        "V.y",
        "C.x",
        "x + y",
        "A.x * 2",
        "MATCH_NUMBER()",
        "MATCH_NUMBER() * 10 + x",
    ]
)
aggregated_labels = st.sampled_from(["CLASSIFIER()", "CLASSIFIER()", "CLASSIFIER(U)"])
filters = st.sampled_from(
    ["y > 1", "x IS NULL", "x <> 1", "CLASSIFIER() = 'B'", "MATCH_NUMBER() = 1"]
)


@st.composite
def aggregates(draw: st.DrawFn, numeric: bool = False) -> str:
    """One aggregate call, maybe with FILTER (``numeric``: one with a number result)."""
    arg = draw(aggregated_numbers)
    label = draw(aggregated_labels)
    qualifier = arg.split(".")[0] + "." if "." in arg else ""
    numbers = [
        "count(*)",
        "count(A.*)",
        "count(U.*)",
        "count(V.*)",
        "count()",
        f"count({arg})",
        f"count(DISTINCT {arg})",
        f"count({label})",
        f"sum({arg})",
        f"min({arg})",
        f"max({arg})",
        f"avg({arg})",
        f"any_value({arg})",
        f"count_if({label} = 'A')",
        f"max_by({qualifier}x, {qualifier}y)",
    ]
    kind = draw(
        st.sampled_from(
            numbers
            if numeric
            else [
                "count(*)",
                "count(A.*)",
                "count(U.*)",
                "count(V.*)",
                "count()",
                f"count({arg})",
                f"count(DISTINCT {arg})",
                f"count({label})",
                f"sum({arg})",
                f"min({arg})",
                f"max({arg})",
                f"avg({arg})",
                f"any_value({arg})",
                f"arbitrary({arg})",
                f"first({arg})",
                f"array_agg({arg})",
                f"list({label})",
                f"min({label})",
                f"max({label})",
                f"bool_and({arg} > 1)",
                f"bool_or({arg} = 0)",
                f"count_if({arg} = 1)",
                f"count_if({label} = 'A')",
                f"string_agg({label}, '-')",
                f"max_by({qualifier}x, {qualifier}y)",
                f"min_by({qualifier}y, {qualifier}x)",
                f"array_agg({label})",
            ]
        )
    )
    if draw(st.integers(0, 3)) == 0 and not kind.startswith("count(DISTINCT"):
        kind += f" FILTER (WHERE {draw(filters)})"
    return kind


@st.composite
def measures(draw: st.DrawFn) -> str:
    items: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        choice = draw(st.integers(0, 5))
        if choice <= 1:
            items.append(draw(semantics) + draw(aggregates()))
        elif choice == 2:
            nav = draw(navigation(numeric_targets))
            items.append((draw(semantics) if nav.startswith(("PREV", "NEXT")) else "") + nav)
        elif choice == 3:
            items.append(draw(navigation(label_targets)))
        elif choice == 4:
            items.append(
                draw(
                    st.sampled_from(["MATCH_NUMBER()", "CLASSIFIER()", "CLASSIFIER(V)", "x", "B.y"])
                )
            )
        else:
            items.append(
                f"COALESCE({draw(semantics)}{draw(aggregates(True))}, 0) + "
                f"{draw(navigation(numeric_targets))}"
            )
    return ", ".join(f"{m} AS m{i}" for i, m in enumerate(items))


DEFINE_AGGREGATES = [
    "SUM(x) < 5",
    "SUM(B.x) <= 4",
    "AVG(U.y) >= 1",
    "MIN(x) = x",
    "MAX(A.y) < 3",
    "COUNT(B.*) < 3",
    "COUNT(V.x) <= 2",
    "COUNT(*) > 1 AND SUM(y) > 2",
    "bool_and(x > 0)",
    "count_if(y = 1) < 2",
    "any_value(A.x) = 1",
    "SUM(x) FILTER (WHERE y > 1) < 4",
    "COUNT(*) FILTER (WHERE x IS NULL) < 2",
    "count_if(CLASSIFIER() = 'A') < 2",
    "SUM(MATCH_NUMBER()) < 3",
    "array_agg(CLASSIFIER()) <> ['A', 'B']",
    "COUNT(DISTINCT U.x) < 3",
    "max(CLASSIFIER()) = 'A'",
    "count() <= 2",
]


@st.composite
def conditions(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 5))
    if kind <= 1:
        return draw(st.sampled_from(CONDITIONS))
    if kind == 2:
        return draw(st.sampled_from(DEFINE_AGGREGATES))
    if kind == 3:
        left = draw(navigation(numeric_targets, define=True))
        return (
            f"{left} {draw(st.sampled_from(['<', '>=', '<>']))} "
            f"{draw(st.sampled_from(['x', 'y', '1', 'PREV(x)']))}"
        )
    if kind == 4:
        return f"{draw(navigation(label_targets, define=True))} IS NULL"
    return f"({draw(st.sampled_from(CONDITIONS))}) OR ({draw(st.sampled_from(DEFINE_AGGREGATES))})"


@st.composite
def queries(draw: st.DrawFn) -> str:
    partition = draw(st.sampled_from(["PARTITION BY p", "PARTITION BY p", ""]))
    if draw(st.integers(0, 40)) == 0:  # the empty pattern: no variables to speak of
        return (
            f"SELECT * FROM t MATCH_RECOGNIZE ({partition} ORDER BY id "
            "MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS c, count(*) AS n, x AS x0 "
            f"{draw(st.sampled_from(ROWS))} PATTERN (()))"
        )
    pattern = draw(full_patterns())
    rows = ROWS[:3] if any(isinstance(n, Exclusion) for n in _nodes(pattern)) else ROWS
    defines = ", ".join(
        f"{v} AS {draw(conditions())}" for v in ("A", "B", "C") if v == "A" or draw(st.booleans())
    )
    return (
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        f"  {partition} ORDER BY id\n"
        f"  MEASURES {draw(measures())}\n"
        f"  {draw(st.sampled_from(rows))}\n"
        f"  AFTER MATCH SKIP {draw(st.sampled_from(SKIPS))}\n"
        f"  {draw(st.sampled_from(['', '', '', 'ALL MATCHES']))}\n"
        f"  PATTERN ({pattern.to_sql()})\n"
        f"  {SUBSETS}\n"
        f"  DEFINE {defines}\n"
        ")"
    )


def _nodes(node: PatternNode) -> list[PatternNode]:
    children = [c for c in vars(node).values() if isinstance(c, PatternNode)]
    children += [
        c
        for v in vars(node).values()
        if isinstance(v, tuple)
        for c in v
        if isinstance(c, PatternNode)
    ]
    return [node, *(n for c in children for n in _nodes(c))]


values = st.one_of(st.none(), st.integers(0, 3))
tables = st.lists(
    st.tuples(st.sampled_from([0, 1, 1, 2, None]), values, values), min_size=1, max_size=10
).map(lambda rows: [{"p": p, "id": i, "x": x, "y": y} for i, (p, x, y) in enumerate(rows)])


def partitions_of(spec: MatchSpec, rows: list[dict]) -> list[tuple[tuple, list[dict]]]:
    """The partitions of ``rows`` (already in ORDER BY order) in first-seen order."""
    parts: dict[tuple, list[dict]] = {}
    for row in rows:
        parts.setdefault(tuple(row[c] for c in spec.partition_by), []).append(row)
    return list(parts.items())


def run_path(
    spec: MatchSpec, key: tuple, rows: list[dict], splits: list[int], path: str
) -> tuple[str, object]:
    """('rows', output) of one partition on ``path``, fed in the batches ``splits`` cut,
    ('error', class name), or ('n/a', None) where the path does not apply."""
    config = Config()
    config.execution_path = path
    try:
        matcher = new_partition_matcher(spec, key, config)
        out: list[pa.RecordBatch] = []
        begin = 0
        derived = with_derived(spec, rows, SCHEMA)
        for end in [*sorted(s for s in splits if s <= len(rows)), len(rows)]:
            out += matcher.feed(pa.RecordBatch.from_pylist(derived[begin:end], schema=spec.columns))
            begin = end
        out += matcher.finish()
    except ExecutionError as exc:
        if NOT_APPLICABLE in exc.message:
            return "n/a", None
        return "error", type(exc).__name__
    except matchsql.Error as exc:
        return "error", type(exc).__name__
    return "rows", as_result(spec, [tuple(r.values()) for b in out for r in b.to_pylist()])


def expected(oracle: Oracle, key: tuple, rows: list[dict]) -> tuple[str, object]:
    try:
        return "rows", as_result(
            oracle.spec, oracle.run(with_derived(oracle.spec, rows, SCHEMA), key)
        )
    except matchsql.Error as exc:
        assume(type(exc).__name__ != "LimitExceededError")
        return "error", type(exc).__name__


def sql_rows(sql: str, rows: list[dict], path: str) -> tuple[str, object]:
    """The statement's rows through the public API on ``path`` (any order), with the
    table created in a fresh connection; ('n/a', None) where the path does not apply."""
    con = matchsql.connect(demo=False, execution_path=path, batch_size=3)
    try:
        con.sql("CREATE TABLE t (p INTEGER, id INTEGER, x INTEGER, y INTEGER)")
        con.sql(
            "INSERT INTO t VALUES "
            + ", ".join(
                "(" + ", ".join("NULL" if r[c] is None else str(r[c]) for c in SCHEMA.names) + ")"
                for r in rows
            )
        )
        result = con.sql(sql)
        got = result.fetchall() if result is not None else []
    except matchsql.Error as exc:
        if NOT_APPLICABLE in str(exc):
            return "n/a", None
        return "error", type(exc).__name__
    finally:
        con.close()
    return "rows", sorted(got, key=repr)


def _coverage(sql: str) -> None:
    """Which output mode, skip and partitioning a query drew (--hypothesis-show-statistics)."""
    for mode in reversed(ROWS):
        if mode in sql:
            event(mode)
            break
    for skip in SKIPS:
        if f"SKIP {skip}\n" in sql:
            event(f"SKIP {skip}")
    event("PARTITION BY" if "PARTITION BY" in sql else "one partition")


@SETTINGS
@given(sql=queries(), rows=tables, data=st.data())
def test_every_path_matches_oracle(sql: str, rows: list[dict], data: st.DataObject) -> None:
    _coverage(sql)
    try:
        spec = spec_of(sql, SCHEMA)
    except matchsql.Error as exc:
        event(f"rejected by analysis: {type(exc).__name__}")
        assume(False)
        return
    try:
        oracle = Oracle(spec)
    except matchsql.Error as exc:  # the engine must reject it too
        event("rejected by the oracle")
        want: tuple[str, object] = ("error", type(exc).__name__)
        for path in PATHS:
            assert run_path(spec, (), [], [], path) == want, (path, sql)
        return
    whole: list[tuple] | None = []
    for key, part in partitions_of(spec, rows):
        want = expected(oracle, key, part)
        whole = whole + want[1] if whole is not None and want[0] == "rows" else None
        splits = data.draw(st.lists(st.integers(0, len(part)), max_size=3))
        for path in PATHS:
            got = run_path(spec, key, part, splits, path)
            if got[0] != "n/a":
                event(f"ran on {path}")
                assert got == want, (path, sql, key, part, splits)
    if whole is not None and data.draw(st.integers(0, 4)) == 0:  # now and then end to end
        path = data.draw(st.sampled_from(PATHS))
        got = sql_rows(sql, rows, path)
        if got[0] != "n/a":
            event("ran through SQL")
            assert got == ("rows", sorted(whole, key=repr)), (path, sql, rows)
