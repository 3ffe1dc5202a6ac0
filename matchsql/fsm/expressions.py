"""DEFINE and MEASURES expressions: sqlglot trees compiled to Python closures.

An expression is evaluated against a :class:`MatchView`: the partition's
rows, the start of a (partial) match, the variable each matched row was
mapped to, and the row at which the expression is evaluated. Everything
pattern-specific reduces to *locating a row* and then reading a value there:

* ``A.x`` (and ``CLASSIFIER(A)``) read the last row mapped to ``A``; an
  unqualified ``x`` reads the last row of the match so far (the current row);
* ``FIRST/LAST(expr, k)`` locate the k-th row from the start/end among the
  rows mapped to the variable (or all match rows when unqualified);
* ``PREV/NEXT(expr, k)`` first locate ``expr``'s row (possibly through a
  nested ``FIRST/LAST``) and then move k rows physically in the partition;
* aggregates evaluate their argument at every row mapped to the variable.

RUNNING semantics see the match rows up to ``current``; FINAL semantics see
the whole match. Two reads ignore that limit, as Trino's do: ``FIRST`` counts
from the match's start over every row the view has, and ``CLASSIFIER()``
reached through navigation is the label of any row of the match. (In DEFINE
the view has only the rows up to ``current``, so both end there.)
``MatchView.final`` is the default for expressions without RUNNING/FINAL
(True in ONE ROW PER MATCH measures); an explicit keyword overrides it for
the subtree, so nesting is honest: ``FINAL LAST(A.x)`` and
``RUNNING COUNT(*)`` side by side in one ALL ROWS PER MATCH measure each see
what they should from one view.

While compiling, :class:`HistoryUse` records which parts of the match
history each expression can observe; the VM merges threads whose observable
histories are equal, which is what keeps ambiguous patterns polynomial.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

import pyarrow as pa
from sqlglot import exp

from matchsql.errors import SemanticError
from matchsql.expr import aggregates as agg
from matchsql.expr import values as sc
from matchsql.grammar.nodes import Classifier, MatchNumber, Navigation, PatternSemantics
from matchsql.plan.spec import MatchSpec

# -- what an expression sees ---------------------------------------------------------------


class RowSource(Protocol):
    """Partition rows by absolute index (0 = the partition's first row)."""

    @property
    def count(self) -> int:
        """Rows known so far."""
        ...  # pragma: no cover

    @property
    def complete(self) -> bool:
        """True once the partition has ended (``count`` is its length)."""
        ...  # pragma: no cover

    def value(self, index: int, column: str) -> Any: ...  # pragma: no cover


class ListRows:
    """A :class:`RowSource` over a list of dicts or an Arrow table (for oracles and tests)."""

    def __init__(self, rows: Sequence[dict] | pa.Table | pa.RecordBatch,
                 complete: bool = True) -> None:
        if isinstance(rows, pa.Table | pa.RecordBatch):
            rows = rows.to_pylist()
        self.rows = list(rows)
        self.complete = complete

    @property
    def count(self) -> int:
        return len(self.rows)

    def value(self, index: int, column: str) -> Any:
        return self.rows[index][column]


@dataclass
class MatchView:
    """What an expression sees when evaluated at one row of a (partial) match."""

    rows: RowSource  # partition rows by absolute index
    start: int  # absolute index of the match's first row
    labels: Sequence[str]  # labels[k] = primary variable of row start+k (so far / whole match)
    current: int  # absolute index of the row at which the expression is evaluated
    match_number: int
    final: bool = False  # default semantics: True = FINAL (whole match known)


Evaluator = Callable[[MatchView], Any]
VarSet = frozenset[str] | None  # None: the universal row pattern variable (all rows)
_Fn = Callable[[MatchView, Any], Any]  # (view, bound row) -> value


# -- locating rows ---------------------------------------------------------------------------


def _visible(view: MatchView, final: bool) -> int:
    """How many match rows the semantics can see: all (FINAL) or up to current (RUNNING)."""
    n = len(view.labels)
    if final:
        return n
    k = view.current - view.start + 1  # max(0, min(n, k)), without the calls
    return n if k >= n else (k if k > 0 else 0)


def _backward(labels: Sequence[str], n: int) -> Iterator[tuple[int, str]]:
    if n == len(labels):
        k = n - 1
        for label in reversed(labels):
            yield k, label
            k -= 1
    else:
        for k in range(n - 1, -1, -1):
            yield k, labels[k]


def last_row(view: MatchView, vars_: VarSet, k: int, final: bool) -> int | None:
    """Absolute index of the k-th last visible row mapped to ``vars_`` (0 = last)."""
    n = _visible(view, final)
    if vars_ is None:
        return view.start + n - 1 - k if k < n else None
    tracked = getattr(view.labels, "last_rows", None)
    if tracked is not None and n == len(view.labels):
        found = tracked(vars_)
        if found is not None:
            rows, exhaustive = found
            if k < len(rows):
                return rows[-1 - k]
            if exhaustive:
                return None
    for idx, label in _backward(view.labels, n):
        if label in vars_:
            if k == 0:
                return view.start + idx
            k -= 1
    return None


def first_row(view: MatchView, vars_: VarSet, k: int) -> int | None:
    """Absolute index of the k-th row of the match mapped to ``vars_`` (0 = first).

    FIRST counts from the match's start over every row the view knows, whatever
    the semantics: Trino resolves it over the whole match even under RUNNING in
    MEASURES, while in DEFINE the view knows only the rows up to the current one,
    so a row beyond it is NULL there.
    """
    n = len(view.labels)
    if vars_ is None:
        return view.start + k if k < n else None
    for idx in range(n):
        if view.labels[idx] in vars_:
            if k == 0:
                return view.start + idx
            k -= 1
    return None


def rows_of(view: MatchView, vars_: VarSet, final: bool) -> list[int]:
    """Absolute indexes of the visible rows mapped to ``vars_``, in match order."""
    n = _visible(view, final)
    if vars_ is None:
        return list(range(view.start, view.start + n))
    labels = view.labels
    if n != len(labels):
        labels = labels[:n]
    return [view.start + idx for idx, label in enumerate(labels) if label in vars_]


def _label_at(view: MatchView, row: int | None) -> str | None:
    """The variable of ``row`` when it belongs to the match, else NULL.

    Navigation may name any row of the match, past the current one too under
    RUNNING (``NEXT(CLASSIFIER())``), as in Trino; a row outside the match
    (before it, after it, or not matched yet in DEFINE) has no label.
    """
    if row is None:
        return None
    idx = row - view.start
    return view.labels[idx] if 0 <= idx < len(view.labels) else None


def _physical(view: MatchView, row: int | None, delta: int) -> int | None:
    """Move ``delta`` rows within the partition; outside it the result is NULL."""
    if row is None:
        return None
    target = row + delta
    if target < 0 or (view.rows.complete and target >= view.rows.count):
        return None
    return target


# -- history observation (for thread merging) -----------------------------------------------


@dataclass
class HistoryUse:
    """Which parts of the match history an expression can observe.

    Two partial matches that agree on all of these behave identically under
    the expression, so the VM may keep only the preferred one.
    """

    last: dict[frozenset[str], int] = field(default_factory=dict)  # S -> k: last k+1 rows
    first: dict[frozenset[str], int] = field(default_factory=dict)  # S -> k: first k+1 rows
    every: set[frozenset[str]] = field(default_factory=set)  # all rows of S
    count: set[frozenset[str]] = field(default_factory=set)  # only how many rows of S
    labels: set[frozenset[str]] = field(default_factory=set)  # labels of the rows of S
    all_labels: bool = False  # the whole label sequence

    @property
    def empty(self) -> bool:
        return not (self.last or self.first or self.every or self.count or self.labels
                    or self.all_labels)

    def in_define_of(self, var: str) -> HistoryUse:
        """The history a DEFINE of ``var`` really observes.

        While ``var``'s condition is evaluated the current row is already
        mapped to ``var``, so ``LAST(S.x, k)`` with ``var`` in ``S`` reaches
        only k rows of the earlier history (``A.x`` in DEFINE A is the current
        row and observes none). Without this, ``DEFINE A AS A.x > 0`` would
        keep threads apart by their last A row and defeat merging.
        """
        last = {}
        for s, k in self.last.items():
            if var not in s:
                last[s] = k
            elif k > 0:
                last[s] = k - 1
        labels = {s for s in self.labels if s in last or s in self.first or s in self.every}
        return HistoryUse(last, dict(self.first), set(self.every), set(self.count), labels,
                          self.all_labels)

    def merge(self, other: HistoryUse) -> None:
        for s, k in other.last.items():
            self.last[s] = max(k, self.last.get(s, k))
        for s, k in other.first.items():
            self.first[s] = max(k, self.first.get(s, k))
        self.every |= other.every
        self.count |= other.count
        self.labels |= other.labels
        self.all_labels |= other.all_labels


@dataclass
class Reach:
    """How far an expression looks physically before/after the rows it is anchored to."""

    back: int = 0
    ahead: int = 0

    def merge(self, other: Reach) -> None:
        self.back = max(self.back, other.back)
        self.ahead = max(self.ahead, other.ahead)


# -- compilation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scope:
    bound: bool = False  # column references read the row chosen by an enclosing navigation
    semantics: bool | None = None  # True FINAL, False RUNNING, None: the view's default
    shift: int = 0  # physical offset accumulated by enclosing PREV/NEXT (for Reach)

    def final(self, view: MatchView) -> bool:
        return view.final if self.semantics is None else self.semantics


@dataclass
class CompiledExpression:
    """A compiled expression plus what the matcher needs to know about it."""

    fn: Evaluator
    history: HistoryUse
    reach: Reach

    def __call__(self, view: MatchView) -> Any:
        return self.fn(view)


def compile_expression(expr: exp.Expression, spec: MatchSpec) -> Evaluator:
    """Compile ``expr`` into a closure ``view -> value``."""
    return analyze_expression(expr, spec).fn


def analyze_expression(expr: exp.Expression, spec: MatchSpec) -> CompiledExpression:
    """Compile ``expr`` and report the history it observes and its navigation reach."""
    compiler = _Compiler(spec)
    fn = compiler.compile(expr, _Scope())
    return CompiledExpression(lambda view: fn(view, None), compiler.history, compiler.reach)


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    exp.Add: sc.add, exp.Sub: sc.sub, exp.Mul: sc.mul, exp.Div: sc.div,
    exp.IntDiv: sc.int_div, exp.Mod: sc.mod, exp.Pow: sc.power,
}

