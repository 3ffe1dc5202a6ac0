"""The row-at-a-time backend: a bound expression compiled to Python closures.

An expression is evaluated against a :class:`~matchsql.expr.rows.MatchView`.
Its bound form (:mod:`matchsql.plan.bound`) already says, for every read,
which row it names, so evaluation is: locate the pointer's row, read a column
or the label there; aggregates visit the rows mapped to their variables and
evaluate their arguments at each. Values go through :mod:`matchsql.expr.values`
and :mod:`matchsql.expr.aggregates`, the same rules every other backend uses.

``MatchView.final`` is the default for reads without RUNNING/FINAL (True in
ONE ROW PER MATCH measures); an explicit keyword was bound into the pointer,
so ``FINAL LAST(A.x)`` and ``RUNNING COUNT(*)`` side by side in one ALL ROWS
PER MATCH measure each see what they should from one view.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import ErrorLevel

from matchsql.errors import SemanticError
from matchsql.expr import aggregates as agg
from matchsql.expr import values as sc
from matchsql.expr.duckdb_calls import DuckDBCall, duckdb_type
from matchsql.expr.history import HistoryUse, Reach, observe
from matchsql.expr.rows import MatchView, first_row, label_at, last_row, physical_move, rows_of
from matchsql.plan.binder import bind
from matchsql.plan.bound import (
    BY_DUCKDB,
    AggregateCall,
    Const,
    MatchNumberRef,
    Pointer,
    Position,
    ValueSet,
    describe,
    folded_values,
    pointers,
)
from matchsql.plan.spec import MatchSpec

Evaluator = Callable[[MatchView], Any]
_Fn = Callable[[MatchView, Any], Any]  # (view, aggregated row) -> value


@dataclass
class CompiledExpression:
    """A compiled expression plus what the matcher needs to know about it."""

    fn: Evaluator
    history: HistoryUse
    reach: Reach

    def __call__(self, view: MatchView) -> Any:
        return self.fn(view)


def compile_expression(expr: exp.Expression, spec: MatchSpec) -> Evaluator:
    """Compile ``expr`` (a DEFINE or MEASURES tree of ``spec``) into ``view -> value``."""
    return analyze_expression(expr, spec).fn


def evaluator(bound: exp.Expression) -> Evaluator:
    """Compile an already bound expression into ``view -> value``."""
    fn = _Compiler().compile(bound)
    return lambda view: fn(view, None)


def analyze_expression(expr: exp.Expression, spec: MatchSpec) -> CompiledExpression:
    """Compile ``expr`` and report the history it observes and its navigation reach."""
    bound = bind(expr, spec)
    fn = _Compiler(spec.columns).compile(bound)
    history, reach = observe(bound)
    return CompiledExpression(lambda view: fn(view, None), history, reach)


def _null_safe(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any) -> Any:
        if any(a is None for a in args):
            return None
        return fn(*args)

    return wrapped


def _log(*args: Any) -> Any:
    """``log(x)`` is base 10 in DuckDB; ``log(b, x)`` is base ``b``."""
    if any(a is None for a in args):
        return None
    if len(args) == 1:
        return math.log10(args[0]) if args[0] > 0 else None
    base, x = args
    return math.log(x) / math.log(base) if base > 0 and x > 0 and base != 1 else None


def _floor_ceil(fn: Callable[[Any], int]) -> Callable[[Any], Any]:
    def apply(v: Any) -> Any:
        if isinstance(v, int):
            return v
        if isinstance(v, Decimal):
            return Decimal(fn(v))
        return float(fn(v))

    return apply


def _sign(v: Any) -> int:
    sign: int = (v > 0) - (v < 0)
    return sign


def _strpos(text: str, sub: str) -> int:
    return text.find(sub) + 1


def _concat(*args: Any) -> str:
    return "".join(sc.as_text(a) for a in args if a is not None)


def _regexp(text: str, pattern: str) -> bool:
    return re.search(pattern, text) is not None


# Scalar functions whose arguments are ``this``, ``expression`` (and a few
# named extras); NULL in -> NULL out unless noted.
_SCALARS: dict[type, tuple[tuple[str, ...], Callable[..., Any]]] = {
    exp.Abs: (("this",), _null_safe(abs)),
    exp.Sqrt: (("this",), _null_safe(lambda v: math.sqrt(v) if v >= 0 else math.nan)),
    exp.Ln: (("this",), _null_safe(lambda v: math.log(v) if v > 0 else None)),
    exp.Exp: (("this",), _null_safe(lambda v: math.exp(v))),
    exp.Log: (("this", "expression"), _log),
    exp.Sign: (("this",), _null_safe(_sign)),
    exp.Floor: (("this",), _null_safe(_floor_ceil(math.floor))),
    exp.Ceil: (("this",), _null_safe(_floor_ceil(math.ceil))),
    exp.IsNan: (("this",), _null_safe(lambda v: isinstance(v, float) and math.isnan(v))),
    exp.Lower: (("this",), _null_safe(str.lower)),
    exp.Upper: (("this",), _null_safe(str.upper)),
    exp.Length: (("this",), _null_safe(len)),
    exp.Substring: (("this", "start", "length"), sc.substring),
    exp.Replace: (("this", "expression", "replacement"), _null_safe(str.replace)),
    exp.Left: (("this", "expression"), _null_safe(lambda s, n: s[: max(n, 0)])),
    exp.Right: (("this", "expression"), _null_safe(lambda s, n: s[len(s) - n :] if n > 0 else "")),
    exp.StrPosition: (("this", "substr"), _null_safe(_strpos)),
    exp.Contains: (("this", "expression"), _null_safe(lambda s, t: t in s)),
    exp.StartsWith: (("this", "expression"), _null_safe(lambda s, t: s.startswith(t))),
    exp.EndsWith: (("this", "expression"), _null_safe(lambda s, t: s.endswith(t))),
    exp.RegexpLike: (("this", "expression"), _null_safe(_regexp)),
    exp.TimeToUnix: (("this",), sc.epoch_seconds),
    exp.Nullif: (
        ("this", "expression"),
        lambda a, b: None if a is None else (None if sc.equal(a, b) else a),
    ),
}

# Functions sqlglot leaves anonymous in DuckDB's dialect.
_ANONYMOUS: dict[str, Callable[..., Any]] = {
    "strlen": _null_safe(len),
    "date_part": lambda unit, v: None if unit is None else sc.date_part(unit, v),
    "datepart": lambda unit, v: None if unit is None else sc.date_part(unit, v),
    "reverse": _null_safe(lambda s: s[::-1]),
    "prefix": _null_safe(lambda s, t: s.startswith(t)),
    "suffix": _null_safe(lambda s, t: s.endswith(t)),
    "ifnull": lambda a, b: b if a is None else a,
}


def _literal(value: Any) -> exp.Expression | None:
    """A constant as a SQL literal in a query DuckDB answers (None: it is a parameter)."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, int | Decimal) or (isinstance(value, float) and math.isfinite(value)):
        return exp.Literal.number(str(value))
    return None


