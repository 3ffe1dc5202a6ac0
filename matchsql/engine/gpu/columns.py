"""Row-local DEFINE terms evaluated elementwise on the device's column arrays.

A term that reads only the tested row and rows at fixed physical offsets
(``PREV``/``NEXT``) is one elementwise expression over the partition's
columns: it is built here from the bound form (:mod:`matchsql.plan.bound`) into
closures over the array module ``xp`` (CuPy on a device, numpy in numba's
simulator), so the columns are copied to the device once and each variable's
condition becomes one truth column there (the per-variable bitsets the kernel
reads); only the columns travel, never a host-side truth table.

Values are ``(data, null)`` pairs: ``null`` is a boolean mask or None (no
NULL). String columns travel as integer codes: one code table per partition
(held with its device columns, :attr:`Columns.codes`) gives every distinct
string, column value or constant alike, its own code, so ``=``, ``<>`` and IN
are exact on the codes; ordering strings is not evaluated here. The rules are the column-wise CPU
terms' (:mod:`matchsql.engine.compiled.rowlocal`), so both paths give the same truth: integers
stay int64 (an overflow is an error, as Arrow's checked kernels make it), ``/`` divides as
float64, AND/OR are Kleene's, a NULL condition is false. Which terms come here
is decided by the support table (:mod:`matchsql.expr.support`, backend
``gpu``); a node outside it raises :class:`~matchsql.engine.compiled.lowering.
Unsupported` at planning time.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from matchsql.engine.compiled.lowering import Unsupported
from matchsql.errors import ExecutionError
from matchsql.expr.number_order import COMPARISON_NAMES, array_ops, compare_columns
from matchsql.expr.support import GPU, why_not
from matchsql.plan.bound import Const, Pointer, describe

Value = tuple[Any, Any]  # (data array or scalar, null mask or None)


class Columns(dict[str, Value]):
    """A partition's device columns by name, and its string code table (``codes``:
    string -> code), which travels with them because a term's string constant must get
    the code the same string has in the columns."""

    def __init__(self, codes: dict[str, int] | None = None) -> None:
        super().__init__()
        self.codes: dict[str, int] = {} if codes is None else codes


DeviceTerm = Callable[[ModuleType, Columns, int], Value]

_ARITH: dict[type[exp.Expression], str] = {
    exp.Add: "add",
    exp.Sub: "subtract",
    exp.Mul: "multiply",
}
_LIMIT = float(2**63)


def is_row_local(term: exp.Expression, var: str) -> bool:
    """Does ``term`` of variable ``var``'s DEFINE go to the device's elementwise terms?"""
    if why_not(term, GPU) is not None:
        return False
    return all(p.position.vars is None or var in p.position.vars for p in term.find_all(Pointer))


def compile_term(term: exp.Expression, strings: frozenset[str] = frozenset()) -> DeviceTerm:
    """The elementwise closure of a row-local ``term`` (see :func:`is_row_local`);
    ``strings`` names the string columns (compared as codes)."""
    reason = why_not(term, GPU)
    if reason is not None:
        raise Unsupported(reason)
    for node in term.walk():
        if not isinstance(node, exp.Expression):
            continue
        if (
            type(node) in _ARITH
            or isinstance(node, exp.Div | exp.Neg | exp.Between)
            or (type(node) in COMPARISON_NAMES and not isinstance(node, exp.EQ | exp.NEQ))
        ):
            if any(_is_string(side, strings) for side in node.iter_expressions()):
                raise Unsupported(
                    f"{describe(node)} over strings is not evaluated by the GPU "
                    "column path (only =, <> and IN)"
                )
    return _node(term)


def _is_string(node: exp.Expression, strings: frozenset[str]) -> bool:
    if isinstance(node, Const):
        return isinstance(node.value, str)
    return isinstance(node, Pointer) and node.column in strings


def code_of(cols: Columns, text: str) -> int:
    """The code of ``text`` in the partition's table (a new code for a new string)."""
    table = cols.codes
    code = table.get(text)
    if code is None:
        code = table[text] = len(table)
    return code


def _or_null(a: Any, b: Any, xp: ModuleType) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return xp.logical_or(a, b)


