"""What a matcher needs to know about one MATCH_RECOGNIZE, after analysis.

The grammar's analyzer turns a checked :class:`~matchsql.grammar.nodes.MatchRecognizeTable`
into a :class:`MatchSpec`; every execution path (reference, compiled, GPU,
Spark) consumes only this. Expressions are sqlglot trees normalised as
described in :mod:`matchsql.grammar.nodes`; column names are the input
relation's column names exactly (case preserved), variable names upper-cased
unless quoted.
"""

from __future__ import annotations

import datetime
import decimal
import functools
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, cast

import pyarrow as pa
from sqlglot import exp

from matchsql.plan.pattern import PatternNode

#: A WITHIN bound: an interval, or a number in the ORDER BY column's units.
WithinBound = datetime.timedelta | int | float | decimal.Decimal


@functools.lru_cache(maxsize=4096)
def quoted(name: str) -> str:
    """``name`` as a quoted SQL identifier (kept: each run of a statement quotes its
    columns again, through sqlglot's generator, 30 us a name)."""
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def select_list(columns: list[str] | None, derived: dict[str, str]) -> str:
    """SQL select items reading ``columns`` of an input relation (None: ``*``, every
    column), a derived column (:attr:`MatchSpec.derived`) computed from its SQL."""
    if columns is None:
        items = ["*", *(f"({sql}) AS {quoted(name)}" for name, sql in derived.items())]
    else:
        items = [f"({derived[c]}) AS {quoted(c)}" if c in derived else quoted(c) for c in columns]
    return ", ".join(items)


class RowsPerMatch(Enum):
    ONE = "ONE ROW PER MATCH"
    ALL_SHOW_EMPTY = "ALL ROWS PER MATCH SHOW EMPTY MATCHES"
    ALL_OMIT_EMPTY = "ALL ROWS PER MATCH OMIT EMPTY MATCHES"
    ALL_WITH_UNMATCHED = "ALL ROWS PER MATCH WITH UNMATCHED ROWS"

    @property
    def all_rows(self) -> bool:
        return self is not RowsPerMatch.ONE


class SkipMode(Enum):
    PAST_LAST_ROW = "PAST LAST ROW"
    TO_NEXT_ROW = "TO NEXT ROW"
    TO_FIRST = "TO FIRST"
    TO_LAST = "TO LAST"  # ``SKIP TO v`` means ``SKIP TO LAST v``


def as_expression(node: exp.Expr) -> exp.Expression:
    """``node`` as the plan holds it: sqlglot types its tree functions (``transform``,
    ``replace``) over the base class ``Expr``, of which every node class it makes is an
    ``Expression`` (the other subclasses are mixins)."""
    return cast(exp.Expression, node)


@dataclass(frozen=True)
class Measure:
    name: str
    expr: exp.Expression
    type: pa.DataType  # the output column's Arrow type
    # DuckDB's type of the column where DuckDB would read ``type`` as another one (a
    # HUGEINT sum leaves as Arrow's decimal128(38, 0)); None where they agree.
    duckdb_type: str | None = None


@dataclass(frozen=True)
class ResultMeasure:
    """A measure of the result: ``sql`` computes it in DuckDB over the matcher's output."""

    name: str
    sql: str
    type: pa.DataType
    duckdb_type: str | None = None  # as Measure.duckdb_type

    @property
    def by_duckdb(self) -> bool:
        """Whether DuckDB computes it (rather than passing the matcher's measure on)."""
        return self.sql != quoted(self.name)


class PlanMemo(dict[Any, Any]):
    """What the engine and the planner derived from one spec: its lowering, its physical
    plan per config (:func:`matchsql.engine.planner.physical`).

    A cache beside the spec's value, so that a query's plans are built once and dropped
    with it: ``dataclasses.replace`` gives the new spec a fresh memo (a narrowed or
    re-anchored spec plans for itself), pickling and deep copies leave it behind (a
    worker process builds its own plans), and snapshots do not walk it
    (:data:`snapshot_opaque`: the paths of a plan's objects stay those of the plan).
    """

    #: Read by :mod:`matchsql.saved_state.snapshot`: this object's contents are no part of a plan.
    snapshot_opaque = True

    def __reduce__(self) -> tuple[type[PlanMemo], tuple[()]]:
        return PlanMemo, ()


