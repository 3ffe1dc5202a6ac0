"""Aggregate measures computed column-wise per match: every aggregate of the reference.

An aggregate measure (``sum(A.x * 2)``, ``array_agg(CLASSIFIER())``,
``max_by(s, x) FILTER (WHERE x > 0)``, ...) is computed in two steps over a
chunk of matches:

1. its arguments and FILTER condition are evaluated once for every labelled
   row of the chunk (:mod:`.aggregate_inputs`, Arrow compute over the bound
   tree), and the rows that count are a mask: the aggregate's variables, and
   a FILTER condition that is TRUE;
2. a segment reduction (:mod:`.segment_reductions`) gives the aggregate over
   each match up to any of its labels: at the match's last label for ONE ROW
   PER MATCH and FINAL, at each output row's label for a running measure in
   ALL ROWS PER MATCH, linear in the match length either way.

Only aggregates whose result is bit-for-bit the reference's are taken; for
the others :class:`Unsupported` says why and the reference evaluator builds
the output: ``count(DISTINCT ...)``, SUM/AVG over decimals, ``string_agg``
with a separator that is not a constant text or over values other than text
and integers (the reference's text of a float is Python's). MIN/MAX and
max_by/min_by over floating keys order NaN as DuckDB does, above every other
number (:meth:`Segments.extreme`). The result has the measure's declared (DuckDB)
type: where the computed type differs (an integer expression under a narrower
declared integer, COUNT_IF's HUGEINT) the values are cast exactly, a value
that does not fit failing as the reference's conversion does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from matchsql.engine.compiled.aggregate_inputs import (
    Argument,
    ArgumentCompiler,
    LabelledRows,
    constant_text,
)
from matchsql.engine.compiled.lowering import Unsupported
from matchsql.engine.compiled.match_arrays import Expansion, Matches, Rows
from matchsql.engine.compiled.segment_reductions import Evaluate, Segments, cast_exact, true_mask
from matchsql.plan.binder import bind
from matchsql.plan.bound import AggregateCall, describe
from matchsql.plan.spec import MatchSpec

__all__ = ["SegmentAggregate", "fits", "segment_aggregate"]

_COUNTS = frozenset({"count", "count_star", "count_if"})
_EXTREMES = frozenset({"min", "max", "arg_min", "arg_max"})
_BOOLEAN_ARGS = frozenset({"count_if", "bool_and", "bool_or"})
_KINDS = (
    _COUNTS
    | _EXTREMES
    | _BOOLEAN_ARGS
    | {"sum", "avg", "any_value", "arbitrary", "list", "string_agg"}
)
_DECIMAL_SUM = pa.decimal128(38, 0)  # DuckDB's HUGEINT, as Arrow exports it


def _ordered(t: pa.DataType) -> bool:
    """Types whose Arrow order is the reference's (floats with NaN ranked apart, see
    :meth:`Segments.extreme`)."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_boolean(t)
    )


def _boolean(t: pa.DataType) -> bool:
    return pa.types.is_boolean(t) or pa.types.is_null(t)


def fits(natural: pa.DataType, declared: pa.DataType) -> bool:
    """Whether values of ``natural`` become ``declared`` by an exact cast (the reference
    converts its Python values to the declared type, failing where one does not fit)."""
    if natural == declared:
        return True
    if pa.types.is_integer(natural):
        return pa.types.is_integer(declared) or (
            pa.types.is_decimal(declared) and declared.scale == 0
        )
    if pa.types.is_list(natural) and pa.types.is_list(declared):
        return fits(natural.value_type, declared.value_type)
    return False


@dataclass
class SegmentAggregate:
    """One aggregate measure: what it reduces, over which rows, with which result type."""

    kind: str
    args: list[Argument]
    condition: Argument | None
    ids: np.ndarray | None  # variable ids the aggregate covers; None: every row
    variables: list[str]
    type: pa.DataType  # the measure's declared (DuckDB) type
    name: str
    separator: str = ","

    def _segment_values(self, m: Matches, rows: Rows) -> Evaluate:
        """A function from label indexes (-1: before any row) to the aggregate over the
        labels of that label's match up to and including it."""
        if len(m.labels) == 0:
            if self.kind in _COUNTS:
                return lambda idx: cast_exact(pa.array(np.zeros(len(idx), np.int64)), self.type)
            return lambda idx: pa.nulls(len(idx), self.type)
        inputs = LabelledRows(m, rows, self.variables)
        values = [a(inputs) for a in self.args]
        mask = np.ones(len(m.labels), bool)
        if self.ids is not None:
            mask &= np.isin(m.labels, self.ids)
        if self.condition is not None:
            mask &= true_mask(self.condition(inputs))
        evaluate = self._reduction(Segments(m), values, mask)
        what = f"measure {self.name}"
        return lambda idx: cast_exact(evaluate(idx), self.type, what)

    def _reduction(self, seg: Segments, values: list[pa.Array], mask: np.ndarray) -> Evaluate:
        kind = self.kind
        if kind == "count_star":
            return seg.count(mask)
        v = values[0]
        valid = ~np.asarray(v.is_null(), dtype=bool)
        if kind == "count":
            return seg.count(mask & valid)
        if kind == "count_if":
            return seg.count(mask & true_mask(v))
        if kind in ("bool_and", "bool_or"):
            return seg.booleans(v, mask, every=kind == "bool_and")
        if kind in ("sum", "avg"):
            total = pa.float64() if pa.types.is_floating(v.type) else _DECIMAL_SUM
            return seg.sum(v, mask, kind == "avg", total)
        if kind in _EXTREMES:
            keys = v if kind in ("min", "max") else values[1]
            largest = kind in ("max", "arg_max")
            return seg.extreme(keys, v, mask, largest)
        if kind == "any_value":
            return seg.first_value(v, mask & valid)
        if kind == "arbitrary":
            return seg.first_value(v, mask)
        if kind == "list":
            return seg.lists(v, mask, self.type)
        # string_agg: the list of the non-NULL values as text, joined
        texts = v if pa.types.is_string(v.type) else v.cast(pa.string())
        lists = seg.lists(texts, mask & valid, pa.list_(pa.string()))
        return lambda idx: pc.binary_join(lists(idx), self.separator)

    # -- the two shapes of output ----------------------------------------------------------------

    def final(self, m: Matches, rows: Rows) -> pa.Array:
        """The aggregate over each whole match (ONE ROW PER MATCH, FINAL)."""
        evaluate = self._segment_values(m, rows)
        return evaluate(np.where(m.lengths > 0, m.offsets + m.lengths - 1, -1))

    def running(self, m: Matches, e: Expansion, rows: Rows) -> pa.Array:
        """The aggregate over the match up to each output row (ALL ROWS PER MATCH)."""
        evaluate = self._segment_values(m, rows)
        return evaluate(np.where(e.pos >= 0, m.offsets[e.match] + e.pos, -1))


