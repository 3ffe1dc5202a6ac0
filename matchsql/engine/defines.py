"""DEFINE conditions specialised for the reference matcher's thread VM.

:mod:`matchsql.expr.rowwise` evaluates any expression against a
:class:`~matchsql.expr.rows.MatchView`, which is complete but costs a
view, a label sequence and a walk to find each row per evaluation. Nearly all
real DEFINEs are much simpler: comparisons and arithmetic over columns of the
current row, of the last row of some variable (``A.price``), and of rows a
constant physical offset away from those (``PREV(B.price)``). For exactly that
subset this module builds closures ``(history, key, row) -> value`` (the
VM's test signature, so a boolean-valued one is the test itself) that read
the InputHolder's column lists directly:

* the current row is ``row`` (in a DEFINE of ``V`` the row being tested is
  already mapped to ``V``, so ``V.x`` and an unqualified ``x`` read it);
* the last row of a variable set ``S`` not containing ``V`` is the newest
  entry of the thread's :class:`~matchsql.engine.vm.HistoryKey` component for
  ``S`` (the key tracks it because the DEFINE observes it);
* ``PREV/NEXT(e, k)`` move that row by ``k`` and read ``e`` there, NULL
  outside the partition, as :func:`~matchsql.expr.rows.physical_move` does.

Values go through the same :mod:`~matchsql.expr.values` functions as the
general evaluator, with one shortcut: comparing two ``int``/``float`` values
uses the value library's number tests directly (its ``COMPARISONS``, which order
NaN as DuckDB does, above every other number), and when both
sides are statically numeric (numeric columns, number literals) the type
test and the calls to read them are folded into one closure. AND/OR chains
are flattened keeping their evaluation order. A condition that reads only
the tested row (and PREV/NEXT of it) is cached per row. Anything else
(FIRST/LAST, aggregates, CLASSIFIER, MATCH_NUMBER, functions, CASE, ...) makes
:func:`compile_define` return None and the matcher uses the general evaluator,
so the two can never disagree on what is supported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from sqlglot import exp

from matchsql.engine.holder import InputHolder
from matchsql.engine.vm import History, HistoryKey, Test
from matchsql.errors import ExecutionError, SemanticError
from matchsql.expr import values as sc
from matchsql.expr.support import DEFINE_FAST, why_not
from matchsql.plan.binder import bind
from matchsql.plan.bound import Const, Pointer
from matchsql.plan.spec import MatchSpec

#: A specialised expression, called exactly like the VM calls a test:
#: (thread's history, its key, absolute row being tested) -> SQL value. The
#: history itself is never read (the key has what the DEFINE observes); the
#: shared signature lets a boolean-valued expression *be* the test.
Fn = Callable[[History, tuple, int], Any]
#: Builds an :data:`Fn` over one partition's holder (one per partition).
Factory = Callable[[InputHolder], Fn]
#: Where a column is read: ``("cur", delta)`` = the tested row + delta, or
#: ``("key", component, with_label, scalar, delta)`` = the last row of a
#: variable set as tracked by the history key (see HistoryKey.last_slot), + delta.
Locator = tuple


@dataclass(frozen=True)
class _Code:
    """A compiled subexpression and the static facts that let its parent specialise."""

    factory: Factory
    numeric: bool = False  # every non-NULL value is an int or a float (not a bool)
    boolean: bool = False  # every value is True, False or None
    operand: _Operand | None = None  # set for simple reads a comparison can inline


#: A value a fused comparison reads without a call: ``(mode, column, component,
#: delta, constant)``; mode _ROW reads ``column`` at the tested row + delta,
#: _KEY at the history key's bare row number ``component`` + delta (both with
#: delta <= 0), _CONST is ``constant``.
_Operand = tuple[int, str, int, int, Any]
_CONST, _ROW, _KEY = 0, 1, 2


class _Unsupported(Exception):
    """The expression is outside the specialised subset (use the general evaluator)."""


class FastDefine:
    """A DEFINE condition compiled for the VM; :meth:`bind` makes a partition's test."""

    def __init__(self, code: _Code, row_local: bool) -> None:
        self.code = code
        # True when the condition reads only the tested row and physical
        # offsets from it: its value then depends on the row alone, not on the
        # thread or the attempt, and may be cached per row.
        self.row_local = row_local

    def bind(self, holder: InputHolder) -> Test:
        fn = self.code.factory(holder)
        truth = sc.truth
        if self.code.boolean:
            test = fn  # the VM treats None (UNKNOWN) as false, like ``truth(v) is True``
        else:

            def test(history: History, key: tuple, row: int) -> bool:
                v = fn(history, key, row)
                if v is True:
                    return True
                if v is False or v is None:
                    return False
                return truth(v) is True  # a NULL condition is false

        if not self.row_local:
            return test

        cache: dict[int, bool] = {}
        room = [_CACHE_ROWS]  # trim when the cache outgrows this (amortised O(1))

        def cached(history: History, key: tuple, row: int) -> bool:
            hit = cache.get(row)
            if hit is not None:
                return hit
            result = test(history, key, row) is True
            if len(cache) >= room[0]:
                low = holder.base
                for old in [r for r in cache if r < low]:
                    del cache[old]
                room[0] = max(_CACHE_ROWS, 2 * len(cache))
            cache[row] = result
            return result

        return cached


