"""Row-local DEFINE terms evaluated column-wise with Arrow compute kernels (numpy for
plain comparisons of numbers).

A term is row-local when it reads only the current row and rows at fixed
physical offsets from it (``PREV``/``NEXT`` of current-row expressions): then
its value for every row of a batch is one vectorised expression, with
``PREV(e, k)`` as ``e`` shifted down by ``k`` rows (NULL where the row is
outside the buffer; the matcher keeps enough earlier rows that such rows are
never consumed). A NULL condition is false, like everywhere else.

The translation is built from the analysed tree into closures over Arrow
compute functions; nothing is evaluated from text. Each term is tried once
on an empty batch of the input schema, so a type combination Arrow has no
kernel for is reported as :class:`Unsupported` at planning time, not at run
time.

A DEFINE conjunct that is one comparison of numeric columns (``PREV``/``NEXT``
of them) and numeric constants, the common ``price < PREV(price)``, is
evaluated by :class:`NumericComparison` instead: one numpy comparison over the
column buffers, no shifted copies and no NULL-propagating temporaries (the
Arrow route took most of the row-local path's matching time). A conjunct's
NULL is false, so the truth array is all it has to give.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from matchsql.engine.compiled.lowering import Unsupported
from matchsql.expr.number_order import ARROW, COMPARISON_NAMES, compare_columns
from matchsql.expr.support import ROW_LOCAL, why_not
from matchsql.plan.bound import Const, Pointer, describe
from matchsql.plan.spec import MatchSpec

Columns = dict[str, pa.Array]
Value: TypeAlias = pa.Array | pa.Scalar
Term = Callable[[Columns, int], Value]

EDGES = "\0partition edges"  # Columns key of a PartitionEdges when rows span partitions


class PartitionEdges:
    """Where the partitions of a multi-partition buffer start and end.

    Row-local terms over a buffer that holds several whole partitions
    (:mod:`.batch`) must not let ``PREV``/``NEXT`` reach into a neighbouring
    partition: a shifted value is NULL where the row ``k`` away lies outside
    the row's own partition. Stored in the columns under :data:`EDGES`.
    """

    def __init__(self, bounds: np.ndarray) -> None:
        self.bounds = bounds
        self._masks: dict[int, np.ndarray] = {}

    def outside(self, delta: int) -> pa.Array:
        """True where the row ``delta`` away is in another partition."""
        return pa.array(self.outside_rows(delta))

    def outside_rows(self, delta: int) -> np.ndarray:
        """:meth:`outside` as a numpy ``bool`` array."""
        mask = self._masks.get(delta)
        if mask is None:
            b = self.bounds - self.bounds[0]
            lengths = np.diff(b)
            rows = np.arange(int(b[-1]), dtype=np.int64)
            if delta < 0:  # fewer than -delta rows before it in its partition
                mask = rows - np.repeat(b[:-1], lengths) < -delta
            else:  # fewer than delta rows after it
                mask = np.repeat(b[1:], lengths) - rows - 1 < delta
            self._masks[delta] = mask
        return mask


_NULL = pa.scalar(None, pa.bool_())
_NUMPY_COMPARE = {kind: getattr(np, name) for kind, name in COMPARISON_NAMES.items()}
_ARITH: dict[type[exp.Expression], str] = {
    exp.Add: "add_checked",
    exp.Sub: "subtract_checked",
    exp.Mul: "multiply_checked",
}


def _widen(v: Value) -> Value:
    """Integers become int64 and floats float64, as the reference computes in Python."""
    t = v.type
    if pa.types.is_integer(t) and t != pa.int64():
        return v.cast(pa.int64())
    if pa.types.is_floating(t) and t != pa.float64():
        return v.cast(pa.float64())
    return v


def _shift(values: Value, n: int, delta: int, edges: PartitionEdges | None = None) -> Value:
    """``values`` moved ``delta`` rows (negative: PREV), NULL where no row exists
    (outside the buffer, or with ``edges`` outside the row's partition)."""
    shifted = _shift_buffer(values, n, delta)
    if edges is None or pa.types.is_null(shifted.type):
        return shifted
    return pc.if_else(edges.outside(delta), pa.scalar(None, shifted.type), shifted)


def _shift_buffer(values: Value, n: int, delta: int) -> Value:
    if isinstance(values, pa.Scalar):
        values = pa.array([values.as_py()] * n, type=values.type)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    k = abs(delta)
    if k >= n:
        return pa.nulls(n, values.type)
    pad = pa.nulls(k, values.type)
    if delta < 0:
        return pa.concat_arrays([pad, values.slice(0, n - k)])
    return pa.concat_arrays([values.slice(k), pad])


class RowLocalCompiler:
    """Turns one DEFINE term of variable ``var`` into a column-wise closure."""

    def __init__(self, spec: MatchSpec, var: str) -> None:
        self.spec = spec
        self.var = var
        self.columns: set[str] = set()

    def compile(self, term: exp.Expression) -> Term:
        reason = why_not(term, ROW_LOCAL)
        if reason is not None:
            raise Unsupported(reason)
        fn = self.node(term)
        empty = {f.name: pa.array([], f.type) for f in self.spec.columns}
        try:
            result = fn(empty, 0)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise Unsupported(f"cannot evaluate {describe(term)} column-wise: {exc}") from None
        if not (pa.types.is_boolean(result.type) or pa.types.is_null(result.type)):
            raise Unsupported(f"{describe(term)} is not a boolean condition")
        fast = self.numeric_comparison(term, fn)
        if fast is None:
            return fn
        fast(empty, 0)
        return fast

    def numeric_comparison(self, term: exp.Expression, fn: Term) -> NumericComparison | None:
        """``term`` as a :class:`NumericComparison` (``fn``: its Arrow form, for NaNs),
        or None when it is not one comparison of numeric operands."""
        op = _NUMPY_COMPARE.get(type(term))
        if op is None:
            return None
        left, right = self.numeric_operand(term.this), self.numeric_operand(term.expression)
        if left is None or right is None or (left.column is None and right.column is None):
            return None
        return NumericComparison(op, left, right, fn)

    def numeric_operand(self, node: exp.Expression) -> Operand | None:
        """A numeric column read at a fixed offset, or a numeric constant; else None."""
        sign = 1
        if isinstance(node, exp.Neg) and isinstance(node.this, Const):  # a negative literal
            node, sign = node.this, -1
        if isinstance(node, Const):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            if isinstance(value, int):  # BIGINT as the Arrow form has it, negated exactly
                if not -(1 << 63) < value < 1 << 63:
                    return None
                return Operand(None, 0, np.int64(sign * value))
            return Operand(None, 0, np.float64(sign * value))
        if not isinstance(node, Pointer) or node.column is None:
            return None
        field = self.spec.columns.field(node.column)
        if not _numpy_numeric(field.type):
            return None
        self.pointer(node)  # the same checks as the Arrow form (which passed them)
        return Operand(node.column, node.position.physical, None)

    def node(self, node: exp.Expression) -> Term:
        if isinstance(node, Const):
            value = _scalar(node.value)
            return lambda cols, n: value
        if isinstance(node, Pointer):
            return self.pointer(node)
        if type(node) in COMPARISON_NAMES:  # in DuckDB's order: NaN greatest
            return self.call(
                partial(compare_columns, ARROW, COMPARISON_NAMES[type(node)]),
                node.this,
                node.expression,
            )
        if type(node) in _ARITH:
            return self.call(_ARITH[type(node)], node.this, node.expression, widen=True)
        if isinstance(node, exp.Div):
            left, right = self.node(node.this), self.node(node.expression)

            def divide(cols: Columns, n: int) -> Value:
                a, b = left(cols, n), right(cols, n)
                if pa.types.is_null(a.type) or pa.types.is_null(b.type):
                    return _NULL
                return pc.divide(a.cast(pa.float64()), b.cast(pa.float64()))

            return divide
        if isinstance(node, exp.And | exp.Or):
            name = "and_kleene" if isinstance(node, exp.And) else "or_kleene"
            return self.call(name, node.this, node.expression, booleans=True)
        if isinstance(node, exp.Not):
            inner = self.node(node.this)
            return lambda cols, n: pc.invert(self.boolean(inner(cols, n)))
        if isinstance(node, exp.Neg):
            inner = self.node(node.this)
            return lambda cols, n: pc.negate_checked(_widen(inner(cols, n)))
        if isinstance(node, exp.Abs):
            inner = self.node(node.this)
            return lambda cols, n: pc.abs_checked(_widen(inner(cols, n)))
        if (
            isinstance(node, exp.Is)
            and isinstance(node.expression, Const)
            and node.expression.value is None
        ):
            inner = self.node(node.this)

            def is_null(cols: Columns, n: int) -> Value:
                v = inner(cols, n)
                if isinstance(v, pa.Scalar):
                    return pa.scalar(not v.is_valid)
                return pc.is_null(v)

            return is_null
        if isinstance(node, exp.Between):
            low = exp.GTE(this=node.this.copy(), expression=node.args["low"].copy())
            high = exp.LTE(this=node.this.copy(), expression=node.args["high"].copy())
            return self.node(exp.And(this=low, expression=high))
        if isinstance(node, exp.In) and node.expressions and node.args.get("query") is None:
            tests = [exp.EQ(this=node.this.copy(), expression=e.copy()) for e in node.expressions]
            tree: exp.Expression = tests[0]
            for t in tests[1:]:
                tree = exp.Or(this=tree, expression=t)
            return self.node(tree)
        raise Unsupported(f"{type(node).__name__.upper()} is not evaluated column-wise")

    def boolean(self, v: Value) -> Value:
        return _NULL if pa.types.is_null(v.type) else v

    def call(
        self,
        op: str | Callable[[Value, Value], Value],
        left_node: exp.Expression,
        right_node: exp.Expression,
        widen: bool = False,
        booleans: bool = False,
    ) -> Term:
        """``op`` (an Arrow compute function's name, or a function) over the two operands."""
        left, right = self.node(left_node), self.node(right_node)
        fn = getattr(pc, op) if isinstance(op, str) else op
        boolean = pa.types.is_boolean

        def apply(cols: Columns, n: int) -> Value:
            a, b = left(cols, n), right(cols, n)
            if booleans:
                a, b = self.boolean(a), self.boolean(b)
                if not (boolean(a.type) and boolean(b.type)):
                    raise TypeError("AND/OR over non-boolean values")
            elif (
                pa.types.is_null(a.type)
                or pa.types.is_null(b.type)
                or a.type == pa.null()
                or (isinstance(a, pa.Scalar) and not a.is_valid and a.type == pa.bool_())
                or (isinstance(b, pa.Scalar) and not b.is_valid and b.type == pa.bool_())
            ):
                return _NULL
            if widen:
                a, b = _widen(a), _widen(b)
            if isinstance(a, pa.Scalar) and isinstance(b, pa.Scalar):
                a = pa.array([a.as_py()] * n, type=a.type)
            return fn(a, b)

        return apply

    def pointer(self, node: Pointer) -> Term:
        """A column of the tested row, shifted by its PREV/NEXT offset."""
        at = node.position
        name = node.column  # None: CLASSIFIER
        if name is None or at.aggregated or at.final:
            raise Unsupported(f"{node.text} is not evaluated column-wise")
        if not at.current:
            raise Unsupported(f"{node.text} reads other rows of the match")
        if at.vars is not None and self.var not in at.vars:
            raise Unsupported(f"{node.text} reads the last row of another variable")
        self.columns.add(name)
        delta = at.physical
        if not delta:
            return lambda cols, n: cols[name]
        return lambda cols, n: _shift(cols[name], n, delta, cols.get(EDGES))


def _numpy_numeric(type_: pa.DataType) -> bool:
    """Types numpy compares as Arrow does: integers (not uint64, which would meet int64
    as float64 in numpy) and 32/64-bit floats."""
    return (pa.types.is_integer(type_) and type_ != pa.uint64()) or type_ in (
        pa.float32(),
        pa.float64(),
    )


class Operand:
    """One side of a :class:`NumericComparison`: ``column`` read ``delta`` rows away,
    or (``column`` None) the constant ``value``."""

    __slots__ = ("column", "delta", "value")

    def __init__(self, column: str | None, delta: int, value: np.generic | None) -> None:
        self.column = column
        self.delta = delta
        self.value = value


class NumericComparison:
    """A comparison of numbers as one numpy pass; its value is the conjunct's truth
    (NULL false) as a ``bool`` array. A float column holding NaN is left to the Arrow
    form ``slow`` (DuckDB orders NaN above every number, numpy leaves it unordered)."""

    def __init__(self, op: np.ufunc, left: Operand, right: Operand, slow: Term) -> None:
        self.op = op
        self.left = left
        self.right = right
        self.slow = slow

    def __call__(self, cols: Columns, n: int) -> np.ndarray | Value:
        left, right = self.left, self.right
        # Rows whose operands both exist in the buffer: [lo, hi).
        lo = max(0, -left.delta, -right.delta)
        hi = max(lo, min(n, n - left.delta, n - right.delta))
        out = np.zeros(n, bool)
        a, a_valid = _side(cols, left, lo, hi)
        b, b_valid = _side(cols, right, lo, hi)
        if a is None or b is None:
            return self.slow(cols, n)
        self.op(a, b, out=out[lo:hi])
        for valid in (a_valid, b_valid):
            if valid is not None:
                out[lo:hi] &= valid
        edges = cols.get(EDGES)
        if edges is not None:
            for delta in {left.delta, right.delta} - {0}:
                out &= ~edges.outside_rows(delta)
        return out


def _side(
    cols: Columns, side: Operand, lo: int, hi: int
) -> tuple[np.ndarray | np.generic | None, np.ndarray | None]:
    """``(values, valid)`` of rows ``[lo, hi)`` of ``side`` (valid None: no NULLs);
    values None where a NaN needs the Arrow route."""
    if side.column is None:
        return side.value, None
    array = cols[side.column]
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if hi <= lo:
        return np.zeros(0), None
    values = np.frombuffer(
        array.buffers()[1], dtype=array.type.to_pandas_dtype(), count=len(array) + array.offset
    )[array.offset :]
    values = values[lo + side.delta : hi + side.delta]
    valid = None
    if array.null_count:
        valid = array.is_valid().to_numpy(zero_copy_only=False)[lo + side.delta : hi + side.delta]
    if values.dtype.kind == "f" and bool(
        np.isnan(values[valid] if valid is not None else values).any()
    ):
        return None, None
    return values, valid


def _scalar(value: object) -> pa.Scalar:
    """A bound constant as an Arrow scalar (integers beyond BIGINT as DOUBLE)."""
    if value is None:
        return _NULL
    if isinstance(value, bool):
        return pa.scalar(value)
    if isinstance(value, str):
        return pa.scalar(value, pa.string())
    if isinstance(value, int):
        try:
            return pa.scalar(value, pa.int64())
        except (OverflowError, pa.ArrowInvalid):
            return pa.scalar(float(value), pa.float64())
    return pa.scalar(value, pa.float64())


def evaluate(terms: list[Term], columns: Columns, n: int) -> np.ndarray:
    """TRUE-ness of the AND of ``terms`` for each of ``n`` rows, as ``uint8``."""
    out = np.ones(n, np.uint8)
    for term in terms:
        v = term(columns, n)
        if isinstance(v, np.ndarray):
            out &= v.view(np.uint8)
            continue
        if isinstance(v, pa.Scalar):
            if v.as_py() is not True:
                out[:] = 0
            continue
        if isinstance(v, pa.ChunkedArray):
            v = v.combine_chunks()
        if pa.types.is_null(v.type):
            out[:] = 0
            continue
        truth = pc.fill_null(v, False).to_numpy(zero_copy_only=False)
        out &= truth.astype(np.uint8)
    return out