@dataclass
class MatchSpec:
    """A fully analysed row pattern recognition.

    ``columns`` is the input relation's schema in order. ``partition_by`` and
    ``order_by`` name input columns (the input arrives already sorted by them).
    ``subsets`` maps a subset name to its primary variables. ``defines`` maps
    a primary variable to its condition; variables without one are true.
    ``all_matches`` / ``incremental`` carry DejaVu's ``ALL MATCHES`` and
    ``INCREMENTAL MATCH`` (see ``docs`` in the README for the mapping).
    ``within`` bounds a match's span in the first ORDER BY column, or None.
    """

    columns: pa.Schema
    pattern: PatternNode
    partition_by: list[str] = field(default_factory=list)
    order_by: list[str] = field(default_factory=list)
    measures: list[Measure] = field(default_factory=list)
    rows_per_match: RowsPerMatch = RowsPerMatch.ONE
    skip: SkipMode = SkipMode.PAST_LAST_ROW
    skip_variable: str | None = None
    initial: bool = True
    subsets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    defines: dict[str, exp.Expression] = field(default_factory=dict)
    all_matches: bool = False
    incremental: bool = False
    within: WithinBound | None = None  # in ORDER BY units
    #: derived column -> its DuckDB SQL over the input row: the parts of DEFINE and
    #: MEASURES that read one row, computed by DuckDB (see matchsql.grammar.pushdown).
    #: They are the last fields of ``columns`` and never part of the output.
    derived: dict[str, str] = field(default_factory=dict)
    #: The result's measures where DuckDB computes some of them over the matcher's
    #: output (see matchsql.grammar.measure_split), in order; empty where the matcher's
    #: measures are the result's.
    projection: list[ResultMeasure] = field(default_factory=list)
    #: id(expression) -> (expression, its bound form); see :func:`matchsql.plan.binder.bind`.
    bound_cache: dict[int, tuple[exp.Expression, exp.Expression]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    #: The plans built for this very spec (see :class:`PlanMemo`).
    memo: PlanMemo = field(default_factory=PlanMemo, init=False, repr=False, compare=False)

    @property
    def all_ends(self) -> bool:
        """Does an attempt keep every end it reaches (ALL MATCHES or INCREMENTAL MATCH),
        not only its preferred match?"""
        return self.all_matches or self.incremental

    @property
    def with_unmatched(self) -> bool:
        """Are the rows no match covers output too (WITH UNMATCHED ROWS)?"""
        return self.rows_per_match is RowsPerMatch.ALL_WITH_UNMATCHED

    @property
    def variables(self) -> list[str]:
        """Primary pattern variables, in order of first appearance in PATTERN."""
        return self.pattern.variables()

    @property
    def passed_columns(self) -> list[str]:
        """The input columns ALL ROWS PER MATCH passes through after the measures."""
        used = set(self.partition_by) | set(self.order_by) | set(self.derived)
        return [f.name for f in self.columns if f.name not in used]

    @property
    def input_schema(self) -> pa.Schema:
        """``columns`` less the derived ones: the input relation's own schema."""
        return pa.schema([f for f in self.columns if f.name not in self.derived])

    def result_schema(self) -> pa.Schema:
        """The schema the user sees: :meth:`output_schema` with the projection's measures."""
        if not self.projection:
            return self.output_schema()
        return self._shape([pa.field(m.name, m.type) for m in self.projection])

    def retyped(self) -> dict[str, str]:
        """The result's measure columns whose DuckDB type is not the one DuckDB reads
        their Arrow form as, each with its type (the result casts them back)."""
        measures = self.projection or self.measures
        return {m.name: m.duckdb_type for m in measures if m.duckdb_type is not None}

    def result_select(self) -> str:
        """The DuckDB select list that turns the matcher's output into the result."""
        measures = {m.name: m.sql for m in self.projection}
        return select_list(self.result_schema().names, measures)

    def output_schema(self) -> pa.Schema:
        """Standard output shape.

        ONE ROW PER MATCH: partition columns, then measures. ALL ROWS PER
        MATCH: partition columns, order columns, measures, then the remaining
        input columns in input order.
        """
        return self._shape([pa.field(m.name, m.type) for m in self.measures])

    def _shape(self, measures: list[pa.Field]) -> pa.Schema:
        by_name = {f.name: f for f in self.columns}
        fields = [by_name[c] for c in self.partition_by]
        if self.rows_per_match.all_rows:
            fields += [by_name[c] for c in self.order_by]
        fields += measures
        if self.rows_per_match.all_rows:
            fields += [by_name[c] for c in self.passed_columns]
        return pa.schema(fields)