_COMPARE: dict[type, Callable[[int], bool]] = {
    exp.EQ: lambda c: c == 0, exp.NEQ: lambda c: c != 0, exp.GT: lambda c: c > 0,
    exp.GTE: lambda c: c >= 0, exp.LT: lambda c: c < 0, exp.LTE: lambda c: c <= 0,
}


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


def _floor_ceil(fn: Callable[[float], int]) -> Callable[[Any], Any]:
    def apply(v: Any) -> Any:
        if isinstance(v, int):
            return v
        if isinstance(v, Decimal):
            return Decimal(fn(v))
        return float(fn(v))
    return apply


def _sign(v: Any) -> int:
    return (v > 0) - (v < 0)


def _strpos(text: str, sub: str) -> int:
    return text.find(sub) + 1


def _concat(*args: Any) -> str:
    return "".join(sc.to_str(a) for a in args if a is not None)


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
    exp.Left: (("this", "expression"), _null_safe(lambda s, n: s[:max(n, 0)])),
    exp.Right: (("this", "expression"), _null_safe(lambda s, n: s[len(s) - n:] if n > 0 else "")),
    exp.StrPosition: (("this", "substr"), _null_safe(_strpos)),
    exp.Contains: (("this", "expression"), _null_safe(lambda s, t: t in s)),
    exp.StartsWith: (("this", "expression"), _null_safe(lambda s, t: s.startswith(t))),
    exp.EndsWith: (("this", "expression"), _null_safe(lambda s, t: s.endswith(t))),
    exp.RegexpLike: (("this", "expression"), _null_safe(_regexp)),
    exp.TimeToUnix: (("this",), sc.epoch_seconds),
    exp.Nullif: (("this", "expression"),
                 lambda a, b: None if a is None else (None if sc.equal(a, b) else a)),
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

