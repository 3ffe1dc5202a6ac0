"""One compile step for every MATCH_RECOGNIZE, whichever way it runs.

A MATCH_RECOGNIZE reaches the engine from a one-time query and its EXPLAIN, a
query over a live stream, a continuous query, a row pattern window (as the
synthetic node its WINDOW clause becomes) and Spark's driver. All of them go
through :func:`compile_match`, so a query is accepted or refused, with the same
message, the same way on every path: analysis (:func:`~matchsql.grammar.analyze.analyze`,
which also splits the work with DuckDB), the output rule of SQL:2016
(:func:`require_columns`), then the pattern size limit (``max_pattern_size``).

The result, a :class:`CompiledMatch`, holds the spec and answers with its
physical plan per config (:func:`matchsql.engine.planner.physical`, kept in the
spec's own memo, never in a table keyed by object identity).

A session keeps its compiled queries in :class:`CompiledQueries`, by what
analysis read: the statement text, the node's place in it and, for a node not parsed from the
text (a window's synthetic node, built on each run), its clauses,
the input schema and the settings the checks read. A MATCH_RECOGNIZE with a
subquery is never kept: analysis folds the subquery's value of the moment
into the spec.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Hashable

import duckdb
import pyarrow as pa
from sqlglot import exp

import matchsql.engine.planner as planner  # by module: tests stand in for its functions
from matchsql.config import Config
from matchsql.engine.program import MAX_PROGRAM_SIZE, check_first_rows, check_pattern_size
from matchsql.errors import SemanticError
from matchsql.grammar.analyze import Watch, analyze
from matchsql.grammar.checks import offset_of, position
from matchsql.grammar.nodes import FROM_TEXT, MatchRecognizeTable
from matchsql.grammar.subqueries import has_subqueries
from matchsql.plan.spec import MatchSpec

__all__ = ["CompiledMatch", "CompiledQueries", "compile_match", "require_columns"]

#: Compiled queries a session keeps (least recently used go first).
KEEP = 64


class CompiledMatch:
    """A MATCH_RECOGNIZE analysed and checked: its spec and its physical plans.

    Every run of the same statement may share one (see :class:`CompiledQueries`), so
    nothing in it changes once it is made but caches: the plans in the spec's memo and
    the variants over other input columns (:meth:`over`).
    """

    __slots__ = ("spec", "_variants")

    def __init__(self, spec: MatchSpec) -> None:
        self.spec = spec
        self._variants: dict[pa.Schema, CompiledMatch] = {}

    def physical(self, config: Config) -> planner.PhysicalPlan:
        """How its partitions run under ``config`` (decided once per config's values)."""
        return planner.physical(self.spec, config)

    def explain(self, config: Config) -> str:
        """EXPLAIN's text of it under ``config``."""
        return planner.explain(self.spec, config)

    def over(self, columns: pa.Schema) -> CompiledMatch:
        """The same query over the input ``columns``: fewer of them (ONE ROW PER MATCH
        reads only those it names), or DuckDB's own types of the derived ones. Its spec
        is its own (so are its plans), kept per schema for the next run."""
        if columns.equals(self.spec.columns):
            return self
        found = self._variants.get(columns)
        if found is None:
            found = CompiledMatch(dataclasses.replace(self.spec, columns=columns))
            self._variants[columns] = found
        return found


class CompiledQueries:
    """A session's compiled queries, the :data:`KEEP` used last."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._entries: OrderedDict[Hashable, CompiledMatch] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> CompiledMatch | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: Hashable, compiled: CompiledMatch) -> None:
        self._entries[key] = compiled
        self._entries.move_to_end(key)
        while len(self._entries) > self.keep:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()


def compile_match(
    node: MatchRecognizeTable,
    schema: pa.Schema,
    *,
    sql: str,
    con: duckdb.DuckDBPyConnection,
    config: Config,
    cache: CompiledQueries | None = None,
    watch: Watch | None = None,
) -> CompiledMatch:
    """``node`` (parsed from ``sql``, where its errors point) over an input of ``schema``,
    analysed and checked; ``con`` types its expressions. With a ``cache``, a statement
    compiled before over the same schema and settings is not analysed again.

    ``node`` may be changed (a subquery folded into its value): callers that replace it
    in their statement afterwards do so in their own parse tree, which no cache holds.
    ``watch``: see :func:`~matchsql.grammar.analyze.analyze` (an interrupt reaches the
    DuckDB queries of analysis).
    """
    key = _key(node, schema, sql, config) if cache is not None else None
    if key is not None and cache is not None:
        found = cache.get(key)
        if found is not None:
            return found
    spec = analyze(node, schema, sql=sql, con=con, watch=watch)
    require_columns(spec, node, sql)
    check_pattern_size(spec.pattern, config.max_pattern_size, sql)
    check_first_rows(spec.pattern, config.max_threads, sql)
    compiled = CompiledMatch(spec)
    if key is not None and cache is not None:
        cache.put(key, compiled)
    return compiled


def require_columns(spec: MatchSpec, node: MatchRecognizeTable, statement: str) -> None:
    """SQL:2016 asks ONE ROW PER MATCH for a partition column or a measure: without
    either the output has no columns (which no table can hold)."""
    if not spec.result_schema():
        raise SemanticError(
            "ONE ROW PER MATCH without PARTITION BY needs at least one "
            "measure: the output would have no columns",
            sql=statement,
            offset=offset_of(node.this),
        )


def _key(node: MatchRecognizeTable, schema: pa.Schema, sql: str, config: Config) -> Hashable | None:
    """What the compiled form of ``node`` depends on, or None where it may not be kept:
    a subquery's value, or a node whose place in ``sql`` is unknown."""
    where = position(node)
    if where is None or has_subqueries(node):
        return None
    size = min(config.max_pattern_size, MAX_PROGRAM_SIZE)
    if node.meta.get(FROM_TEXT):
        # The parser's node: ``sql`` and its place already say what its clauses are (writing
        # them out again took a quarter of a millisecond a run of a short query).
        return sql, where, schema, size, config.max_threads
    return sql, where, _clauses(node), schema, size, config.max_threads


def _clauses(node: MatchRecognizeTable) -> tuple[tuple[str, object], ...]:
    """The text of every clause of ``node`` but its input, which analysis reads only as
    the schema (an enclosing statement renames an inner MATCH_RECOGNIZE's view each run)."""
    out: list[tuple[str, object]] = []
    for name, value in node.args.items():
        if name == "this" or value is None:
            continue
        items = value if isinstance(value, list) else [value]
        out.append((name, tuple(_text(item) for item in items)))
    return tuple(out)


def _text(value: object) -> object:
    return value.sql(dialect="matchsql") if isinstance(value, exp.Expr) else repr(value)