#: Row-local results are cached per row (attempts that start at later rows
#: test the same rows again); rows the holder has dropped are forgotten.
_CACHE_ROWS = 1024


def compile_define(
    expr: exp.Expression, spec: MatchSpec, var: str, history_key: HistoryKey, row_local: bool
) -> FastDefine | None:
    """DEFINE ``expr`` of ``var`` specialised, or None when it is outside the subset.

    ``row_local`` says the condition observes no history (from its
    :class:`~matchsql.expr.history.HistoryUse`).
    """
    try:
        bound = bind(expr, spec)
        if why_not(bound, DEFINE_FAST) is not None:
            return None
        code = _DefineCompiler(spec, var, history_key).compile(bound)
    except (_Unsupported, SemanticError, ExecutionError):
        return None  # the general evaluator reports errors in its own words
    return FastDefine(code, row_local)


def _numeric_type(t: pa.DataType) -> bool:
    """Arrow types whose Python values are plain ints or floats."""
    return pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t)


class _DefineCompiler:
    """Specialises a bound DEFINE of ``var`` (see the module docstring for the subset)."""

    def __init__(self, spec: MatchSpec, var: str, history_key: HistoryKey) -> None:
        self.types = {f.name: f.type for f in spec.columns}
        self.var = var
        self.history_key = history_key

    def compile(self, node: exp.Expression) -> _Code:
        if isinstance(node, Pointer):
            return self.pointer(node)
        if isinstance(node, Const):
            value = node.value
            if value is None or isinstance(value, bool):
                return _Code(_constant(value), boolean=True)
            numeric = isinstance(value, int | float)
            return _Code(
                _constant(value),
                numeric=numeric,
                operand=(_CONST, "", 0, 0, value) if numeric else None,
            )
        if isinstance(node, exp.And | exp.Or):
            return self.connective(node)
        if isinstance(node, exp.Not):
            inner = self.compile(node.this).factory
            return _Code(lambda holder: _not(inner(holder)), boolean=True)
        if isinstance(node, exp.Neg):
            inner = self.compile(node.this).factory
            return _Code(lambda holder: _neg(inner(holder)))
        if (
            isinstance(node, exp.Is)
            and isinstance(node.expression, Const)
            and node.expression.value is None
        ):
            inner = self.compile(node.this).factory
            return _Code(lambda holder: _is_null(inner(holder)), boolean=True)
        makers = _COMPARISONS.get(type(node))
        if makers is not None:
            left, right = self.compile(node.this), self.compile(node.expression)
            if left.numeric and right.numeric:
                if left.operand is not None and right.operand is not None:
                    return _Code(_fused(type(node), left.operand, right.operand), boolean=True)
                maker = makers[1]
            else:
                maker = makers[0]
            lf, rf = left.factory, right.factory
            return _Code(lambda holder: maker(lf(holder), rf(holder)), boolean=True)
        binary = sc.ARITHMETIC.get(type(node))
        if binary is not None:
            lf = self.compile(node.this).factory
            rf = self.compile(node.expression).factory
            return _Code(lambda holder: _binary(binary, lf(holder), rf(holder)))
        raise _Unsupported

    def last_of(self, vars_: frozenset[str] | None) -> Locator:
        """Locator of the last row mapped to ``vars_`` (RUNNING, in DEFINE of ``var``)."""
        if vars_ is None or self.var in vars_:
            return ("cur", 0)  # the tested row is the match's (and the variable's) last
        slot = self.history_key.last_slot(vars_)
        if slot is None:
            raise _Unsupported
        return ("key", *slot, 0)

    def pointer(self, node: Pointer) -> _Code:
        at = node.position
        name = node.column  # None: the row's label (CLASSIFIER)
        if name is None or not at.current or at.final:
            raise _Unsupported  # labels, FIRST/LAST offsets; FINAL is an error in DEFINE
        anchor = self.last_of(at.vars)
        where = anchor[:-1] + (anchor[-1] + at.physical,)
        operand: _Operand | None = None
        if where[0] == "cur" and where[-1] <= 0:
            operand = (_ROW, name, 0, where[-1], None)
        elif where[0] == "key" and where[3] and where[-1] <= 0:  # a bare row number (scalar)
            operand = (_KEY, name, where[1], where[-1], None)
        return _Code(_reader(name, where), numeric=_numeric_type(self.types[name]), operand=operand)

    def connective(self, node: exp.And | exp.Or) -> _Code:
        """Flatten an AND (OR) chain; evaluation order and short-circuit are unchanged."""
        kind = type(node)
        operands: list[exp.Expression] = []
        pending: list[exp.Expression] = [node]
        while pending:  # left-to-right leaves of the same connective
            item = pending.pop()
            if type(item) is kind:
                pending.append(item.expression)
                pending.append(item.this)
            else:
                operands.append(item)
        parts = [self.compile(item) for item in operands]
        factories = [p.factory for p in parts]
        make = sc.every if kind is exp.And else sc.some
        return _Code(lambda holder: make(tuple(f(holder) for f in factories)), boolean=True)