def _natural(kind: str, args: list[Argument]) -> pa.DataType:
    """The type the reduction computes (before the cast to the declared type)."""
    if kind in _COUNTS:
        return pa.int64()
    if kind in ("bool_and", "bool_or"):
        return pa.bool_()
    if kind == "string_agg":
        return pa.string()
    t = args[0].type
    if kind == "avg":
        return pa.float64()
    if kind == "sum":
        return pa.float64() if pa.types.is_floating(t) else _DECIMAL_SUM
    if kind == "list":
        return pa.list_(t)
    return t


def _check_types(node: AggregateCall, kind: str, args: list[Argument]) -> None:
    """Unsupported for argument types whose column-wise result would differ."""
    if any(pa.types.is_null(a.type) for a in args) and kind not in _BOOLEAN_ARGS | {"count"}:
        raise Unsupported(f"{describe(node)}: a NULL-typed argument")
    t = args[0].type if args else None
    if kind in ("sum", "avg") and not (
        (pa.types.is_integer(t) and t != pa.uint64()) or pa.types.is_floating(t)
    ):
        raise Unsupported(f"{describe(node)}: column-wise SUM/AVG over {t}")
    if kind in ("min", "max") and not _ordered(t):
        raise Unsupported(f"{describe(node)}: column-wise MIN/MAX over {t}")
    if kind in ("arg_min", "arg_max") and (len(args) != 2 or not _ordered(args[1].type)):
        raise Unsupported(
            f"{describe(node)}: column-wise {kind} key over "
            f"{args[1].type if len(args) == 2 else 'nothing'}"
        )
    if kind in _BOOLEAN_ARGS and not _boolean(t):
        raise Unsupported(f"{describe(node)}: {kind} over {t}")
    if kind == "string_agg" and not (pa.types.is_string(t) or pa.types.is_integer(t)):
        raise Unsupported(f"{describe(node)}: column-wise string_agg over {t}")


def segment_aggregate(
    spec: MatchSpec, variables: list[str], node: exp.Expression
) -> SegmentAggregate | None:
    """The column-wise form of bound aggregate ``node``: a whole measure of ``spec``
    (then with the measure's declared type) or part of one (with the type it computes);
    None when ``node`` is no aggregate (the caller decides what else to try). Raises
    Unsupported for an aggregate whose result would not match the reference exactly."""
    if not isinstance(node, AggregateCall):
        return None
    measure = next((m for m in spec.measures if bind(m.expr, spec) is node), None)
    kind = node.function
    if kind not in _KINDS:
        raise Unsupported(f"{describe(node)}: {kind} is not computed column-wise")
    if node.distinct:
        raise Unsupported(f"{describe(node)}: DISTINCT aggregates stay on the reference")
    compiler = ArgumentCompiler(spec)
    separator = ","
    exprs = list(node.expressions)
    if kind == "string_agg":
        sep = constant_text(exprs[1]) if len(exprs) > 1 else None
        separator = "," if sep is None else sep
        exprs = exprs[:1]
    args = [compiler.argument(a) for a in exprs]
    condition = compiler.argument(node.condition) if node.condition is not None else None
    if condition is not None and not _boolean(condition.type):
        raise Unsupported(f"{describe(node)}: a FILTER condition that is not boolean")
    _check_types(node, kind, args)
    natural = _natural(kind, args)
    declared, name = (
        (measure.type, measure.name) if measure is not None else (natural, describe(node))
    )
    if not fits(natural, declared):
        raise Unsupported(f"measure {name}: computed as {natural}, declared {declared}")
    members = node.vars
    ids = None if members is None else np.array([variables.index(v) for v in members], np.int64)
    return SegmentAggregate(kind, args, condition, ids, variables, declared, name, separator)