_AGGREGATES: dict[type, Callable[[Sequence[Any]], Any]] = {
    exp.Sum: agg.agg_sum, exp.Avg: agg.agg_avg, exp.Min: agg.agg_min, exp.Max: agg.agg_max,
    exp.AnyValue: agg.agg_any_value, exp.ArrayAgg: agg.agg_list,
    exp.LogicalAnd: agg.agg_bool_and, exp.LogicalOr: agg.agg_bool_or,
    exp.CountIf: agg.agg_count_if, exp.FirstValue: agg.agg_arbitrary,
    exp.ArgMax: agg.agg_arg_max, exp.ArgMin: agg.agg_arg_min,
    exp.GroupConcat: agg.agg_string_agg,
}
_PAIR_AGGREGATES = (exp.ArgMax, exp.ArgMin, exp.GroupConcat)
_ANONYMOUS_AGGREGATES: dict[str, Callable[[Sequence[Any]], Any]] = {
    "arbitrary": agg.agg_arbitrary, "first": agg.agg_arbitrary, "list": agg.agg_list,
    "any_value": agg.agg_any_value, "bool_and": agg.agg_bool_and,
    "bool_or": agg.agg_bool_or, "count_if": agg.agg_count_if,
}


def _whole_history(view: MatchView) -> bool:
    """Whether the view is a DEFINE's: its labels are a thread's history ending at the
    current row (so RUNNING and FINAL see the same rows) and can fold over it."""
    return hasattr(view.labels, "fold") and \
        len(view.labels) == view.current - view.start + 1


def _running(fold: agg.Fold | None, vars_: VarSet, value: _Fn, condition: _Fn | None,
             args: list[exp.Expression | None]) -> Callable[[MatchView], Any] | None:
    """An aggregate as a running fold over the history (see ``HistoryLabels.fold``), or
    None when it has no fold or its argument or FILTER reads more than its own row.

    A row's contribution is then fixed once the row is in the match: it reads
    only that row's columns, not labels (``CLASSIFIER``) or other rows
    (navigation), whose answers may change as the match grows.
    """
    if fold is None:
        return None
    for arg in args:
        if arg is not None and any(isinstance(n, Navigation | Classifier) for n in arg.walk()):
            return None
    token = object()
    initial, add, finish = fold.initial, fold.step, fold.finish

    def evaluate(view: MatchView) -> Any:
        def step(state: Any, row: int, label: str) -> Any:
            if vars_ is not None and label not in vars_:
                return state
            if condition is not None and sc.truth(condition(view, row)) is not True:
                return state
            return add(state, value(view, row))
        return finish(view.labels.fold(token, initial, step))  # type: ignore[attr-defined]
    return evaluate