# -- leaves ---------------------------------------------------------------------------------


def _constant(value: Any) -> Factory:
    def make(holder: InputHolder) -> Fn:
        return lambda history, key, row: value

    return make


def _not_held(row: int, base: int) -> ExecutionError:
    return ExecutionError(
        f"internal error: partition row {row} is not held (first held row {base})"
    )


def _reader(name: str, at: Locator) -> Factory:
    """Read column ``name`` at the row ``at`` points to (NULL outside the partition)."""
    if at[0] == "cur":
        delta = at[1]

        def make(holder: InputHolder) -> Fn:
            col = holder.column_list(name)
            if delta == 0:
                return lambda history, key, row: col[row - holder.base]
            if delta < 0:

                def prev(history: History, key: tuple, row: int) -> Any:
                    target = row + delta
                    if target < 0:
                        return None
                    base = holder.base
                    if target < base:
                        raise _not_held(target, base)
                    return col[target - base]

                return prev

            def next_(history: History, key: tuple, row: int) -> Any:
                target = row + delta
                if holder.complete and target >= holder.count:
                    return None
                return col[target - holder.base]

            return next_

        return make

    _, index, with_label, scalar, delta = at

    def make_last(holder: InputHolder) -> Fn:
        col = holder.column_list(name)
        if scalar and delta == 0:

            def last_row(history: History, key: tuple, row: int) -> Any:
                at = key[index]
                if at is None:
                    return None  # no row mapped to the variable yet
                return col[at - holder.base]

            return last_row

        def last(history: History, key: tuple, row: int) -> Any:
            entries = key[index]
            if scalar:
                if entries is None:
                    return None  # no row mapped to the variable yet
                target = entries + delta
            else:
                if not entries:
                    return None
                target = (entries[-1][0] if with_label else entries[-1]) + delta
            if target < 0 or (delta > 0 and holder.complete and target >= holder.count):
                return None
            base = holder.base
            if target < base:
                raise _not_held(target, base)
            return col[target - base]

        return last

    return make_last