def _finder(at: Position) -> Callable[[MatchView], int | None]:
    """:func:`~matchsql.expr.rows.locate` specialised to one position: pointer reads are
    the evaluator's innermost loop, so the position's fields are bound once."""
    vars_, k, delta, fixed = at.vars, at.offset, at.physical, at.final
    if at.first:

        def find_first(view: MatchView) -> int | None:
            row = first_row(view, vars_, k)
            return physical_move(view, row, delta) if delta else row

        return find_first

    def find_last(view: MatchView) -> int | None:
        row = last_row(view, vars_, k, view.final if fixed is None else fixed)
        return physical_move(view, row, delta) if delta else row

    return find_last


def _whole_history(view: MatchView) -> bool:
    """Whether the view is a DEFINE's: its labels are a thread's history ending at the
    current row (so RUNNING and FINAL see the same rows) and can fold over it."""
    return hasattr(view.labels, "fold") and len(view.labels) == view.current - view.start + 1


def _running(
    call: AggregateCall, value: _Fn, condition: _Fn | None
) -> Callable[[MatchView], Any] | None:
    """An aggregate as a running fold over the history (see ``HistoryLabels.fold``), or
    None when it has no fold or its argument or FILTER reads a label.

    A row's contribution is then fixed once the row is in the match: it reads
    only that row's columns, not its label (``CLASSIFIER``), whose answer may
    change as the match grows.
    """
    reducer = agg.REDUCERS.get(call.function)
    fold = None if reducer is None else agg.FOLDS.get(reducer)
    if fold is None or call.distinct or any(p.classifier for p in pointers(call)):
        return None
    vars_ = call.vars
    token = object()
    initial, add, finish = fold.initial, fold.step, fold.finish

    def evaluate(view: MatchView) -> Any:
        def step(state: Any, row: int, label: str) -> Any:
            if vars_ is not None and label not in vars_:
                return state
            if condition is not None and sc.truth(condition(view, row)) is not True:
                return state
            return add(state, value(view, row))

        # called only where _whole_history(view): the labels are a history, which folds
        return finish(view.labels.fold(token, initial, step))  # type: ignore[attr-defined]

    return evaluate


