"""Hypothesis strategies: random row patterns, DEFINEs, partitions and queries.

Queries are generated as SQL text and analysed by the real grammar, so the
matchers under test see exactly the MatchSpec a user's statement produces.
Variables: A and B are defined by random conditions, C is left undefined
(always true); SUBSET U = (A, B) is always declared.
"""

from __future__ import annotations

import atexit
from functools import cache

import duckdb
import pyarrow as pa
from hypothesis import strategies as st

from matchsql.expr.batch_select import derive_input, project_result
from matchsql.grammar.analyze import analyze
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.plan.pattern import (
    Alternation,
    Anchor,
    AnchorKind,
    Concatenation,
    Empty,
    Exclusion,
    Label,
    PatternNode,
    Permutation,
    Quantified,
)
from matchsql.plan.spec import MatchSpec

SCHEMA = pa.schema([("id", pa.int32()), ("x", pa.int32()), ("y", pa.int32())])
VARIABLES = ("A", "B", "C")

labels = st.sampled_from(VARIABLES).map(Label)
leaves = st.one_of(
    labels,
    labels,
    labels,
    st.just(Empty()),
    st.sampled_from([Anchor(AnchorKind.START), Anchor(AnchorKind.END)]),
)


def _quantified(child: st.SearchStrategy[PatternNode]) -> st.SearchStrategy[PatternNode]:
    bounds = st.sampled_from([(0, None), (1, None), (0, 1), (2, 2), (1, 2), (0, 2), (2, None)])
    return st.builds(lambda c, b, g: Quantified(c, b[0], b[1], g), child, bounds, st.booleans())


def _extend(children: st.SearchStrategy[PatternNode]) -> st.SearchStrategy[PatternNode]:
    many = st.lists(children, min_size=2, max_size=3).map(tuple)
    return st.one_of(
        many.map(Concatenation),
        many.map(Concatenation),
        many.map(Alternation),
        st.lists(children, min_size=2, max_size=3).map(tuple).map(Permutation),
        children.map(Exclusion),
        _quantified(children),
        _quantified(children),
    )


patterns = st.recursive(leaves, _extend, max_leaves=5)

CONDITIONS = [
    "x > PREV(x)",
    "x = 1",
    "x IS NULL",
    "y >= 2",
    "A.x <= x",
    "x > FIRST(x)",
    "LAST(x, 1) IS NULL OR x <> LAST(x, 1)",
    "COUNT(*) <= 3",
    "COUNT(A.*) < 2",
    "SUM(x) < 5",
    "CLASSIFIER() = 'A'",
    "NEXT(x) IS NOT NULL AND NEXT(x) > x",
    "PREV(LAST(U.y, 1), 1) = y",
    "MAX(U.x) >= x",
    "x <> PREV(x, 2)",
    "FIRST(B.x) IS NULL",
    "MATCH_NUMBER() <= 2",
]
MEASURES = (
    "MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, COUNT(*) AS n, FIRST(x) AS fx, "
    "LAST(y) AS ly, SUM(A.x) AS sa, FINAL COUNT(U.*) AS fu, PREV(x) AS px"
)
ROWS = [
    "ONE ROW PER MATCH",
    "ALL ROWS PER MATCH",
    "ALL ROWS PER MATCH OMIT EMPTY MATCHES",
    "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
]
SKIPS = ["PAST LAST ROW", "TO NEXT ROW", "TO FIRST A", "TO LAST B", "TO U"]

values = st.one_of(st.none(), st.integers(0, 3))
partitions = st.lists(st.tuples(values, values), max_size=8).map(
    lambda rows: [{"id": i, "x": x, "y": y} for i, (x, y) in enumerate(rows)]
)


@st.composite
def queries(draw: st.DrawFn) -> str:
    """A MATCH_RECOGNIZE statement over ``t(id, x, y)`` with random clauses."""
    pattern = draw(patterns)
    a = draw(st.sampled_from(CONDITIONS))
    b = draw(st.sampled_from(CONDITIONS))
    rows = draw(st.sampled_from(ROWS))
    skip = draw(st.sampled_from(SKIPS))
    extension = draw(st.sampled_from(["", "", "", "ALL MATCHES"]))
    return (
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        f"  MEASURES {MEASURES}\n"
        f"  {rows}\n"
        f"  AFTER MATCH SKIP {skip}\n"
        f"  {extension}\n"
        f"  PATTERN ({pattern.to_sql()})\n"
        "  SUBSET U = (A, B)\n"
        f"  DEFINE A AS {a}, B AS {b}\n"
        ")"
    )


@cache
def _typing_database() -> duckdb.DuckDBPyConnection:
    """The DuckDB that types the expressions of every :func:`spec_of`.

    ``analyze`` types on a cursor of its own and leaves nothing behind, so one
    database serves all: a new one per call cost ~25 ms (its thread pool started
    and joined), and random tests call this tens of thousands of times, mostly
    for queries they then reject.
    """
    database = duckdb.connect()
    # Dropped before the interpreter tears its modules down, where DuckDB's bindings
    # would report it as leaked.
    atexit.register(_typing_database.cache_clear)
    return database


def spec_of(sql: str, schema: pa.Schema = SCHEMA) -> MatchSpec:
    """Parse and analyse ``sql`` (one MATCH_RECOGNIZE over ``t``) into its MatchSpec."""
    tree = parse(sql)[-1]
    node = next(tree.find_all(MatchRecognizeTable))
    return analyze(node, schema, sql=sql, con=_typing_database())


def with_derived(spec: MatchSpec, rows: list[dict], schema: pa.Schema = SCHEMA) -> list[dict]:
    """``rows`` with ``spec``'s derived columns, as DuckDB computes them in the input scan."""
    derive = derive_input(spec)
    if derive is None or not rows:
        return rows
    return derive(pa.RecordBatch.from_pylist(rows, schema=schema)).to_pylist()


def as_result(spec: MatchSpec, rows: list[tuple]) -> list[tuple]:
    """The matcher's output ``rows`` as the query's result (DuckDB's measures computed)."""
    project = project_result(spec)
    if project is None or not rows:
        return rows
    schema = spec.output_schema()
    batch = pa.RecordBatch.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)
    return [tuple(r.values()) for r in project(batch).to_pylist()]


def fed_in_splits(matcher, rows: list[dict], splits: list[int]) -> list[pa.RecordBatch]:
    """What ``matcher`` outputs for ``rows`` fed as batches cut at ``splits``, then finished:
    the batch edges a random test draws, so that resuming across batches is exercised. The
    rows get the matcher's spec's derived columns, and the output its DuckDB measures."""
    spec = getattr(matcher, "spec", None)
    rows = with_derived(spec, rows) if spec is not None else rows
    out: list[pa.RecordBatch] = []
    begin = 0
    for end in [*sorted(splits), len(rows)]:
        out += matcher.feed(
            pa.RecordBatch.from_pylist(
                rows[begin:end], schema=spec.columns if spec is not None else SCHEMA
            )
        )
        begin = end
    out += matcher.finish()
    project = project_result(spec) if spec is not None else None
    return out if project is None else [project(b) for b in out]
