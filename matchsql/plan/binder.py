"""Binding: a DEFINE/MEASURES tree of a MatchSpec -> its bound form (:mod:`.bound`).

This is the one place where a column name is resolved against the input
schema, a variable or subset name against the pattern, a literal parsed into
a value, a navigation chain turned into the row it reads, and an aggregate
call named. Every backend (the reference evaluator, the VM's DEFINE fast path,
the register bytecode, the column-wise row-local terms and measures) starts
from the result, so each of those rules is written once.

Bound trees are cached on the spec per expression object: binding happens once
per query, not once per backend or partition.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlglot import exp

from matchsql.errors import SemanticError
from matchsql.plan.bound import (
    BY_DUCKDB,
    AggregateCall,
    Const,
    MatchNumberRef,
    Pointer,
    Position,
    VarSet,
)
from matchsql.plan.row_functions import (
    Classifier,
    DuckDBAggregate,
    MatchNumber,
    Navigation,
    PatternSemantics,
)
from matchsql.plan.spec import MatchSpec

#: sqlglot's aggregate classes -> the canonical names of :mod:`matchsql.expr.aggregates`.
AGGREGATE_NAMES: dict[type, str] = {
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.AnyValue: "any_value",
    exp.ArrayAgg: "list",
    exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
    exp.CountIf: "count_if",
    exp.FirstValue: "arbitrary",
    exp.ArgMax: "arg_max",
    exp.ArgMin: "arg_min",
    exp.GroupConcat: "string_agg",
}
#: Aggregates DuckDB's dialect leaves as anonymous function calls.
ANONYMOUS_AGGREGATES: dict[str, str] = {
    "arbitrary": "arbitrary",
    "first": "arbitrary",
    "list": "list",
    "any_value": "any_value",
    "bool_and": "bool_and",
    "bool_or": "bool_or",
    "count_if": "count_if",
}


def is_aggregate(node: exp.Expr) -> bool:
    """Is ``node`` an aggregate over the rows of a pattern variable (with its FILTER)?"""
    if isinstance(node, exp.Filter) or (
        isinstance(node, exp.IgnoreNulls) and isinstance(node.this, exp.AggFunc)
    ):
        return True
    if isinstance(node, exp.Anonymous):
        return node.name.lower() in ANONYMOUS_AGGREGATES
    return isinstance(node, exp.AggFunc)


def bind(expr: exp.Expression, spec: MatchSpec) -> exp.Expression:
    """The bound form of ``expr`` (a DEFINE or MEASURES tree of ``spec``), cached."""
    cache = spec.bound_cache
    hit = cache.get(id(expr))
    if hit is not None and hit[0] is expr:
        return hit[1]
    bound = Binder(spec).bind(expr, _Context())
    cache[id(expr)] = (expr, bound)
    return bound


def literal_value(node: exp.Literal) -> object:
    """A SQL literal's value: text as ``str``, an integral number as ``int``, else ``float``."""
    if node.is_string:
        return node.this
    raw = str(node.this)
    try:
        return int(raw)
    except ValueError:
        return float(raw)


def column_candidates(columns: list[str], name: str) -> list[str]:
    """The input columns ``name`` may refer to: itself when exact, else every
    case-insensitive match (DuckDB's rule; more than one is ambiguous)."""
    if name in columns:
        return [name]
    return [c for c in columns if c.lower() == name.lower()]


def resolve_column(spec: MatchSpec, name: str) -> str:
    """The input column ``name`` refers to: exact, else the one case-insensitive match."""
    matches = column_candidates(spec.columns.names, name)
    if len(matches) == 1:
        return matches[0]
    raise SemanticError(f"unknown column {name!r} in row pattern expression")


def resolve_vars(spec: MatchSpec, name: str | None) -> VarSet:
    """The primary variables a qualifier names (a subset expands); None: universal."""
    if name is None:
        return None
    variables = set(spec.variables)
    for candidate in (name, name.upper()):
        if candidate in spec.subsets:
            return frozenset(spec.subsets[candidate])
        if candidate in variables:
            return frozenset((candidate,))
    raise SemanticError(f"unknown pattern variable {name!r}")


@dataclass(frozen=True)
class _Context:
    final: bool | None = None  # the innermost RUNNING/FINAL
    at: Position | None = None  # inside navigation: the row every read uses
    aggregated: bool = False  # inside an aggregate's arguments or FILTER
    text: str | None = None  # the enclosing navigation's source, for messages