# -- operators ------------------------------------------------------------------------------
#
# Each comparison: NULL if either side is NULL; two int/float values compare
# with the value library's number tests (sc.COMPARISONS: the same order as
# sc.compare's sign, NaN greatest and equal to itself); anything else goes through sc.compare, which
# coerces types and raises on incomparable ones. Both sides are always evaluated, left first,
# like the general evaluator. The ``_num`` variants are used when both sides
# are statically int/float (numeric columns and literals) and skip the type
# test.

_NUM = (int, float)


def _general(
    number_test: Callable[[Any, Any], bool], sign_test: Callable[[int], bool]
) -> Callable[[Fn, Fn], Fn]:
    """A comparison of any two values (int/float ones compared directly)."""

    def make(left: Fn, right: Fn) -> Fn:
        def compare(history: History, key: tuple, row: int) -> Any:
            a = left(history, key, row)
            b = right(history, key, row)
            if a is None or b is None:
                return None
            if type(a) in _NUM and type(b) in _NUM:
                return number_test(a, b)
            c = sc.compare(a, b)
            return None if c is None else sign_test(c)

        return compare

    return make


def _numeric(number_test: Callable[[Any, Any], bool]) -> Callable[[Fn, Fn], Fn]:
    """A comparison of two statically int/float sides."""

    def make(left: Fn, right: Fn) -> Fn:
        def compare(history: History, key: tuple, row: int) -> Any:
            a = left(history, key, row)
            b = right(history, key, row)
            if a is None or b is None:
                return None
            return number_test(a, b)

        return compare

    return make


def _fused(kind: type, left: _Operand, right: _Operand) -> Factory:
    """A comparison of two int/float operands that reads them inline.

    The same values as :func:`_reader` and :func:`_constant` followed by the
    number test of ``kind`` (:data:`matchsql.expr.values.COMPARISONS`), in one
    closure: nearly every DEFINE is an AND of such comparisons, and calls are the
    dominant cost in CPython. The most common left side, a column of the tested
    row, is read without looking at its mode.
    """
    test = sc.COMPARISONS[kind][0]
    lmode, lname, lindex, ldelta, lvalue = left
    rmode, rname, rindex, rdelta, rvalue = right
    current = lmode == _ROW and ldelta == 0

    def make(holder: InputHolder) -> Fn:
        lcol = holder.column_list(lname) if lmode != _CONST else []
        rcol = holder.column_list(rname) if rmode != _CONST else []

        def compare(history: History, key: tuple, row: int) -> Any:
            base = holder.base
            if current:
                a = lcol[row - base]
            elif lmode == _CONST:
                a = lvalue
            else:
                t = row if lmode == _ROW else key[lindex]
                if t is None:
                    a = None  # no row mapped to the variable yet
                else:
                    t += ldelta
                    if t < 0:
                        a = None  # before the partition's first row
                    elif t < base:
                        raise _not_held(t, base)
                    else:
                        a = lcol[t - base]
            if rmode == _CONST:
                b = rvalue
            else:
                t = row if rmode == _ROW else key[rindex]
                if t is None:
                    b = None
                else:
                    t += rdelta
                    if t < 0:
                        b = None
                    elif t < base:
                        raise _not_held(t, base)
                    else:
                        b = rcol[t - base]
            if a is None or b is None:
                return None
            return test(a, b)

        return compare

    return make


#: comparison node -> (general, both sides int/float)
_COMPARISONS: dict[type, tuple[Callable[[Fn, Fn], Fn], Callable[[Fn, Fn], Fn]]] = {
    kind: (_general(number_test, sign_test), _numeric(number_test))
    for kind, (number_test, sign_test) in sc.COMPARISONS.items()
}


def _not(inner: Fn) -> Fn:
    not_ = sc.not_
    return lambda history, key, row: not_(inner(history, key, row))


def _neg(inner: Fn) -> Fn:
    neg = sc.neg
    return lambda history, key, row: neg(inner(history, key, row))


def _is_null(inner: Fn) -> Fn:
    return lambda history, key, row: inner(history, key, row) is None


def _binary(fn: Callable[[Any, Any], Any], left: Fn, right: Fn) -> Fn:
    return lambda history, key, row: fn(left(history, key, row), right(history, key, row))