def is_aggregate(node: exp.Expression) -> bool:
    """Is ``node`` an aggregate over the rows of a pattern variable (with its FILTER)?"""
    if isinstance(node, exp.Filter) or (
            isinstance(node, exp.IgnoreNulls) and isinstance(node.this, exp.AggFunc)):
        return True
    if isinstance(node, exp.Anonymous):
        return node.name.lower() in _ANONYMOUS_AGGREGATES
    return isinstance(node, exp.AggFunc)


class _Compiler:
    """Turns one expression into nested closures; records history use and reach."""

    def __init__(self, spec: MatchSpec) -> None:
        self.spec = spec
        self.columns = [f.name for f in spec.columns]
        self.variables = set(spec.variables)
        self.history = HistoryUse()
        self.reach = Reach()

    # -- names ----------------------------------------------------------------------------

    def column_name(self, node: exp.Column) -> str:
        name = node.name
        if name in self.columns:
            return name
        matches = [c for c in self.columns if c.lower() == name.lower()]
        if len(matches) == 1:
            return matches[0]
        raise SemanticError(f"unknown column {name!r} in row pattern expression")

    def var_set(self, name: str | None) -> VarSet:
        if name is None:
            return None
        for candidate in (name, name.upper()):
            if candidate in self.spec.subsets:
                return frozenset(self.spec.subsets[candidate])
            if candidate in self.variables:
                return frozenset((candidate,))
        raise SemanticError(f"unknown pattern variable {name!r}")

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
                f"found {', '.join(sorted(str(n) for n in names))}")
        return self.var_set(next(iter(qualified))) if qualified else None

    # -- dispatch -----------------------------------------------------------------------------

    def compile(self, node: exp.Expression, scope: _Scope) -> _Fn:
        if isinstance(node, exp.Paren):
            return self.compile(node.this, scope)
        if isinstance(node, exp.Column):
            return self.column(node, scope)
        if isinstance(node, exp.Literal):
            return self.literal(node)
        if isinstance(node, exp.Null):
            return lambda view, row: None
        if isinstance(node, exp.Boolean):
            value = bool(node.this)
            return lambda view, row: value
        if isinstance(node, Navigation):
            return self.navigation(node, scope)
        if isinstance(node, PatternSemantics):
            inner = _Scope(scope.bound, node.final, scope.shift)
            return self.compile(node.this, inner)
        if isinstance(node, Classifier):
            return self.classifier(node, scope)
        if isinstance(node, MatchNumber):
            return lambda view, row: view.match_number
        if is_aggregate(node):
            return self.aggregate(node, scope)
        binary = _BINARY.get(type(node))
        if binary is not None:
            return self.binary(node, binary, scope)
        test = _COMPARE.get(type(node))
        if test is not None:
            return self.comparison(node, test, scope)
        handler = getattr(self, "on_" + type(node).__name__.lower(), None)
        if handler is not None:
            return handler(node, scope)
        if type(node) in _SCALARS:
            names, fn = _SCALARS[type(node)]
            return self.call(fn, [node.args.get(n) for n in names], scope)
        if isinstance(node, exp.Anonymous):
            fn = _ANONYMOUS.get(node.name.lower())
            if fn is None:
                raise SemanticError(f"unknown function {node.name}() in row pattern expression")
            return self.call(fn, list(node.expressions), scope)
        raise SemanticError(
            f"unsupported expression in row pattern recognition: {node.sql(dialect='duckdb')}")

    def call(self, fn: Callable[..., Any], args: list[exp.Expression | None],
             scope: _Scope) -> _Fn:
        while args and args[-1] is None:
            args.pop()
        parts = [self.compile(a, scope) if a is not None else (lambda view, row: None)
                 for a in args]
        return lambda view, row: fn(*[p(view, row) for p in parts])

    # -- leaves --------------------------------------------------------------------------------

    def literal(self, node: exp.Literal) -> _Fn:
        if node.is_string:
            text = node.this
            return lambda view, row: text
        raw = str(node.this)
        try:
            value: Any = int(raw)
        except ValueError:
            value = float(raw)
        return lambda view, row: value

    def column(self, node: exp.Column, scope: _Scope) -> _Fn:
        if isinstance(node.this, exp.Star):
            raise SemanticError(f"{node.sql()} is only allowed inside COUNT")
        name = self.column_name(node)
        if scope.bound:
            return lambda view, row: None if row is None else view.rows.value(row, name)
        vars_ = self.var_set(node.table or None)
        self.observe_last(vars_, 0, scope)

        def read(view: MatchView, row: Any) -> Any:
            at = last_row(view, vars_, 0, scope.final(view))
            return None if at is None else view.rows.value(at, name)
        return read

    def observe_last(self, vars_: VarSet, k: int, scope: _Scope) -> None:
        self.reach.back = max(self.reach.back, scope.shift)
        if vars_ is not None:
            self.history.last[vars_] = max(k, self.history.last.get(vars_, k))

    def classifier(self, node: Classifier, scope: _Scope) -> _Fn:
        if scope.bound:
            return lambda view, row: _label_at(view, row)
        vars_ = self.var_set(node.variable)
        if vars_ is not None:
            self.observe_last(vars_, 0, scope)
            self.history.labels.add(vars_)

        def label(view: MatchView, row: Any) -> Any:
            return _label_at(view, last_row(view, vars_, 0, scope.final(view)))
        return label

    # -- navigation ------------------------------------------------------------------------------

    def navigation(self, node: Navigation, scope: _Scope) -> _Fn:
        locate, value_expr = self.locator(node, scope)
        value = self.compile(value_expr, _Scope(True, scope.semantics))
        self.note_labels_through(node, value_expr)
        return lambda view, row: value(view, locate(view, row))

    def note_labels_through(self, node: Navigation, value_expr: exp.Expression) -> None:
        """A CLASSIFIER read through navigation sees labels of rows located by it."""
        if not any(isinstance(n, Classifier) for n in value_expr.walk()):
            return
        vars_ = self.arg_vars(value_expr, node.kind)
        if vars_ is None or any(isinstance(n, Navigation) and n.physical for n in node.walk()):
            self.history.all_labels = True  # the located row may carry any label
        else:
            self.history.labels.add(vars_)

    def locator(self, node: Navigation, scope: _Scope
                ) -> tuple[Callable[[MatchView, Any], int | None], exp.Expression]:
        """A function finding the row ``node`` points at, and the expression to read there."""
        arg = node.this
        while isinstance(arg, exp.Paren | PatternSemantics):
            if isinstance(arg, PatternSemantics):  # PREV(RUNNING LAST(x)): FIRST/LAST's own
                scope = _Scope(scope.bound, arg.final, scope.shift)
            arg = arg.this
        offset = node.offset
        if not isinstance(offset, int) or offset < 0:
            raise SemanticError(f"{node.kind} needs a non-negative integer offset")
        if node.physical:
            delta = -offset if node.kind == "PREV" else offset
            inner_scope = _Scope(scope.bound, scope.semantics, scope.shift + abs(delta))
            if delta < 0:
                self.reach.back = max(self.reach.back, inner_scope.shift)
            else:
                self.reach.ahead = max(self.reach.ahead, offset + max(0, scope.shift))
            if isinstance(arg, Navigation):
                if arg.physical:
                    raise SemanticError("PREV/NEXT cannot be nested inside PREV/NEXT")
                base, value_expr = self.locator(arg, inner_scope)
            else:
                value_expr = arg
                base = self.default_locator(arg, inner_scope, node.kind)
            return (lambda view, row: _physical(view, base(view, row), delta)), value_expr
        if isinstance(arg, Navigation):
            raise SemanticError(f"{node.kind} cannot contain another navigation function")
        vars_ = self.arg_vars(arg, node.kind)
        self.reach.back = max(self.reach.back, scope.shift)
        if node.kind == "LAST":
            if vars_ is not None:
                self.history.last[vars_] = max(offset, self.history.last.get(vars_, offset))

            def locate_last(view: MatchView, row: Any) -> int | None:
                return last_row(view, vars_, offset, scope.final(view))
            return locate_last, arg
        if vars_ is not None:
            self.history.first[vars_] = max(offset, self.history.first.get(vars_, offset))

        def locate_first(view: MatchView, row: Any) -> int | None:
            return first_row(view, vars_, offset)
        return locate_first, arg

    def default_locator(self, arg: exp.Expression, scope: _Scope, what: str
                        ) -> Callable[[MatchView, Any], int | None]:
        """The row a PREV/NEXT argument without FIRST/LAST is anchored to."""
        if scope.bound:
            return lambda view, row: row
        vars_ = self.arg_vars(arg, what)
        self.observe_last(vars_, 0, scope)
        return lambda view, row: last_row(view, vars_, 0, scope.final(view))

    # -- aggregates ---------------------------------------------------------------------------------

    def aggregate(self, node: exp.Expression, scope: _Scope) -> _Fn:
        if scope.bound:
            raise SemanticError(f"aggregate {node.sql()} cannot be nested in another "
                                "aggregate or navigation")
        condition: _Fn | None = None
        if isinstance(node, exp.Filter):
            where = node.expression.this if isinstance(node.expression, exp.Where) \
                else node.expression
            node = node.this
        else:
            where = None
        if isinstance(node, exp.IgnoreNulls):
            node = node.this
        bound = _Scope(True, scope.semantics)
        if isinstance(node, exp.Count):
            return self.count(node, scope, where)
        if isinstance(node, exp.Anonymous):
            reducer = _ANONYMOUS_AGGREGATES[node.name.lower()]
            args = list(node.expressions)
        else:
            reducer = _AGGREGATES.get(type(node))  # type: ignore[assignment]
            if reducer is None:
                raise SemanticError(f"aggregate {node.key.upper()} is not supported in "
                                    "row pattern recognition")
            if isinstance(node, exp.GroupConcat):
                args = [node.this, node.args.get("separator")]
            else:
                args = [node.this, node.args.get("expression")]
        args = [a for a in args if a is not None]
        if isinstance(node, exp.ArrayAgg) and isinstance(args[0], exp.Order):
            raise SemanticError("ORDER BY inside an aggregate is not supported here")
        what = node.key.upper() if not isinstance(node, exp.Anonymous) else node.name
        vars_ = self.arg_vars(exp.Tuple(expressions=[a.copy() for a in args]), what)
        parts = [self.compile(a, bound) for a in args]
        if where is not None:
            condition = self.compile(where, bound)
        pair = isinstance(node, _PAIR_AGGREGATES)
        self.observe_rows(vars_, args, count_only=False)
        running = None if pair else _running(agg.FOLDS.get(reducer), vars_, parts[0],
                                             condition, [*args, where])

        def evaluate(view: MatchView, row: Any) -> Any:
            if running is not None and _whole_history(view):
                return running(view)
            positions = rows_of(view, vars_, scope.final(view))
            if condition is not None:
                positions = [p for p in positions if sc.truth(condition(view, p)) is True]
            if pair:
                return reducer([(parts[0](view, p), parts[1](view, p) if len(parts) > 1
                                 else None) for p in positions])
            return reducer([parts[0](view, p) for p in positions])
        return evaluate

    def observe_rows(self, vars_: VarSet, args: list[exp.Expression], count_only: bool) -> None:
        reads_labels = any(isinstance(n, Classifier) for a in args for n in a.walk())
        if vars_ is None:
            self.history.all_labels |= reads_labels
            return
        (self.history.count if count_only else self.history.every).add(vars_)
        if reads_labels:
            self.history.labels.add(vars_)

    def count(self, node: exp.Count, scope: _Scope, where: exp.Expression | None) -> _Fn:
        arg = node.this
        bound = _Scope(True, scope.semantics)
        condition = self.compile(where, bound) if where is not None else None
        distinct = isinstance(arg, exp.Distinct)
        if distinct:
            if len(arg.expressions) != 1:
                raise SemanticError("COUNT(DISTINCT ...) takes one argument here")
            arg = arg.expressions[0]
        if isinstance(arg, exp.Star) or (isinstance(arg, exp.Column)
                                         and isinstance(arg.this, exp.Star)):
            vars_ = self.var_set(arg.table or None) if isinstance(arg, exp.Column) else None
            self.observe_rows(vars_, [], count_only=condition is None)
            running = _running(agg.FOLDS[agg.agg_count], vars_, lambda view, row: 1,
                               condition, [where])

            def count_rows(view: MatchView, row: Any) -> int:
                if running is not None and _whole_history(view):
                    return running(view)
                positions = rows_of(view, vars_, scope.final(view))
                if condition is None:
                    return len(positions)
                return sum(1 for p in positions if sc.truth(condition(view, p)) is True)
            return count_rows
        vars_ = self.arg_vars(arg, "COUNT")
        value = self.compile(arg, bound)
        self.observe_rows(vars_, [arg], count_only=False)
        reducer = agg.agg_count_distinct if distinct else agg.agg_count
        running = _running(agg.FOLDS.get(reducer), vars_, value, condition, [arg, where])

        def count_values(view: MatchView, row: Any) -> int:
            if running is not None and _whole_history(view):
                return running(view)
            positions = rows_of(view, vars_, scope.final(view))
            if condition is not None:
                positions = [p for p in positions if sc.truth(condition(view, p)) is True]
            return reducer([value(view, p) for p in positions])
        return count_values

    # -- operators -----------------------------------------------------------------------------------

    def binary(self, node: exp.Expression, fn: Callable[[Any, Any], Any], scope: _Scope) -> _Fn:
        left = self.compile(node.this, scope)
        right = self.compile(node.expression, scope)
        return lambda view, row: fn(left(view, row), right(view, row))

    def comparison(self, node: exp.Expression, test: Callable[[int], bool], scope: _Scope) -> _Fn:
        left = self.compile(node.this, scope)
        right = self.compile(node.expression, scope)

        def compare(view: MatchView, row: Any) -> Any:
            c = sc.compare(left(view, row), right(view, row))
            return None if c is None else test(c)
        return compare

    def on_nullsafeeq(self, node: exp.Expression, scope: _Scope) -> _Fn:
        left = self.compile(node.this, scope)
        right = self.compile(node.expression, scope)

        def same(view: MatchView, row: Any) -> bool:
            a, b = left(view, row), right(view, row)
            if a is None or b is None:
                return a is None and b is None
            return sc.compare(a, b) == 0
        return same

    def on_nullsafeneq(self, node: exp.Expression, scope: _Scope) -> _Fn:
        same = self.on_nullsafeeq(node, scope)
        return lambda view, row: not same(view, row)

    def on_and(self, node: exp.And, scope: _Scope) -> _Fn:
        left = self.compile(node.this, scope)
        right = self.compile(node.expression, scope)

        def both(view: MatchView, row: Any) -> Any:
            a = sc.truth(left(view, row))
            if a is False:
                return False
            b = sc.truth(right(view, row))
            if b is False:
                return False
            return None if a is None or b is None else True
        return both

    def on_or(self, node: exp.Or, scope: _Scope) -> _Fn:
        left = self.compile(node.this, scope)
        right = self.compile(node.expression, scope)

        def either(view: MatchView, row: Any) -> Any:
            a = sc.truth(left(view, row))
            if a is True:
                return True
            b = sc.truth(right(view, row))
            if b is True:
                return True
            return None if a is None or b is None else False
        return either

    def on_not(self, node: exp.Not, scope: _Scope) -> _Fn:
        inner = self.compile(node.this, scope)
        return lambda view, row: sc.not_(inner(view, row))

    def on_neg(self, node: exp.Neg, scope: _Scope) -> _Fn:
        inner = self.compile(node.this, scope)
        return lambda view, row: sc.neg(inner(view, row))

    def on_is(self, node: exp.Is, scope: _Scope) -> _Fn:
        inner = self.compile(node.this, scope)
        target = node.expression
        if isinstance(target, exp.Null):
            return lambda view, row: inner(view, row) is None
        if isinstance(target, exp.Boolean):
            wanted = bool(target.this)
            return lambda view, row: sc.truth(inner(view, row)) is wanted
        raise SemanticError(f"unsupported IS test: {node.sql()}")

    def on_in(self, node: exp.In, scope: _Scope) -> _Fn:
        if node.args.get("query") is not None or not node.expressions:
            raise SemanticError("IN with a subquery is not supported in row pattern expressions")
        value = self.compile(node.this, scope)
        options = [self.compile(e, scope) for e in node.expressions]

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

    def on_between(self, node: exp.Between, scope: _Scope) -> _Fn:
        value = self.compile(node.this, scope)
        low = self.compile(node.args["low"], scope)
        high = self.compile(node.args["high"], scope)

        def between(view: MatchView, row: Any) -> Any:
            v = value(view, row)
            lo, hi = sc.compare(v, low(view, row)), sc.compare(v, high(view, row))
            return sc.and_([None if lo is None else lo >= 0, None if hi is None else hi <= 0])
        return between

    def like(self, node: exp.Expression, scope: _Scope, insensitive: bool,
             escape: exp.Expression | None = None) -> _Fn:
        value = self.compile(node.this, scope)
        pattern = self.compile(node.expression, scope)
        esc = self.compile(escape, scope) if escape is not None else (lambda view, row: None)
        cache: dict[tuple[str, str | None], re.Pattern] = {}

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

    def on_like(self, node: exp.Like, scope: _Scope) -> _Fn:
        return self.like(node, scope, False)

    def on_ilike(self, node: exp.ILike, scope: _Scope) -> _Fn:
        return self.like(node, scope, True)

    def on_escape(self, node: exp.Escape, scope: _Scope) -> _Fn:
        inner = node.this
        if not isinstance(inner, exp.Like | exp.ILike):
            raise SemanticError(f"unsupported ESCAPE: {node.sql()}")
        return self.like(inner, scope, isinstance(inner, exp.ILike), node.expression)

    def on_case(self, node: exp.Case, scope: _Scope) -> _Fn:
        operand = self.compile(node.this, scope) if node.this is not None else None
        branches = [(self.compile(b.this, scope), self.compile(b.args["true"], scope))
                    for b in node.args.get("ifs") or []]
        default = node.args.get("default")
        otherwise = self.compile(default, scope) if default is not None else None

        def case(view: MatchView, row: Any) -> Any:
            subject = operand(view, row) if operand is not None else None
            for test, result in branches:
                t = test(view, row)
                hit = sc.equal(subject, t) if operand is not None else sc.truth(t)
                if hit is True:
                    return result(view, row)
            return otherwise(view, row) if otherwise is not None else None
        return case

    def on_if(self, node: exp.If, scope: _Scope) -> _Fn:
        test = self.compile(node.this, scope)
        then = self.compile(node.args["true"], scope)
        other = node.args.get("false")
        otherwise = self.compile(other, scope) if other is not None else None

        def if_(view: MatchView, row: Any) -> Any:
            if sc.truth(test(view, row)) is True:
                return then(view, row)
            return otherwise(view, row) if otherwise is not None else None
        return if_

    def variadic(self, node: exp.Expression, scope: _Scope) -> list[_Fn]:
        items = ([node.this] if node.this is not None else []) + list(node.expressions)
        return [self.compile(e, scope) for e in items]

    def on_coalesce(self, node: exp.Coalesce, scope: _Scope) -> _Fn:
        parts = self.variadic(node, scope)

        def coalesce(view: MatchView, row: Any) -> Any:
            for part in parts:
                v = part(view, row)
                if v is not None:
                    return v
            return None
        return coalesce

    def extreme(self, node: exp.Expression, scope: _Scope, sign: int) -> _Fn:
        parts = self.variadic(node, scope)

        def pick(view: MatchView, row: Any) -> Any:
            best = None  # DuckDB's GREATEST/LEAST skip NULL arguments
            for part in parts:
                v = part(view, row)
                if v is not None and (best is None or sc.compare(v, best) == sign):
                    best = v
            return best
        return pick

    def on_array(self, node: exp.Array, scope: _Scope) -> _Fn:
        """``ARRAY[a, b]`` (a list value, as ``array_agg`` returns): compared element-wise."""
        parts = [self.compile(e, scope) for e in node.expressions]
        return lambda view, row: [p(view, row) for p in parts]

    def on_greatest(self, node: exp.Greatest, scope: _Scope) -> _Fn:
        return self.extreme(node, scope, 1)

    def on_least(self, node: exp.Least, scope: _Scope) -> _Fn:
        return self.extreme(node, scope, -1)

    def on_concat(self, node: exp.Concat, scope: _Scope) -> _Fn:
        parts = self.variadic(node, scope)
        return lambda view, row: _concat(*[p(view, row) for p in parts])

    def on_dpipe(self, node: exp.DPipe, scope: _Scope) -> _Fn:
        left = self.compile(node.this, scope)
        right = self.compile(node.expression, scope)

        def pipe(view: MatchView, row: Any) -> Any:
            a, b = left(view, row), right(view, row)
            return None if a is None or b is None else sc.to_str(a) + sc.to_str(b)
        return pipe

    def on_round(self, node: exp.Round, scope: _Scope) -> _Fn:
        value = self.compile(node.this, scope)
        digits_expr = node.args.get("decimals")
        digits = self.compile(digits_expr, scope) if digits_expr is not None else None

        def round_(view: MatchView, row: Any) -> Any:
            d = digits(view, row) if digits is not None else 0
            v = value(view, row)
            return None if v is None or d is None else sc.round_half_away(v, int(d))
        return round_

    def on_trim(self, node: exp.Trim, scope: _Scope) -> _Fn:
        value = self.compile(node.this, scope)
        chars_expr = node.expression
        chars = self.compile(chars_expr, scope) if chars_expr is not None else None
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

    def on_extract(self, node: exp.Extract, scope: _Scope) -> _Fn:
        unit = node.this.name
        value = self.compile(node.expression, scope)
        return lambda view, row: sc.date_part(unit, value(view, row))

    def truncate(self, node: exp.Expression, scope: _Scope) -> _Fn:
        unit = node.args["unit"].name if node.args.get("unit") is not None else None
        if unit is None:
            raise SemanticError(f"date_trunc needs a unit: {node.sql()}")
        value = self.compile(node.this, scope)
        return lambda view, row: sc.date_trunc(unit, value(view, row))

    def on_timestamptrunc(self, node: exp.Expression, scope: _Scope) -> _Fn:
        return self.truncate(node, scope)

    def on_datetrunc(self, node: exp.Expression, scope: _Scope) -> _Fn:
        return self.truncate(node, scope)

    def on_interval(self, node: exp.Interval, scope: _Scope) -> _Fn:
        amount = self.compile(node.this, scope)
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

    def on_cast(self, node: exp.Cast, scope: _Scope) -> _Fn:
        return self.cast(node, scope, safe=False)

    def on_trycast(self, node: exp.TryCast, scope: _Scope) -> _Fn:
        return self.cast(node, scope, safe=True)

    def cast(self, node: exp.Cast, scope: _Scope, safe: bool) -> _Fn:
        value = self.compile(node.this, scope)
        convert = _caster(node.to)

        def cast(view: MatchView, row: Any) -> Any:
            v = value(view, row)
            try:
                return convert(v)
            except Exception:
                if safe:
                    return None
                raise
        return cast