class Binder:
    def __init__(self, spec: MatchSpec) -> None:
        self.spec = spec

    def bind(self, node: exp.Expression, ctx: _Context) -> exp.Expression:
        if isinstance(node, exp.Paren):
            return self.bind(node.this, ctx)
        if isinstance(node, exp.Column):
            return self.column(node, ctx)
        if isinstance(node, exp.Literal):
            return Const(value=literal_value(node), text=source_text(node))
        if isinstance(node, exp.Null):
            return Const(value=None, text="NULL")
        if isinstance(node, exp.Boolean):
            return Const(value=bool(node.this), text=str(bool(node.this)).upper())
        if isinstance(node, PatternSemantics):
            return self.bind(node.this, replace(ctx, final=node.final))
        if isinstance(node, Classifier):
            return self.classifier(node, ctx)
        if isinstance(node, MatchNumber):
            return MatchNumberRef()
        if isinstance(node, Navigation):
            at, value = self.locate(node, ctx)
            return self.bind(value, replace(ctx, at=at, text=source_text(node)))
        if isinstance(node, DuckDBAggregate):
            return self.duckdb_aggregate(node, ctx)
        if is_aggregate(node):
            return self.aggregate(node, ctx)
        return self.rebuild(node, ctx)

    def rebuild(self, node: exp.Expression, ctx: _Context) -> exp.Expression:
        """An operator or function: the same class over bound arguments."""
        args: dict[str, Any] = {}
        for key, value in node.args.items():
            if isinstance(value, exp.Expression):
                args[key] = self.bind(value, ctx) if _is_value(key, node) else value.copy()
            elif isinstance(value, list):
                args[key] = [
                    self.bind(v, ctx)
                    if isinstance(v, exp.Expression) and _is_value(key, node)
                    else v
                    for v in value
                ]
            else:
                args[key] = value
        return type(node)(**args)

    # -- reads ------------------------------------------------------------------------------

    def column(self, node: exp.Column, ctx: _Context) -> Pointer:
        if isinstance(node.this, exp.Star):
            raise SemanticError(f"{node.sql()} is only allowed inside COUNT")
        name = resolve_column(self.spec, node.name)
        return Pointer(
            column=name, position=self.position(node.table or None, ctx), text=_text(node, ctx)
        )

    def classifier(self, node: Classifier, ctx: _Context) -> Pointer:
        return Pointer(
            column=None, position=self.position(node.variable, ctx), text=_text(node, ctx)
        )

    def position(self, qualifier: str | None, ctx: _Context) -> Position:
        if ctx.at is not None:
            return ctx.at
        if ctx.aggregated:
            return Position(aggregated=True)
        return Position(vars=resolve_vars(self.spec, qualifier), final=ctx.final)

    def locate(self, node: Navigation, ctx: _Context) -> tuple[Position, exp.Expression]:
        """The row ``node`` points at, and the expression to read there."""
        if ctx.at is not None or ctx.aggregated:
            where = "another navigation" if ctx.at is not None else "an aggregate"
            raise SemanticError(f"{node.kind} cannot be nested inside {where} here")
        arg, final = node.this, ctx.final
        while isinstance(arg, exp.Paren | PatternSemantics):
            if isinstance(arg, PatternSemantics):  # PREV(RUNNING LAST(x)): FIRST/LAST's own
                final = arg.final
            arg = arg.this
        offset = node.offset
        if not isinstance(offset, int) or offset < 0:
            raise SemanticError(f"{node.kind} needs a non-negative integer offset")
        if node.physical:
            delta = -offset if node.kind == "PREV" else offset
            if isinstance(arg, Navigation):
                if arg.physical:
                    raise SemanticError("PREV/NEXT cannot be nested inside PREV/NEXT")
                inner, value = self.locate(arg, replace(ctx, final=final))
                return inner.moved(delta), value
            vars_ = self.arg_vars(arg, node.kind)
            return Position(vars=vars_, physical=delta, final=final), arg
        if isinstance(arg, Navigation):
            raise SemanticError(f"{node.kind} cannot contain another navigation function")
        vars_ = self.arg_vars(arg, node.kind)
        return Position(vars=vars_, first=node.kind == "FIRST", offset=offset, final=final), arg

    def arg_vars(self, arg: exp.Expression, what: str) -> VarSet:
        """The one variable (or subset) the column references of ``arg`` refer to."""
        names: set[str | None] = set()
        for node in arg.walk():
            if isinstance(node, exp.Column):
                names.add(node.table or None)
            elif isinstance(node, Classifier) and node.variable is not None:
                names.add(node.variable)
        qualified = {n for n in names if n is not None}
        if len(qualified) > 1 or (qualified and None in names):
            raise SemanticError(
                f"the argument of {what} must refer to a single pattern variable, "
                f"found {', '.join(sorted(str(n) for n in names))}"
            )
        return resolve_vars(self.spec, next(iter(qualified))) if qualified else None

    # -- aggregates -------------------------------------------------------------------------

    def aggregate(self, node: exp.Expression, ctx: _Context) -> AggregateCall:
        text = source_text(node)
        if ctx.at is not None or ctx.aggregated:
            raise SemanticError(
                f"aggregate {node.sql()} cannot be nested in another aggregate or navigation"
            )
        where = None
        if isinstance(node, exp.Filter):
            where = (
                node.expression.this if isinstance(node.expression, exp.Where) else node.expression
            )
            node = node.this
        if isinstance(node, exp.IgnoreNulls):
            node = node.this
        inner = _Context(final=ctx.final, aggregated=True)
        condition = self.bind(where, inner) if where is not None else None
        if isinstance(node, exp.Count):
            return self.count(node, ctx, inner, condition, text)
        function: str | None
        if isinstance(node, exp.Anonymous):
            function = ANONYMOUS_AGGREGATES[node.name.lower()]
            args = list(node.expressions)
        else:
            function = AGGREGATE_NAMES.get(type(node))
            if function is None:
                raise SemanticError(
                    f"aggregate {node.key.upper()} is not supported in row pattern recognition"
                )
            if isinstance(node, exp.GroupConcat):
                args = [node.this, node.args.get("separator")]
            else:
                args = [node.this, node.args.get("expression")]
        args = [a for a in args if a is not None]
        if isinstance(node, exp.ArrayAgg) and isinstance(args[0], exp.Order):
            raise SemanticError("ORDER BY inside an aggregate is not supported here")
        what = node.key.upper() if not isinstance(node, exp.Anonymous) else node.name
        vars_ = self.arg_vars(exp.Tuple(expressions=[a.copy() for a in args]), what)
        return AggregateCall(
            function=function,
            expressions=[self.bind(a, inner) for a in args],
            vars=vars_,
            filter=condition,
            final=ctx.final,
            text=text,
        )

    def duckdb_aggregate(self, node: DuckDBAggregate, ctx: _Context) -> AggregateCall:
        """An aggregate DuckDB computes: the matcher collects its reads."""
        text = node.args["text"]
        if ctx.at is not None or ctx.aggregated:
            raise SemanticError(
                f"aggregate {text} cannot be nested in another aggregate or navigation"
            )
        reads = list(node.expressions)
        inner = _Context(final=ctx.final, aggregated=True)
        vars_ = (
            self.arg_vars(exp.Tuple(expressions=[r.copy() for r in reads]), text) if reads else None
        )
        return AggregateCall(
            function=BY_DUCKDB,
            expressions=[self.bind(r, inner) for r in reads],
            vars=vars_,
            final=ctx.final,
            text=text,
            sql=node.query,
        )

    def count(
        self,
        node: exp.Count,
        ctx: _Context,
        inner: _Context,
        condition: exp.Expression | None,
        text: str,
    ) -> AggregateCall:
        arg = node.this
        distinct = isinstance(arg, exp.Distinct)
        if distinct:
            if len(arg.expressions) != 1:
                raise SemanticError("COUNT(DISTINCT ...) takes one argument here")
            arg = arg.expressions[0]
        if (
            arg is None
            or isinstance(arg, exp.Star)
            or (isinstance(arg, exp.Column) and isinstance(arg.this, exp.Star))
        ):
            vars_ = (
                resolve_vars(self.spec, arg.table or None) if isinstance(arg, exp.Column) else None
            )
            return AggregateCall(
                function="count_star",
                expressions=[],
                vars=vars_,
                filter=condition,
                final=ctx.final,
                text=text,
            )
        vars_ = self.arg_vars(arg, "COUNT")
        return AggregateCall(
            function="count",
            expressions=[self.bind(arg, inner)],
            vars=vars_,
            filter=condition,
            distinct=distinct,
            final=ctx.final,
            text=text,
        )


