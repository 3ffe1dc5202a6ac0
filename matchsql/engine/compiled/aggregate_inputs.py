"""Aggregate arguments and FILTER conditions evaluated column-wise, once per labelled row.

Inside an aggregate every read is an ``aggregated`` pointer: it reads the row
being aggregated. For a chunk of matches the rows any aggregate can visit are
exactly the labelled rows (``Matches.labels``), so an argument is one
vectorised expression over those rows: the input columns taken at them,
``CLASSIFIER()`` as the column of their labels and ``MATCH_NUMBER()`` as the
match numbers repeated over each match. The row-local compiler
(:mod:`.rowlocal`) already turns bound trees into Arrow compute closures; this
module reuses it with those three kinds of leaves and a few more operators
(CASE, IF, ``||``, exact casts) that aggregate arguments commonly use.

Only computations whose values equal the reference evaluator's are taken:
arithmetic over integer and floating values (Python's integers and floats
give the same numbers, overflow aside: a 64-bit overflow is an error here,
as in DuckDB), comparisons, three-valued logic, string concatenation. Other
types (decimals, dates) are accepted as a bare argument only (``min(d)``),
where the value is passed through untouched.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from matchsql.engine.compiled.lowering import Unsupported
from matchsql.engine.compiled.match_arrays import Matches, Rows
from matchsql.engine.compiled.rowlocal import Columns, RowLocalCompiler, Term, Value, _widen
from matchsql.errors import ExecutionError
from matchsql.expr.support import AGGREGATE_ARGS, why_not
from matchsql.plan.bound import Const, MatchNumberRef, Pointer, describe
from matchsql.plan.spec import MatchSpec

__all__ = ["Argument", "ArgumentCompiler", "LabelledRows"]

CLASSIFIER = "\0classifier"  # Columns key: the label of each labelled row
MATCH_NUMBER = "\0match number"  # Columns key: the match number of each labelled row

_NUMERIC_OPS = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Abs)


def _plain(t: pa.DataType) -> bool:
    """Types whose Arrow operations give the reference's values."""
    return (
        (pa.types.is_integer(t) and t != pa.uint64())
        or pa.types.is_floating(t)
        or pa.types.is_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_null(t)
    )


def _numeric(v: Value) -> bool:
    t = v.type
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t)


class LabelledRows:
    """The columns an argument reads, taken at every labelled row of a chunk (cached
    per chunk, so several aggregates over the same columns take them once)."""

    def __init__(self, m: Matches, rows: Rows, variables: list[str]) -> None:
        self.m = m
        self.rows = rows
        self.variables = variables
        self.n = len(m.labels)
        self.match_of = np.repeat(np.arange(len(m.starts), dtype=np.int64), m.lengths)
        self._at: pa.Array | None = None
        self._columns: Columns = {}

    def column(self, name: str) -> pa.Array:
        got = self._columns.get(name)
        if got is not None:
            return got
        if name == CLASSIFIER:
            names = pa.array(self.variables, pa.string())
            got = names.take(pa.array(self.m.labels, pa.int64()))
        elif name == MATCH_NUMBER:
            got = pa.array(self.m.numbers[self.match_of], pa.int64())
        else:
            if self._at is None:
                m = self.m
                at = np.repeat(m.starts - m.offsets, m.lengths) + np.arange(self.n, dtype=np.int64)
                self._at = pa.array(at - self.rows.base, pa.int64())
            got = self.rows.table.column(name).take(self._at)
            if isinstance(got, pa.ChunkedArray):
                got = got.combine_chunks()
        self._columns[name] = got
        return got

    def columns(self, names: set[str]) -> Columns:
        return {name: self.column(name) for name in names}