def _node(node: exp.Expression) -> DeviceTerm:
    if isinstance(node, Const):
        value = node.value
        if isinstance(value, str):
            return lambda xp, cols, n: (code_of(cols, value), None)
        if value is None:
            return lambda xp, cols, n: (False, True)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _LIMIT:
            value = float(value)  # beyond BIGINT: DOUBLE, as the CPU terms make it
        return lambda xp, cols, n: (value, None)
    if isinstance(node, Pointer):
        return _pointer(node)
    if type(node) in COMPARISON_NAMES:
        return _binary(COMPARISON_NAMES[type(node)], node, _compare)
    if type(node) in _ARITH:
        return _binary(_ARITH[type(node)], node, _arith)
    if isinstance(node, exp.Div):
        return _binary("divide", node, _divide)
    if isinstance(node, exp.And | exp.Or):
        return _kleene(node)
    if isinstance(node, exp.Not):
        inner = _node(node.this)
        return lambda xp, cols, n: _not(xp, *inner(xp, cols, n))
    if isinstance(node, exp.Neg):
        inner = _node(node.this)
        return lambda xp, cols, n: _negate(xp, *inner(xp, cols, n))
    if (
        isinstance(node, exp.Is)
        and isinstance(node.expression, Const)
        and node.expression.value is None
    ):
        inner = _node(node.this)
        return lambda xp, cols, n: _is_null(xp, n, *inner(xp, cols, n))
    if isinstance(node, exp.Between):
        low = exp.GTE(this=node.this.copy(), expression=node.args["low"].copy())
        high = exp.LTE(this=node.this.copy(), expression=node.args["high"].copy())
        return _node(exp.And(this=low, expression=high))
    if isinstance(node, exp.In) and node.expressions and node.args.get("query") is None:
        tests = [exp.EQ(this=node.this.copy(), expression=e.copy()) for e in node.expressions]
        tree: exp.Expression = tests[0]
        for t in tests[1:]:
            tree = exp.Or(this=tree, expression=t)
        return _node(tree)
    raise Unsupported(f"{describe(node)} is not evaluated by the GPU column path")


def _pointer(node: Pointer) -> DeviceTerm:
    at = node.position
    name, delta = node.column, at.physical
    if node.classifier or name is None or not at.current or at.final:
        raise Unsupported(f"{node.text} is not evaluated by the GPU column path")
    if not delta:
        return lambda xp, cols, n: cols[name]
    return lambda xp, cols, n: _shift(xp, cols[name], n, delta)


def _shift(xp: ModuleType, value: Value, n: int, delta: int) -> Value:
    """The column moved ``delta`` rows (negative: PREV), NULL where no row exists."""
    data, null = value
    out = xp.zeros(n, data.dtype)
    mask = xp.ones(n, bool)
    k = abs(delta)
    if k < n:
        src = xp.zeros(n, bool) if null is None else null
        if delta < 0:
            out[k:] = data[: n - k]
            mask[k:] = src[: n - k]
        else:
            out[: n - k] = data[k:]
            mask[: n - k] = src[k:]
    return out, mask


def _binary(op: str, node: exp.Expression, rule: Callable) -> DeviceTerm:
    left, right = _node(node.this), _node(node.expression)

    def apply(xp: ModuleType, cols: Columns, n: int) -> Value:
        (a, an), (b, bn) = left(xp, cols, n), right(xp, cols, n)
        if an is True or bn is True:
            return False, True
        return rule(xp, op, a, b), _or_null(an, bn, xp)

    return apply


def _compare(xp: ModuleType, op: str, a: Any, b: Any) -> Any:
    """``a op b`` in DuckDB's order of numbers, NaN greatest and equal to itself."""
    return compare_columns(array_ops(xp), op, a, b)


def _is_int(xp: ModuleType, v: Any) -> bool:
    dtype = getattr(v, "dtype", None)
    if dtype is None:
        return isinstance(v, int) and not isinstance(v, bool)
    return bool(np.issubdtype(dtype, np.integer))  # numpy dtypes also under CuPy


def _arith(xp: ModuleType, op: str, a: Any, b: Any) -> Any:
    if _is_int(xp, a) and _is_int(xp, b):
        a64, b64 = xp.asarray(a, xp.int64), xp.asarray(b, xp.int64)
        exact = getattr(xp, op)(a64.astype(xp.float64), b64.astype(xp.float64))
        if bool(xp.any(xp.abs(exact) >= _LIMIT)):
            raise ExecutionError(f"integer overflow in a DEFINE condition ({op})")
        return getattr(xp, op)(a64, b64)
    return getattr(xp, op)(xp.asarray(a, xp.float64), xp.asarray(b, xp.float64))