def _is_value(key: str, node: exp.Expression) -> bool:
    """Whether argument ``key`` of ``node`` is a value to bind (not a type, unit or name)."""
    if isinstance(node, exp.Cast | exp.TryCast) and key == "to":
        return False
    if key == "unit":
        return False
    if isinstance(node, exp.Extract) and key == "this":
        return False
    return True


def source_text(node: exp.Expr) -> str:
    """SQL text of an unbound node, for messages (DuckDB's generator does not know the
    row pattern functions, so they are shown as the function calls they were written as)."""
    if isinstance(node, exp.Literal) and not node.is_string:
        return str(node.this)  # the common leaf, without a copy and a generator (1,000 measures)

    def plain(n: exp.Expr) -> exp.Expr:
        if isinstance(n, Navigation):
            args = (
                [n.this] if n.args.get("offset") is None else [n.this, exp.Literal.number(n.offset)]
            )
            return exp.Anonymous(this=n.kind, expressions=args)
        if isinstance(n, PatternSemantics):
            word = "FINAL" if n.final else "RUNNING"
            return exp.Anonymous(this=word, expressions=[n.this])
        if isinstance(n, Classifier):
            return exp.Anonymous(
                this="CLASSIFIER", expressions=[exp.to_identifier(n.variable)] if n.variable else []
            )
        if isinstance(n, MatchNumber):
            return exp.Anonymous(this="MATCH_NUMBER", expressions=[])
        return n

    root = exp.Paren(this=node.copy())
    for n in reversed(list(root.walk(bfs=False))):
        replacement = plain(n)
        if replacement is not n:
            n.replace(replacement)
    try:
        text: str = root.this.sql(dialect="duckdb")
    except ValueError:
        return type(node).__name__.upper()
    for word in ("RUNNING", "FINAL"):  # shown as written: keyword, not a call
        text = text.replace(f"{word}(", f"{word} (")
    return text


def _text(node: exp.Expression, ctx: _Context) -> str:
    return ctx.text or source_text(node)