class Argument:
    """One compiled argument (or FILTER condition): its value at every labelled row."""

    def __init__(self, term: Term, columns: set[str], type_: pa.DataType, text: str) -> None:
        self.term = term
        self.columns = columns
        self.type = type_
        self.text = text

    def __call__(self, rows: LabelledRows) -> pa.Array:
        return self.evaluate(rows.columns(self.columns), rows.n)

    def evaluate(self, columns: Columns, n: int) -> pa.Array:
        """The value for ``n`` rows of ``columns``, as one array."""
        try:
            v = self.term(columns, n)
        except pa.ArrowInvalid as exc:  # integer overflow: DuckDB reports it too
            raise ExecutionError(f"cannot compute {self.text}: {exc}") from None
        if isinstance(v, pa.Scalar):
            v = pa.repeat(v, n)
        if isinstance(v, pa.ChunkedArray):
            v = v.combine_chunks()
        return v


class ArgumentCompiler(RowLocalCompiler):
    """Compiles the bound argument of an aggregate over its ``aggregated`` pointers."""

    def __init__(self, spec: MatchSpec, extra: dict[str, pa.DataType] | None = None) -> None:
        super().__init__(spec, "")
        # ``extra``: further named columns (a measure's parts, see measures.composite)
        self.extra = extra or {}
        self.types = {f.name: f.type for f in spec.columns} | self.extra
        self.bare = False
        # node id -> (node, term): each node compiled once (the numeric check compiles the
        # operands the base compiler compiles too); the node is held so its id stays its own
        self._terms: dict[int, tuple[exp.Expression, Term]] = {}

    def argument(self, node: exp.Expression) -> Argument:
        """``node`` (an aggregate's argument or FILTER) as a column-wise function."""
        reason = why_not(node, AGGREGATE_ARGS)
        if reason is not None:
            raise Unsupported(reason)
        self.columns = set()
        self._terms = {}
        self.bare = isinstance(node, Pointer)
        fn = self.node(node)
        empty: Columns = {f.name: pa.array([], f.type) for f in self.spec.columns}
        empty[CLASSIFIER] = pa.array([], pa.string())
        empty[MATCH_NUMBER] = pa.array([], pa.int64())
        empty.update({name: pa.array([], t) for name, t in self.extra.items()})
        try:
            probe = fn(empty, 0)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise Unsupported(f"cannot evaluate {describe(node)} column-wise: {exc}") from None
        return Argument(fn, set(self.columns), probe.type, describe(node))

    def node(self, node: exp.Expression) -> Term:
        hit = self._terms.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        term = self._compile(node)
        self._terms[id(node)] = (node, term)
        return term

    def _compile(self, node: exp.Expression) -> Term:
        if isinstance(node, MatchNumberRef):
            self.columns.add(MATCH_NUMBER)
            return lambda cols, n: cols[MATCH_NUMBER]
        if isinstance(node, exp.Case | exp.If):
            return self.case(node)
        if isinstance(node, exp.DPipe):
            return self.concat(node)
        if isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast):
            return self.cast(node)
        term = super().node(node)
        if isinstance(node, _NUMERIC_OPS):
            return self.numeric(term, node)
        return term

    def numeric(self, term: Term, node: exp.Expression) -> Term:
        """Arithmetic only over integers and floats (Arrow's decimal rules differ)."""
        operands = [self.node(c) for c in node.iter_expressions()]

        def checked(cols: Columns, n: int) -> Value:
            if n == 0 and not all(_numeric(o(cols, 0)) for o in operands):
                raise TypeError(f"{describe(node)} over non-numeric values")
            return term(cols, n)

        return checked

    def pointer(self, node: Pointer) -> Term:
        if not node.position.aggregated:
            raise Unsupported(f"{node.text} reads a row other than the aggregated one")
        name = node.column
        if name is None:  # CLASSIFIER
            self.columns.add(CLASSIFIER)
            return lambda cols, n: cols[CLASSIFIER]
        if not self.bare and not _plain(self.types[name]):
            raise Unsupported(f"{node.text} of type {self.types[name]} inside an expression")
        self.columns.add(name)
        return lambda cols, n: cols[name]

    def case(self, node: exp.Expression) -> Term:
        """Searched CASE and IF: the first branch whose test is TRUE (NULL is not)."""
        if isinstance(node, exp.If):
            branches = [(node.this, node.args["true"])]
            default = node.args.get("false")
        else:
            if node.this is not None:
                raise Unsupported("CASE with an operand is not evaluated column-wise")
            branches = [(b.this, b.args["true"]) for b in node.args.get("ifs") or []]
            default = node.args.get("default")
        tests = [self.node(t) for t, _ in branches]
        results = [self.node(r) for _, r in branches]
        otherwise = self.node(default) if default is not None else None

        def case(cols: Columns, n: int) -> Value:
            values = [_widen(r(cols, n)) for r in results]
            if otherwise is not None:
                values.append(_widen(otherwise(cols, n)))
            typed = {v.type for v in values if not _null(v)}
            if len(typed) > 1:
                raise TypeError(f"CASE branches of types {sorted(map(str, typed))}")
            t = typed.pop() if typed else pa.null()
            conds = []
            for test in tests:
                c = self.boolean(test(cols, n))
                if not pa.types.is_boolean(c.type):
                    raise TypeError("CASE condition is not boolean")
                conds.append(pc.fill_null(_full(c, n), False))
            arrays = [_full(v.cast(t), n) for v in values]
            if otherwise is None:
                arrays.append(pa.nulls(n, t))
            if not conds:
                return arrays[-1]
            names = [str(i) for i in range(len(conds))]
            return pc.case_when(pa.StructArray.from_arrays(conds, names=names), *arrays)

        return case

    def concat(self, node: exp.DPipe) -> Term:
        """``a || b`` over strings: NULL when either side is."""
        left, right = self.node(node.this), self.node(node.expression)

        def pipe(cols: Columns, n: int) -> Value:
            a, b = left(cols, n), right(cols, n)
            for v in (a, b):
                if not (pa.types.is_string(v.type) or pa.types.is_null(v.type)):
                    raise TypeError("|| over non-string values")
            return pc.binary_join_element_wise(
                _full(a.cast(pa.string()), n), _full(b.cast(pa.string()), n), ""
            )

        return pipe

    def cast(self, node: exp.Cast) -> Term:
        """The casts whose Arrow result is the reference's: to the same type, an integer
        to a wider integer or to text, text to text."""
        inner = self.node(node.this)
        target = node.to.this
        kinds: dict[exp.DType, Callable[[pa.DataType], pa.DataType | None]] = {
            exp.DataType.Type.BOOLEAN: lambda t: pa.bool_() if pa.types.is_boolean(t) else None,
            exp.DataType.Type.VARCHAR: lambda t: (
                pa.string() if pa.types.is_integer(t) or pa.types.is_string(t) else None
            ),
            exp.DataType.Type.TEXT: lambda t: (
                pa.string() if pa.types.is_integer(t) or pa.types.is_string(t) else None
            ),
            exp.DataType.Type.BIGINT: lambda t: (
                pa.int64() if pa.types.is_integer(t) and t != pa.uint64() else None
            ),
        }
        rule = kinds.get(target)
        if rule is None:
            raise Unsupported(f"CAST to {node.to.sql()} is not evaluated column-wise")

        def cast(cols: Columns, n: int) -> Value:
            v = inner(cols, n)
            if pa.types.is_null(v.type):
                return v
            to = rule(v.type)
            if to is None:
                raise TypeError(f"CAST of {v.type} to {node.to.sql()}")
            return v.cast(to)

        return cast


def _null(v: Value) -> bool:
    """A NULL literal (a typed invalid scalar) or a NULL-typed value."""
    return pa.types.is_null(v.type) or (isinstance(v, pa.Scalar) and not v.is_valid)


def _full(v: Value, n: int) -> pa.Array:
    """A scalar repeated ``n`` times (Arrow's struct and join kernels want arrays)."""
    if isinstance(v, pa.Scalar):
        return pa.repeat(v, n)
    if isinstance(v, pa.ChunkedArray):
        return v.combine_chunks()
    return v


def constant_text(node: exp.Expression | None) -> str | None:
    """The string a Const holds (``string_agg``'s separator); raises for anything else."""
    if node is None:
        return None
    if isinstance(node, Const) and (node.value is None or isinstance(node.value, str)):
        return node.value
    raise Unsupported(f"string_agg separator {describe(node)} is not a constant text")