def _divide(xp: ModuleType, op: str, a: Any, b: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.divide(xp.asarray(a, xp.float64), xp.asarray(b, xp.float64))


def _negate(xp: ModuleType, a: Any, null: Any) -> Value:
    if null is True:
        return False, True
    if _is_int(xp, a):
        return _arith(xp, "subtract", 0, a), null
    return xp.negative(xp.asarray(a, xp.float64)), null


def _not(xp: ModuleType, a: Any, null: Any) -> Value:
    return (False, True) if null is True else (xp.logical_not(a), null)


def _is_null(xp: ModuleType, n: int, a: Any, null: Any) -> Value:
    if null is None or null is False:
        return False, None
    if null is True:
        return True, None
    return null.copy(), None


def _kleene(node: exp.And | exp.Or) -> DeviceTerm:
    """Three-valued AND/OR: a FALSE (AND) or TRUE (OR) side decides, else NULL wins."""
    left, right = _node(node.this), _node(node.expression)
    is_and = isinstance(node, exp.And)

    def apply(xp: ModuleType, cols: Columns, n: int) -> Value:
        (a, an), (b, bn) = left(xp, cols, n), right(xp, cols, n)
        av, bv = _known(xp, n, a, an, is_and), _known(xp, n, b, bn, is_and)
        decided = xp.logical_or(av, bv)  # one side is FALSE (AND) / TRUE (OR)
        null = xp.logical_and(xp.logical_not(decided), _as_mask(xp, n, _or_null(an, bn, xp)))
        data = xp.logical_not(decided) if is_and else decided
        return data, null

    return apply


def _as_mask(xp: ModuleType, n: int, null: Any) -> Any:
    if null is None or null is False:
        return xp.zeros(n, bool)
    if null is True:
        return xp.ones(n, bool)
    return null


def _known(xp: ModuleType, n: int, value: Any, null: Any, is_and: bool) -> Any:
    """Where the side is known FALSE (for AND) or known TRUE (for OR)."""
    v = xp.broadcast_to(xp.asarray(value, bool), (n,))
    if not is_and:
        return xp.logical_and(v, xp.logical_not(_as_mask(xp, n, null)))
    return xp.logical_and(xp.logical_not(v), xp.logical_not(_as_mask(xp, n, null)))


def truth(xp: ModuleType, terms: list[DeviceTerm], cols: Columns, n: int) -> Any:
    """The AND of ``terms``, TRUE-ness per row, as a ``uint8`` device column."""
    out = xp.ones(n, bool)
    for term in terms:
        data, null = term(xp, cols, n)
        t = xp.broadcast_to(xp.asarray(data, bool), (n,))
        out = xp.logical_and(out, xp.logical_and(t, xp.logical_not(_as_mask(xp, n, null))))
    return out.astype(xp.uint8)


def device_columns(
    xp: ModuleType, table: Any, names: list[str], codes: dict[str, int] | None = None
) -> Columns:
    """The columns ``names`` of an Arrow table, copied to the device once; string
    columns as codes of the table ``codes`` (which grows by the new strings)."""
    cols = Columns(codes)
    for name in names:
        arr = table.column(name).combine_chunks()
        null = None
        if arr.null_count:
            null = xp.asarray(~np.asarray(arr.is_valid().to_numpy(zero_copy_only=False)))
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            encoded = arr.dictionary_encode()
            mapping = np.array(
                [code_of(cols, v) for v in encoded.dictionary.to_pylist()] or [0], np.int64
            )
            index = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
            cols[name] = (xp.asarray(mapping[index.astype(np.int64)]), null)
            continue
        if arr.null_count:
            arr = arr.fill_null(0)
        data = np.asarray(arr.to_numpy(zero_copy_only=False))
        if np.issubdtype(data.dtype, np.integer):
            data = data.astype(np.int64, copy=False)
        elif np.issubdtype(data.dtype, np.floating):
            data = data.astype(np.float64, copy=False)
        cols[name] = (xp.asarray(data), null)
    return cols
