"""The oracle's own reading of which row each value reference in an expression reads.

Navigation is the part of the expression semantics that is easiest to get
subtly wrong, and a second opinion is worth something only if it is formed
independently, so the oracle does not take it from the engine's evaluator
(:mod:`matchsql.expr.rowwise`). It resolves every value reference itself,
straight from the rules Trino implements (``LogicalIndexNavigation``):

* a column ``V.x`` (or ``x``) is ``LAST(V.x)``; ``CLASSIFIER(V)`` is
  ``LAST(CLASSIFIER(V))``; without a variable, every match row counts;
* ``LAST(.., k)`` is the k-th row of V counted back from the current row
  (RUNNING) or from the match's last row (FINAL);
* ``FIRST(.., k)`` is the k-th row of V counted forward from the match's
  first row, over every row the match has, RUNNING or FINAL alike (in DEFINE
  the match has only the rows up to the current one);
* ``PREV/NEXT(.., k)`` then move k rows physically; the row must lie in the
  partition, not necessarily in the match;
* a column reads its value at that row; ``CLASSIFIER()`` reads the row's
  variable when the row belongs to the match, else NULL; ``MATCH_NUMBER()``
  is the match's number wherever it is read from.

Aggregates are the oracle's too: an aggregate ranges over the rows of the
match mapped to its argument's variable (every row without one), up to the
current row under RUNNING and over the whole match under FINAL; its FILTER
and its arguments read the visited row itself (columns, ``CLASSIFIER()``),
and the values are reduced by the value library's reducers
(:data:`~matchsql.expr.aggregates.REDUCERS`: what SUM or MAX of a list of
values is, is value arithmetic, not pattern semantics).

Each reference is replaced by a placeholder column that holds the value read;
what is left (operators, scalar functions) is evaluated by the shared value
library through :func:`~matchsql.expr.rowwise.compile_expression`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from sqlglot import exp

from matchsql.errors import SemanticError
from matchsql.expr import aggregates as agg
from matchsql.expr.rows import MatchView, RowSource
from matchsql.expr.rowwise import compile_expression
from matchsql.plan.binder import (
    AGGREGATE_NAMES,
    ANONYMOUS_AGGREGATES,
    is_aggregate,
    resolve_column,
    resolve_vars,
)
from matchsql.plan.row_functions import Classifier, Navigation, PatternSemantics
from matchsql.plan.spec import MatchSpec

__all__ = ["OracleExpression"]

_PLACEHOLDER = "__oracle_value_{}"


@dataclass(frozen=True)
class _Where:
    """Which row a value reference reads."""

    variables: frozenset[str] | None  # None: every row of the match
    last: bool  # LAST (else FIRST)
    logical: int  # rows of ``variables`` to skip from the start/end
    physical: int  # PREV/NEXT move after that, in rows (negative: back)
    final: bool | None  # FINAL/RUNNING, None: the view's default
    here: bool = False  # the row an enclosing aggregate visits (the view's current row)


_HERE = _Where(None, True, 0, 0, None, here=True)


@dataclass(frozen=True)
class _Reference:
    where: _Where
    column: str | None  # None: CLASSIFIER()
    aggregate: _Aggregate | None = None  # set: the value of this aggregate


@dataclass(frozen=True)
class _Aggregate:
    """One aggregate call: the rows it visits and what it reads at each."""

    function: str  # a key of aggregates.REDUCERS
    variables: frozenset[str] | None
    final: bool | None
    arguments: tuple[OracleExpression, ...]  # read at the visited row
    condition: OracleExpression | None  # FILTER (WHERE ...)
    distinct: bool

    def value(self, view: MatchView) -> Any:
        final = view.final if self.final is None else self.final
        visited = [
            view.start + i
            for i, label in enumerate(view.labels)
            if (self.variables is None or label in self.variables)
            and (final or view.start + i <= view.current)
        ]
        at = [
            MatchView(view.rows, view.start, view.labels, row, view.match_number, False)
            for row in visited
        ]
        if self.condition is not None:
            at = [v for v in at if self.condition(v) is True]
        if self.function == "count_star":
            return len(at)
        values = [tuple(arg(v) for arg in self.arguments) for v in at]
        if self.distinct:
            return agg.agg_count_distinct([v[0] for v in values])
        if self.function in agg.PAIR_AGGREGATES:
            return agg.REDUCERS[self.function](
                [(v[0], v[1] if len(v) > 1 else None) for v in values]
            )
        return agg.REDUCERS[self.function]([v[0] for v in values])


def _locate(where: _Where, view: MatchView, rows: int) -> int | None:
    if where.here:
        return view.current
    final = view.final if where.final is None else where.final
    matched = [
        view.start + i
        for i, label in enumerate(view.labels)
        if where.variables is None or label in where.variables
    ]
    if where.last:
        if not final:
            matched = [r for r in matched if r <= view.current]
        index = len(matched) - 1 - where.logical
    else:
        index = where.logical
    if not 0 <= index < len(matched):
        return None
    target = matched[index] + where.physical
    return target if 0 <= target < rows else None


class _Given:
    """Partition rows plus the placeholder values of one evaluation."""

    def __init__(self, rows: RowSource, values: dict[str, Any]) -> None:
        self.rows = rows
        self.values = values

    @property
    def count(self) -> int:
        return max(self.rows.count, 1)

    @property
    def complete(self) -> bool:
        return self.rows.complete

    def value(self, index: int, column: str) -> Any:
        if column in self.values:
            return self.values[column]
        return self.rows.value(index, column)


class OracleExpression:
    """One DEFINE or MEASURES expression, navigated by the oracle's own rules."""

    def __init__(self, expr: exp.Expression, spec: MatchSpec, *, aggregated: bool = False) -> None:
        self.spec = spec
        self.aggregated = aggregated  # an aggregate's argument: reads the visited row
        self.types = {f.name: f.type for f in spec.columns}
        self.references: list[_Reference] = []
        rewritten = self._rewrite(expr.copy(), None)
        fields = [
            pa.field(
                _PLACEHOLDER.format(i),
                pa.null()
                if r.aggregate is not None
                else pa.string()
                if r.column is None
                else self.types[r.column],
            )
            for i, r in enumerate(self.references)
        ]
        schema = pa.schema([*spec.columns, *fields])
        self.fn = compile_expression(rewritten, replace(spec, columns=schema))

    def __call__(self, view: MatchView) -> Any:
        values: dict[str, Any] = {}
        for i, ref in enumerate(self.references):
            if ref.aggregate is not None:
                values[_PLACEHOLDER.format(i)] = ref.aggregate.value(view)
                continue
            at = _locate(ref.where, view, view.rows.count)
            if at is None:
                value = None
            elif ref.column is None:
                k = at - view.start
                value = view.labels[k] if 0 <= k < len(view.labels) else None
            else:
                value = view.rows.value(at, ref.column)
            values[_PLACEHOLDER.format(i)] = value
        # Every read is a placeholder now: evaluate them at one stand-in row, so that a
        # value (an aggregate's) is seen even where the match has no rows (empty match).
        given = MatchView(_Given(view.rows, values), 0, ["-"], 0, view.match_number, True)
        return self.fn(given)

    # -- rewriting ---------------------------------------------------------------------------

    def _rewrite(self, node: exp.Expression, final: bool | None) -> exp.Expression:
        if isinstance(node, PatternSemantics):
            return self._rewrite(node.this, node.final)
        if self.aggregated and (is_aggregate(node) or isinstance(node, Navigation)):
            raise SemanticError("no navigation or aggregate inside an aggregate")
        if is_aggregate(node):
            return self._aggregate(node, final)
        if isinstance(node, exp.Column | Classifier):
            if self.aggregated:
                return self._bind(node, _HERE)
            return self._bind(node, _Where(self._variables(node), True, 0, 0, final))
        if isinstance(node, Navigation):
            return self._navigation(node, final)
        for key, child in list(node.args.items()):
            if isinstance(child, exp.Expression):
                node.set(key, self._rewrite(child, final))
            elif isinstance(child, list):
                node.set(
                    key,
                    [
                        self._rewrite(c, final) if isinstance(c, exp.Expression) else c
                        for c in child
                    ],
                )
        return node

    def _navigation(self, node: Navigation, final: bool | None) -> exp.Expression:
        arg = _unwrap(node.this)
        if not node.physical:
            where = _Where(self._variables(arg), node.kind == "LAST", node.offset, 0, final)
            return self._bind(arg, where)
        shift = -node.offset if node.kind == "PREV" else node.offset
        while isinstance(arg, PatternSemantics):
            final = arg.final
            arg = _unwrap(arg.this)
        if isinstance(arg, Navigation) and not arg.physical:
            inner = _unwrap(arg.this)
            where = _Where(self._variables(inner), arg.kind == "LAST", arg.offset, shift, final)
            return self._bind(inner, where)
        return self._bind(arg, _Where(self._variables(arg), True, 0, shift, final))

    def _aggregate(self, node: exp.Expression, final: bool | None) -> exp.Expression:
        condition = None
        if isinstance(node, exp.Filter):
            where = node.expression
            condition = where.this if isinstance(where, exp.Where) else where
            node = node.this
        if isinstance(node, exp.IgnoreNulls):
            node = node.this
        distinct = False
        if isinstance(node, exp.Count):
            function, args = "count", [node.this]
            if isinstance(node.this, exp.Distinct):
                distinct, args = True, list(node.this.expressions)
            star = args[0]
            if star is None or isinstance(star, exp.Star):
                function, args = "count_star", []
            elif isinstance(star, exp.Column) and isinstance(star.this, exp.Star):
                function, args = "count_star", [exp.column("*", table=star.table)]
        elif isinstance(node, exp.Anonymous):
            function, args = ANONYMOUS_AGGREGATES[node.name.lower()], list(node.expressions)
        elif type(node) in AGGREGATE_NAMES:
            function = AGGREGATE_NAMES[type(node)]
            second = node.args.get(
                "separator" if isinstance(node, exp.GroupConcat) else "expression"
            )
            args = [a for a in (node.this, second) if a is not None]
        else:
            raise SemanticError(f"aggregate {node.key.upper()} is not supported")
        call = _Aggregate(
            function=function,
            variables=self._variables(exp.Tuple(expressions=[a.copy() for a in args])),
            final=final,
            arguments=tuple(
                OracleExpression(a, self.spec, aggregated=True)
                for a in args
                if function != "count_star"
            ),
            condition=None
            if condition is None
            else OracleExpression(condition, self.spec, aggregated=True),
            distinct=distinct,
        )
        return self._reference(_Reference(_HERE, None, call))

    def _bind(self, arg: exp.Expression, where: _Where) -> exp.Expression:
        """``arg`` with its columns and CLASSIFIER() read at the row ``where`` names."""
        if any(isinstance(n, Navigation) or is_aggregate(n) for n in arg.walk()):
            raise SemanticError(
                "navigation may nest only FIRST/LAST inside PREV/NEXT, without aggregates"
            )

        def read(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                return self._reference(_Reference(where, resolve_column(self.spec, node.name)))
            if isinstance(node, Classifier):
                return self._reference(_Reference(where, None))
            return node

        return arg.transform(read, copy=False)

    def _reference(self, ref: _Reference) -> exp.Expression:
        self.references.append(ref)
        return exp.column(_PLACEHOLDER.format(len(self.references) - 1))

    def _variables(self, arg: exp.Expression) -> frozenset[str] | None:
        """The variables a navigation argument ranges over (its one qualifier), None for all."""
        names = {n.table for n in arg.walk() if isinstance(n, exp.Column) and n.table}
        names |= {n.variable for n in arg.walk() if isinstance(n, Classifier) and n.variable}
        if len(names) > 1:
            raise SemanticError("a navigation argument must refer to one pattern variable")
        return resolve_vars(self.spec, names.pop() if names else None)


def _unwrap(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node