def _caster(to: exp.DataType) -> Callable[[Any], Any]:
    """A conversion function for ``CAST(... AS to)``."""
    T = exp.DataType.Type
    kind = to.this
    ints = {T.TINYINT, T.SMALLINT, T.MEDIUMINT, T.INT, T.BIGINT, T.INT128, T.UTINYINT,
            T.USMALLINT, T.UINT, T.UBIGINT, T.UINT128}
    floats = {T.FLOAT, T.DOUBLE}
    texts = {T.TEXT, T.VARCHAR, T.CHAR, T.NVARCHAR, T.NCHAR, T.BPCHAR}
    stamps = {T.TIMESTAMP, T.TIMESTAMPNTZ, T.DATETIME, T.TIMESTAMP_S, T.TIMESTAMP_MS,
              T.TIMESTAMP_NS}
    if kind in ints:
        return sc.to_int
    if kind in floats:
        return sc.to_float
    if kind in texts:
        return sc.to_str
    if kind == T.BOOLEAN:
        return sc.to_bool
    if kind == T.DATE:
        return sc.to_date
    if kind in stamps:
        return sc.to_timestamp
    if kind == T.DECIMAL:
        params = [p.this for p in to.expressions]
        scale = int(params[1].this) if len(params) > 1 else (3 if not params else 0)
        return lambda v: sc.to_decimal(v, scale)
    if kind == T.INTERVAL:
        return lambda v: sc.parse_interval(v) if isinstance(v, str) else v
    raise SemanticError(f"CAST to {to.sql(dialect='duckdb')} is not supported in row pattern "
                        "expressions")