def _member_of(value: _Fn, folded: ValueSet) -> _Fn:
    """``value IN`` a folded subquery's values, by SQL's three-valued rules: a hash
    lookup where the value has the set's one Python type (equal there means equal to
    Python, as :func:`~matchsql.expr.values.equal` finds), else a comparison with each
    value, as the IN of a literal list does."""
    found, kind, nan = folded.values, folded.kind, folded.nan
    missing = None if folded.null else False

    def member(view: MatchView, row: Any) -> Any:
        v = value(view, row)
        if v is None:
            return None
        if isinstance(v, float) and v != v:
            return True if nan else missing  # DuckDB finds NaN equal to NaN only
        if type(v) is kind:
            return True if v in found else missing
        if any(sc.equal(v, option) for option in found):
            return True
        return missing

    return member


class _Compiler:
    """Turns one bound expression into nested closures ``(view, aggregated row) -> value``;
    ``columns`` (the input's) type the values a query DuckDB answers reads."""

    def __init__(self, columns: pa.Schema | None = None) -> None:
        self.columns = columns

    def compile(self, node: exp.Expression) -> _Fn:
        if isinstance(node, Pointer):
            return self.pointer(node)
        if isinstance(node, Const):
            value = node.value
            return lambda view, row: value
        if isinstance(node, MatchNumberRef):
            return lambda view, row: view.match_number
        if isinstance(node, AggregateCall):
            return self.aggregate(node)
        binary = sc.ARITHMETIC.get(type(node))
        if binary is not None:
            return self.binary(node, binary)
        test = sc.COMPARISONS.get(type(node))
        if test is not None:
            return self.comparison(node, test[1])
        handler: Callable[[exp.Expression], _Fn] | None = getattr(
            self, "on_" + type(node).__name__.lower(), None
        )
        if handler is not None:
            return handler(node)
        if type(node) in _SCALARS:
            names, fn = _SCALARS[type(node)]
            return self.call(fn, [node.args.get(n) for n in names])
        if isinstance(node, exp.Anonymous) and node.name.lower() in _ANONYMOUS:
            return self.call(_ANONYMOUS[node.name.lower()], list(node.expressions))
        return self.by_duckdb(node)

    def by_duckdb(self, node: exp.Expression) -> _Fn:
        """A node the value library has no rule for, as DuckDB computes it: a query over
        the values of its reads (pointers, aggregates, MATCH_NUMBER()), which this
        evaluator supplies (see :mod:`matchsql.expr.duckdb_calls`)."""
        reads: list[exp.Expression] = []
        template, shown = exp.Paren(this=node.copy()), exp.Paren(this=node.copy())
        copies = list(zip(node.walk(), template.this.walk(), shown.this.walk()))
        at = {id(n): (t, s) for n, t, s in copies}
        pending = [node]
        while pending:
            n = pending.pop()
            literal = _literal(n.value) if isinstance(n, Const) else None
            if literal is not None:
                at[id(n)][0].replace(literal)
                at[id(n)][1].replace(literal.copy())
            elif isinstance(n, Pointer | AggregateCall | MatchNumberRef | Const):
                reads.append(n)
                at[id(n)][0].replace(self.parameter(n, len(reads)))
                at[id(n)][1].replace(exp.var(describe(n)))
            else:
                pending.extend(n.iter_expressions())
        try:
            sql = "SELECT " + template.this.sql(
                dialect="duckdb", unsupported_level=ErrorLevel.RAISE
            )
            text = shown.this.sql(dialect="duckdb")
        except Exception:  # noqa: BLE001 - a node DuckDB's dialect cannot write
            raise SemanticError(
                f"unsupported expression in row pattern recognition: {describe(node)}"
            ) from None
        call = DuckDBCall(sql, text)
        parts = [self.compile(r) for r in reads]
        return lambda view, row: call([p(view, row) for p in parts])

    def call(self, fn: Callable[..., Any], args: list[exp.Expression | None]) -> _Fn:
        while args and args[-1] is None:
            args.pop()
        parts = [self.compile(a) if a is not None else (lambda view, row: None) for a in args]
        return lambda view, row: fn(*[p(view, row) for p in parts])

    # -- reads -------------------------------------------------------------------------------

    def pointer(self, node: Pointer) -> _Fn:
        name = node.column
        if node.position.aggregated:  # the row the enclosing aggregate visits
            if name is None:
                return lambda view, row: label_at(view, row)
            return lambda view, row: None if row is None else view.rows.value(row, name)
        find = _finder(node.position)
        if name is None:
            return lambda view, row: label_at(view, find(view))

        def read(view: MatchView, row: Any) -> Any:
            found = find(view)
            return None if found is None else view.rows.value(found, name)

        return read

    # -- aggregates ----------------------------------------------------------------------------

    def aggregate(self, node: AggregateCall) -> _Fn:
        vars_, fixed = node.vars, node.final
        parts = [self.compile(a) for a in node.expressions]
        if node.function == BY_DUCKDB:
            return self.duckdb_aggregate(node, parts)
        condition = self.compile(node.condition) if node.condition is not None else None
        if node.function == "count_star":
            parts = [lambda view, row: 1]
        reducer = agg.REDUCERS[node.function]
        if node.distinct:
            reducer = agg.agg_count_distinct
        pair = node.function in agg.PAIR_AGGREGATES
        running = None if pair else _running(node, parts[0], condition)

        def evaluate(view: MatchView, row: Any) -> Any:
            if running is not None and _whole_history(view):
                return running(view)
            final = view.final if fixed is None else fixed
            positions = rows_of(view, vars_, final)
            if condition is not None:
                positions = [p for p in positions if sc.truth(condition(view, p)) is True]
            if pair:
                return reducer(
                    [
                        (parts[0](view, p), parts[1](view, p) if len(parts) > 1 else None)
                        for p in positions
                    ]
                )
            return reducer([parts[0](view, p) for p in positions])

        return evaluate

    def parameter(self, read: exp.Expression, number: int) -> exp.Expression:
        """Parameter ``number`` of a query DuckDB answers, cast to the type of ``read``
        where it is known: a NULL read keeps its column's type (``greatest($1, $2)``
        is DOUBLE where ``$1`` reads a DOUBLE column, NULL or not)."""
        placeholder = exp.Placeholder(this=str(number))
        type_name = None
        if isinstance(read, Pointer):
            if read.classifier:
                type_name = "VARCHAR"
            elif self.columns is not None and read.column in self.columns.names:
                type_name = duckdb_type(self.columns.field(read.column).type)
        elif isinstance(read, MatchNumberRef):
            type_name = "BIGINT"
        if type_name is None:
            return placeholder
        return exp.Cast(this=placeholder, to=exp.DataType.build(type_name, dialect="duckdb"))

    def duckdb_aggregate(self, node: AggregateCall, parts: list[_Fn]) -> _Fn:
        """An aggregate DuckDB computes over the lists of its reads' values."""
        vars_, fixed = node.vars, node.final
        call = DuckDBCall(node.query or "", node.text)

        def evaluate(view: MatchView, row: Any) -> Any:
            positions = rows_of(view, vars_, view.final if fixed is None else fixed)
            if not parts:
                return call([[None] * len(positions)])
            return call([[part(view, p) for p in positions] for part in parts])

        return evaluate

    # -- operators ---------------------------------------------------------------------------------

    def binary(self, node: exp.Expression, fn: Callable[[Any, Any], Any]) -> _Fn:
        left = self.compile(node.this)
        right = self.compile(node.expression)
        return lambda view, row: fn(left(view, row), right(view, row))

    def comparison(self, node: exp.Expression, test: Callable[[int], bool]) -> _Fn:
        left = self.compile(node.this)
        right = self.compile(node.expression)

        def compare(view: MatchView, row: Any) -> Any:
            c = sc.compare(left(view, row), right(view, row))
            return None if c is None else test(c)

        return compare

    def on_nullsafeeq(self, node: exp.Expression) -> _Fn:
        left = self.compile(node.this)
        right = self.compile(node.expression)

        def same(view: MatchView, row: Any) -> bool:
            a, b = left(view, row), right(view, row)
            if a is None or b is None:
                return a is None and b is None
            return sc.compare(a, b) == 0

        return same

    def on_nullsafeneq(self, node: exp.Expression) -> _Fn:
        same = self.on_nullsafeeq(node)
        return lambda view, row: not same(view, row)

    def on_and(self, node: exp.And) -> _Fn:
        return sc.both(self.compile(node.this), self.compile(node.expression))

    def on_or(self, node: exp.Or) -> _Fn:
        return sc.either(self.compile(node.this), self.compile(node.expression))

    def on_not(self, node: exp.Not) -> _Fn:
        inner = self.compile(node.this)
        return lambda view, row: sc.not_(inner(view, row))

    def on_neg(self, node: exp.Neg) -> _Fn:
        inner = self.compile(node.this)
        return lambda view, row: sc.neg(inner(view, row))

    def on_is(self, node: exp.Is) -> _Fn:
        inner = self.compile(node.this)
        target = node.expression
        if isinstance(target, Const) and target.value is None:
            return lambda view, row: inner(view, row) is None
        if isinstance(target, Const) and isinstance(target.value, bool):
            wanted = target.value
            return lambda view, row: sc.truth(inner(view, row)) is wanted
        raise SemanticError(f"unsupported IS test: {node.sql()}")

    def on_in(self, node: exp.In) -> _Fn:
        folded = folded_values(node)
        if folded is not None:
            return _member_of(self.compile(node.this), folded)
        if node.args.get("query") is not None or not node.expressions:
            raise SemanticError("IN with a subquery is not supported in row pattern expressions")
        value = self.compile(node.this)
        options = [self.compile(e) for e in node.expressions]

        def member(view: MatchView, row: Any) -> Any:
            v = value(view, row)
            if v is None:
                return None
            unknown = False
            for option in options:
                eq = sc.equal(v, option(view, row))
                if eq:
                    return True
                unknown |= eq is None
            return None if unknown else False

        return member

    def on_between(self, node: exp.Between) -> _Fn:
        value = self.compile(node.this)
        low = self.compile(node.args["low"])
        high = self.compile(node.args["high"])

        def between(view: MatchView, row: Any) -> Any:
            v = value(view, row)
            lo, hi = sc.compare(v, low(view, row)), sc.compare(v, high(view, row))
            return sc.and_([None if lo is None else lo >= 0, None if hi is None else hi <= 0])

        return between

    def like(
        self, node: exp.Expression, insensitive: bool, escape: exp.Expression | None = None
    ) -> _Fn:
        value = self.compile(node.this)
        pattern = self.compile(node.expression)
        esc = self.compile(escape) if escape is not None else (lambda view, row: None)
        cache: dict[tuple[str, str | None], re.Pattern[str]] = {}

        def like(view: MatchView, row: Any) -> Any:
            v, p = value(view, row), pattern(view, row)
            if v is None or p is None:
                return None
            e = esc(view, row)
            regex = cache.get((p, e))
            if regex is None:
                regex = cache[(p, e)] = sc.like_regex(p, insensitive, e)
            return regex.match(v) is not None

        return like

    def on_like(self, node: exp.Like) -> _Fn:
        return self.like(node, False)

    def on_ilike(self, node: exp.ILike) -> _Fn:
        return self.like(node, True)

    def on_escape(self, node: exp.Escape) -> _Fn:
        inner = node.this
        if not isinstance(inner, exp.Like | exp.ILike):
            raise SemanticError(f"unsupported ESCAPE: {node.sql()}")
        return self.like(inner, isinstance(inner, exp.ILike), node.expression)

    def on_case(self, node: exp.Case) -> _Fn:
        operand = self.compile(node.this) if node.this is not None else None
        branches = [
            (self.compile(b.this), self.compile(b.args["true"])) for b in node.args.get("ifs") or []
        ]
        default = node.args.get("default")
        otherwise = self.compile(default) if default is not None else None

        def case(view: MatchView, row: Any) -> Any:
            subject = operand(view, row) if operand is not None else None
            for test, result in branches:
                t = test(view, row)
                hit = sc.equal(subject, t) if operand is not None else sc.truth(t)
                if hit is True:
                    return result(view, row)
            return otherwise(view, row) if otherwise is not None else None

        return case

    def on_if(self, node: exp.If) -> _Fn:
        test = self.compile(node.this)
        then = self.compile(node.args["true"])
        other = node.args.get("false")
        otherwise = self.compile(other) if other is not None else None

        def if_(view: MatchView, row: Any) -> Any:
            if sc.truth(test(view, row)) is True:
                return then(view, row)
            return otherwise(view, row) if otherwise is not None else None

        return if_

    def variadic(self, node: exp.Expression) -> list[_Fn]:
        items = ([node.this] if node.this is not None else []) + list(node.expressions)
        return [self.compile(e) for e in items]

    def on_coalesce(self, node: exp.Coalesce) -> _Fn:
        parts = self.variadic(node)

        def coalesce(view: MatchView, row: Any) -> Any:
            for part in parts:
                v = part(view, row)
                if v is not None:
                    return v
            return None

        return coalesce

    def extreme(self, node: exp.Expression, sign: int) -> _Fn:
        parts = self.variadic(node)

        def pick(view: MatchView, row: Any) -> Any:
            best = None  # DuckDB's GREATEST/LEAST skip NULL arguments
            for part in parts:
                v = part(view, row)
                if v is not None and (best is None or sc.compare(v, best) == sign):
                    best = v
            return best

        return pick

    def on_array(self, node: exp.Array) -> _Fn:
        """``ARRAY[a, b]`` (a list value, as ``array_agg`` returns): compared element-wise."""
        parts = [self.compile(e) for e in node.expressions]
        return lambda view, row: [p(view, row) for p in parts]

    def on_greatest(self, node: exp.Greatest) -> _Fn:
        return self.extreme(node, 1)

    def on_least(self, node: exp.Least) -> _Fn:
        return self.extreme(node, -1)

    def on_concat(self, node: exp.Concat) -> _Fn:
        parts = self.variadic(node)
        return lambda view, row: _concat(*[p(view, row) for p in parts])

    def on_dpipe(self, node: exp.DPipe) -> _Fn:
        left = self.compile(node.this)
        right = self.compile(node.expression)

        def pipe(view: MatchView, row: Any) -> Any:
            a, b = left(view, row), right(view, row)
            return None if a is None or b is None else sc.as_text(a) + sc.as_text(b)

        return pipe

    def on_round(self, node: exp.Round) -> _Fn:
        value = self.compile(node.this)
        digits_expr = node.args.get("decimals")
        digits = self.compile(digits_expr) if digits_expr is not None else None

        def round_(view: MatchView, row: Any) -> Any:
            d = digits(view, row) if digits is not None else 0
            v = value(view, row)
            return None if v is None or d is None else sc.round_half_away(v, int(d))

        return round_

    def on_trim(self, node: exp.Trim) -> _Fn:
        value = self.compile(node.this)
        chars_expr = node.expression
        chars = self.compile(chars_expr) if chars_expr is not None else None
        position = str(node.args.get("position") or "BOTH").upper()

        def trim(view: MatchView, row: Any) -> Any:
            v = value(view, row)
            c = chars(view, row) if chars is not None else " "
            if v is None or c is None:
                return None
            if position == "LEADING":
                return v.lstrip(c)
            if position == "TRAILING":
                return v.rstrip(c)
            return v.strip(c)

        return trim

    def on_extract(self, node: exp.Extract) -> _Fn:
        unit = node.this.name
        value = self.compile(node.expression)
        return lambda view, row: sc.date_part(unit, value(view, row))

    def truncate(self, node: exp.Expression) -> _Fn:
        unit = node.args["unit"].name if node.args.get("unit") is not None else None
        if unit is None:
            raise SemanticError(f"date_trunc needs a unit: {node.sql()}")
        value = self.compile(node.this)
        return lambda view, row: sc.date_trunc(unit, value(view, row))

    def on_timestamptrunc(self, node: exp.Expression) -> _Fn:
        return self.truncate(node)

    def on_datetrunc(self, node: exp.Expression) -> _Fn:
        return self.truncate(node)

    def on_interval(self, node: exp.Interval) -> _Fn:
        amount = self.compile(node.this)
        unit = node.args.get("unit")
        unit_name = unit.name if unit is not None else None

        def interval(view: MatchView, row: Any) -> Any:
            a = amount(view, row)
            if a is None:
                return None
            if unit_name is None:
                return sc.parse_interval(str(a))
            return sc.make_interval(a, unit_name)

        return interval

    def on_cast(self, node: exp.Cast) -> _Fn:
        return self.cast(node, safe=False)

    def on_trycast(self, node: exp.TryCast) -> _Fn:
        return self.cast(node, safe=True)

    def cast(self, node: exp.Cast, safe: bool) -> _Fn:
        value = self.compile(node.this)
        convert = sc.caster(node.to)

        def cast(view: MatchView, row: Any) -> Any:
            v = value(view, row)
            try:
                return convert(v)
            except Exception:
                if safe:
                    return None
                raise

        return cast
